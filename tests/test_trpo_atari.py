"""trpo_atari.py: critic isolation, the adaptive entropy bonus, the per-state KL bound, the entropy-consistent objective."""

from functools import partial

import numpy as np
import pytest
import torch
from torch.distributions import Categorical, kl_divergence
from torch.nn.utils import parameters_to_vector, vector_to_parameters

import trpo_atari

NUM_ACTIONS = 4


@pytest.fixture
def batch():
    torch.manual_seed(0)
    obs = torch.randint(0, 256, (32, 4, 84, 84), dtype=torch.uint8)
    actor = trpo_atari.Actor(NUM_ACTIONS)
    with torch.no_grad():
        logits = actor(obs)
        actions = trpo_atari.sample_action(logits)
        logprobs = torch.log_softmax(logits, -1).gather(-1, actions[:, None]).squeeze(-1)
    return actor, obs, actions, logprobs, logits


def test_critic_update_leaves_policy_unchanged(batch):
    actor, obs, _, _, logits = batch
    critic = trpo_atari.Critic()
    optimizer = torch.optim.Adam(critic.parameters(), lr=1e-3)
    critic_before = parameters_to_vector(critic.parameters()).detach().clone()
    loss, skipped = trpo_atari.fit_critic(
        critic, optimizer, obs, torch.randn(32) * 10, trpo_atari.Args(vf_epochs=2, vf_minibatches=4)
    )
    assert np.isfinite(loss) and skipped == 0
    assert not torch.equal(parameters_to_vector(critic.parameters()), critic_before)  # the critic did learn
    with torch.no_grad():
        assert torch.equal(torch.softmax(actor(obs), -1), torch.softmax(logits, -1))


def test_a_failed_line_search_restores_the_policy_and_reports_nan_kls(batch):
    actor, obs, actions, logprobs, logits = batch
    surrogate = partial(
        trpo_atari.surrogate_and_state_kls, actor, obs, actions, logprobs, torch.randn(32), 0.01, logits
    )

    def kl_too_large():  # every trial step looks like it leaves the trust region
        objective, kls = surrogate()
        return objective, torch.ones_like(kls)

    before = parameters_to_vector(actor.parameters()).detach().clone()
    diagnostics = trpo_atari.trpo_step(actor, kl_too_large, obs, 0.01, trpo_atari.Args(max_state_kl=1.0, cg_iters=5))
    assert diagnostics["line_search_success"] == 0.0 and diagnostics["step_fraction"] == 0.0
    assert np.isnan(diagnostics["kl"]) and np.isnan(diagnostics["max_state_kl"])
    assert diagnostics["line_search_iters"] == trpo_atari.BACKTRACK_ITERS
    assert torch.equal(parameters_to_vector(actor.parameters()), before)


def test_entropy_bonus_grows_below_its_target_entropy_and_shrinks_above_it():
    max_entropy, rate = np.log(NUM_ACTIONS), trpo_atari.ENT_COEF_RATE
    target = 0.9 * max_entropy

    def adapt(ent_coef, entropy):  # the gap as main() computes it, a fraction of the largest entropy
        return trpo_atari.adapt_entropy_coef(ent_coef, (target - entropy) / max_entropy)

    assert adapt(0.1, entropy=target - 0.1 * max_entropy) == pytest.approx(0.1 * np.exp(0.1 * rate))
    assert adapt(0.1, entropy=target + 0.05 * max_entropy) == pytest.approx(0.1 * np.exp(-0.05 * rate))
    assert adapt(0.1, entropy=target) == pytest.approx(0.1)
    assert adapt(trpo_atari.MIN_ENT_COEF, entropy=max_entropy) == trpo_atari.MIN_ENT_COEF  # the floor
    assert adapt(0.999, entropy=0.0) == 1.0  # the cap
    # Closed loop, with an entropy that rises with the bonus: the controller settles on the bonus
    # that puts the entropy at its target, from either side.
    for ent_coef in (1.0, 0.001):
        for _ in range(3000):
            entropy = max_entropy * ent_coef / (ent_coef + 0.01)
            ent_coef = adapt(ent_coef, entropy=entropy)
        assert entropy == pytest.approx(target, abs=1e-3)
        assert ent_coef == pytest.approx(0.09, rel=1e-2)


