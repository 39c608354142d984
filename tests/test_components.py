"""The pieces of the scripts against plain references."""

from functools import partial

import numpy as np
import pytest
import torch
from torch import nn
from torch.distributions import Categorical, Normal
from torch.distributions.kl import kl_divergence
from torch.func import functional_call
from torch.nn.utils import parameters_to_vector

import ppo_atari
import ppo_continuous
import trpo_atari
import trpo_continuous
import trpo_discrete

TRPO_SCRIPTS = [trpo_discrete, trpo_continuous]
SCRIPTS = [trpo_discrete, trpo_continuous, ppo_continuous]  # the rollout pieces every script has


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    np.random.seed(0)


@pytest.mark.parametrize("script", TRPO_SCRIPTS)
def test_conjugate_gradient_solves_random_spd_system(script):
    n = 30
    q = torch.randn(n, n, dtype=torch.float64)
    a = q @ q.T + 0.5 * torch.eye(n, dtype=torch.float64)
    b = torch.randn(n, dtype=torch.float64)
    x = script.conjugate_gradient(lambda v: a @ v, b, iters=3 * n, residual_tol=1e-30)
    expected = torch.linalg.solve(a, b)
    assert torch.linalg.norm(x - expected) / torch.linalg.norm(expected) < 1e-6


def explicit_kl_hessian(actor, obs, mean_kl_of_outputs):
    """Hessian of the mean KL w.r.t. the flat parameter vector, built entry by entry by autograd."""
    names = [name for name, _ in actor.named_parameters()]
    shapes = [p.shape for _, p in actor.named_parameters()]
    theta_old = parameters_to_vector(actor.parameters()).detach()
    with torch.no_grad():
        old_outputs = actor(obs)

    def kl_of_flat_params(flat):
        params, offset = {}, 0
        for name, shape in zip(names, shapes):
            params[name] = flat[offset : offset + shape.numel()].view(shape)
            offset += shape.numel()
        return mean_kl_of_outputs(old_outputs, functional_call(actor, params, (obs,)))

    return torch.autograd.functional.hessian(kl_of_flat_params, theta_old)


def categorical_mean_kl(old_logits, new_logits):
    return kl_divergence(Categorical(logits=old_logits), Categorical(logits=new_logits)).mean()


def gaussian_mean_kl(old, new):
    (old_mean, old_log_std), (new_mean, new_log_std) = old, new
    return kl_divergence(Normal(old_mean, old_log_std.exp()), Normal(new_mean, new_log_std.exp())).sum(-1).mean()


@pytest.mark.parametrize(
    ("script", "mean_kl_of_outputs"),
    [(trpo_discrete, categorical_mean_kl), (trpo_continuous, gaussian_mean_kl), (trpo_atari, categorical_mean_kl)],
    ids=["categorical", "gaussian", "atari-gauss-newton"],
)
def test_fvp_matches_explicit_fisher(script, mean_kl_of_outputs):
    actor = script.Actor(2) if script is trpo_atari else script.Actor(3, 2)
    # A narrower body keeps the explicit Hessian small; the product only sees named parameters.
    small_body = [nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 2)]
    obs_shape = (16, 3)
    if script is trpo_continuous:
        actor.mean = nn.Sequential(*small_body)
    elif script is trpo_discrete:
        actor.net = nn.Sequential(*small_body)
    else:  # trpo_atari's actor takes (N, C, H, W) frames: here 1x1 frames of 3 channels, flattened
        actor.net = nn.Sequential(nn.Flatten(), *small_body)
        obs_shape = (16, 3, 1, 1)
    # trpo_atari's actor casts its (uint8 frame) input to float32, so it is checked in float32.
    dtype, tolerances, min_eigenvalue = (
        (torch.float32, {"rtol": 1e-4, "atol": 1e-6}, -1e-5)
        if script is trpo_atari
        else (torch.float64, {"rtol": 1e-8, "atol": 1e-10}, -1e-10)
    )
    actor = actor.to(dtype)
    with torch.no_grad():  # move away from the zero-initialised output layer and log-std
        for p in actor.parameters():
            p.add_(0.3 * torch.randn_like(p))
    obs = torch.randn(obs_shape, dtype=dtype) * (255.0 if script is trpo_atari else 1.0)  # trpo_atari divides by 255
    fisher = explicit_kl_hessian(actor, obs, mean_kl_of_outputs)
    fisher_vector_product = script.fisher_vector_product_fn(actor, obs)
    for _ in range(3):
        v = torch.randn(fisher.shape[0], dtype=dtype)
        torch.testing.assert_close(fisher_vector_product(v), fisher @ v, **tolerances)
    # The Fisher matrix is positive semi-definite and not zero.
    assert torch.linalg.eigvalsh(fisher.double()).min() > min_eigenvalue
    assert fisher.abs().max() > 1e-3


