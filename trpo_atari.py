"""TRPO with the Nature CNN on Atari (default BreakoutNoFrameskip-v4; ALE/...-v5 ids work too).

    python trpo_atari.py --num-envs 8 --max-kl 0.02

Trust Region Policy Optimization (Schulman et al., 2015) with GAE, made to keep learning on Atari:
many small updates (8 envs x 128 steps, as ppo_atari.py, whose training envs and game scores it shares),
rewards scaled by the running std of the discounted return, an entropy bonus that adapts to hold the
policy's entropy at 80% of its maximum, Fisher-vector products on a subsample of the batch, and a bound
on the KL of every state besides the mean. Every iteration collects num_steps x num_envs transitions,
estimates advantages with GAE, maximises L(theta) = E[pi_theta(a|s) / pi_old(a|s) * A] + ent_coef * H(pi_theta)
subject to mean KL(pi_old || pi_theta) <= max_kl (conjugate gradient + backtracking line search), and fits
a separate value network (its own CNN, so a critic update can never move the policy). max_kl 0.02 per
1024-step batch is 20x OpenAI baselines' Atari setting (0.001 per batch of about 8192 steps). The default
budget is 10M agent steps (40M frames): --checkpoint-every N and --resume PATH split a long run into parts.
"""

import datetime
import math
import os
import random
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from functools import partial

import ale_py
import gymnasium as gym
import numpy as np
import torch
import tyro
from torch import nn
from torch.autograd import forward_ad
from torch.distributions import Categorical
from torch.distributions.kl import kl_divergence
from torch.func import functional_call
from torch.nn.utils import parameters_to_vector, vector_to_parameters
from torch.utils.tensorboard import SummaryWriter

gym.register_envs(ale_py)
# ALE prints a banner to stderr whenever it starts a game; keep its warnings and errors only.
ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Warning)

