"""TRPO with a diagonal Gaussian policy for Box-action environments (default HalfCheetah-v5).

Trust Region Policy Optimization (Schulman et al., 2015) with GAE (Schulman et al., 2016).
Every iteration collects num_steps x num_envs transitions, then
  1. estimates advantages A_t with GAE, at a discount moving linearly from --gamma to
     --final-gamma over training,
  2. maximises the surrogate L(theta) = E[pi_theta(a|s) / pi_old(a|s) * A] + ent_coef * H(pi_theta)
     subject to mean KL(pi_old || pi_theta) <= max_kl, a radius that shrinks linearly to
     --final-max-kl over training: a natural-gradient step found by conjugate gradient, scaled to
     the trust region and checked by a backtracking line search; ent_coef grows while the
     policy's entropy per action dimension is below --target-entropy (which
     --final-target-entropy moves linearly over training, or from --target-entropy-hold to
     --target-entropy-fraction of it) and falls to almost nothing above it, where a penalty
     adapted the same way (--entropy-ceiling) pulls the entropy down to the target,
  3. fits the value network (a separate network, so it never moves the policy) by regression
     on the GAE returns: Adam on minibatches (with --anneal-vf-lr its learning rate decays
     linearly towards 0), or with --vf-lbfgs-iters full-batch L-BFGS.
"""

import copy
import glob
import math
import os
import pickle
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
from torch.distributions import Normal
from torch.distributions.kl import kl_divergence
from torch.nn.utils import parameters_to_vector, vector_to_parameters
from torch.utils.tensorboard import SummaryWriter