def reference_advantages(rewards, values, terminated, truncated, final_values, next_value, gamma, lam):
    """Per env, per step, in plain Python: GAE that stops at every episode boundary, bootstraps
    V(final obs) on truncation, nothing on termination, and next_value after the last step."""
    num_steps, num_envs = rewards.shape
    advantages = np.zeros((num_steps, num_envs))
    for env in range(num_envs):
        later_advantage = 0.0
        for t in reversed(range(num_steps)):
            if terminated[t, env]:
                next_state_value, later_advantage = 0.0, 0.0
            elif truncated[t, env]:
                next_state_value, later_advantage = final_values[t, env], 0.0
            elif t == num_steps - 1:
                next_state_value, later_advantage = next_value[env], 0.0
            else:
                next_state_value = values[t + 1, env]
            delta = rewards[t, env] + gamma * next_state_value - values[t, env]
            later_advantage = delta + gamma * lam * later_advantage
            advantages[t, env] = later_advantage
    return advantages


@pytest.mark.parametrize("script", [*SCRIPTS, ppo_atari, trpo_atari])
def test_gae_matches_per_env_reference_with_terminations_and_truncations(script):
    num_steps, num_envs, gamma, lam = 64, 5, 0.99, 0.95
    rng = np.random.default_rng(1)
    raw_rewards = rng.normal(size=(num_steps, num_envs))
    values = rng.normal(size=(num_steps, num_envs))
    final_values = rng.normal(size=(num_steps, num_envs))
    next_value = rng.normal(size=num_envs)
    terminated = rng.random((num_steps, num_envs)) < 0.05
    truncated = (rng.random((num_steps, num_envs)) < 0.05) & ~terminated
    assert terminated.any() and truncated.any()

    # What the rollout loop stores: truncations fold gamma * V(final obs) into the reward.
    rewards = raw_rewards + gamma * final_values * truncated
    dones = terminated | truncated
    inputs = (rewards, values, dones.astype(np.float64), next_value)
    if script in (ppo_atari, trpo_atari):  # their GAE runs in torch, on the rollout's device
        advantages, returns = (x.numpy() for x in script.compute_gae(*map(torch.as_tensor, inputs), gamma, lam))
    else:
        advantages, returns = script.compute_gae(*inputs, gamma, lam)
    expected = reference_advantages(raw_rewards, values, terminated, truncated, final_values, next_value, gamma, lam)
    np.testing.assert_allclose(advantages, expected, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(returns, expected + values, rtol=1e-10, atol=1e-10)


def discrete_problem(num_states=256):
    actor = trpo_discrete.Actor(4, 3)
    with torch.no_grad():
        for p in actor.parameters():
            p.add_(0.1 * torch.randn_like(p))
    obs = torch.randn(num_states, 4)
    with torch.no_grad():
        old_logits = actor(obs)
        dist = Categorical(logits=old_logits)
        actions = dist.sample()
        old_logprobs = dist.log_prob(actions)
    advantages = torch.randn(num_states)
    objective_fn = partial(trpo_discrete.surrogate_objective, actor, obs, actions, old_logprobs, advantages)
    kl_fn = partial(trpo_discrete.mean_kl, actor, obs, old_logits)
    objective = objective_fn()
    gradient = torch.cat([g.reshape(-1) for g in torch.autograd.grad(objective, actor.parameters())])
    return actor, obs, advantages, objective_fn, kl_fn, gradient


def test_line_search_accepts_only_steps_inside_trust_region_that_improve(monkeypatch):
    monkeypatch.setattr(trpo_discrete, "BACKTRACK_ITERS", 40)
    actor, _, _, objective_fn, kl_fn, gradient = discrete_problem()
    max_kl = 0.01
    with torch.no_grad():
        old_objective = objective_fn().item()
    full_step = 50 * gradient / gradient.norm()  # far outside the trust region at full length
    result = trpo_discrete.line_search(
        actor, objective_fn, kl_fn, full_step, old_objective, max_kl, backtrack_coeff=0.7
    )
    success, fraction, iters = result["line_search_success"], result["step_fraction"], result["line_search_iters"]
    kl, improvement = result["kl"], result["actual_improvement"]
    assert success and iters > 1 and fraction == pytest.approx(0.7 ** (iters - 1))
    with torch.no_grad():
        assert kl == pytest.approx(kl_fn().item()) and kl <= max_kl
        assert objective_fn().item() - old_objective == pytest.approx(improvement) and improvement > 0


@pytest.mark.parametrize(
    ("step_scale", "backtrack_iters"),
    [(-1e-2, 10), (50.0, 3)],
    ids=["objective-gets-worse", "kl-always-too-large"],
)
def test_line_search_failure_restores_parameters_and_reports_nan_kl(step_scale, backtrack_iters, monkeypatch):
    monkeypatch.setattr(trpo_discrete, "BACKTRACK_ITERS", backtrack_iters)
    actor, _, _, objective_fn, kl_fn, gradient = discrete_problem()
    before = parameters_to_vector(actor.parameters()).detach().clone()
    with torch.no_grad():
        old_objective = objective_fn().item()
    full_step = step_scale * gradient / gradient.norm()
    result = trpo_discrete.line_search(actor, objective_fn, kl_fn, full_step, old_objective, 0.01, backtrack_coeff=0.9)
    assert result["line_search_success"] == 0.0 and result["step_fraction"] == 0.0
    assert result["line_search_iters"] == backtrack_iters and result["actual_improvement"] == 0.0
    assert np.isnan(result["kl"])
    assert torch.equal(parameters_to_vector(actor.parameters()), before)


def test_trpo_step_stays_in_trust_region_and_improves():
    actor, obs, _, objective_fn, kl_fn, _ = discrete_problem()
    with torch.no_grad():
        old_objective = objective_fn().item()
    diagnostics = trpo_discrete.trpo_step(actor, objective_fn, kl_fn, obs, 0.01, trpo_discrete.Args())
    assert diagnostics["line_search_success"] == 1.0 and diagnostics["nonfinite_skipped"] == 0.0
    with torch.no_grad():
        assert 0 < kl_fn().item() <= 0.01
        assert objective_fn().item() > old_objective
    # With a quadratic model that is good at this scale, most of the predicted gain is realised.
    assert diagnostics["actual_improvement"] > 0.5 * diagnostics["expected_improvement"] > 0


def test_trpo_step_skips_non_finite_update():
    actor, obs, advantages, objective_fn, kl_fn, _ = discrete_problem()
    advantages[3] = float("nan")
    before = parameters_to_vector(actor.parameters()).detach().clone()
    diagnostics = trpo_discrete.trpo_step(actor, objective_fn, kl_fn, obs, 0.01, trpo_discrete.Args())
    assert diagnostics["nonfinite_skipped"] == 1.0 and diagnostics["line_search_success"] == 0.0
    assert np.isnan(diagnostics["kl"])
    assert torch.equal(parameters_to_vector(actor.parameters()), before)


def test_gaussian_trpo_step_with_zero_advantages_follows_the_entropy_bonus():
    # With a flat surrogate only the entropy bonus can improve: the step must raise the policy's
    # std, stay in the trust region, and the line search must count the entropy it gained.
    torch.manual_seed(0)
    actor = trpo_continuous.Actor(3, 2)
    with torch.no_grad():
        actor.log_std.fill_(-0.5)
    obs = torch.randn(64, 3)
    with torch.no_grad():
        old_mean, old_log_std = actor(obs)
        old_dist = Normal(old_mean, old_log_std.exp())
        actions = old_dist.sample()
        old_logprobs = old_dist.log_prob(actions).sum(-1)
    ent_coef = 0.005
    objective_fn = partial(
        trpo_continuous.surrogate_objective, actor, obs, actions, old_logprobs, torch.zeros(64), ent_coef
    )
    kl_fn = partial(trpo_continuous.mean_kl, actor, obs, old_mean, old_log_std)

    def entropy():
        with torch.no_grad():
            return actor.dist(obs).entropy().sum(-1).mean().item()

    entropy_before = entropy()
    diagnostics = trpo_continuous.trpo_step(actor, objective_fn, kl_fn, obs, 0.01, trpo_continuous.Args())
    assert diagnostics["line_search_success"] == 1.0
    assert (actor.log_std.detach() > -0.5).all()
    assert 0 < diagnostics["kl"] <= 0.01
    assert diagnostics["actual_improvement"] == pytest.approx(ent_coef * (entropy() - entropy_before), rel=1e-4)


def test_entropy_bonus_grows_below_the_target_and_falls_to_its_floor_above(monkeypatch):
    monkeypatch.setattr(trpo_continuous, "ENT_COEF_RATE", 0.5)
    adapt = trpo_continuous.adapt_entropy_coef  # (ent_coef, target entropy - entropy per action dimension)
    assert adapt(0.01, 0.2) == pytest.approx(0.01 * np.exp(0.1))
    assert adapt(0.01, -0.2) == pytest.approx(0.01 * np.exp(-0.1))
    assert adapt(0.09, 5.0) == trpo_continuous.MAX_ENT_COEF == 0.1
    # A bonus that starts at 0 starts at the floor, from where a multiplicative step can grow it.
    assert adapt(0.0, -1.0) == trpo_continuous.MIN_ENT_COEF == 1e-4
    assert adapt(1e-4, 1.0) > 1e-4


def test_running_mean_std_matches_numpy_over_batches():
    rms = trpo_discrete.RunningMeanStd((2,))
    data = np.random.default_rng(0).normal(loc=3.0, scale=2.0, size=(1000, 2))
    for batch in np.split(data, [1, 7, 100, 350, 999]):
        rms.update(batch)
    np.testing.assert_allclose(rms.mean, data.mean(0), rtol=1e-4)
    np.testing.assert_allclose(rms.var, data.var(0), rtol=1e-4)


@pytest.mark.parametrize("script", [*SCRIPTS, trpo_atari, ppo_atari])
def test_sampled_actions_follow_the_policy_distribution(script):
    # A few states, each repeated, so per-state frequencies and moments can be checked.
    categorical = script in (trpo_discrete, trpo_atari, ppo_atari)
    if categorical:
        logits = torch.randn(4, 3).repeat_interleave(20_000, dim=0)
        actions = script.sample_action(logits)
    else:
        mean, log_std = torch.randn(4, 3).repeat_interleave(20_000, dim=0), torch.randn(3).expand(80_000, 3)
        actions = script.sample_action(mean, log_std)
    if categorical:
        frequencies = torch.eye(3)[actions].reshape(4, 20_000, 3).mean(1)
        # 3.5 standard errors of a frequency estimated from 20k draws.
        torch.testing.assert_close(frequencies, torch.softmax(logits[::20_000], -1), atol=0.012, rtol=0)
    else:
        noise = ((actions - mean) / log_std.exp()).reshape(4, 20_000, 3)
        torch.testing.assert_close(noise.mean(1), torch.zeros(4, 3), atol=0.03, rtol=0)
        torch.testing.assert_close(noise.std(1), torch.ones(4, 3), atol=0.03, rtol=0)


def test_the_rollout_acts_through_any_network_the_actor_holds(tmp_path, monkeypatch):
    """The rollout calls the actor itself: a student's new layer trains without further changes."""
    monkeypatch.chdir(tmp_path)

    class ReluActor(trpo_discrete.Actor):
        def __init__(self, obs_dim, num_actions):
            super().__init__(obs_dim, num_actions)
            self.net = nn.Sequential(nn.Linear(obs_dim, 32), nn.ReLU(), nn.LayerNorm(32), nn.Linear(32, num_actions))

    monkeypatch.setattr(trpo_discrete, "Actor", ReluActor)
    args = trpo_discrete.Args(num_envs=2, num_steps=64, total_timesteps=256, eval_episodes=1)
    assert len(trpo_discrete.main(args)) == 1


@pytest.mark.parametrize("script", [ppo_continuous, ppo_atari])
def test_clipped_policy_loss_is_the_pessimistic_bound_with_no_gradient_where_the_clip_binds(script):
    # clip 0.2: r = 0.5 (A > 0) and r = 1.3 (A < 0) take the unclipped term, the smaller one;
    # r = 1.5 (A > 0) and r = 0.7 (A < 0) take the clipped one, which does not depend on r.
    ratio = torch.tensor([0.5, 1.3, 1.5, 0.7], requires_grad=True)
    advantages = torch.tensor([1.0, -1.0, 1.0, -1.0])
    loss = script.clipped_policy_loss(ratio, advantages, 0.2)
    assert loss.item() == pytest.approx(-(0.5 - 1.3 + 1.2 - 0.8) / 4)
    loss.backward()
    torch.testing.assert_close(ratio.grad, torch.tensor([-0.25, 0.25, 0.0, 0.0]))


def test_each_ppo_update_takes_update_epochs_times_num_minibatches_adam_steps(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    steps = []
    adam_step = torch.optim.Adam.step
    monkeypatch.setattr(torch.optim.Adam, "step", lambda self, *a, **kw: steps.append(1) or adam_step(self, *a, **kw))
    args = ppo_continuous.Args(env_id="Pendulum-v1", num_envs=2, num_steps=64, total_timesteps=256, eval_episodes=1)
    args.update_epochs, args.num_minibatches = 3, 2
    ppo_continuous.main(args)
    assert len(steps) == 2 * 3 * 2  # two updates