def test_line_search_checks_the_objective_that_was_differentiated_entropy_included(batch):
    # With zero advantages the surrogate is flat and only the entropy bonus can improve: a line
    # search that left the entropy out of its check would reject every step.
    actor, obs, _, _, _ = batch
    with torch.no_grad():  # a peaked policy, far from the (maximum-entropy) uniform one
        actor.net[-1].weight.mul_(100)
        logits = actor(obs)
        actions = trpo_atari.sample_action(logits)
        logprobs = torch.log_softmax(logits, -1).gather(-1, actions[:, None]).squeeze(-1)
    ent_coef = 0.1
    objective_and_kls_fn = partial(
        trpo_atari.surrogate_and_state_kls, actor, obs, actions, logprobs, torch.zeros(32), ent_coef, logits
    )

    def entropy():
        with torch.no_grad():
            return torch.distributions.Categorical(logits=actor(obs)).entropy().mean().item()

    entropy_before = entropy()
    diagnostics = trpo_atari.trpo_step(actor, objective_and_kls_fn, obs, 0.01, trpo_atari.Args(max_state_kl=1.0))
    assert diagnostics["line_search_success"] == 1.0
    assert entropy() > entropy_before
    assert diagnostics["actual_improvement"] == pytest.approx(ent_coef * (entropy() - entropy_before), rel=1e-3)


@pytest.mark.parametrize("max_state_kl", [0.02, 0.05])
def test_a_large_trust_region_still_bounds_the_kl_of_every_state(batch, max_state_kl):
    """All the advantage on two states: a mean-KL step of 0.01 would spend its budget there."""
    actor, obs, actions, logprobs, logits = batch
    advantages = torch.zeros(32)
    advantages[:2] = 10.0
    objective_and_kls_fn = partial(
        trpo_atari.surrogate_and_state_kls, actor, obs, actions, logprobs, advantages, 0.0, logits
    )
    before = parameters_to_vector(actor.parameters()).detach().clone()

    def step(max_state_kl):
        trpo_atari.vector_to_parameters(before, actor.parameters())
        diagnostics = trpo_atari.trpo_step(
            actor, objective_and_kls_fn, obs, 0.01, trpo_atari.Args(max_state_kl=max_state_kl)
        )
        with torch.no_grad():
            _, measured = objective_and_kls_fn()
        return diagnostics, measured

    unbounded, unbounded_kls = step(max_state_kl=float("inf"))
    assert unbounded["line_search_success"] == 1.0
    assert unbounded_kls.max() > max_state_kl  # the mean alone lets two states move this far
    bounded, bounded_kls = step(max_state_kl)
    assert bounded["line_search_success"] == 1.0
    assert bounded_kls.max() <= max_state_kl and bounded_kls.mean() <= 0.01
    assert bounded["max_state_kl"] == pytest.approx(bounded_kls.max().item())
    assert bounded["step_fraction"] < unbounded["step_fraction"]