# ALE's ids (ALE/Breakout-v5, ...) are registered only once ale-py is imported.
gym.register_envs(ale_py)


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """the name of this experiment"""
    seed: int = 1
    """seed of python, numpy, torch, every env and action space"""
    torch_deterministic: bool = True
    """if toggled, `torch.backends.cudnn.deterministic=True`"""
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
    """the id of a gymnasium env with Box actions and Box observations"""
    total_timesteps: int = 1_000_000
    """total environment steps over all envs"""
    num_envs: int = 4
    """the number of parallel environments"""
    # The comparisons in the comments below are from benchmarks/RESULTS.md. Where one names no other
    # base, it was made with a constant entropy floor of 0 nats, the undamped step and a constant
    # discount: the floor-0 rows, these defaults with --target-entropy 0 --final-target-entropy None
    # --target-entropy-hold 0 --no-damped-step-length --final-gamma None.
    # 1024 (half the updates) lowers Hopper's mean over seeds 21-30 with the default trust region
    # (2648.5 against 3098.4) and with twice it (2694.1).
    num_steps: int = 512
    """the number of steps per env per policy update"""
    # Held constant, both sides of 0.99 trap Hopper seeds: at 0.98 they dive forward, at 0.993 and
    # 0.995 some stand still for whole episodes. Rising to final_gamma does not (see target_entropy).
    gamma: float = 0.99
    """the discount factor"""
    # Part of the entropy floor's recipe (see target_entropy); alone, with floor 0, it leaves Hopper's
    # mean where floor 0 has it (3285.6 over seeds 1-10).
    final_gamma: float | None = 0.995
    """the discount factor moves linearly from gamma to this over training (None: constant gamma)"""
    # 0.9 rather than 0.95: on HalfCheetah and Walker2d it raised the mean of 10 seeds, on Hopper it
    # lowered it, none significantly; 0.95 lowers Hopper's mean over seeds 1-10 to 3054.1 against
    # 3369.0, and 0.85 over seeds 21-28 to 2422.1 against 3054.7. Andrychowicz et al. (2021) also
    # recommend 0.9.
    gae_lambda: float = 0.9
    """the GAE lambda"""
    norm_adv: bool = True
    """if toggled, normalize the advantages over the batch"""
    # Starting at 0.02 instead left Hopper's mean below 3400 (3169.1 over seeds 1-10); its Walker2d
    # mean over six seeds is below floor 0's on one machine and above it on another. Starting at 0.06
    # raises Walker2d's mean over seeds 1-10 (4543.2 against 4192.7) and lowers Hopper's (2933.0
    # against 3369.0): three Hopper seeds stay below a return of 1000 for 700k steps or more.
    max_kl: float = 0.04
    """the trust region radius: the largest mean KL(old || new) a step may reach"""
    # Against a constant radius, shrinking to 0.01 raises Hopper's and Walker2d's means over seeds 1-20
    # and lowers HalfCheetah's; shrinking to 0 leaves a slow Hopper seed stuck and two of eight Walker2d
    # seeds falling early in most evaluation episodes; shrinking to 0.005 lowers Hopper's mean over
    # seeds 21-40 (2985.8 against 3117.6).
    final_max_kl: float | None = 0.01
    """the trust region radius shrinks linearly from max_kl to this over training (None: constant max_kl)"""
    # rl-zoo's 25 for sb3-contrib lowers Hopper's mean over seeds 1-10 (2867.2 against 3369.0): three
    # seeds start slowly and two end below 2000. 5 starts Hopper sooner but ends it no higher over
    # seeds 21-40 (3086.0 against 3117.6), and lowers Walker2d's over 21-30: 4268.3 against 4977.1.
    cg_iters: int = 10
    """conjugate gradient iterations"""
    cg_damping: float = 0.1
    """damping added to the Fisher matrix: CG solves (F + cg_damping * I) x = g"""
    # As OpenAI baselines, Spinning Up and sb3-contrib size the step; part of the entropy floor's
    # recipe (see target_entropy). Alone, with floor 0, it lowers Hopper's mean over seeds 21-30
    # (3011.5 against 3098.4).
    damped_step_length: bool = True
    """if toggled, the full step's length comes from x^T (F + cg_damping * I) x instead of x^T F x"""
    fvp_subsample: float = 1.0
    """fraction of the batch used for Fisher-vector products"""
    backtrack_iters: int = 10
    """the most line-search steps"""
    backtrack_coeff: float = 0.8
    """each line-search step shrinks the step by this factor"""
    ent_coef: float = 0.0
    """coefficient of the entropy bonus in the surrogate objective: constant without target_entropy, else its start"""
    # A bonus that acts only below a floor: each step may spend part of the trust region on shrinking
    # the std, and a seed whose noise runs out early stops exploring. A floor of 0 nats with the
    # smaller starting noise below lifts HalfCheetah and Hopper over seeds 1-20 against neither. The
    # defaults hold a noisier floor, 1 nat (std 0.66), for 70% of training, where Hopper finds a faster
    # gait, then let it fall to 0, with the step sized by the damped curvature and the discount rising
    # from gamma to 0.995, which weighs the falls that come late in an episode. Without the entropy
    # ceiling, against floor 0 on one machine, seeds 1-10, it raises all three means, none
    # significantly (HalfCheetah 6995.9 against 6978.0, Hopper 3259.8 against 3189.2, Walker2d 4520.1
    # against 4313.3), with one seed of the thirty ending below 3000 against four; on another, Hopper
    # gives 3480.5 and 3407.0 on seeds 1-10 and 21-30.
    target_entropy: float | None = 1.0
    """if set, ent_coef adapts to hold the policy's entropy per action dimension near this many nats (1: std 0.66); None turns the bonus into the constant ent_coef"""
    # Falling from the start, without the damped step and the rising discount: from 1 to 0 over all
    # of training it raises Walker2d's mean over seeds 1-10 (4658.7 against floor 0's 4192.7) and
    # lowers Hopper's (2980.1 against 3369.0); a floor falling to -1, or from 0.25 to 0, or rising
    # from 0 to 0.7 lowered Hopper's or HalfCheetah's mean.
    final_target_entropy: float | None = 0.0
    """the entropy target moves linearly from target_entropy to this over training, or from target_entropy_hold to target_entropy_fraction of it (None: constant target)"""
    # The fall from 1 to 0 over the first half or quarter of training, then held, keeps Walker2d
    # above floor 0 over seeds 1-10 (4657.8 and 4446.3 against 4192.7) and still lowers Hopper's mean
    # (3137.0 and 3141.0 against 3369.0): a few seeds settle in a poor gait as the noise falls.
    target_entropy_fraction: float = 1.0
    """the share of training by which the entropy target reaches final_target_entropy, after which it holds there"""
    # Part of the entropy floor's recipe (see target_entropy). Without the rising discount, half of
    # Hopper's seeds 1-10 and 21-30 fall in some evaluation episodes (3308.5 over the twenty).
    target_entropy_hold: float = 0.7
    """the share of training over which the entropy target holds at target_entropy before it starts moving to final_target_entropy"""
    # 2 rather than 0.5: the first updates shrink the std faster than a slow controller winds the
    # bonus up, and the entropy fell far below its floor on most seeds. Against 0.5 on one machine it
    # raises all three envs' means over seeds 1-20 with floor 0.
    ent_coef_rate: float = 2.0
    """log(ent_coef) moves by this times (target_entropy - entropy per action dimension) per update"""
    # The bonus only holds the entropy up: with it alone the policy ends training at 0.58-0.87 nats
    # per action dimension (std 0.43-0.58) on one machine's seeds 1-10, far above the falling
    # target, and the Gaussian's mean, which the evaluation acts with, was trained under that much
    # noise. The penalty makes the target two-sided, so the noise falls with it (0.01-0.08 nats at
    # the end). On that machine's seeds 1-10 it raises Hopper's mean to 3467.7 (from 3259.8) and
    # Walker2d's to 4776.1 (from 4520.1) and lowers HalfCheetah's to 6688.8 (from 6995.9), none
    # significantly (benchmarks/RESULTS.md).
    entropy_ceiling: bool = True
    """if toggled, an entropy penalty, adapted like the bonus with the gap reversed, also pulls the entropy down to the target (no effect without target_entropy)"""
    min_ent_coef: float = 1e-4
    """the floor of the adapted ent_coef, and of the ceiling's penalty"""
    # Much less noise at the start than std 1: a noisy start leaves HalfCheetah seeds in a poor gait
    # (below 4000: none of seeds 1-20 at -1 with the entropy floor, five at -0.5 without it). Walker2d
    # loses by it, and as much at -0.75. On Hopper's seeds 21-30 both neighbours lower the mean: -0.5
    # to 2703.9 (two seeds dive forward) and -1.5 to 3010.9, against 3098.4.
    log_std_init: float = -1.0
    """the initial log standard deviation of the Gaussian policy (std 0.37 at -1), the same for every action dimension"""
    # 128 gave Hopper 3206.4 over seeds 1-5 at ent_coef_rate 0.5, and 3050.6 over seeds 1-10 against
    # 3369.0, every seed lower.
    actor_width: int = 64
    """the width of each of the policy network's two hidden layers"""
    # Off by default: at ent_coef_rate 0.5, against floor 0 at that rate on the same machine, it
    # lifts Hopper's mean over seeds 1-10 (3331.1 against 3190.2) but not over seeds 1-20 (3142.0
    # against 3162.1), and lowers Walker2d's (3632.5 against 3675.5) and HalfCheetah's (6579.4
    # against 6744.0) over seeds 1-10, none significantly. At the default rate it lowers Hopper's
    # mean over seeds 21-30 (2936.9 against 3098.4).
    tanh_actions: bool = False
    """if toggled, the env receives tanh of the Gaussian sample, scaled into the action bounds, instead of the sample clipped to them"""
    # Wider than the actor's 64: over seeds 1-20, 256 raises HalfCheetah's and Walker2d's means and
    # lowers Hopper's, none significantly, leaves fewer of seeds 1-10 in a poor local optimum than
    # sb3-contrib on all three envs, and a run still takes less than half sb3-contrib's wall-clock.
    critic_width: int = 256
    """the width of each of the value network's two hidden layers"""
    vf_lr: float = 1e-3
    """the Adam learning rate of the value network"""
    # Off by default: the decay lowered Hopper's and Walker2d's means.
    anneal_vf_lr: bool = False
    """if toggled, the value network's learning rate decays linearly from vf_lr towards 0 over training"""
    # 40 Adam steps of 512 samples per update rather than hundreds of small ones: at this network
    # size a step's cost is torch's per-call overhead, not its arithmetic, and 320 steps of 128
    # lowered Hopper's mean over 10 seeds. 80 of 512 and 160 of 128 start Hopper sooner and lower its
    # mean over seeds 21-24 and 21-25 (2150.3 and 2017.6 against 2677.0 and 2837.4).
    vf_epochs: int = 10
    """passes over the batch when fitting the value network"""
    vf_minibatches: int = 4
    """minibatches per value-network pass"""
    # The original TRPO code fit its value network this way; off by default.
    vf_lbfgs_iters: int = 0
    """if positive, fit the value network by full-batch L-BFGS with this many iterations in place of Adam"""
    norm_obs: bool = True
    """if toggled, normalize observations by their running mean and std"""
    norm_reward: bool = True
    """if toggled, scale rewards by the running std of the discounted return"""
    # The last iterate is one draw from a policy that still moves every update, and its deterministic
    # evaluation can fall far from the returns it trains at. Averaging iterates (Nikishin et al., 2018,
    # "Improving Stability in Deep Reinforcement Learning with Weight Averaging") narrows Walker2d's
    # spread over seeds but lowers its mean and Hopper's, so it is off by default.
    policy_ema_decay: float = 0.0
    """if positive, evaluations and the saved actor use an exponential moving average of the actor's parameters with this decay per update (0: the last iterate)"""
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
            env = gym.wrappers.RecordVideo(env, f"videos/{run_name}")
        else:
            env = gym.make(env_id)
        # The networks take flat vectors: observations of more dimensions (ALE's frames) are flattened.
        if isinstance(env.observation_space, gym.spaces.Box) and len(env.observation_space.shape) > 1:
            env = gym.wrappers.FlattenObservation(env)
        return env

    return thunk


