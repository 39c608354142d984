"""PPO with a diagonal Gaussian policy for Box-action environments (default HalfCheetah-v5).

Proximal Policy Optimization (Schulman et al., 2017) with GAE (Schulman et al., 2016). Each iteration
collects num_steps x num_envs transitions, estimates advantages with GAE, then runs update_epochs passes of
Adam over shuffled minibatches on L = -E[min(r A, clip(r, 1 - clip_coef, 1 + clip_coef) A)] + vf_coef * L_V -
ent_coef * H, with r = pi_theta(a|s) / pi_old(a|s), advantages normalized per minibatch and L_V clipped around
the rollout's values as the surrogate is clipped.
"""

import datetime
import math
import os
import random
import sys
import time
import warnings
from collections import deque
from dataclasses import dataclass, field
from functools import partial

import gymnasium as gym
import mujoco
import numpy as np
import torch
import tyro
from torch import nn
from torch.distributions import Normal
from torch.utils.tensorboard import SummaryWriter

# MuJoCo 4 warns, once per env made, that gymnasium's XML models use a deprecated attribute: drop that one warning.
mujoco.set_mju_user_warning(lambda message: "deprecated" in message or print(f"WARNING: {message}", file=sys.stderr))


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """the name of this experiment"""
    seed: int = 1
    """seed of python, numpy, torch and every env"""
    cuda: bool = True
    """if toggled, train on CUDA when a GPU is available (else on the CPU, with a warning)"""
    track: bool = False
    """if toggled, track the run with Weights and Biases"""
    wandb_project_name: str = "ppo"
    """the wandb project name"""
    wandb_entity: str | None = None
    """the wandb entity (team)"""
    capture_video: bool = False
    """if toggled, record videos of env 0 into videos/{run_name} and of the final evaluation into videos/{run_name}/eval"""
    save_model: bool = False
    """if toggled, save the networks and normalization statistics to runs/{run_name}/{exp_name}.model"""

    env_id: str = "HalfCheetah-v5"
    """the id of a gymnasium env with Box actions and flat Box observations"""
    total_timesteps: int = 1_000_000
    """total environment steps over all envs (rounded down to whole iterations)"""
    learning_rate: float = 3e-4
    """the Adam learning rate of the actor and the critic"""
    anneal_lr: bool = True
    """if toggled, anneal the learning rate linearly to 0 over training"""
    num_envs: int = 4
    """the number of parallel environments"""
    num_steps: int = 512
    """the number of steps per env per policy update"""
    gamma: float = 0.99
    """the discount factor"""
    gae_lambda: float = 0.95
    """the GAE lambda"""
    num_minibatches: int = 32
    """the number of minibatches per epoch"""
    update_epochs: int = 10
    """passes over the batch per update"""
    clip_coef: float = 0.2
    """the surrogate clipping coefficient"""
    ent_coef: float = 0.0
    """coefficient of the entropy bonus"""
    vf_coef: float = 0.5
    """coefficient of the value loss"""
    max_grad_norm: float = 0.5
    """the largest global gradient norm"""
    eval_episodes: int = 10
    """deterministic (mean action) episodes per evaluation: after training and every eval_every iterations"""
    eval_every: int = 0
    """if positive, evaluate the current policy every this many iterations, logged against global_step"""
    eval_only: str | None = None
    """a .model file saved with --save-model: evaluate (and with --capture-video record) it instead of training"""

    # Computed at runtime, not flags.
    batch_size: int = field(default=0, init=False)
    """the batch size, num_envs * num_steps"""
    minibatch_size: int = field(default=0, init=False)
    """the minibatch size, batch_size // num_minibatches"""
    num_iterations: int = field(default=0, init=False)
    """the number of policy updates"""


def make_env(env_id, idx, capture_video, run_name):
    def thunk():
        if capture_video and idx == 0:
            env = gym.make(env_id, render_mode="rgb_array")
            return gym.wrappers.RecordVideo(env, f"videos/{run_name}")
        return gym.make(env_id)

    return thunk


def layer_init(layer, std=2**0.5, bias_const=0.0):
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias_const)
    return layer