# Resuming with other values of these would not continue the same training run.
RESUME_MUST_MATCH = ("env_id", "num_envs", "num_steps")
# The share of the batch whose states give the Fisher-vector products, 10% as in the TRPO paper;
# the line search still checks the KL on the whole batch.
FVP_SUBSAMPLE = 0.1
# The line search gives up after this many tries.
BACKTRACK_ITERS = 10
# What a line search that found no step reports: the KLs are NaN, never 0, so no step is mistaken for a tiny one.
FAILED_SEARCH = {"line_search_success": 0.0, "step_fraction": 0.0, "kl": math.nan, "max_state_kl": math.nan}
FAILED_SEARCH |= {"actual_improvement": 0.0}
# The adaptive entropy bonus stays within [MIN_ENT_COEF, MAX_ENT_COEF]; its rate is per update: 0.125 per 1024
# agent steps moves it as fast as 1.0 per 8192, and 2.0 per 8192 overshoots when the entropy drops fast (Pong).
ENT_COEF_RATE, MIN_ENT_COEF, MAX_ENT_COEF = 0.125, 1e-3, 1.0


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
    """if toggled, record the evaluation games (the final one, and every eval_every iterations) into videos/{run_name}"""
    save_model: bool = False
    """if toggled, save the networks and reward statistics to runs/{run_name}/{exp_name}.model"""
    checkpoint_every: int = 0
    """if positive, save all a resumed run needs to runs/{run_name}/checkpoint.pt every this many updates"""
    resume: str | None = None
    """a checkpoint.pt to continue training from (same env_id, num_envs, num_steps)"""

    env_id: str = "BreakoutNoFrameskip-v4"
    """the id of an Atari env: {Game}NoFrameskip-v4 (no sticky actions) or ALE/{Game}-v5 (sticky actions)"""
    total_timesteps: int = 10_000_000
    """total agent steps over all envs, each 4 frames (rounded down to whole iterations)"""
    num_envs: int = 8
    """the number of parallel environments"""
    # Eight times the updates of 8 x 1024 steps for the same samples: Breakout learns faster (docs/trpo_atari.md).
    num_steps: int = 128
    """the number of steps per env per policy update"""
    gamma: float = 0.99
    """the discount factor"""
    gae_lambda: float = 0.95
    """the GAE lambda"""
    max_kl: float = 0.02
    """the trust region radius: the largest mean KL(old || new) a step may reach"""
    cg_iters: int = 10
    """conjugate gradient iterations"""
    cg_damping: float = 0.1
    """damping added to the Fisher matrix: CG solves (F + cg_damping * I) x = g"""
    backtrack_coeff: float = 0.8
    """each line-search step shrinks the step by at least this factor"""
    # Each step spends the trust region on the gradient's noise too, and random moves of the logits lower the
    # entropy: a weak bonus lets a large max_kl collapse the policy, a fixed strong one holds some games at the
    # uniform policy (BeamRider, docs/trpo_atari.md). So the bonus follows the entropy it is there to keep.
    ent_coef: float = 0.1
    """the initial coefficient of the entropy bonus in the surrogate objective (fixed with target_entropy_frac 0)"""
    # At 90% Breakout levels off at about 8 points, at 80% it keeps rising (docs/trpo_atari.md).
    target_entropy_frac: float = 0.8
    """if > 0, ent_coef adapts to hold the policy's entropy at this fraction of ln(number of actions)"""
    max_state_kl: float = 0.1
    """the largest KL(old || new) a step may reach in any one state of the batch, whatever max_kl is"""
    vf_lr: float = 2.5e-4
    """the Adam learning rate of the value network"""
    vf_epochs: int = 3
    """passes over the batch when fitting the value network"""
    vf_minibatches: int = 16
    """minibatches per value-network pass"""
    # Not the policy's: bfloat16 rounding moves the logits more than a small step does, so the line search's KL
    # would exceed the quadratic model's many times over (docs/trpo_atari.md); in float32 the model holds.
    bf16: bool = False
    """if toggled, run the critic's CNN (all layers but the last) in bfloat16; the policy stays float32 (fast on CPUs with AVX512-BF16 or AMX and on recent GPUs)"""
    eval_episodes: int = 10
    """games per evaluation (greedy actions, 5% random; see evaluate): after training and every eval_every iterations"""
    eval_every: int = 0
    """if positive, evaluate the current policy every this many iterations, logged against global_step"""
    eval_only: str | None = None
    """a .model (--save-model) or checkpoint.pt file: evaluate (and with --capture-video record) it instead of training"""

    # Computed at runtime, not flags.
    batch_size: int = field(default=0, init=False)
    """the batch size, num_envs * num_steps"""
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


def nature_cnn(num_outputs, last_layer_std):
    """Nature DQN trunk (Mnih et al., 2015) with a linear output layer, on uint8 frames / 255."""
    return nn.Sequential(
        layer_init(nn.Conv2d(4, 32, 8, stride=4)),
        nn.ReLU(),
        layer_init(nn.Conv2d(32, 64, 4, stride=2)),
        nn.ReLU(),
        layer_init(nn.Conv2d(64, 64, 3, stride=1)),
        nn.ReLU(),
        nn.Flatten(),
        layer_init(nn.Linear(64 * 7 * 7, 512)),
        nn.ReLU(),
        layer_init(nn.Linear(512, num_outputs), std=last_layer_std),
    )


def nature_cnn_forward(net, obs, bf16):
    """net(obs / 255) for uint8 frames. With bf16 the scaled frames and every layer but the last are
    bfloat16 (weights and gradients stay float32): nearly all of the compute, in about half the time on
    CPUs with bfloat16 instructions; the last layer computes logits and values in float32."""
    # Unpacked rather than sliced: net[:-1] would build a new nn.Sequential on every call.
    *hidden_layers, last_layer = net
    dtype = torch.bfloat16 if bf16 else torch.float32
    # Channels-last (NHWC), faster for oneDNN's CPU convolutions; converted as uint8, the smallest copy.
    frames = obs.contiguous(memory_format=torch.channels_last)
    with torch.autocast(obs.device.type, dtype=torch.bfloat16, enabled=bf16):
        features = frames.to(dtype) / 255.0
        for layer in hidden_layers:
            features = layer(features)
    return last_layer(features.float())