def layer_init(layer, std=2**0.5, bias_const=0.0):
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias_const)
    return layer


class Actor(nn.Module):
    def __init__(self, obs_dim, action_dim, log_std_init=0.0, width=64):
        super().__init__()
        self.mean = nn.Sequential(
            layer_init(nn.Linear(obs_dim, width)),
            nn.Tanh(),
            layer_init(nn.Linear(width, width)),
            nn.Tanh(),
            layer_init(nn.Linear(width, action_dim), std=0.01),
        )
        # State-independent log standard deviation, one per action dimension.
        self.log_std = nn.Parameter(torch.full((action_dim,), log_std_init))

    def forward(self, obs):
        """Mean and log-std of the Gaussian policy, both of shape (batch, action_dim)."""
        mean = self.mean(obs)
        return mean, self.log_std.expand_as(mean)

    def dist(self, obs):
        mean, log_std = self(obs)
        return Normal(mean, log_std.exp())


class Critic(nn.Module):
    def __init__(self, obs_dim, width):
        super().__init__()
        self.net = nn.Sequential(
            layer_init(nn.Linear(obs_dim, width)),
            nn.Tanh(),
            layer_init(nn.Linear(width, width)),
            nn.Tanh(),
            layer_init(nn.Linear(width, 1), std=1.0),
        )

    def forward(self, obs):
        return self.net(obs).squeeze(-1)


class RunningMeanStd:
    """Mean and variance of a stream of batches, merged with Chan et al.'s parallel formula."""

    def __init__(self, shape):
        self.mean = np.zeros(shape)
        self.var = np.ones(shape)
        self.count = 1e-4

    def update(self, batch):
        # One NaN or inf (from a broken reward or observation) would poison the statistics for good.
        if not np.isfinite(batch).all():
            return
        batch_mean, batch_var, batch_count = batch.mean(0), batch.var(0), batch.shape[0]
        delta = batch_mean - self.mean
        total = self.count + batch_count
        self.mean = self.mean + delta * batch_count / total
        sum_sq = self.var * self.count + batch_var * batch_count + delta**2 * self.count * batch_count / total
        self.var = sum_sq / total
        self.count = total

    def normalize(self, x):
        return np.clip((x - self.mean) / np.sqrt(self.var + 1e-8), -10.0, 10.0)

    def state_dict(self):
        return {"mean": torch.as_tensor(self.mean), "var": torch.as_tensor(self.var), "count": self.count}

    def load_state_dict(self, state):
        self.mean, self.var, self.count = state["mean"].numpy(), state["var"].numpy(), state["count"]


def numpy_forward_fn(net):
    """A numpy snapshot of net, an nn.Sequential of Linear and Tanh layers: x -> net(x) for numpy arrays.

    The rollout acts through it: at a rollout step's few rows, torch's overhead per call costs
    several times the arithmetic, and numpy's a fraction of torch's. A snapshot serves the whole
    rollout, since the weights change only in the update; it agrees with net(x) to float32 rounding."""
    layers = []
    for layer in net:
        if isinstance(layer, nn.Linear):
            weight_t = layer.weight.detach().cpu().numpy().T.copy()
            bias = layer.bias.detach().cpu().numpy().copy()
            layers.append(lambda x, weight_t=weight_t, bias=bias: x @ weight_t + bias)
        elif isinstance(layer, nn.Tanh):
            layers.append(np.tanh)
        else:
            raise TypeError(f"numpy_forward_fn has no numpy version of {layer}; add one beside nn.Tanh")

    def forward(x):
        for layer in layers:
            x = layer(x)
        return x

    return forward


def sample_action(mean, std):
    """Sample a = mean + std * noise for each row of a numpy array of means, std the standard deviations.

    The log-probs pi_old(a|s) are computed after the rollout in one batched torch pass, since the
    policy does not change during it."""
    return mean + std * np.random.standard_normal(mean.shape)