@pytest.mark.parametrize(("max_kl", "max_state_kl"), [(10.0, 0.02), (0.01, 10.0)])
def test_line_search_cuts_a_far_overshooting_step_to_its_bound(batch, max_kl, max_state_kl):
    """A full step whose KL is hundreds of times its bound, where ten cuts of 0.8 stay outside it,
    is brought inside by cuts sized from the KL measured."""
    actor, obs, actions, logprobs, logits = batch
    advantages = torch.zeros(32)
    advantages[:2] = 10.0
    objective_and_kls_fn = partial(
        trpo_atari.surrogate_and_state_kls, actor, obs, actions, logprobs, advantages, 0.0, logits
    )
    objective, _ = objective_and_kls_fn()
    gradient = torch.cat([g.reshape(-1) for g in torch.autograd.grad(objective, actor.parameters())])
    full_step = gradient / gradient.norm()
    before = parameters_to_vector(actor.parameters()).detach().clone()

    def kls_at(step_fraction):
        vector_to_parameters(before + step_fraction * full_step, actor.parameters())
        with torch.no_grad():
            _, kls = objective_and_kls_fn()
        vector_to_parameters(before, actor.parameters())
        return kls.mean().item() / max_kl, kls.max().item() / max_state_kl

    assert max(kls_at(1.0)) > 200
    assert max(kls_at(0.8**9)) > 1  # the smallest step of ten fixed cuts
    search = partial(
        trpo_atari.line_search,
        actor,
        objective_and_kls_fn,
        full_step,
        objective.item(),
        max_kl,
        trpo_atari.Args(max_state_kl=max_state_kl, backtrack_coeff=0.8),
    )
    result = search()
    step_fraction, kl, largest_kl = result["step_fraction"], result["kl"], result["max_state_kl"]
    assert result["line_search_success"] and result["line_search_iters"] <= 5 and result["actual_improvement"] > 0
    assert kl <= max_kl and largest_kl <= max_state_kl
    assert max(kl / max_kl, largest_kl / max_state_kl) > 0.3  # cut to the bound, not far below it
    assert torch.allclose(parameters_to_vector(actor.parameters()), before + step_fraction * full_step)


def test_each_line_search_trial_is_one_forward_pass_of_the_batch(batch):
    """The objective and the KLs of a trial come from the same logits: a trial costs one pass, not two."""
    actor, obs, actions, logprobs, logits = batch
    objective_and_kls_fn = partial(
        trpo_atari.surrogate_and_state_kls, actor, obs, actions, logprobs, torch.randn(32), 0.01, logits
    )
    objective, _ = objective_and_kls_fn()
    gradient = torch.cat([g.reshape(-1) for g in torch.autograd.grad(objective, actor.parameters())])
    forward_passes = []
    actor.register_forward_hook(lambda *_: forward_passes.append(1))
    result = trpo_atari.line_search(
        actor,
        objective_and_kls_fn,
        100 * gradient / gradient.norm(),
        objective.item(),
        0.01,
        trpo_atari.Args(max_state_kl=1.0, backtrack_coeff=0.5),
    )
    assert result["line_search_success"] and result["kl"] <= 0.01
    iters = result["line_search_iters"]
    assert iters > 1 and len(forward_passes) == iters  # the long first trials failed, each after one pass


class Bf16Actor(trpo_atari.Actor):
    """The policy as --bf16 would run it if it reached the policy (it does not)."""

    def forward(self, obs):
        return trpo_atari.nature_cnn_forward(self.net, obs, bf16=True)


def test_bf16_rounding_swamps_the_kl_of_a_small_step_and_float32_does_not(batch):
    """Why the policy stays float32 under --bf16: a step that the quadratic model gives a KL of 1e-7
    measures about that in float32, and many times more through bfloat16 weights."""
    actor, obs, _, _, _ = batch
    with torch.no_grad():  # a policy far from uniform, so that the Fisher matrix has weight
        actor.net[-1].weight.mul_(100)
    actor_bf16 = Bf16Actor(NUM_ACTIONS)
    actor_bf16.load_state_dict(actor.state_dict())
    direction = torch.randn(sum(p.numel() for p in actor.parameters()))
    curvature = direction @ trpo_atari.fisher_vector_product_fn(actor, obs)(direction)
    step = torch.sqrt(2 * 1e-7 / curvature) * direction
    measured = {}
    for name, network in (("float32", actor), ("bf16", actor_bf16)):
        with torch.no_grad():
            old_logits = network(obs)
            vector_to_parameters(parameters_to_vector(network.parameters()) + step, network.parameters())
            kls = kl_divergence(Categorical(logits=old_logits), Categorical(logits=network(obs)))
        measured[name] = kls.mean().item()
    assert 0.5e-7 < measured["float32"] < 2e-7
    assert measured["bf16"] > 10e-7