def mlp(in_dim, out_dim, width, out_std):
    """Two tanh hidden layers of `width` units, orthogonally initialized; the output layer's gain is out_std."""
    hidden = [layer_init(nn.Linear(in_dim, width)), nn.Tanh(), layer_init(nn.Linear(width, width)), nn.Tanh()]
    return nn.Sequential(*hidden, layer_init(nn.Linear(width, out_dim), std=out_std))


class Actor(nn.Module):
    def __init__(self, obs_dim, action_dim):
        super().__init__()
        # A small output gain: every mean action starts near 0.
        self.mean = mlp(obs_dim, action_dim, 64, out_std=0.01)
        # State-independent log standard deviation, one per action dimension, starting at std 1.
        self.log_std = nn.Parameter(torch.zeros(action_dim))

    def forward(self, obs):
        """Mean and log-std of the Gaussian policy, both of shape (batch, action_dim)."""
        mean = self.mean(obs)
        return mean, self.log_std.expand_as(mean)

    def dist(self, obs):
        mean, log_std = self(obs)
        return Normal(mean, log_std.exp())


class Critic(nn.Module):
    def __init__(self, obs_dim, width=64):
        super().__init__()
        self.net = mlp(obs_dim, 1, width, out_std=1.0)

    def forward(self, obs):
        return self.net(obs).squeeze(-1)


class RunningMeanStd:
    """Mean and variance of a stream of batches, merged with Chan et al.'s parallel formula."""

    def __init__(self, shape):
        self.mean, self.var, self.count = np.zeros(shape), np.ones(shape), 1e-4

    def update(self, batch):
        # One NaN or inf (from a broken reward or observation) would poison the statistics for good.
        if not np.isfinite(batch).all():
            return
        batch_mean, batch_var, batch_count = batch.mean(0), batch.var(0), batch.shape[0]
        delta, total = batch_mean - self.mean, self.count + batch_count
        self.mean = self.mean + delta * batch_count / total
        sum_sq = self.var * self.count + batch_var * batch_count + delta**2 * self.count * batch_count / total
        self.var, self.count = sum_sq / total, total

    def normalize(self, x):
        return np.clip((x - self.mean) / np.sqrt(self.var + 1e-8), -10.0, 10.0)

    def state_dict(self):
        return {"mean": torch.as_tensor(self.mean), "var": torch.as_tensor(self.var), "count": self.count}

    def load_state_dict(self, state):
        self.mean, self.var, self.count = state["mean"].numpy(), state["var"].numpy(), state["count"]


def sample_action(mean, log_std):
    """Sample a ~ N(mean, exp(log_std)^2) for each row, cheaper than building a Normal at rollout
    batch sizes; pi_old(a|s) is computed after the rollout, in one batched pass."""
    return mean + log_std.exp() * torch.randn_like(mean)


def compute_gae(rewards, values, dones, next_value, gamma, gae_lambda):
    """GAE over (num_steps, num_envs) arrays; returns (advantages, returns). dones[t] = 1: transition t
    ended its episode, so s_{t+1} starts another and is not bootstrapped from (a truncated transition
    already carries gamma * V(final obs) in rewards[t]). next_value = V(obs after the last step)."""
    advantages = np.zeros_like(rewards)
    last_gae = np.zeros_like(next_value)
    for t in reversed(range(rewards.shape[0])):
        next_values = next_value if t == rewards.shape[0] - 1 else values[t + 1]
        not_done = 1.0 - dones[t]
        delta = rewards[t] + gamma * next_values * not_done - values[t]
        last_gae = delta + gamma * gae_lambda * not_done * last_gae
        advantages[t] = last_gae
    return advantages, advantages + values


def clipped_policy_loss(ratio, advantages, clip_coef):
    """PPO's clipped surrogate (Schulman et al., 2017, eq. 7) as a loss: -E[min(r A, clip(r, 1 - eps, 1 + eps) A)].
    The clip takes away the incentive to move r out of [1 - eps, 1 + eps] in the direction A favours."""
    clipped_ratio = torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)
    return -torch.min(ratio * advantages, clipped_ratio * advantages).mean()