def env_action(action, low, high, tanh_actions):
    """The action the env receives for a policy output: clipped into [low, high], or with tanh_actions
    squashed into it by tanh. The policy's log-probs stay those of the unsquashed sample: the change of
    variables multiplies pi_theta and pi_old by the same Jacobian, so the ratio and the KL are unchanged."""
    if tanh_actions:
        return low + (np.tanh(action) + 1) * (high - low) / 2
    return np.clip(action, low, high)


def compute_gae(rewards, values, dones, next_value, gamma, gae_lambda):
    """GAE over (num_steps, num_envs) numpy arrays, all envs at once.

    Convention: dones[t] = 1 when transition t ended its episode (terminated or truncated), so
    s_{t+1} belongs to a new episode and is not bootstrapped from. A truncated transition already
    carries gamma * V(final obs) in rewards[t]. next_value = V(obs after the last step).
    """
    num_steps = rewards.shape[0]
    advantages = np.zeros_like(rewards)
    last_gae = np.zeros_like(next_value)
    for t in reversed(range(num_steps)):
        next_values = next_value if t == num_steps - 1 else values[t + 1]
        not_done = 1.0 - dones[t]
        delta = rewards[t] + gamma * next_values * not_done - values[t]
        last_gae = delta + gamma * gae_lambda * not_done * last_gae
        advantages[t] = last_gae
    return advantages, advantages + values


def surrogate_objective(actor, obs, actions, old_logprobs, advantages, ent_coef):
    """L(theta) = E[pi_theta(a|s) / pi_old(a|s) * A] + ent_coef * E[H(pi_theta(.|s))].

    The gradient step and the line search both call this, so they optimise the same objective."""
    dist = actor.dist(obs)
    ratio = torch.exp(dist.log_prob(actions).sum(-1) - old_logprobs)
    return (ratio * advantages).mean() + ent_coef * dist.entropy().sum(-1).mean()


def adapt_entropy_coef(ent_coef, entropy_per_dim, target_entropy, args):
    """The entropy bonus for the next update: multiplied by exp(ent_coef_rate * (target - entropy)),
    so it grows while the entropy is below target_entropy and shrinks to min_ent_coef above it. The cap
    of 0.1 bounds the wind-up while the trust region holds the entropy away from its target."""
    if target_entropy is None:
        return args.ent_coef
    gap = target_entropy - entropy_per_dim
    return min(max(ent_coef * math.exp(args.ent_coef_rate * gap), args.min_ent_coef), 0.1)


def linear_schedule(start, final, remaining):
    """start, moved linearly towards final as the share of training still ahead (remaining) falls from
    1 to 0; start throughout when final is None."""
    return start if final is None else final + (start - final) * remaining


def mean_kl(actor, obs, old_mean, old_log_std):
    """Mean KL(pi_old || pi_theta) over the states; the old distribution is a constant."""
    old_dist = Normal(old_mean.detach(), old_log_std.detach().exp())
    return kl_divergence(old_dist, actor.dist(obs)).sum(-1).mean()


def fisher_vector_product_fn(actor, obs):
    """Return v -> F v, with F the Hessian of mean KL(pi_old || pi_theta) at theta = theta_old.

    At theta_old the KL's gradient w.r.t. the distribution parameters z = (mean, log_std) is zero,
    so its Hessian w.r.t. theta is the Gauss-Newton product F = E_s[J^T M J], with J = dz/dtheta
    and M the Hessian of the KL w.r.t. z: diagonal, 1 / sigma^2 for the mean and 2 for the
    log-std. Both products with J are backward passes through graphs built once: J^T u is one
    backward pass, and because u -> J^T u is linear, the gradient of (J^T u) . v w.r.t. u is J v
    (the double-backward trick). For a small MLP this is faster than a forward-mode pass through
    torch.func.functional_call.
    """
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
    residual = b.clone()
    direction = b.clone()
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


def line_search(actor, objective_fn, kl_fn, full_step, old_objective, max_kl, backtrack_iters, backtrack_coeff):
    """Try theta_old + backtrack_coeff**k * full_step for k = 0, 1, ...; accept the first step whose
    mean KL is at most max_kl and whose objective beats old_objective = objective_fn() at theta_old.
    On failure theta_old is restored.

    Returns (success, step_fraction, iterations, kl, actual_improvement); kl is NaN on failure.
    """
    old_params = parameters_to_vector(actor.parameters()).detach().clone()
    with torch.no_grad():
        for k in range(backtrack_iters):
            step_fraction = backtrack_coeff**k
            vector_to_parameters(old_params + step_fraction * full_step, actor.parameters())
            improvement = objective_fn().item() - old_objective
            kl = kl_fn().item()
            # NaN fails both comparisons, so a non-finite trial step is never accepted.
            if kl <= max_kl and improvement > 0:
                return True, step_fraction, k + 1, kl, improvement
        vector_to_parameters(old_params, actor.parameters())
    return False, 0.0, backtrack_iters, float("nan"), 0.0