class Actor(nn.Module):
    def __init__(self, num_actions):
        super().__init__()
        self.net = nature_cnn(num_actions, last_layer_std=0.01)

    def forward(self, obs):
        """Logits of the categorical policy, always in float32 (see Args.bf16)."""
        return nature_cnn_forward(self.net, obs, bf16=False)


class Critic(nn.Module):
    def __init__(self, bf16=False):
        super().__init__()
        self.net = nature_cnn(1, last_layer_std=1.0)
        self.bf16 = bf16

    def forward(self, obs):
        return nature_cnn_forward(self.net, obs, self.bf16).squeeze(-1)


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

    def state_dict(self):
        return {"mean": torch.as_tensor(self.mean), "var": torch.as_tensor(self.var), "count": self.count}

    def load_state_dict(self, state):
        self.mean, self.var, self.count = state["mean"].numpy(), state["var"].numpy(), state["count"]


def sample_action(logits):
    """Sample a ~ softmax(logits) for each row by inverse CDF, cheaper than building a Categorical at
    rollout batch sizes; pi_old(a|s) is computed after the rollout, in one batched pass."""
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


def surrogate_and_state_kls(actor, obs, actions, old_logprobs, advantages, ent_coef, old_logits):
    """L(theta) = E[pi_theta(a|s) / pi_old(a|s) * A] + ent_coef * E[H(pi_theta(.|s))] and the per-state
    KL(pi_old || pi_theta) from one forward pass, nearly all of a trial's cost; the gradient step and every
    line-search trial call this, so they optimise the same objective."""
    dist = Categorical(logits=actor(obs))
    ratio = torch.exp(dist.log_prob(actions) - old_logprobs)
    objective = (ratio * advantages).mean() + ent_coef * dist.entropy().mean()
    return objective, kl_divergence(Categorical(logits=old_logits.detach()), dist)


def fisher_vector_product_fn(actor, obs):
    """Return v -> F v, with F the Hessian of mean KL(pi_old || pi_theta) at theta = theta_old.

    At theta_old the KL's gradient w.r.t. the logits z is zero, so its Hessian w.r.t. theta is the
    Gauss-Newton product F = E_s[J^T M J], J = dz/dtheta, M = diag(p) - p p^T the KL's Hessian w.r.t. z.
    J v is one forward-mode pass (dual numbers), J^T u one backward pass through a graph built once:
    for this CNN faster than the double backward pass that wins for small MLPs."""
    params = dict(actor.named_parameters())
    sizes = [p.numel() for p in params.values()]
    logits = actor(obs)
    probs = torch.softmax(logits, dim=-1).detach()

    def fisher_vector_product(vector):
        tangents = [chunk.view_as(p) for chunk, p in zip(vector.split(sizes), params.values())]
        with forward_ad.dual_level():
            duals = {name: forward_ad.make_dual(p.detach(), t) for (name, p), t in zip(params.items(), tangents)}
            jv = forward_ad.unpack_dual(functional_call(actor, duals, (obs,))).tangent
        m_jv = probs * (jv - (probs * jv).sum(-1, keepdim=True))
        grads = torch.autograd.grad(logits, params.values(), m_jv / obs.shape[0], retain_graph=True)
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


