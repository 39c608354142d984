"""TRPO with a diagonal Gaussian policy for Box-action environments (default HalfCheetah-v5).

Trust Region Policy Optimization (Schulman et al., 2015) with GAE (Schulman et al., 2016). Each iteration
collects num_steps x num_envs transitions, estimates advantages A_t with GAE, maximises the surrogate
L(theta) = E[pi_theta(a|s) / pi_old(a|s) * A] + ent_coef * H(pi_theta) subject to mean KL(pi_old || pi_theta)
<= max_kl, a radius that shrinks linearly to final_max_kl over training (a natural-gradient step by conjugate
gradient, scaled to the trust region and checked by a backtracking line search; ent_coef grows while the
policy's entropy per action dimension is below target_entropy and falls to almost nothing above it), then
fits the value network, a separate one, by regression on the GAE returns.
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
from torch.distributions.kl import kl_divergence
from torch.nn.utils import parameters_to_vector, vector_to_parameters
from torch.utils.tensorboard import SummaryWriter

# MuJoCo 4 warns, once per env made, that gymnasium's XML models use a deprecated attribute: drop that one warning.
mujoco.set_mju_user_warning(lambda message: "deprecated" in message or print(f"WARNING: {message}", file=sys.stderr))
# The line search gives up after this many tries, at backtrack_coeff**9 of the full step.
BACKTRACK_ITERS = 10
# What a line search that found no step reports: the KL is NaN, never 0, so no step is mistaken for a tiny one.
FAILED_SEARCH = {"line_search_success": 0.0, "step_fraction": 0.0, "kl": math.nan, "actual_improvement": 0.0}
# The adaptive entropy bonus: log(ent_coef) moves by ENT_COEF_RATE * (target - entropy per action dimension) per
# update, fast enough to wind up before the first updates shrink the std below the target, and stays in
# [MIN_ENT_COEF, MAX_ENT_COEF], bounding the wind-up while the trust region holds the entropy away from its target.
ENT_COEF_RATE, MIN_ENT_COEF, MAX_ENT_COEF = 2.0, 1e-4, 0.1
# The critic is wider than the actor: its fit is not bounded by a trust region, and its cost is small.
ACTOR_WIDTH, CRITIC_WIDTH = 64, 256
# Much less noise at the start than std 1 (std 0.37): a noisy start leaves HalfCheetah seeds in a poor gait.
LOG_STD_INIT = -1.0


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
    wandb_project_name: str = "trpo"
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
    num_envs: int = 4
    """the number of parallel environments"""
    num_steps: int = 512
    """the number of steps per env per policy update"""
    gamma: float = 0.99
    """the discount factor"""
    # Andrychowicz et al. (2021) also recommend 0.9 over 0.95.
    gae_lambda: float = 0.9
    """the GAE lambda"""
    # Wide early, while the policy is far from good; narrow late, when a step that is too long costs a learned gait.
    max_kl: float = 0.04
    """the trust region radius at the start: the largest mean KL(old || new) a step may reach"""
    final_max_kl: float = 0.01
    """the trust region radius shrinks linearly from max_kl to this over training (equal to max_kl: constant)"""
    cg_iters: int = 10
    """conjugate gradient iterations"""
    cg_damping: float = 0.1
    """damping added to the Fisher matrix: CG solves (F + cg_damping * I) x = g"""
    backtrack_coeff: float = 0.8
    """each line-search step shrinks the step by this factor"""
    # Only below a floor: a step may spend trust region on shrinking the std, and a seed out of noise stops exploring.
    target_entropy: float | None = 0.0
    """the entropy bonus keeps the policy's entropy per action dimension above this many nats (0: std 0.24); None: no bonus"""
    vf_lr: float = 1e-3
    """the Adam learning rate of the value network"""
    vf_epochs: int = 10
    """passes over the batch when fitting the value network"""
    # 40 Adam steps of 512 samples per update, not hundreds of small ones: a step's cost here is per-call overhead.
    vf_minibatches: int = 4
    """minibatches per value-network pass"""
    eval_episodes: int = 10
    """deterministic (mean action) episodes per evaluation: after training and every eval_every iterations"""
    eval_every: int = 0
    """if positive, evaluate the current policy every this many iterations, logged against global_step"""
    eval_only: str | None = None
    """a .model file saved with --save-model: evaluate (and with --capture-video record) it instead of training"""

    # Computed at runtime, not flags.
    batch_size: int = field(default=0, init=False)
    """the batch size, num_envs * num_steps"""
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
        self.mean = mlp(obs_dim, action_dim, ACTOR_WIDTH, out_std=0.01)
        # State-independent log standard deviation, one per action dimension.
        self.log_std = nn.Parameter(torch.full((action_dim,), LOG_STD_INIT))

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