def ppo_update(actor, critic, optimizer, batch, args):
    """update_epochs passes of Adam over shuffled minibatches of the batch (b_obs, b_actions, b_logprobs,
    b_advantages, b_returns, b_values) on the loss in the module docstring. Returns the last minibatch's
    losses, the mean approximate KL and clip fraction, and how many steps were skipped as non-finite."""
    b_obs, b_actions, b_logprobs, b_advantages, b_returns, b_values = batch
    parameters = [*actor.parameters(), *critic.parameters()]
    clip_fractions, approx_kls, skipped_steps = [], [], 0
    for _ in range(args.update_epochs):
        permutation = torch.randperm(args.batch_size, device=b_obs.device)
        for start in range(0, args.batch_size, args.minibatch_size):
            idx = permutation[start : start + args.minibatch_size]
            dist = actor.dist(b_obs[idx])
            log_ratio = dist.log_prob(b_actions[idx]).sum(-1) - b_logprobs[idx]
            ratio = log_ratio.exp()
            with torch.no_grad():
                # KL(old || new) estimated by E[(r - 1) - log r] (low variance, never negative).
                approx_kls.append(((ratio - 1) - log_ratio).mean())
                clip_fractions.append(((ratio - 1.0).abs() > args.clip_coef).float().mean())
            mb_advantages = b_advantages[idx]
            mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
            policy_loss = clipped_policy_loss(ratio, mb_advantages, args.clip_coef)

            new_values = critic(b_obs[idx])
            # The value may move at most clip_coef from its rollout estimate before the loss stops pulling.
            clipped_values = b_values[idx] + torch.clamp(new_values - b_values[idx], -args.clip_coef, args.clip_coef)
            value_losses = torch.max((new_values - b_returns[idx]) ** 2, (clipped_values - b_returns[idx]) ** 2)
            value_loss = 0.5 * value_losses.mean()
            entropy = dist.entropy().sum(-1).mean()
            loss = policy_loss - args.ent_coef * entropy + args.vf_coef * value_loss

            optimizer.zero_grad()
            loss.backward()
            grad_norm = nn.utils.clip_grad_norm_(parameters, args.max_grad_norm)
            if not torch.isfinite(loss + grad_norm):  # a non-finite step never reaches the weights
                skipped_steps += 1
                continue
            optimizer.step()
    # The minibatches' statistics stay on the device until here: one read per update.
    approx_kl, clip_fraction = torch.stack([torch.stack(approx_kls), torch.stack(clip_fractions)]).mean(1).tolist()
    losses = {"value_loss": value_loss.item(), "policy_loss": policy_loss.item(), "entropy": entropy.item()}
    return losses | {"approx_kl": approx_kl, "clipfrac": clip_fraction, "nonfinite_skipped": skipped_steps}


def evaluate(actor, obs_rms, args, device, label, video_name=None):
    """args.eval_episodes episodes of the mean action on an env seeded seed + 10_000, statistics frozen, no global
    RNG drawn: every evaluation starts from the same states and leaves the run as it was. Video: videos/{video_name}."""
    env = make_env(args.env_id, 0, video_name is not None, video_name)()
    episodic_returns, episodic_return = [], 0.0
    obs, _ = env.reset(seed=args.seed + 10_000)
    while len(episodic_returns) < args.eval_episodes:
        with torch.inference_mode():
            action, _ = actor(torch.as_tensor(obs_rms.normalize(obs), dtype=torch.float32, device=device))
        action = np.clip(action.cpu().numpy(), env.action_space.low, env.action_space.high)
        obs, reward, terminated, truncated, _ = env.step(action)
        episodic_return += reward
        if terminated or truncated:
            episodic_returns.append(episodic_return)
            episodic_return = 0.0
            if len(episodic_returns) < args.eval_episodes:  # a reset after the last would start a one-frame video
                obs, _ = env.reset()
    env.close()
    mean, std = np.mean(episodic_returns), np.std(episodic_returns)
    print(f"{label}: mean return {mean:.2f} +- {std:.2f} over {len(episodic_returns)} episodes")
    return episodic_returns


def log_evaluation(writer, episodic_returns, global_step, final=False):
    """An evaluation as a point of the curve eval/episodic_return; the final one also episode by episode."""
    writer.add_scalar("eval/episodic_return", np.mean(episodic_returns), global_step)
    for i, episodic_return in enumerate(episodic_returns if final else []):
        writer.add_scalar("eval/final_episodic_return", episodic_return, i)