def line_search(actor, objective_and_kls_fn, full_step, old_objective, max_kl, args):
    """Try theta_old + f * full_step from f = 1; take the first step whose mean KL is at most max_kl, whose largest
    per-state KL is at most max_state_kl (the bound of the paper's Theorem 1: the mean alone lets a large max_kl put
    a big change on a few states) and whose objective beats old_objective; on failure restore theta_old, both KLs
    NaN. A trial that breaks a KL bound by the factor r sets f = f * min(backtrack_coeff, r**-1/2), where a quadratic
    KL would meet its bound (a few states can put the largest KL tens of times over, beyond BACKTRACK_ITERS fixed
    cuts: 0.8**9 = 1/56 of a quadratic KL); other failures multiply f by backtrack_coeff."""
    old_params = parameters_to_vector(actor.parameters()).detach().clone()
    with torch.no_grad():
        step_fraction = 1.0
        for k in range(BACKTRACK_ITERS):
            vector_to_parameters(old_params + step_fraction * full_step, actor.parameters())
            objective, kls = objective_and_kls_fn()
            means, largest = torch.stack([objective, kls.mean()]), kls.max()
            improvement, kl, largest_kl = means[0].item() - old_objective, means[1].item(), largest.item()
            # NaN fails every comparison, so a non-finite trial step is never accepted.
            if kl <= max_kl and largest_kl <= args.max_state_kl and improvement > 0:
                diagnostics = {"line_search_success": 1.0, "step_fraction": step_fraction, "kl": kl}
                diagnostics |= {"max_state_kl": largest_kl, "actual_improvement": improvement}
                return diagnostics | {"line_search_iters": k + 1}
            overshoot = max(kl / max_kl, largest_kl / args.max_state_kl)
            cut = min(args.backtrack_coeff, overshoot**-0.5) if 1 < overshoot < math.inf else args.backtrack_coeff
            step_fraction *= cut
        vector_to_parameters(old_params, actor.parameters())
    return FAILED_SEARCH | {"line_search_iters": BACKTRACK_ITERS}


def trpo_step(actor, objective_and_kls_fn, fvp_obs, max_kl, args):
    """One trust-region step on the actor; returns the diagnostics logged under trpo/. x = (F + damping I)^-1 g
    by CG, full step sqrt(2 max_kl / x^T F x) x (1/2 s^T F s = max_kl, Appendix C of the paper), then the
    line search; non-finite values skip the step. The length uses the undamped x^T F x, the KL's own model:
    baselines and sb3-contrib count the damping, which only regularizes the solve, and step short of max_kl."""
    objective, _ = objective_and_kls_fn()
    policy_gradient = torch.cat([g.reshape(-1) for g in torch.autograd.grad(objective, actor.parameters())])
    fisher_vector_product = fisher_vector_product_fn(actor, fvp_obs)
    damped_fvp = lambda v: fisher_vector_product(v) + args.cg_damping * v
    step_direction = conjugate_gradient(damped_fvp, policy_gradient, args.cg_iters)
    curvature = step_direction @ fisher_vector_product(step_direction)
    full_step = torch.sqrt(2 * max_kl / curvature) * step_direction
    if not (torch.isfinite(objective) and torch.isfinite(full_step).all() and curvature > 0):
        return FAILED_SEARCH | {"line_search_iters": 0, "expected_improvement": 0.0, "nonfinite_skipped": 1.0}
    diagnostics = line_search(actor, objective_and_kls_fn, full_step, objective.item(), max_kl, args)
    expected_improvement = diagnostics["step_fraction"] * (policy_gradient @ full_step).item()
    return diagnostics | {"expected_improvement": expected_improvement, "nonfinite_skipped": 0.0}


def adapt_entropy_coef(ent_coef, entropy_gap):
    """The entropy bonus for the next update, ent_coef * exp(ENT_COEF_RATE * entropy_gap) within
    [MIN_ENT_COEF, MAX_ENT_COEF]: it grows while the entropy is below its target (entropy_gap > 0, as
    a fraction of the largest entropy ln(number of actions)) and shrinks above it."""
    return min(max(ent_coef * math.exp(ENT_COEF_RATE * entropy_gap), MIN_ENT_COEF), MAX_ENT_COEF)


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