def trpo_step(
    actor,
    objective_fn,
    kl_fn,
    fvp_obs,
    max_kl,
    cg_damping,
    cg_iters,
    backtrack_iters,
    backtrack_coeff,
    damped_step_length=False,
):
    """One trust-region step on the actor; returns the diagnostics logged under trpo/.

    g = grad L, x = (F + damping I)^-1 g by CG, full step sqrt(2 max_kl / x^T F x) x (the largest
    step along x with 1/2 s^T F s = max_kl), then the line search. Non-finite values skip the step.
    With damped_step_length (the script's default) the length comes from x^T (F + damping I) x, as
    in OpenAI baselines, Spinning Up and sb3-contrib: the damping then also shortens the step, most
    where x lies along directions of small curvature. Without it, from the undamped x^T F x, the
    KL's own quadratic model.
    """
    objective = objective_fn()
    policy_gradient = torch.cat([g.reshape(-1) for g in torch.autograd.grad(objective, actor.parameters())])
    fisher_vector_product = fisher_vector_product_fn(actor, fvp_obs)
    step_direction = conjugate_gradient(lambda v: fisher_vector_product(v) + cg_damping * v, policy_gradient, cg_iters)
    curvature = step_direction @ fisher_vector_product(step_direction)
    if damped_step_length:
        curvature = curvature + cg_damping * (step_direction @ step_direction)
    full_step = torch.sqrt(2 * max_kl / curvature) * step_direction
    diagnostics = {
        "kl": float("nan"),
        "expected_improvement": 0.0,
        "actual_improvement": 0.0,
        "line_search_success": 0.0,
        "line_search_iters": 0,
        "step_fraction": 0.0,
        "nonfinite_skipped": 1.0,
    }
    if not (torch.isfinite(objective) and torch.isfinite(full_step).all() and curvature > 0):
        return diagnostics
    success, step_fraction, iters, kl, actual_improvement = line_search(
        actor, objective_fn, kl_fn, full_step, objective.item(), max_kl, backtrack_iters, backtrack_coeff
    )
    diagnostics.update(
        kl=kl,
        expected_improvement=step_fraction * (policy_gradient @ full_step).item(),
        actual_improvement=actual_improvement,
        line_search_success=float(success),
        line_search_iters=iters,
        step_fraction=step_fraction,
        nonfinite_skipped=0.0,
    )
    return diagnostics


def flatten_steps_envs(*tensors):
    """(num_steps, num_envs, ...) -> (num_steps * num_envs, ...), row t * num_envs + env, for every field alike."""
    return [tensor.reshape((-1,) + tensor.shape[2:]) for tensor in tensors]


def fit_critic(critic, optimizer, obs, returns, epochs, minibatches):
    """Adam on shuffled minibatches of 1/2 (V(s) - R)^2; returns (mean loss, skipped steps).

    A step whose loss or gradient is not finite is skipped, so a broken observation or return never
    reaches the weights."""
    batch_size = obs.shape[0]
    minibatch_size = batch_size // minibatches
    losses, skipped = [], 0
    for _ in range(epochs):
        permutation = torch.randperm(batch_size, device=obs.device)
        for start in range(0, batch_size, minibatch_size):
            idx = permutation[start : start + minibatch_size]
            value_loss = 0.5 * ((critic(obs[idx]) - returns[idx]) ** 2).mean()
            optimizer.zero_grad()
            value_loss.backward()
            grad_norm = nn.utils.get_total_norm([p.grad for p in critic.parameters()])
            if not torch.isfinite(value_loss + grad_norm):
                skipped += 1
                continue
            optimizer.step()
            losses.append(value_loss.detach())
    return (torch.stack(losses).mean().item() if losses else float("nan")), skipped


def fit_critic_lbfgs(critic, obs, returns, iters):
    """Full-batch L-BFGS with a strong Wolfe line search on 1/2 (V(s) - R)^2; returns (final loss, skipped fits).

    The curvature history is dropped every update, since the returns it was built on have changed. A fit
    that ends with a non-finite loss or weights is undone, so they never reach the next rollout."""
    optimizer = torch.optim.LBFGS(critic.parameters(), max_iter=iters, line_search_fn="strong_wolfe")

    def value_loss():
        optimizer.zero_grad()
        loss = 0.5 * ((critic(obs) - returns) ** 2).mean()
        loss.backward()
        return loss

    weights_before = parameters_to_vector(critic.parameters()).detach().clone()
    optimizer.step(value_loss)
    with torch.no_grad():
        loss = 0.5 * ((critic(obs) - returns) ** 2).mean()
        if not (torch.isfinite(loss) and torch.isfinite(parameters_to_vector(critic.parameters())).all()):
            vector_to_parameters(weights_before, critic.parameters())
            return float("nan"), 1
    return loss.item(), 0


def evaluate(actor, obs_rms, args, device, video_name=None):
    """args.eval_episodes episodes of the actor's mean action on an env of its own, observations
    normalized with frozen statistics, recorded into videos/{video_name} if given; returns their returns.

    Its env is seeded with seed + 10_000 and it draws from no global random generator, so every
    evaluation starts from the same states and evaluating during training leaves the run unchanged."""
    env = make_env(args.env_id, 0, video_name is not None, video_name)()
    episodic_returns = []
    obs, _ = env.reset(seed=args.seed + 10_000)
    episodic_return = 0.0
    while len(episodic_returns) < args.eval_episodes:
        obs = obs_rms.normalize(obs) if obs_rms is not None else obs
        with torch.no_grad():
            action, _ = actor(torch.as_tensor(obs, dtype=torch.float32, device=device))
        action = env_action(action.cpu().numpy(), env.action_space.low, env.action_space.high, args.tanh_actions)
        obs, reward, terminated, truncated, _ = env.step(action)
        episodic_return += reward
        if terminated or truncated:
            episodic_returns.append(episodic_return)
            episodic_return = 0.0
            obs, _ = env.reset()
    env.close()
    return episodic_returns


def summarize_evaluation(episodic_returns):
    """The one-line summary of an evaluation's returns."""
    return f"mean return {np.mean(episodic_returns):.2f} +- {np.std(episodic_returns):.2f} over {len(episodic_returns)} episodes"


