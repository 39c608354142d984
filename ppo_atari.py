"""PPO with the Nature CNN on Atari (default BreakoutNoFrameskip-v4; ALE/...-v5 ids work too).

Proximal Policy Optimization (Schulman et al., 2017) with GAE, on the standard Atari settings (8 envs x 128
steps, 4 epochs of 4 minibatches, clip 0.1, learning rate 2.5e-4 annealed). Training runs in ale-py's C++ vector
env (frame skip, pooling and stacking in C++, uint8 observations (num_envs, 4, 84, 84)); evaluation plays on
gymnasium's wrappers for the same preprocessing (make_env). A life loss ends the bootstrapped return but not the
game; charts/episodic_return is the unclipped score of a whole game. The default budget is 10M agent steps (40M
frames): --checkpoint-every N and --resume PATH split a long run into parts.
"""

import datetime
import math
import os
import random
import sys
import time
from collections import deque
from dataclasses import dataclass, field

import ale_py
import gymnasium as gym
import numpy as np
import torch
import tyro
from torch import nn
from torch.utils.tensorboard import SummaryWriter

gym.register_envs(ale_py)
# ALE prints a banner to stderr whenever it starts a game; keep its warnings and errors only.
ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Warning)

# Resuming with other values of these would not continue the same training run.
RESUME_MUST_MATCH = ("env_id", "num_envs", "num_steps")


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
    """if toggled, record the final evaluation's games into videos/{run_name}/eval"""
    save_model: bool = False
    """if toggled, save the network to runs/{run_name}/{exp_name}.model"""
    checkpoint_every: int = 0
    """if positive, save all a resumed run needs to runs/{run_name}/checkpoint.pt every this many updates"""
    resume: str | None = None
    """a checkpoint.pt to continue training from (same env_id, num_envs, num_steps)"""

    env_id: str = "BreakoutNoFrameskip-v4"
    """the id of an Atari env: {Game}NoFrameskip-v4 (no sticky actions) or ALE/{Game}-v5 (sticky actions)"""
    total_timesteps: int = 10_000_000
    """total agent steps over all envs, each 4 frames (rounded down to whole iterations)"""
    learning_rate: float = 2.5e-4
    """the Adam learning rate"""
    anneal_lr: bool = True
    """if toggled, anneal the learning rate linearly to 0 over training"""
    num_envs: int = 8
    """the number of parallel environments"""
    num_steps: int = 128
    """the number of steps per env per policy update"""
    gamma: float = 0.99
    """the discount factor"""
    gae_lambda: float = 0.95
    """the GAE lambda"""
    num_minibatches: int = 4
    """the number of minibatches per epoch"""
    update_epochs: int = 4
    """passes over the batch per update"""
    clip_coef: float = 0.1
    """the surrogate clipping coefficient"""
    ent_coef: float = 0.01
    """coefficient of the entropy bonus"""
    vf_coef: float = 0.5
    """coefficient of the value loss"""
    max_grad_norm: float = 0.5
    """the largest global gradient norm"""
    bf16: bool = False
    """if toggled, run the shared CNN trunk (policy and value) in bfloat16 autocast (fast on CPUs with AVX512-BF16 or AMX and on recent GPUs)"""
    eval_episodes: int = 10
    """games per evaluation (greedy actions, 5% random; see evaluate): after training and every eval_every iterations"""
    eval_every: int = 0
    """if positive, evaluate the current policy every this many iterations, logged against global_step"""
    eval_only: str | None = None
    """a .model (--save-model) or checkpoint.pt file: evaluate (and with --capture-video record) it instead of training"""

    # Computed at runtime, not flags.
    batch_size: int = field(default=0, init=False)
    """the batch size, num_envs * num_steps"""
    minibatch_size: int = field(default=0, init=False)
    """the minibatch size, batch_size // num_minibatches"""
    num_iterations: int = field(default=0, init=False)
    """the number of policy updates"""


class FireReset(gym.Wrapper):
    """Press FIRE when a new game starts, for games that wait for it to start."""

    def reset(self, **kwargs):
        self.env.reset(**kwargs)
        obs, _, terminated, truncated, info = self.env.step(1)
        if terminated or truncated:
            obs, info = self.env.reset(**kwargs)
        return obs, info