def test_bf16_fisher_vector_product_stays_close_to_float32(batch):
    actor, obs, _, _, _ = batch
    actor_bf16 = Bf16Actor(NUM_ACTIONS)
    actor_bf16.load_state_dict(actor.state_dict())
    with torch.no_grad():  # a policy far from uniform, so that the Fisher matrix has weight
        for network in (actor, actor_bf16):
            network.net[-1].weight.mul_(100)
    vector = torch.randn(sum(p.numel() for p in actor.parameters()))
    product = trpo_atari.fisher_vector_product_fn(actor, obs)(vector)
    product_bf16 = trpo_atari.fisher_vector_product_fn(actor_bf16, obs)(vector)
    relative_error = ((product_bf16 - product).norm() / product.norm()).item()
    assert 1e-4 < relative_error < 0.03


class TinyConvPolicy(torch.nn.Module):
    """The Nature CNN's kinds of layers (strided convolutions, ReLU, flatten, linear), small enough
    for an explicit Hessian."""

    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Conv2d(2, 3, 3, stride=2),
            torch.nn.ReLU(),
            torch.nn.Conv2d(3, 2, 2, stride=1),
            torch.nn.ReLU(),
            torch.nn.Flatten(),
            torch.nn.Linear(2 * 2 * 2, NUM_ACTIONS),
        )

    def forward(self, obs):
        return self.net(obs)


def test_fvp_through_strided_convolutions_matches_the_hessian_of_the_mean_kl():
    torch.manual_seed(0)
    policy, obs = TinyConvPolicy().double(), torch.randn(6, 2, 7, 7, dtype=torch.float64)
    with torch.no_grad():
        old_logits = policy(obs)
    named = dict(policy.named_parameters())
    flat = parameters_to_vector(named.values()).detach()

    def mean_kl(vector):
        chunks = vector.split([p.numel() for p in named.values()])
        weights = {name: chunk.view_as(p) for (name, p), chunk in zip(named.items(), chunks)}
        logits = torch.func.functional_call(policy, weights, (obs,))
        return kl_divergence(Categorical(logits=old_logits), Categorical(logits=logits)).mean()

    # The Hessian of the mean KL at theta_old by double backward, column by column.
    theta = flat.clone().requires_grad_(True)
    gradient = torch.autograd.grad(mean_kl(theta), theta, create_graph=True)[0]
    hessian = torch.stack([torch.autograd.grad(gradient[i], theta, retain_graph=True)[0] for i in range(len(flat))])
    fisher_vector_product = trpo_atari.fisher_vector_product_fn(policy, obs)
    for _ in range(3):
        v = torch.randn(len(flat), dtype=torch.float64)
        torch.testing.assert_close(fisher_vector_product(v), hessian @ v, rtol=1e-8, atol=1e-10)


def test_a_step_from_a_subsampled_fisher_keeps_the_whole_batchs_kl_within_max_kl(batch):
    actor, obs, actions, logprobs, logits = batch
    advantages = torch.randn(32, generator=torch.Generator().manual_seed(1))
    objective_and_kls_fn = partial(
        trpo_atari.surrogate_and_state_kls, actor, obs, actions, logprobs, advantages, 0.0, logits
    )
    max_kl = 0.01
    # The Fisher of 3 states (the script's FVP_SUBSAMPLE of 10%), the KL bound checked on all 32.
    diagnostics = trpo_atari.trpo_step(actor, objective_and_kls_fn, obs[:3], max_kl, trpo_atari.Args(max_state_kl=10.0))
    with torch.no_grad():
        _, kls = objective_and_kls_fn()
    assert diagnostics["line_search_success"] == 1.0
    assert 0 < kls.mean().item() <= max_kl
    assert diagnostics["kl"] == pytest.approx(kls.mean().item())