def load_model(path, observation_space, action_space):
    """Return ((actor, obs_rms, tanh_actions) from a --save-model file, None), or (None, why it cannot
    be used here); tanh_actions says how the saved run mapped the actor's output to the env's action."""
    try:
        checkpoint = torch.load(path, map_location="cpu")
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError) as e:
        return None, f"cannot read model file {path!r} ({type(e).__name__})"
    try:
        width = checkpoint["actor"]["mean.0.weight"].shape[0]
        actor = Actor(np.prod(observation_space.shape), np.prod(action_space.shape), width=width)
        actor.load_state_dict(checkpoint["actor"])
        tanh_actions = bool(checkpoint["args"].get("tanh_actions", False))
        obs_rms = None
        if checkpoint["obs_rms"] is not None:
            obs_rms = RunningMeanStd(observation_space.shape)
            obs_rms.load_state_dict(checkpoint["obs_rms"])
            if obs_rms.mean.shape != observation_space.shape:
                raise ValueError("observation statistics of another shape")
    except (KeyError, TypeError, ValueError, AttributeError, RuntimeError) as e:
        return None, f"{path!r} is not a model of this script for these spaces ({type(e).__name__})"
    return (actor, obs_rms, tanh_actions), None


def select_device(use_cuda, script):
    """CUDA when asked for and available; otherwise the CPU, saying so when CUDA was asked for."""
    if use_cuda and not torch.cuda.is_available():
        print(f"{script}: no GPU available, running on the CPU", file=sys.stderr)
    return torch.device("cuda" if use_cuda and torch.cuda.is_available() else "cpu")


def check_args(args):
    """Return an error message for the first argument no run can use, else None.

    Every comparison with NaN is false, so each check rejects NaN; `< inf` rejects infinity."""
    inf = math.inf
    requirements = [
        (args.num_envs >= 1, "num_envs must be at least 1"),
        (args.num_steps >= 1, "num_steps must be at least 1"),
        (
            args.total_timesteps >= args.num_envs * args.num_steps,
            "total_timesteps must be at least num_envs * num_steps",
        ),
        (0 <= args.gamma <= 1, "gamma must be in [0, 1]"),
        (args.final_gamma is None or 0 <= args.final_gamma <= 1, "final_gamma must be in [0, 1]"),
        (0 <= args.gae_lambda <= 1, "gae_lambda must be in [0, 1]"),
        (0 < args.max_kl < inf, "max_kl must be positive and finite"),
        (
            args.final_max_kl is None or 0 <= args.final_max_kl <= args.max_kl,
            f"final_max_kl ({args.final_max_kl}) must be in [0, max_kl] ({args.max_kl}); None keeps max_kl constant",
        ),
        (args.cg_iters >= 1, "cg_iters must be at least 1"),
        (0 <= args.cg_damping < inf, "cg_damping must be non-negative and finite"),
        (0 < args.fvp_subsample <= 1, "fvp_subsample must be in (0, 1]"),
        (args.backtrack_iters >= 1, "backtrack_iters must be at least 1"),
        (0 < args.backtrack_coeff < 1, "backtrack_coeff must be in (0, 1)"),
        (0 <= args.ent_coef < inf, "ent_coef must be non-negative and finite"),
        (args.target_entropy is None or -inf < args.target_entropy < inf, "target_entropy must be finite"),
        (
            args.final_target_entropy is None or -inf < args.final_target_entropy < inf,
            "final_target_entropy must be finite",
        ),
        (0 < args.target_entropy_fraction <= 1, "target_entropy_fraction must be in (0, 1]"),
        (
            0 <= args.target_entropy_hold < args.target_entropy_fraction,
            "target_entropy_hold must be in [0, target_entropy_fraction)",
        ),
        (0 < args.ent_coef_rate < inf, "ent_coef_rate must be positive and finite"),
        (0 < args.min_ent_coef <= 0.1, "min_ent_coef must be in (0, 0.1]"),
        (-inf < args.log_std_init < inf, "log_std_init must be finite"),
        (args.actor_width >= 1, "actor_width must be at least 1"),
        (args.critic_width >= 1, "critic_width must be at least 1"),
        (0 < args.vf_lr < inf, "vf_lr must be positive and finite"),
        (args.vf_epochs >= 1, "vf_epochs must be at least 1"),
        (
            1 <= args.vf_minibatches <= args.num_envs * args.num_steps,
            "vf_minibatches must be in [1, num_envs * num_steps]",
        ),
        (args.vf_lbfgs_iters >= 0, "vf_lbfgs_iters must be at least 0"),
        (not (args.vf_lbfgs_iters and args.anneal_vf_lr), "anneal_vf_lr applies to Adam, not vf_lbfgs_iters"),
        (0 <= args.policy_ema_decay < 1, "policy_ema_decay must be in [0, 1)"),
        (args.eval_episodes >= 1, "eval_episodes must be at least 1"),
        (args.eval_every >= 0, "eval_every must be at least 0"),
    ]
    return next((message for ok, message in requirements if not ok), None)