def evaluate(actor, args, device, label, video_name=None, epsilon=0.05):
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
            action = actor(torch.as_tensor(obs, device=device)[None]).argmax().item()
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


def model_state(actor, critic, return_rms, args):
    """What --save-model writes and --eval-only reads."""
    model = {"actor": actor.state_dict(), "critic": critic.state_dict(), "args": vars(args)}
    return model | {"return_rms": return_rms.state_dict()}


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


def load_model(path, num_actions):
    """The actor saved in a .model or checkpoint.pt file; raises ValueError saying why it cannot be used here."""
    checkpoint = read_file(path, "model file")
    try:
        actor = Actor(num_actions)
        actor.load_state_dict(checkpoint["actor"])
    except Exception as e:
        raise ValueError(f"{path!r} is not a model of this script for this game ({type(e).__name__})") from e
    return actor


def load_training_state(path, args):
    """The training state saved at path; raises ValueError saying why this run cannot resume from it."""
    state = read_file(path, "checkpoint")
    if not {"iteration", "actor", "critic_optimizer", "ent_coef"} <= state.keys():
        raise ValueError(f"{path!r} is not a checkpoint.pt this script saved with --checkpoint-every")
    changed = [key for key in RESUME_MUST_MATCH if state["args"][key] != getattr(args, key)]
    if changed:
        raise ValueError(f"{path!r} was saved with other {', '.join(changed)}")
    return state


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
        (batch_size >= 2, "num_envs * num_steps must be at least 2 (advantages are normalized)"),
        (args.total_timesteps >= batch_size, "total_timesteps must be at least num_envs * num_steps"),
        (0 <= args.gamma <= 1 and 0 <= args.gae_lambda <= 1, "gamma and gae_lambda must be in [0, 1]"),
        (0 < args.max_kl <= args.max_state_kl < inf, "max_kl must be positive, max_state_kl finite and >= max_kl"),
        (args.cg_iters >= 1 and 0 <= args.cg_damping < inf, "cg_iters must be >= 1, cg_damping >= 0 and finite"),
        (0 < args.backtrack_coeff < 1, "backtrack_coeff must be in (0, 1)"),
        (0 <= args.ent_coef <= MAX_ENT_COEF, f"ent_coef must be in [0, {MAX_ENT_COEF:g}]"),
        (0 <= args.target_entropy_frac < 1, "target_entropy_frac must be in [0, 1)"),
        (0 < args.vf_lr < inf and args.vf_epochs >= 1, "vf_lr must be positive and finite, vf_epochs at least 1"),
        (1 <= args.vf_minibatches <= batch_size, "vf_minibatches must be in [1, num_envs * num_steps]"),
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
        raise ValueError(f"{args.env_id} is not an Atari game of ale-py: for other envs use trpo_discrete.py")
    env = make_env(args.env_id)()
    env.close()
    return env.action_space.n