def surrogate_objective(actor, obs, actions, old_logprobs, advantages, ent_coef):
    """L(theta) = E[pi_theta(a|s) / pi_old(a|s) * A] + ent_coef * E[H(pi_theta(.|s))] (eq. 14 of the
    TRPO paper, plus the bonus). The gradient step and the line search both call this."""
    dist = actor.dist(obs)
    ratio = torch.exp(dist.log_prob(actions).sum(-1) - old_logprobs)
    return (ratio * advantages).mean() + ent_coef * dist.entropy().sum(-1).mean()


def adapt_entropy_coef(ent_coef, entropy_gap):
    """The next update's bonus: larger while the entropy is below its target (entropy_gap > 0), smaller above."""
    return min(max(ent_coef * math.exp(ENT_COEF_RATE * entropy_gap), MIN_ENT_COEF), MAX_ENT_COEF)


def mean_kl(actor, obs, old_mean, old_log_std):
    """Mean KL(pi_old || pi_theta) over the states; the old distribution is a constant."""
    old_dist = Normal(old_mean.detach(), old_log_std.detach().exp())
    return kl_divergence(old_dist, actor.dist(obs)).sum(-1).mean()


def fisher_vector_product_fn(actor, obs):
    """Return v -> F v, F the Hessian of mean KL(pi_old || pi_theta) at theta_old. There the KL's gradient w.r.t.
    z = (mean, log_std) is zero, so F is the Gauss-Newton product E_s[J^T M J], J = dz/dtheta, M the KL's Hessian
    w.r.t. z: diagonal, 1 / sigma^2 for the mean and 2 for the log-std. J^T u is one backward pass; u -> J^T u is
    linear, so the gradient of (J^T u) . v w.r.t. u is J v (double backward), faster than forward mode here."""
    params = list(actor.parameters())
    mean, log_std = actor(obs)
    inv_var = torch.exp(-2 * log_std).detach()
    # Only the graph of u -> J^T u is used, never its value, so u can be zero.
    u = (torch.zeros_like(mean, requires_grad=True), torch.zeros_like(log_std, requires_grad=True))
    jacobian_t_u = torch.autograd.grad((mean, log_std), params, u, create_graph=True)
    sizes = [p.numel() for p in params]

    def fisher_vector_product(vector):
        tangents = [chunk.view_as(p) for chunk, p in zip(vector.split(sizes), params)]
        jv_mean, jv_log_std = torch.autograd.grad(jacobian_t_u, u, tangents, retain_graph=True)
        m_jv = (inv_var * jv_mean / obs.shape[0], 2 * jv_log_std / obs.shape[0])
        grads = torch.autograd.grad((mean, log_std), params, m_jv, retain_graph=True)
        return torch.cat([g.reshape(-1) for g in grads])

    return fisher_vector_product


def conjugate_gradient(matrix_vector_product, b, iters, residual_tol=1e-10):
    """Approximately solve A x = b for a symmetric positive-definite A given only v -> A v."""
    x = torch.zeros_like(b)
    residual, direction = b.clone(), b.clone()
    residual_sq = residual @ residual
    for _ in range(iters):
        a_direction = matrix_vector_product(direction)
        alpha = residual_sq / (direction @ a_direction)
        x += alpha * direction
        residual -= alpha * a_direction
        new_residual_sq = residual @ residual
        if new_residual_sq < residual_tol:
            break
        direction = residual + (new_residual_sq / residual_sq) * direction
        residual_sq = new_residual_sq
    return x