def make_env(env_id, video_name=None):
    """The evaluation env, one whole game per episode with its unclipped score, recorded into
    videos/{video_name} if given: gymnasium's wrappers for what the ale vector env does in training
    (no-op reset, frame skip 4 with max-pool, 84x84 grayscale, FIRE when a game starts, stack of 4)."""

    def thunk():
        env = gym.make(env_id, frameskip=1, render_mode="rgb_array" if video_name else None)
        if video_name:
            env = gym.wrappers.RecordVideo(env, f"videos/{video_name}")
        env = gym.wrappers.AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84)
        if "FIRE" in env.unwrapped.get_action_meanings():
            env = FireReset(env)
        return gym.wrappers.FrameStackObservation(env, 4)

    return thunk


def make_envs(args):
    """The training envs: ale-py's C++ vector env, the game and sticky-action probability of env_id,
    FIRE when a game starts, uint8 observations (num_envs, 4, 84, 84). A life loss terminates the
    learner's episode but not the game (life_loss_info); rewards come unclipped, so game scores stay
    whole; same-step autoreset: the obs returned with a done is the next episode's."""
    spec_kwargs = gym.spec(args.env_id).kwargs
    options = {"repeat_action_probability": spec_kwargs["repeat_action_probability"], "noop_max": 30}
    options |= {"life_loss_info": True, "reward_clipping": False, "autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}
    return ale_py.vector_env.AtariVectorEnv(spec_kwargs["game"], args.num_envs, **options)


class GameScores:
    """Whole-game scores, which the ale vector env does not report: sum the unclipped rewards and
    close a game when it really ends (lives did not drop on a termination, or truncation)."""

    def __init__(self, lives):
        """lives: the lives of each env's game at the start, from the reset's infos."""
        self.returns = np.zeros(len(lives))
        self.lengths = np.zeros(len(lives), dtype=int)
        self.lives = lives

    def update(self, rewards, terminations, truncations, lives):
        """Add one step; return [(return, length)] of the games that ended."""
        self.returns += rewards
        self.lengths += 1
        # With same-step autoreset, `lives` already belongs to the next game when one ended.
        ended = np.flatnonzero(truncations | (terminations & (lives >= self.lives)))
        self.lives = lives
        finished = list(zip(self.returns[ended], self.lengths[ended]))
        self.returns[ended], self.lengths[ended] = 0, 0
        return finished


def layer_init(layer, std=2**0.5, bias_const=0.0):
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    """Nature CNN trunk shared by a policy head and a value head."""

    def __init__(self, num_actions, bf16=False):
        super().__init__()
        self.bf16 = bf16
        self.trunk = nn.Sequential(
            layer_init(nn.Conv2d(4, 32, 8, stride=4)),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)),
            nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)),
            nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * 7 * 7, 512)),
            nn.ReLU(),
        )
        self.actor = layer_init(nn.Linear(512, num_actions), std=0.01)
        self.critic = layer_init(nn.Linear(512, 1), std=1.0)

    def forward(self, obs):
        """Logits and values for uint8 frames. With bf16 the scaled frames, the convolutions and the 3136 x 512
        layer, nearly all of the compute, are bfloat16 (the weights and their gradients stay float32); the two
        small heads get the hidden features back in float32, so log-probs and values are computed in float32."""
        dtype = torch.bfloat16 if self.bf16 else torch.float32
        # Channels-last (NHWC), faster for oneDNN's CPU convolutions; converted as uint8, the smallest copy.
        frames = obs.contiguous(memory_format=torch.channels_last)
        with torch.autocast(obs.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            hidden = self.trunk(frames.to(dtype) / 255.0).float()
        return self.actor(hidden), self.critic(hidden).squeeze(-1)


def sample_action(logits):
    """Sample a ~ softmax(logits) for each row by inverse CDF, cheaper than building a Categorical at
    rollout batch sizes."""
    cumulative = torch.softmax(logits, dim=-1).cumsum(-1)
    return (cumulative < torch.rand_like(cumulative[:, :1])).sum(-1).clamp(max=logits.shape[-1] - 1)


def compute_gae(rewards, values, dones, next_value, gamma, gae_lambda):
    """GAE over (num_steps, num_envs) tensors; returns (advantages, returns). dones[t] = 1: transition t
    ended its episode (a life loss, a game over or a truncation), so s_{t+1} is not bootstrapped from (a
    truncated transition already carries gamma * V(final obs) in rewards[t]). next_value = V(obs after the last step)."""
    num_steps = rewards.shape[0]
    advantages = torch.zeros_like(rewards)
    last_gae = torch.zeros_like(next_value)
    for t in reversed(range(num_steps)):
        next_values = next_value if t == num_steps - 1 else values[t + 1]
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


def ppo_update(agent, optimizer, batch, args):
    """update_epochs passes of Adam over shuffled minibatches of the batch (b_obs, b_actions, b_logprobs,
    b_advantages, b_returns, b_values) on L = clipped surrogate + vf_coef * clipped value loss - ent_coef * H,
    advantages normalized per minibatch. Returns the last minibatch's losses, the mean approximate KL
    and clip fraction, and how many steps were skipped as non-finite."""
    b_obs, b_actions, b_logprobs, b_advantages, b_returns, b_values = batch
    clip_fractions, approx_kls, skipped_steps = [], [], 0
    for _ in range(args.update_epochs):
        permutation = torch.randperm(args.batch_size, device=b_obs.device)
        for start in range(0, args.batch_size, args.minibatch_size):
            idx = permutation[start : start + args.minibatch_size]
            logits, new_values = agent(b_obs[idx])
            log_probs_all = torch.log_softmax(logits, dim=-1)
            log_ratio = log_probs_all.gather(-1, b_actions[idx, None]).squeeze(-1) - b_logprobs[idx]
            ratio = log_ratio.exp()
            with torch.no_grad():
                # KL(old || new) estimated by E[(r - 1) - log r] (low variance, never negative).
                approx_kls.append(((ratio - 1) - log_ratio).mean())
                clip_fractions.append(((ratio - 1.0).abs() > args.clip_coef).float().mean())
            mb_advantages = b_advantages[idx]
            mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
            policy_loss = clipped_policy_loss(ratio, mb_advantages, args.clip_coef)
            # The value may move at most clip_coef from its rollout estimate before the loss stops pulling.
            clipped_values = b_values[idx] + torch.clamp(new_values - b_values[idx], -args.clip_coef, args.clip_coef)
            value_losses = torch.max((new_values - b_returns[idx]) ** 2, (clipped_values - b_returns[idx]) ** 2)
            value_loss = 0.5 * value_losses.mean()
            entropy = -(log_probs_all.exp() * log_probs_all).sum(-1).mean()
            loss = policy_loss - args.ent_coef * entropy + args.vf_coef * value_loss

            optimizer.zero_grad()
            loss.backward()
            grad_norm = nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
            if not torch.isfinite(loss + grad_norm):  # a non-finite step never reaches the weights
                skipped_steps += 1
                continue
            optimizer.step()
    # The minibatches' statistics stay on the device until here: one read per update.
    approx_kl, clip_fraction = torch.stack([torch.stack(approx_kls), torch.stack(clip_fractions)]).mean(1).tolist()
    losses = {"value_loss": value_loss.item(), "policy_loss": policy_loss.item(), "entropy": entropy.item()}
    return losses | {"approx_kl": approx_kl, "clipfrac": clip_fraction, "nonfinite_skipped": skipped_steps}


def model_state(agent, args):
    """What --save-model writes and --eval-only reads."""
    return {"agent": agent.state_dict(), "args": vars(args)}


def save_atomically(state, path):
    """torch.save to a temporary file, then rename: a run killed while saving keeps its last checkpoint."""
    torch.save(state, f"{path}.tmp")
    os.replace(f"{path}.tmp", path)


def read_file(path, what):
    """torch.load of a model or checkpoint; raises ValueError saying why it cannot be read. weights_only:
    unpickling reads tensors and plain containers only and never runs code from the file."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise ValueError(f"cannot read {what} {path!r} ({type(e).__name__})") from e
    if isinstance(state, dict):  # not a bare tensor, say, which indexing by name would only warn about
        return state
    raise ValueError(f"{path!r} is not a {what} of this script ({type(state).__name__})")


def load_model(path, num_actions, bf16):
    """The agent saved in a .model or checkpoint.pt file; raises ValueError saying why it cannot be used here."""
    checkpoint = read_file(path, "model file")
    try:
        agent = Agent(num_actions, bf16)
        agent.load_state_dict(checkpoint["agent"])
    except Exception as e:
        raise ValueError(f"{path!r} is not a model of this script for this game ({type(e).__name__})") from e
    return agent


def load_training_state(path, args):
    """The training state saved at path; raises ValueError saying why this run cannot resume from it."""
    state = read_file(path, "checkpoint")
    if not {"iteration", "agent", "optimizer"} <= state.keys():
        raise ValueError(f"{path!r} is not a checkpoint.pt this script saved with --checkpoint-every")
    changed = [key for key in RESUME_MUST_MATCH if state["args"][key] != getattr(args, key)]
    if changed:
        raise ValueError(f"{path!r} was saved with other {', '.join(changed)}")
    return state


def evaluate(agent, args, device, label, video_name=None, epsilon=0.05):
    """args.eval_episodes whole games on an env of its own (make_env), recorded into videos/{video_name} if
    given; prints "{label}: mean return ..." and returns the scores. Epsilon-greedy (5% random actions, the
    usual Atari evaluation): a greedy policy can stall forever where a game waits for FIRE. The env and the
    epsilon draws are seeded with seed + 10_000, no global random generator: evaluating leaves the run as it was."""
    env = make_env(args.env_id, video_name)()
    rng = np.random.default_rng(args.seed + 10_000)
    scores, score = [], 0.0
    obs, _ = env.reset(seed=args.seed + 10_000)
    while len(scores) < args.eval_episodes:
        with torch.inference_mode():
            action = agent(torch.as_tensor(obs, device=device)[None])[0].argmax().item()
        if rng.random() < epsilon:
            action = rng.integers(env.action_space.n)
        obs, reward, terminated, truncated, _ = env.step(action)
        score += reward
        if terminated or truncated:
            scores.append(score)
            score = 0.0
            if len(scores) < args.eval_episodes:  # a reset after the last would start a one-frame video
                obs, _ = env.reset()
    env.close()
    print(f"{label}: mean return {np.mean(scores):.2f} +- {np.std(scores):.2f} over {len(scores)} games")
    return scores


def log_evaluation(writer, scores, global_step, final=False):
    """An evaluation as a point of the curve eval/episodic_return; the final one also game by game."""
    writer.add_scalar("eval/episodic_return", np.mean(scores), global_step)
    for i, score in enumerate(scores if final else []):
        writer.add_scalar("eval/final_episodic_return", score, i)


def start_logging(args, run_name, resumed, total_steps):
    """(the TensorBoard writer of runs/{run_name}, with the hyperparameters as a table; the id of the
    Weights and Biases run that mirrors it with --track, else None). A resumed run goes on in its logs.
    Prints the run folder and the plan, the run's first line."""
    if args.track:
        import wandb

        project = {"project": args.wandb_project_name, "entity": args.wandb_entity, "name": run_name}
        # A resumed run goes on in the same wandb run; monitor_gym uploads what RecordVideo records.
        project |= {"id": resumed.get("wandb_id") if resumed else None, "resume": "allow"}
        wandb.init(**project, config=vars(args), sync_tensorboard=True, monitor_gym=True, save_code=True)
    wandb_id = wandb.run.id if args.track else None
    # On resume, TensorBoard drops what the interrupted run logged after its checkpoint.
    writer = SummaryWriter(f"runs/{run_name}", purge_step=resumed["global_step"] + 1 if resumed else None)
    hyperparameters = "\n".join(f"|{key}|{value}|" for key, value in vars(args).items())
    writer.add_text("hyperparameters", f"|param|value|\n|-|-|\n{hyperparameters}")
    print(
        f"runs/{run_name}: {args.num_iterations} iterations x {total_steps // args.num_iterations} = {total_steps} of {args.total_timesteps} steps"
    )
    return writer, wandb_id


def check_inputs(args):
    """The env's number of actions; raises ValueError naming the first argument no run can use.
    Every comparison with NaN is false, so each check rejects NaN; `< inf` rejects infinity."""
    inf, batch_size = math.inf, args.num_envs * args.num_steps
    requirements = [
        ("/" not in args.exp_name, "exp_name must not contain '/' (it names files in the run folder)"),
        (args.num_envs >= 1 and args.num_steps >= 1, "num_envs and num_steps must be at least 1"),
        # ale-py seeds env i with seed + i, in [0, 2**31).
        (0 <= args.seed <= 2**31 - args.num_envs, "seed must be in [0, 2**31 - num_envs]"),
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
        (args.checkpoint_every >= 0, "checkpoint_every must be at least 0"),
    ]
    for ok, message in requirements:
        if not ok:
            raise ValueError(message)
    try:
        is_atari = gym.spec(args.env_id).entry_point == "ale_py.env:AtariEnv"
    except gym.error.Error as e:
        raise ValueError(f"cannot make env {args.env_id!r}: {e}") from e
    if not is_atari:
        raise ValueError(f"{args.env_id} is not an Atari game: ppo_continuous.py and trpo_discrete.py learn other envs")
    env = make_env(args.env_id)()
    env.close()
    return env.action_space.n


def main(args):
    script = os.path.basename(__file__)
    try:  # nothing is written before the arguments and the input files have been checked
        num_actions = check_inputs(args)
        watched = load_model(args.eval_only, num_actions, args.bf16) if args.eval_only else None
        resumed = load_training_state(args.resume, args) if args.resume and not args.eval_only else None
    except ValueError as e:
        sys.exit(f"{script}: error: {e}")
    args.batch_size = args.num_envs * args.num_steps
    args.minibatch_size = args.batch_size // args.num_minibatches
    args.num_iterations = args.total_timesteps // args.batch_size
    # A resumed run keeps its name, so its TensorBoard logs and checkpoints stay in one folder.
    run_name = resumed["run_name"] if resumed else f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
    device = torch.device("cuda" if args.cuda and torch.cuda.is_available() else "cpu")
    if args.cuda and device.type == "cpu":
        print(f"{script}: no GPU available, running on the CPU", file=sys.stderr)
    video_name = f"{run_name}/eval" if args.capture_video else None  # the final evaluation's
    if watched is not None:
        return evaluate(watched.to(device), args, device, "eval", video_name)

    envs = make_envs(args)
    total_steps = args.num_iterations * args.batch_size  # whole iterations, at most total_timesteps
    writer, wandb_id = start_logging(args, run_name, resumed, total_steps)

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = True
    agent = Agent(num_actions, args.bf16).to(device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5, fused=True)
    start_iteration, global_step = 1, 0
    if resumed is not None:  # the envs are not saved: a resumed run starts new games
        agent.load_state_dict(resumed["agent"])
        optimizer.load_state_dict(resumed["optimizer"])
        start_iteration, global_step = resumed["iteration"] + 1, resumed["global_step"]

    # Rollout storage, (num_steps, num_envs, ...) everywhere; frames stay uint8 until the network.
    obs_shape = envs.single_observation_space.shape
    observations = torch.zeros((args.num_steps, args.num_envs) + obs_shape, dtype=torch.uint8, device=device)
    actions = torch.zeros((args.num_steps, args.num_envs), dtype=torch.long, device=device)
    logprobs, rewards, dones, values = torch.zeros((4, args.num_steps, args.num_envs), device=device)

    start_step, start_time, recent_returns = global_step, time.time(), deque(maxlen=20)
    next_obs, infos = envs.reset(seed=args.seed)
    next_obs, scores = torch.as_tensor(next_obs, device=device), GameScores(infos["lives"])
    checkpoint = f"runs/{run_name}/checkpoint.pt"

    try:
        for iteration in range(start_iteration, args.num_iterations + 1):
            if args.anneal_lr:
                optimizer.param_groups[0]["lr"] = args.learning_rate * (1.0 - (iteration - 1.0) / args.num_iterations)
            for step in range(args.num_steps):
                global_step += args.num_envs
                observations[step] = next_obs
                with torch.no_grad():
                    logits, values[step] = agent(next_obs)
                    action = sample_action(logits)
                    logprobs[step] = torch.log_softmax(logits, dim=-1).gather(-1, action[:, None]).squeeze(-1)
                actions[step] = action
                next_obs, reward, terminations, truncations, infos = envs.step(action.cpu().numpy())
                for game_return, game_length in scores.update(reward, terminations, truncations, infos["lives"]):
                    recent_returns.append(game_return)
                    writer.add_scalar("charts/episodic_return", game_return, global_step)
                    writer.add_scalar("charts/episodic_length", game_length, global_step)
                reward = np.sign(reward).astype(np.float32)
                # Truncation is not termination: bootstrap a time-limit cut with gamma * V(final obs).
                truncated = truncations & ~terminations
                if truncated.any():
                    final_obs = torch.as_tensor(np.stack(infos["final_obs"][truncated]), device=device)
                    with torch.no_grad():
                        reward[truncated] += args.gamma * agent(final_obs)[1].cpu().numpy()
                rewards[step] = torch.as_tensor(reward, device=device)
                dones[step] = torch.as_tensor(terminations | truncations, device=device)
                next_obs = torch.as_tensor(next_obs, device=device)

            with torch.no_grad():
                next_value = agent(next_obs)[1]
            advantages, returns = compute_gae(rewards, values, dones, next_value, args.gamma, args.gae_lambda)
            # (num_steps, num_envs, ...) -> (num_steps * num_envs, ...), the same row order for every field.
            batch = [x.flatten(0, 1) for x in (observations, actions, logprobs, advantages, returns, values)]
            losses = ppo_update(agent, optimizer, batch, args)

            *_, b_returns, b_values = batch
            returns_var = b_returns.var()
            losses["explained_variance"] = (
                (1 - (b_returns - b_values).var() / returns_var).item() if returns_var > 0 else math.nan
            )
            elapsed = time.time() - start_time
            sps = max(int((global_step - start_step) / elapsed), 1)
            scalars = {"charts/SPS": sps, "charts/learning_rate": optimizer.param_groups[0]["lr"]}
            scalars |= {f"losses/{key}": value for key, value in losses.items()}
            elapsed, left = (datetime.timedelta(seconds=round(t)) for t in (elapsed, (total_steps - global_step) / sps))
            recent = f"{np.mean(recent_returns):8.1f}" if recent_returns else "     n/a"
            progress = (
                f"iter {iteration:5d}/{args.num_iterations} step {global_step:9d} sps {sps:5d} elapsed {elapsed} "
                f"left {left} return {recent} kl {losses['approx_kl']:.4f} clipfrac {losses['clipfrac']:.3f}"
                + (f" [non-finite: {losses['nonfinite_skipped']} steps skipped]" if losses["nonfinite_skipped"] else "")
            )
            for key, value in scalars.items():
                writer.add_scalar(key, value, global_step)
            print(progress)
            if args.checkpoint_every and iteration % args.checkpoint_every == 0:
                training_state = {"optimizer": optimizer.state_dict(), "run_name": run_name, "wandb_id": wandb_id}
                training_state |= {"iteration": iteration, "global_step": global_step}
                save_atomically(model_state(agent, args) | training_state, checkpoint)
            if args.eval_every and iteration % args.eval_every == 0:
                log_evaluation(writer, evaluate(agent, args, device, f"eval at step {global_step}"), global_step)
    except KeyboardInterrupt:
        writer.close()
        tail = f"; --resume {checkpoint} goes on from there" if os.path.exists(checkpoint) else ""
        print(f"{script}: stopped at step {global_step} of {total_steps}; wrote runs/{run_name}{tail}", file=sys.stderr)
        sys.exit(130)

    written = [f"runs/{run_name}"] + [f"videos/{run_name}"] * args.capture_video
    if args.save_model:
        written.append(f"runs/{run_name}/{args.exp_name}.model")
        torch.save(model_state(agent, args), written[-1])
    eval_returns = evaluate(agent, args, device, "eval", video_name)
    log_evaluation(writer, eval_returns, global_step, final=True)
    envs.close()
    writer.close()
    print(f"wrote {', '.join(written)}")
    return eval_returns


if __name__ == "__main__":
    main(tyro.cli(Args))