def main(args):
    script = os.path.basename(__file__)
    try:  # nothing is written before the arguments and the input files have been checked
        num_actions = check_inputs(args)
        watched = load_model(args.eval_only, num_actions) if args.eval_only else None
        resumed = load_training_state(args.resume, args) if args.resume and not args.eval_only else None
    except ValueError as e:
        sys.exit(f"{script}: error: {e}")
    args.batch_size = args.num_envs * args.num_steps
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
    # No TF32 convolutions (cuDNN's default since Ampere): their rounding swamps a small step's KL, as bfloat16's would.
    torch.backends.cudnn.allow_tf32 = False
    actor = Actor(num_actions).to(device)
    critic = Critic(args.bf16).to(device)
    critic_optimizer = torch.optim.Adam(critic.parameters(), lr=args.vf_lr, eps=1e-5, fused=True)
    # Reward scaling divides by the std of the discounted return, not of the reward itself.
    return_rms, discounted_return = RunningMeanStd(()), np.zeros(args.num_envs)
    ent_coef, start_iteration, global_step = args.ent_coef, 1, 0
    if resumed is not None:  # the envs are not saved: a resumed run starts new games
        parts = {"actor": actor, "critic": critic, "critic_optimizer": critic_optimizer, "return_rms": return_rms}
        for name, part in parts.items():
            part.load_state_dict(resumed[name])
        ent_coef, start_iteration, global_step = resumed["ent_coef"], resumed["iteration"] + 1, resumed["global_step"]

    # Rollout storage, (num_steps, num_envs, ...) everywhere; frames stay uint8 until the network.
    obs_shape = envs.single_observation_space.shape
    observations = torch.zeros((args.num_steps, args.num_envs) + obs_shape, dtype=torch.uint8, device=device)
    actions = torch.zeros((args.num_steps, args.num_envs), dtype=torch.long, device=device)
    rewards, dones = torch.zeros((2, args.num_steps, args.num_envs), device=device)

    start_step, start_time, recent_returns = global_step, time.time(), deque(maxlen=20)
    next_obs, infos = envs.reset(seed=args.seed)
    next_obs, scores = torch.as_tensor(next_obs, device=device), GameScores(infos["lives"])
    checkpoint = f"runs/{run_name}/checkpoint.pt"
    max_entropy, fvp_size = math.log(num_actions), max(1, int(FVP_SUBSAMPLE * args.batch_size))
    target_entropy = args.target_entropy_frac * max_entropy  # in nats; the gap is taken as a fraction of max_entropy

    try:
        for iteration in range(start_iteration, args.num_iterations + 1):
            for step in range(args.num_steps):
                global_step += args.num_envs
                observations[step] = next_obs
                with torch.no_grad():
                    action = sample_action(actor(next_obs))
                actions[step] = action
                next_obs, reward, terminations, truncations, infos = envs.step(action.cpu().numpy())
                for game_return, game_length in scores.update(reward, terminations, truncations, infos["lives"]):
                    recent_returns.append(game_return)
                    writer.add_scalar("charts/episodic_return", game_return, global_step)
                    writer.add_scalar("charts/episodic_length", game_length, global_step)
                reward = np.sign(reward).astype(np.float32)  # float32 before fractions join ale-py's integers
                discounted_return = discounted_return * args.gamma + reward
                return_rms.update(discounted_return)
                reward = reward / np.sqrt(return_rms.var + 1e-8)
                discounted_return[terminations | truncations] = 0.0
                # Truncation is not termination: bootstrap a time-limit cut with gamma * V(final obs).
                truncated = truncations & ~terminations
                if truncated.any():
                    final_obs = torch.as_tensor(np.stack(infos["final_obs"][truncated]), device=device)
                    with torch.no_grad():
                        reward[truncated] += args.gamma * critic(final_obs).cpu().numpy()
                rewards[step] = torch.as_tensor(reward, device=device)
                dones[step] = torch.as_tensor(terminations | truncations, device=device)
                next_obs = torch.as_tensor(next_obs, device=device)

            with torch.no_grad():  # V(s_t) of the rollout in batched passes (chunks bound the memory)
                values = torch.cat([critic(chunk) for chunk in observations.flatten(0, 1).split(512)])
                values, next_value = values.view(observations.shape[:2]), critic(next_obs)
            advantages, returns = compute_gae(rewards, values, dones, next_value, args.gamma, args.gae_lambda)
            # (num_steps, num_envs, ...) -> (num_steps * num_envs, ...), the same row order for every field.
            batch = (observations, actions, advantages, returns, values)
            b_obs, b_actions, b_advantages, b_returns, b_values = (x.flatten(0, 1) for x in batch)
            # Normalized always: max_kl sets the step's length, so their scale only weighs them against the bonus.
            b_advantages = (b_advantages - b_advantages.mean()) / (b_advantages.std() + 1e-8)

            with torch.no_grad():  # pi_old: the actor as it was during the rollout
                old_logits = actor(b_obs)
                old_dist = Categorical(logits=old_logits)
                b_logprobs, entropy = old_dist.log_prob(b_actions), old_dist.entropy().mean().item()
            objective_and_kls_fn = partial(
                surrogate_and_state_kls, actor, b_obs, b_actions, b_logprobs, b_advantages, ent_coef, old_logits
            )
            # The Fisher from a random FVP_SUBSAMPLE of the states, the objective and the KLs from all of them.
            fvp_obs = b_obs[torch.randperm(args.batch_size, device=device)[:fvp_size]]
            diagnostics = trpo_step(actor, objective_and_kls_fn, fvp_obs, args.max_kl, args)
            diagnostics["ent_coef"] = ent_coef
            if args.target_entropy_frac > 0:
                ent_coef = adapt_entropy_coef(ent_coef, (target_entropy - entropy) / max_entropy)

            value_loss, skipped_value_steps = fit_critic(critic, critic_optimizer, b_obs, b_returns, args)

            returns_var = b_returns.var()
            explained_var = (1 - (b_returns - b_values).var() / returns_var).item() if returns_var > 0 else math.nan
            elapsed = time.time() - start_time
            sps = max(int((global_step - start_step) / elapsed), 1)
            scalars = {"charts/SPS": sps, "losses/value_loss": value_loss, "losses/explained_variance": explained_var}
            scalars |= {"losses/entropy": entropy, "losses/value_nonfinite_skipped": skipped_value_steps}
            scalars |= {f"trpo/{key}": value for key, value in diagnostics.items()}
            elapsed, left = (datetime.timedelta(seconds=round(t)) for t in (elapsed, (total_steps - global_step) / sps))
            recent = f"{np.mean(recent_returns):7.1f}" if recent_returns else "    n/a"
            search = "taken at try" if diagnostics["line_search_success"] else "rejected after try"
            progress = (
                f"iter {iteration:4d}/{args.num_iterations} step {global_step:9d} sps {sps:5d} elapsed {elapsed} "
                f"left {left} return {recent} kl {diagnostics['kl']:.4f} state kl {diagnostics['max_state_kl']:.3f} "
                f"step {search} {diagnostics['line_search_iters']} entropy {entropy:.2f} bonus {diagnostics['ent_coef']:.3f}"
                + (" [non-finite: update skipped]" if diagnostics["nonfinite_skipped"] or skipped_value_steps else "")
            )
            for key, value in scalars.items():
                writer.add_scalar(key, value, global_step)
            print(progress)
            if args.checkpoint_every and iteration % args.checkpoint_every == 0:
                training_state = {"critic_optimizer": critic_optimizer.state_dict(), "ent_coef": ent_coef}
                training_state |= {"run_name": run_name, "wandb_id": wandb_id}
                training_state |= {"iteration": iteration, "global_step": global_step}
                save_atomically(model_state(actor, critic, return_rms, args) | training_state, checkpoint)
            if args.eval_every and iteration % args.eval_every == 0:
                log_evaluation(writer, evaluate(actor, args, device, f"eval at step {global_step}"), global_step)
    except KeyboardInterrupt:
        writer.close()
        tail = f"; --resume {checkpoint} goes on from there" if os.path.exists(checkpoint) else ""
        print(f"{script}: stopped at step {global_step} of {total_steps}; wrote runs/{run_name}{tail}", file=sys.stderr)
        sys.exit(130)

    written = [f"runs/{run_name}"] + [f"videos/{run_name}"] * args.capture_video
    if args.save_model:
        written.append(f"runs/{run_name}/{args.exp_name}.model")
        torch.save(model_state(actor, critic, return_rms, args), written[-1])
    eval_returns = evaluate(actor, args, device, "eval", video_name)
    log_evaluation(writer, eval_returns, global_step, final=True)
    envs.close()
    writer.close()
    print(f"wrote {', '.join(written)}")
    return eval_returns


if __name__ == "__main__":
    main(tyro.cli(Args))