def line_search(actor, objective_fn, kl_fn, full_step, old_objective, max_kl, backtrack_coeff):
    """Try theta_old + backtrack_coeff**k * full_step for k = 0, 1, ...; take the first step whose mean KL
    is at most max_kl and whose objective beats old_objective. On failure restore theta_old, KL NaN."""
    old_params = parameters_to_vector(actor.parameters()).detach().clone()
    with torch.no_grad():
        for k in range(BACKTRACK_ITERS):
            step_fraction = backtrack_coeff**k
            vector_to_parameters(old_params + step_fraction * full_step, actor.parameters())
            improvement = objective_fn().item() - old_objective
            kl = kl_fn().item()
            # NaN fails both comparisons, so a non-finite trial step is never accepted.
            if kl <= max_kl and improvement > 0:
                diagnostics = {"line_search_success": 1.0, "step_fraction": step_fraction, "kl": kl}
                return diagnostics | {"line_search_iters": k + 1, "actual_improvement": improvement}
        vector_to_parameters(old_params, actor.parameters())
    return FAILED_SEARCH | {"line_search_iters": BACKTRACK_ITERS}


def trpo_step(actor, objective_fn, kl_fn, obs, max_kl, args):
    """One trust-region step on the actor; returns the diagnostics logged under trpo/. x = (F + damping I)^-1 g
    by CG, full step sqrt(2 max_kl / x^T F x) x (1/2 s^T F s = max_kl, Appendix C of the paper), then the
    line search; non-finite values skip the step. The length uses the undamped x^T F x, the KL's own model:
    baselines and sb3-contrib count the damping, which only regularizes the solve, and step short of max_kl."""
    objective = objective_fn()
    policy_gradient = torch.cat([g.reshape(-1) for g in torch.autograd.grad(objective, actor.parameters())])
    fisher_vector_product = fisher_vector_product_fn(actor, obs)
    damped_fvp = lambda v: fisher_vector_product(v) + args.cg_damping * v
    step_direction = conjugate_gradient(damped_fvp, policy_gradient, args.cg_iters)
    curvature = step_direction @ fisher_vector_product(step_direction)
    full_step = torch.sqrt(2 * max_kl / curvature) * step_direction
    if not (torch.isfinite(objective) and torch.isfinite(full_step).all() and curvature > 0):
        return FAILED_SEARCH | {"line_search_iters": 0, "expected_improvement": 0.0, "nonfinite_skipped": 1.0}
    diagnostics = line_search(actor, objective_fn, kl_fn, full_step, objective.item(), max_kl, args.backtrack_coeff)
    expected_improvement = diagnostics["step_fraction"] * (policy_gradient @ full_step).item()
    return diagnostics | {"expected_improvement": expected_improvement, "nonfinite_skipped": 0.0}