def main(args):
    script = os.path.basename(__file__)
    error = check_args(args)
    if error:
        sys.exit(f"{script}: error: {error}")
    args.batch_size = args.num_envs * args.num_steps
    args.num_iterations = args.total_timesteps // args.batch_size
    run_name = f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"

    try:
        env = make_env(args.env_id, 0, False, run_name)()
    except gym.error.Error as e:
        sys.exit(f"{script}: error: cannot make env {args.env_id!r}: {e}")
    observation_space, action_space = env.observation_space, env.action_space
    env.close()
    if not isinstance(action_space, gym.spaces.Box):
        sys.exit(f"{script}: error: {args.env_id} has {action_space} actions; this script needs Box")
    if not isinstance(observation_space, gym.spaces.Box):
        sys.exit(f"{script}: error: {args.env_id} has {observation_space} observations; need Box")

    if args.eval_only is not None:
        model, error = load_model(args.eval_only, observation_space, action_space)
        if error:
            sys.exit(f"{script}: error: {error}")
        actor, obs_rms, args.tanh_actions = model
        device = select_device(args.cuda, script)
        eval_returns = evaluate(
            actor.to(device), obs_rms, args, device, f"{run_name}/eval" if args.capture_video else None
        )
        print(f"eval: {summarize_evaluation(eval_returns)}")
        return eval_returns

    envs = gym.vector.SyncVectorEnv(
        [make_env(args.env_id, i, args.capture_video, run_name) for i in range(args.num_envs)],
        # SAME_STEP: the obs returned with done is already the next episode's first obs and the
        # terminal one is in infos["final_obs"], so no step of the rollout is a fake reset transition.
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)

    if args.track:
        import wandb

        wandb.init(
            project=args.wandb_project_name,
            entity=args.wandb_entity,
            sync_tensorboard=True,
            config=vars(args),
            name=run_name,
            save_code=True,
        )
    writer = SummaryWriter(f"runs/{run_name}")
    writer.add_text(
        "hyperparameters",
        "|param|value|\n|-|-|\n" + "\n".join(f"|{key}|{value}|" for key, value in vars(args).items()),
    )

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    device = select_device(args.cuda, script)

    obs_shape, action_shape = observation_space.shape, action_space.shape
    action_low, action_high = action_space.low, action_space.high
    action_dim = int(np.prod(action_shape))
    actor = Actor(np.prod(obs_shape), action_dim, args.log_std_init, args.actor_width).to(device)
    # The policy that is evaluated and saved: the actor itself, or an average of its iterates.
    evaluated_actor = copy.deepcopy(actor) if args.policy_ema_decay > 0 else actor
    critic = Critic(np.prod(obs_shape), args.critic_width).to(device)
    critic_optimizer = torch.optim.Adam(critic.parameters(), lr=args.vf_lr, fused=True)
    obs_rms = RunningMeanStd(obs_shape) if args.norm_obs else None
    # Reward scaling divides by the std of the discounted return, not of the reward itself.
    return_rms = RunningMeanStd(()) if args.norm_reward else None
    discounted_return = np.zeros(args.num_envs)

    def normalize(obs, update_stats=False):
        if obs_rms is not None:
            if update_stats:
                obs_rms.update(obs)
            obs = obs_rms.normalize(obs)
        return obs.astype(np.float32)

    def to_tensor(array):
        return torch.as_tensor(array, device=device)

    # Rollout storage, (num_steps, num_envs, ...) everywhere; flattened the same way before the update.
    # numpy during the rollout (a numpy write costs far less than a torch one at this size), moved
    # to torch once per rollout.
    observations = np.zeros((args.num_steps, args.num_envs) + obs_shape, dtype=np.float32)
    actions = np.zeros((args.num_steps, args.num_envs) + action_shape, dtype=np.float32)
    rewards = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)
    dones = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)

    global_step = 0
    start_time = time.time()
    recent_returns = deque(maxlen=20)
    recent_successes = deque(maxlen=20)
    ent_coef = args.ent_coef
    ent_penalty = args.min_ent_coef if args.entropy_ceiling and args.target_entropy is not None else 0.0
    envs.action_space.seed(args.seed)
    next_obs, _ = envs.reset(seed=args.seed)
    next_obs = normalize(next_obs, update_stats=True)

    for iteration in range(1, args.num_iterations + 1):
        # The share of training done (0 at the first update) and still ahead, by which the annealed
        # schedules scale; the entropy target's schedule runs from target_entropy_hold to
        # target_entropy_fraction of training.
        progress = (iteration - 1) / args.num_iterations
        remaining = 1 - progress
        gamma = linear_schedule(args.gamma, args.final_gamma, remaining)
        mean_snapshot = numpy_forward_fn(actor.mean)
        std = actor.log_std.detach().exp().cpu().numpy()
        for step in range(args.num_steps):
            global_step += args.num_envs
            observations[step] = next_obs
            actions[step] = sample_action(mean_snapshot(next_obs), std)

            # Only the env sees the clipped (or squashed) action; the stored action, and so its
            # log-prob, is the sample itself.
            next_obs, reward, terminations, truncations, infos = envs.step(
                env_action(actions[step], action_low, action_high, args.tanh_actions)
            )
            if return_rms is not None:
                discounted_return = discounted_return * gamma + reward
                return_rms.update(discounted_return)
                reward = np.clip(reward / np.sqrt(return_rms.var + 1e-8), -10.0, 10.0)
                discounted_return[terminations | truncations] = 0.0
            # Truncation is not termination: a time-limit cut keeps the value of the state it
            # stopped in, r + gamma * V(final obs); the transition then counts as done.
            truncated = truncations & ~terminations
            if truncated.any():
                final_obs = normalize(np.stack(infos["final_obs"][truncated]))
                with torch.inference_mode():
                    reward[truncated] += gamma * critic(to_tensor(final_obs)).cpu().numpy()
            rewards[step] = reward
            dones[step] = terminations | truncations
            next_obs = normalize(next_obs, update_stats=True)

            if "_episode" in infos:
                for i in np.flatnonzero(infos["_episode"]):
                    recent_returns.append(infos["episode"]["r"][i])
                    writer.add_scalar("charts/episodic_return", infos["episode"]["r"][i], global_step)
                    writer.add_scalar("charts/episodic_length", infos["episode"]["l"][i], global_step)

        with torch.no_grad():
            # One batched pass for V(s_t) over the whole rollout: the critic is fixed until the update.
            values = critic(to_tensor(observations)).cpu().numpy()
            next_value = critic(to_tensor(next_obs)).cpu().numpy()
        advantages, returns = compute_gae(rewards, values, dones, next_value, gamma, args.gae_lambda)

        b_obs, b_actions, b_advantages, b_returns, b_values = flatten_steps_envs(
            *map(to_tensor, (observations, actions, advantages, returns, values))
        )
        if args.norm_adv:
            b_advantages = (b_advantages - b_advantages.mean()) / (b_advantages.std() + 1e-8)

        # pi_old: the actor as it was during the rollout, in one batched pass.
        with torch.no_grad():
            old_mean, old_log_std = actor(b_obs)
            old_dist = Normal(old_mean, old_log_std.exp())
            b_logprobs = old_dist.log_prob(b_actions).sum(-1)
            entropy = old_dist.entropy().sum(-1).mean().item()

        max_kl = linear_schedule(args.max_kl, args.final_max_kl, remaining)
        target_entropy = args.target_entropy
        if target_entropy is not None:
            fraction, hold = args.target_entropy_fraction, args.target_entropy_hold
            entropy_remaining = min(max((fraction - progress) / (fraction - hold), 0.0), 1.0)
            target_entropy = linear_schedule(target_entropy, args.final_target_entropy, entropy_remaining)

        ent_coef = adapt_entropy_coef(ent_coef, entropy / action_dim, target_entropy, args)
        if args.entropy_ceiling and target_entropy is not None:
            # The bonus's rule on the negated entropy and target: it grows while the entropy is above.
            ent_penalty = adapt_entropy_coef(ent_penalty, -entropy / action_dim, -target_entropy, args)
        net_ent_coef = ent_coef - ent_penalty
        objective_fn = partial(surrogate_objective, actor, b_obs, b_actions, b_logprobs, b_advantages, net_ent_coef)
        kl_fn = partial(mean_kl, actor, b_obs, old_mean, old_log_std)
        fvp_size = max(1, int(args.fvp_subsample * args.batch_size))
        fvp_obs = b_obs[torch.randperm(args.batch_size, device=device)[:fvp_size]]
        diagnostics = trpo_step(
            actor,
            objective_fn,
            kl_fn,
            fvp_obs,
            max_kl,
            args.cg_damping,
            args.cg_iters,
            args.backtrack_iters,
            args.backtrack_coeff,
            args.damped_step_length,
        )
        recent_successes.append(diagnostics["line_search_success"])
        if evaluated_actor is not actor:
            with torch.no_grad():
                for averaged, current in zip(evaluated_actor.parameters(), actor.parameters()):
                    averaged.lerp_(current, 1 - args.policy_ema_decay)

        if args.vf_lbfgs_iters:
            value_loss, skipped_value_steps = fit_critic_lbfgs(critic, b_obs, b_returns, args.vf_lbfgs_iters)
        else:
            if args.anneal_vf_lr:
                critic_optimizer.param_groups[0]["lr"] = args.vf_lr * remaining
            value_loss, skipped_value_steps = fit_critic(
                critic, critic_optimizer, b_obs, b_returns, args.vf_epochs, args.vf_minibatches
            )

        returns_var = b_returns.var()
        explained_var = (1 - (b_returns - b_values).var() / returns_var).item() if returns_var > 0 else float("nan")
        sps = int(global_step / (time.time() - start_time))
        writer.add_scalar("charts/SPS", sps, global_step)
        writer.add_scalar("charts/gamma", gamma, global_step)
        writer.add_scalar("losses/value_loss", value_loss, global_step)
        if not args.vf_lbfgs_iters:
            writer.add_scalar("losses/vf_lr", critic_optimizer.param_groups[0]["lr"], global_step)
        writer.add_scalar("losses/explained_variance", explained_var, global_step)
        writer.add_scalar("losses/entropy", entropy, global_step)
        writer.add_scalar("trpo/ent_coef", net_ent_coef, global_step)
        writer.add_scalar("trpo/max_kl", max_kl, global_step)
        if target_entropy is not None:
            writer.add_scalar("trpo/target_entropy", target_entropy, global_step)
        writer.add_scalar("losses/value_nonfinite_skipped", skipped_value_steps, global_step)
        for key, value in diagnostics.items():
            writer.add_scalar(f"trpo/{key}", value, global_step)
        recent = f"{np.mean(recent_returns):8.1f}" if recent_returns else "     n/a"
        print(
            f"iter {iteration:4d}/{args.num_iterations} step {global_step:8d} sps {sps:6d} return {recent} "
            f"ls {'ok' if diagnostics['line_search_success'] else 'FAIL'} ({diagnostics['line_search_iters']} it, "
            f"{np.mean(recent_successes):.0%} ok) kl {diagnostics['kl']:.4f} entropy {entropy:.2f} bonus {net_ent_coef:.4f}"
            + (" [non-finite: update skipped]" if diagnostics["nonfinite_skipped"] or skipped_value_steps else "")
        )

        if args.eval_every and iteration % args.eval_every == 0:
            eval_returns = evaluate(evaluated_actor, obs_rms, args, device)
            writer.add_scalar("eval/episodic_return", np.mean(eval_returns), global_step)
            print(f"eval at step {global_step}: {summarize_evaluation(eval_returns)}")

    if args.save_model:
        model_path = f"runs/{run_name}/{args.exp_name}.model"
        model = {
            "actor": evaluated_actor.state_dict(),
            "critic": critic.state_dict(),
            "obs_rms": obs_rms.state_dict() if obs_rms is not None else None,
            "return_rms": return_rms.state_dict() if return_rms is not None else None,
            "args": vars(args),
        }
        torch.save(model, model_path)
        print(f"model saved to {model_path}")
    eval_returns = evaluate(evaluated_actor, obs_rms, args, device, f"{run_name}/eval" if args.capture_video else None)
    # The final evaluation episode by episode, and its mean as the last point of the evaluation curve.
    for i, episodic_return in enumerate(eval_returns):
        writer.add_scalar("eval/final_episodic_return", episodic_return, i)
    writer.add_scalar("eval/episodic_return", np.mean(eval_returns), global_step)
    print(f"eval: {summarize_evaluation(eval_returns)}")
    if evaluated_actor is not actor:
        # The same episodes for the last iterate, so the average is compared with it seed by seed.
        last_iterate_returns = evaluate(actor, obs_rms, args, device)
        for i, episodic_return in enumerate(last_iterate_returns):
            writer.add_scalar("eval/last_iterate_final_episodic_return", episodic_return, i)
        print(f"eval of the last iterate: {summarize_evaluation(last_iterate_returns)}")

    if args.track and args.capture_video:
        for video in sorted(glob.glob(f"videos/{run_name}/**/*.mp4", recursive=True)):
            wandb.log({"videos": wandb.Video(video)})
    envs.close()
    writer.close()
    return eval_returns


if __name__ == "__main__":
    main(tyro.cli(Args))