def save_model(path, args, actor, critic, obs_rms, return_rms):
    """Save the networks, the normalization statistics and the arguments."""
    model = {"actor": actor.state_dict(), "critic": critic.state_dict(), "args": vars(args)}
    torch.save(model | {"obs_rms": obs_rms.state_dict(), "return_rms": return_rms.state_dict()}, path)


def load_model(path, observation_space, action_space):
    """(actor, obs_rms) from a --save-model file; raises ValueError saying why it cannot be used here.
    weights_only: unpickling reads tensors and plain containers only and never runs code from the file."""
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise ValueError(f"cannot read model file {path!r} ({type(e).__name__})") from e
    try:
        if not isinstance(checkpoint, dict):  # a bare tensor, say, which indexing by name would only warn about
            raise TypeError(type(checkpoint).__name__)
        actor = Actor(np.prod(observation_space.shape), np.prod(action_space.shape))
        actor.load_state_dict(checkpoint["actor"])
        obs_rms = RunningMeanStd(observation_space.shape)
        obs_rms.load_state_dict(checkpoint["obs_rms"])
    except Exception as e:
        raise ValueError(f"{path!r} is not a model of this script for these spaces ({type(e).__name__})") from e
    return actor, obs_rms


def check_inputs(args):
    """The env's (observation space, action space); raises ValueError naming the first argument no
    run can use. Every comparison with NaN is false, so each check rejects NaN; `< inf` rejects infinity."""
    inf, batch_size = math.inf, args.num_envs * args.num_steps
    requirements = [
        ("/" not in args.exp_name, "exp_name must not contain '/' (it names files in the run folder)"),
        (0 <= args.seed < 2**32, "seed must be in [0, 2**32)"),
        (args.num_envs >= 1 and args.num_steps >= 1, "num_envs and num_steps must be at least 1"),
        (args.total_timesteps >= batch_size, "total_timesteps must be at least num_envs * num_steps"),
        (0 < args.learning_rate < inf, "learning_rate must be positive and finite"),
        (0 <= args.gamma <= 1 and 0 <= args.gae_lambda <= 1, "gamma and gae_lambda must be in [0, 1]"),
        (
            1 <= args.num_minibatches <= batch_size // 2 and batch_size % args.num_minibatches == 0,
            "num_minibatches must divide num_envs * num_steps into minibatches of at least 2 (advantages are normalized per minibatch)",
        ),
        (args.update_epochs >= 1, "update_epochs must be at least 1"),
        (0 < args.clip_coef < inf, "clip_coef must be positive and finite"),
        (0 <= args.ent_coef < inf and 0 <= args.vf_coef < inf, "ent_coef and vf_coef must be >= 0 and finite"),
        (0 < args.max_grad_norm < inf, "max_grad_norm must be positive and finite"),
        (args.eval_episodes >= 1 and args.eval_every >= 0, "eval_episodes must be >= 1 and eval_every >= 0"),
    ]
    for ok, message in requirements:
        if not ok:
            raise ValueError(message)
    try:  # after the checks above: making an env can print warnings
        env = make_env(args.env_id, 0, False, None)()
    except gym.error.Error as e:
        raise ValueError(f"cannot make env {args.env_id!r}: {e}") from e
    env.close()
    obs_space, action_space = env.observation_space, env.action_space
    spaces_fit = isinstance(action_space, gym.spaces.Box) and isinstance(obs_space, gym.spaces.Box)
    if not spaces_fit or len(obs_space.shape) != 1:
        need = "Box actions, flat Box observations"
        raise ValueError(f"{args.env_id} has {action_space} actions, {obs_space} observations: need {need}")
    if args.capture_video:  # a renderer that fails would otherwise fail after the run folder exists
        try:
            with warnings.catch_warnings():  # GLFW, for one, warns on its way to failing
                warnings.simplefilter("ignore")
                env = gym.make(args.env_id, render_mode="rgb_array")
                env.reset(seed=args.seed)
                env.render()
                env.close()
        except Exception as e:
            reason = (str(e) or type(e).__name__).splitlines()[0]
            raise ValueError(f"--capture-video cannot render {args.env_id} ({reason})") from e
    return obs_space, action_space