def fit_critic(critic, optimizer, obs, returns, args):
    """args.vf_epochs passes of Adam over args.vf_minibatches shuffled minibatches of 1/2 (V(s) - R)^2;
    returns (mean loss, skipped steps): a step with a non-finite loss or gradient never reaches the weights."""
    batch_size = obs.shape[0]
    minibatch_size = batch_size // args.vf_minibatches
    losses, skipped = [], 0
    for _ in range(args.vf_epochs):
        permutation = torch.randperm(batch_size, device=obs.device)
        for start in range(0, batch_size, minibatch_size):
            idx = permutation[start : start + minibatch_size]
            value_loss = 0.5 * ((critic(obs[idx]) - returns[idx]) ** 2).mean()
            optimizer.zero_grad()
            value_loss.backward()
            if not torch.isfinite(value_loss + nn.utils.get_total_norm([p.grad for p in critic.parameters()])):
                skipped += 1
                continue
            optimizer.step()
            losses.append(value_loss.detach())
    return (torch.stack(losses).mean().item() if losses else float("nan")), skipped


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
        (batch_size >= 2, "num_envs * num_steps must be at least 2 (advantages are normalized)"),
        (args.total_timesteps >= batch_size, "total_timesteps must be at least num_envs * num_steps"),
        (0 <= args.gamma <= 1 and 0 <= args.gae_lambda <= 1, "gamma and gae_lambda must be in [0, 1]"),
        (0 < args.max_kl < inf, "max_kl must be positive and finite"),
        (args.cg_iters >= 1 and 0 <= args.cg_damping < inf, "cg_iters must be >= 1, cg_damping >= 0 and finite"),
        (0 < args.backtrack_coeff < 1, "backtrack_coeff must be in (0, 1)"),
        (0 <= args.final_max_kl <= args.max_kl, f"final_max_kl must be in [0, max_kl = {args.max_kl}]"),
        # A Gaussian's entropy per dimension is 1.42 + log std nats: a target beyond this range is no floor.
        (args.target_entropy is None or abs(args.target_entropy) <= 20, "target_entropy must be in [-20, 20]"),
        (0 < args.vf_lr < inf and args.vf_epochs >= 1, "vf_lr must be positive and finite, vf_epochs at least 1"),
        (1 <= args.vf_minibatches <= batch_size, "vf_minibatches must be in [1, num_envs * num_steps]"),
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
    action_dim = int(np.prod(action_shape))
    actor = Actor(np.prod(obs_shape), action_dim).to(device)
    critic = Critic(np.prod(obs_shape), CRITIC_WIDTH).to(device)
    critic_optimizer = torch.optim.Adam(critic.parameters(), lr=args.vf_lr, fused=True)
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

    global_step, start_time = 0, time.time()
    recent_returns, ent_coef = deque(maxlen=20), 0.0
    next_obs, _ = envs.reset(seed=args.seed)
    next_obs = normalize(next_obs, update_stats=True)

    try:
        for iteration in range(1, args.num_iterations + 1):
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

            with torch.no_grad():  # V(s_t) of the whole rollout in one pass: the critic is fixed until its fit
                values = critic(to_tensor(observations)).cpu().numpy()
                next_value = critic(to_tensor(next_obs)).cpu().numpy()
            advantages, returns = compute_gae(rewards, values, dones, next_value, args.gamma, args.gae_lambda)
            # (num_steps, num_envs, ...) -> (num_steps * num_envs, ...), the same row order for every field.
            batch = (observations, actions, advantages, returns, values)
            b_obs, b_actions, b_advantages, b_returns, b_values = (to_tensor(x).flatten(0, 1) for x in batch)
            b_advantages = (b_advantages - b_advantages.mean()) / (b_advantages.std() + 1e-8)

            with torch.no_grad():  # pi_old: the actor as it was during the rollout
                old_mean, old_log_std = actor(b_obs)
                old_dist = Normal(old_mean, old_log_std.exp())
                b_logprobs, entropy = old_dist.log_prob(b_actions).sum(-1), old_dist.entropy().sum(-1).mean().item()
            max_kl = args.final_max_kl + (args.max_kl - args.final_max_kl) * (1 - (iteration - 1) / args.num_iterations)
            if args.target_entropy is not None:
                ent_coef = adapt_entropy_coef(ent_coef, args.target_entropy - entropy / action_dim)
            objective_fn = partial(surrogate_objective, actor, b_obs, b_actions, b_logprobs, b_advantages, ent_coef)
            kl_fn = partial(mean_kl, actor, b_obs, old_mean, old_log_std)
            diagnostics = trpo_step(actor, objective_fn, kl_fn, b_obs, max_kl, args)
            diagnostics |= {"ent_coef": ent_coef, "max_kl": max_kl}

            value_loss, skipped_value_steps = fit_critic(critic, critic_optimizer, b_obs, b_returns, args)
            returns_var = b_returns.var()
            explained_var = (1 - (b_returns - b_values).var() / returns_var).item() if returns_var > 0 else math.nan
            elapsed = time.time() - start_time
            sps = max(int(global_step / elapsed), 1)
            scalars = {"charts/SPS": sps, "losses/value_loss": value_loss, "losses/explained_variance": explained_var}
            scalars |= {"losses/entropy": entropy, "losses/value_nonfinite_skipped": skipped_value_steps}
            scalars |= {f"trpo/{key}": value for key, value in diagnostics.items()}
            for key, value in scalars.items():
                writer.add_scalar(key, value, global_step)
            elapsed, left = (datetime.timedelta(seconds=round(t)) for t in (elapsed, (total_steps - global_step) / sps))
            recent = f"{np.mean(recent_returns):8.1f}" if recent_returns else "     n/a"
            search = "taken at try" if diagnostics["line_search_success"] else "rejected after try"
            print(
                f"iter {iteration:4d}/{args.num_iterations} step {global_step:8d} sps {sps:6d} elapsed {elapsed} "
                f"left {left} return {recent} kl {diagnostics['kl']:.4f} step {search} "
                f"{diagnostics['line_search_iters']} entropy {entropy:.2f} bonus {ent_coef:.4f}"
                + (" [non-finite: update skipped]" if diagnostics["nonfinite_skipped"] or skipped_value_steps else "")
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