def main(args):
    script = os.path.basename(__file__)
    try:  # nothing is written before the arguments and the model file have been checked
        observation_space, action_space = check_inputs(args)
        model = load_model(args.eval_only, observation_space, action_space) if args.eval_only else None
    except ValueError as e:
        sys.exit(f"{script}: error: {e}")
    args.batch_size = args.num_envs * args.num_steps
    args.minibatch_size = args.batch_size // args.num_minibatches
    args.num_iterations = args.total_timesteps // args.batch_size
    run_name = f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
    if args.cuda and not torch.cuda.is_available():
        print(f"{script}: no GPU available, running on the CPU", file=sys.stderr)
    device = torch.device("cuda" if args.cuda and torch.cuda.is_available() else "cpu")

    video_name = f"{run_name}/eval" if args.capture_video else None  # the final evaluation's
    if model is not None:
        actor, obs_rms = model
        return evaluate(actor.to(device), obs_rms, args, device, "eval", video_name)

    envs = gym.vector.SyncVectorEnv(
        [make_env(args.env_id, i, args.capture_video, run_name) for i in range(args.num_envs)],
        # SAME_STEP: no rollout step is a fake reset transition (a done's terminal obs is in infos["final_obs"]).
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)
    if args.track:
        import wandb

        project = {"project": args.wandb_project_name, "entity": args.wandb_entity, "name": run_name}
        # monitor_gym uploads what RecordVideo records.
        wandb.init(**project, config=vars(args), sync_tensorboard=True, monitor_gym=True, save_code=True)
    writer = SummaryWriter(f"runs/{run_name}")
    hyperparameters = "\n".join(f"|{key}|{value}|" for key, value in vars(args).items())
    writer.add_text("hyperparameters", f"|param|value|\n|-|-|\n{hyperparameters}")
    total_steps = args.num_iterations * args.batch_size  # whole iterations, at most total_timesteps
    plan = f"{args.num_iterations} iterations x {args.batch_size} = {total_steps} of {args.total_timesteps} steps"
    print(f"runs/{run_name}: {plan}")  # the run's first line

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    obs_shape, action_shape = observation_space.shape, action_space.shape
    actor = Actor(np.prod(obs_shape), np.prod(action_shape)).to(device)
    critic = Critic(np.prod(obs_shape), 64).to(device)
    optimizer = torch.optim.Adam(
        [*actor.parameters(), *critic.parameters()], lr=args.learning_rate, eps=1e-5, fused=True
    )
    obs_rms, return_rms, discounted_return = RunningMeanStd(obs_shape), RunningMeanStd(()), np.zeros(args.num_envs)
    to_tensor = partial(torch.as_tensor, device=device)

    def normalize(obs, update_stats=False):
        if update_stats:
            obs_rms.update(obs)
        return obs_rms.normalize(obs).astype(np.float32)

    # Rollout storage, (num_steps, num_envs, ...): numpy while acting (cheaper writes), torch once per rollout.
    observations = np.zeros((args.num_steps, args.num_envs) + obs_shape, dtype=np.float32)
    actions = np.zeros((args.num_steps, args.num_envs) + action_shape, dtype=np.float32)
    rewards, dones = np.zeros((2, args.num_steps, args.num_envs), dtype=np.float32)

    global_step, start_time, recent_returns = 0, time.time(), deque(maxlen=20)
    next_obs, _ = envs.reset(seed=args.seed)
    next_obs = normalize(next_obs, update_stats=True)

    try:
        for iteration in range(1, args.num_iterations + 1):
            if args.anneal_lr:
                optimizer.param_groups[0]["lr"] = args.learning_rate * (1.0 - (iteration - 1.0) / args.num_iterations)
            for step in range(args.num_steps):
                global_step += args.num_envs
                observations[step] = next_obs
                with torch.inference_mode():
                    actions[step] = sample_action(*actor(to_tensor(next_obs))).cpu().numpy()
                # Only the env sees the clipped action; the stored action, and so its log-prob, is the sample.
                clipped_actions = np.clip(actions[step], action_space.low, action_space.high)
                next_obs, reward, terminations, truncations, infos = envs.step(clipped_actions)
                # Reward scaling divides by the std of the discounted return, not of the reward itself.
                discounted_return = discounted_return * args.gamma + reward
                return_rms.update(discounted_return)
                reward = np.clip(reward / np.sqrt(return_rms.var + 1e-8), -10.0, 10.0)
                discounted_return[terminations | truncations] = 0.0
                # Truncation is not termination: a time-limit cut is bootstrapped, r + gamma * V(final obs).
                truncated = truncations & ~terminations
                if truncated.any():
                    final_obs = normalize(np.stack(infos["final_obs"][truncated]))
                    with torch.inference_mode():
                        reward[truncated] += args.gamma * critic(to_tensor(final_obs)).cpu().numpy()
                rewards[step], dones[step] = reward, terminations | truncations
                next_obs = normalize(next_obs, update_stats=True)
                for i in np.flatnonzero(infos.get("_episode", [])):
                    recent_returns.append(infos["episode"]["r"][i])
                    writer.add_scalar("charts/episodic_return", infos["episode"]["r"][i], global_step)
                    writer.add_scalar("charts/episodic_length", infos["episode"]["l"][i], global_step)

            with torch.no_grad():  # V(s_t) of the whole rollout in one pass: the critic is fixed until the update
                values = critic(to_tensor(observations)).cpu().numpy()
                next_value = critic(to_tensor(next_obs)).cpu().numpy()
            advantages, returns = compute_gae(rewards, values, dones, next_value, args.gamma, args.gae_lambda)
            # (num_steps, num_envs, ...) -> (num_steps * num_envs, ...), the same row order for every field.
            batch = (observations, actions, advantages, returns, values)
            b_obs, b_actions, b_advantages, b_returns, b_values = (to_tensor(x).flatten(0, 1) for x in batch)
            with torch.no_grad():  # log pi_old(a|s): the actor as it was during the rollout
                b_logprobs = actor.dist(b_obs).log_prob(b_actions).sum(-1)

            batch = (b_obs, b_actions, b_logprobs, b_advantages, b_returns, b_values)
            losses = ppo_update(actor, critic, optimizer, batch, args)

            returns_var = b_returns.var()
            explained_var = (1 - (b_returns - b_values).var() / returns_var).item() if returns_var > 0 else math.nan
            elapsed = time.time() - start_time
            sps = max(int(global_step / elapsed), 1)
            scalars = {"charts/SPS": sps, "charts/learning_rate": optimizer.param_groups[0]["lr"]}
            scalars |= {f"losses/{key}": value for key, value in losses.items()}
            scalars["losses/explained_variance"] = explained_var
            for key, value in scalars.items():
                writer.add_scalar(key, value, global_step)
            elapsed, left = (datetime.timedelta(seconds=round(t)) for t in (elapsed, (total_steps - global_step) / sps))
            recent = f"{np.mean(recent_returns):8.1f}" if recent_returns else "     n/a"
            print(
                f"iter {iteration:4d}/{args.num_iterations} step {global_step:8d} sps {sps:6d} elapsed {elapsed} "
                f"left {left} return {recent} kl {losses['approx_kl']:.4f} clipfrac {losses['clipfrac']:.3f}"
                + (f" [non-finite: {losses['nonfinite_skipped']} steps skipped]" if losses["nonfinite_skipped"] else "")
            )
            if args.eval_every and iteration % args.eval_every == 0:
                eval_returns = evaluate(actor, obs_rms, args, device, f"eval at step {global_step}")
                log_evaluation(writer, eval_returns, global_step)
    except KeyboardInterrupt:
        writer.close()
        print(f"{script}: stopped at step {global_step} of {total_steps}; wrote runs/{run_name}", file=sys.stderr)
        sys.exit(130)

    written = [f"runs/{run_name}"] + [f"videos/{run_name}"] * args.capture_video
    if args.save_model:
        written.append(f"runs/{run_name}/{args.exp_name}.model")
        save_model(written[-1], args, actor, critic, obs_rms, return_rms)
    eval_returns = evaluate(actor, obs_rms, args, device, "eval", video_name)
    log_evaluation(writer, eval_returns, global_step, final=True)
    envs.close()
    writer.close()
    print(f"wrote {', '.join(written)}")
    return eval_returns


if __name__ == "__main__":
    main(tyro.cli(Args))
