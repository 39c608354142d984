"""ppo_atari_multigpu.py and trpo_atari_multigpu.py: two gloo ranks on this machine behave as one
process holding both halves of their data."""

import os
import re
import socket
import subprocess
import sys
from functools import partial

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.utils import parameters_to_vector

import ppo_atari_multigpu
import trpo_atari
import trpo_atari_multigpu
from tests.test_atari import TINY_ATARI, TINY_TRPO_ATARI
from tests.test_scripts import REPO, eval_mean


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def join_group(rank, world_size, port):
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_WORLD_SIZE=str(world_size),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    torch.set_num_threads(1)


def fixed_batch():
    generator = torch.Generator().manual_seed(0)
    obs = torch.randint(0, 256, (16, 4, 84, 84), dtype=torch.uint8, generator=generator)
    advantages = torch.randn(16, generator=generator) * 3 + 1
    return obs, advantages


def loss_and_gradient(agent, obs, advantages, normalize):
    """A minibatch loss of the script's form (a mean over samples of advantage-weighted terms)."""
    mean, std = normalize(advantages)
    logits, values = agent(obs)
    loss = (torch.log_softmax(logits, -1)[:, 0] * (advantages - mean) / (std + 1e-8)).mean() + values.pow(2).mean()
    agent.zero_grad()
    loss.backward()
    return loss.detach(), [parameter.grad for parameter in agent.parameters()]


def equivalence_worker(rank, world_size, port, results):
    join_group(rank, world_size, port)
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    agent = ppo_atari_multigpu.Agent(4)  # the same weights on both ranks
    obs, advantages = fixed_batch()
    half = slice(rank * 8, rank * 8 + 8)
    loss, grads = loss_and_gradient(agent, obs[half], advantages[half], ppo_atari_multigpu.global_mean_std)
    ppo_atari_multigpu.all_reduce_mean(grads + [loss])
    results[rank] = (loss.clone(), parameters_to_vector(grads).clone())
    dist.destroy_process_group()


def test_two_ranks_holding_half_a_minibatch_get_the_gradient_of_the_whole_minibatch():
    results = mp.Manager().dict()
    mp.spawn(equivalence_worker, args=(2, free_port(), results), nprocs=2, join=True)
    torch.manual_seed(0)
    agent = ppo_atari_multigpu.Agent(4)
    obs, advantages = fixed_batch()
    loss, grads = loss_and_gradient(agent, obs, advantages, lambda x: (x.mean(), x.std()))
    expected = parameters_to_vector(grads)
    for rank in (0, 1):
        rank_loss, rank_gradient = results[rank]
        assert rank_loss == pytest.approx(loss.item(), rel=1e-5)
        torch.testing.assert_close(rank_gradient, expected, rtol=1e-4, atol=1e-6)


NETWORKS = {"ppo_atari_multigpu": ("Agent",), "trpo_atari_multigpu": ("Actor", "Critic")}
SCRIPTS = {"ppo_atari_multigpu": ppo_atari_multigpu, "trpo_atari_multigpu": trpo_atari_multigpu}


def training_worker(rank, world_size, port, folder, script_name, results):
    script = SCRIPTS[script_name]
    join_group(rank, world_size, port)
    os.chdir(folder)
    networks = []
    for name in NETWORKS[script_name]:  # record every network the script builds

        class Recorded(getattr(script, name)):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                networks.append(self)

        setattr(script, name, Recorded)
    # On the CPU on every machine: two processes on one GPU is not a supported NCCL layout.
    args = script.Args(num_envs=2, num_steps=32, total_timesteps=256, eval_episodes=1, cuda=False)
    if script is ppo_atari_multigpu:
        args.update_epochs, args.num_minibatches = 2, 2
    else:
        args.vf_epochs, args.vf_minibatches = 2, 2
    eval_returns = script.main(args)
    dist.destroy_process_group()  # the scripts' __main__ block does this
    results[rank] = (eval_returns, [parameters_to_vector(net.parameters()).detach().cpu() for net in networks])


@pytest.mark.parametrize("script_name", SCRIPTS)
def test_after_a_distributed_run_every_rank_holds_the_same_networks(script_name, tmp_path):
    results = mp.Manager().dict()
    mp.spawn(training_worker, args=(2, free_port(), str(tmp_path), script_name, results), nprocs=2, join=True)
    (returns_0, networks_0), (returns_1, networks_1) = results[0], results[1]
    assert len(networks_0) == len(networks_1) == len(NETWORKS[script_name])
    for parameters_0, parameters_1 in zip(networks_0, networks_1):
        assert torch.equal(parameters_0, parameters_1)
    assert len(returns_0) == 1 and returns_1 is None  # rank 0 alone evaluates
    # It trained: the policy moved from its (broadcast) initial weights.
    torch.manual_seed(1)
    initial = parameters_to_vector(getattr(SCRIPTS[script_name], NETWORKS[script_name][0])(4).parameters())
    assert not torch.equal(networks_0[0], initial)
    assert len(list(tmp_path.glob("runs/*/events.out.tfevents.*"))) == 1  # rank 0 alone logs


def trpo_batch():
    torch.manual_seed(0)
    actor = trpo_atari.Actor(4)
    generator = torch.Generator().manual_seed(1)
    obs = torch.randint(0, 256, (16, 4, 84, 84), dtype=torch.uint8, generator=generator)
    advantages = torch.randn(16, generator=generator)
    vector = torch.randn(parameters_to_vector(actor.parameters()).numel(), generator=generator)
    with torch.no_grad():
        logits = actor(obs)
        actions = trpo_atari.sample_action(logits)
        logprobs = torch.log_softmax(logits, -1).gather(-1, actions[:, None]).squeeze(-1)
    return actor, (obs, actions, logprobs, advantages, logits), vector


def trpo_step_on(script, actor, obs, actions, logprobs, advantages, logits, vector):
    """A Fisher-vector product and a whole trust-region step, as the script computes them."""
    fisher_vector_product = script.fisher_vector_product_fn(actor, obs)(vector)
    objective_and_kls_fn = partial(
        script.surrogate_and_state_kls, actor, obs, actions, logprobs, advantages, 0.01, logits
    )
    diagnostics = script.trpo_step(actor, objective_and_kls_fn, obs, 0.01, script.Args(max_state_kl=1.0))
    return fisher_vector_product.detach(), diagnostics, parameters_to_vector(actor.parameters()).detach()


def trpo_equivalence_worker(rank, world_size, port, results):
    join_group(rank, world_size, port)
    dist.init_process_group("gloo")
    actor, batch, vector = trpo_batch()
    half = [tensor[rank * 8 : rank * 8 + 8] for tensor in batch]
    results[rank] = trpo_step_on(trpo_atari_multigpu, actor, *half, vector)
    dist.destroy_process_group()


def test_two_ranks_holding_half_a_batch_take_the_trust_region_step_of_the_whole_batch():
    results = mp.Manager().dict()
    mp.spawn(trpo_equivalence_worker, args=(2, free_port(), results), nprocs=2, join=True)
    actor, batch, vector = trpo_batch()
    parameters_before = parameters_to_vector(actor.parameters()).detach().clone()
    # trpo_atari.py, one process, on the whole batch.
    fisher_vector_product, diagnostics, parameters = trpo_step_on(trpo_atari, actor, *batch, vector)
    assert diagnostics["line_search_success"] == 1.0
    for rank in (0, 1):
        rank_product, rank_diagnostics, rank_parameters = results[rank]
        torch.testing.assert_close(rank_product, fisher_vector_product, rtol=1e-4, atol=1e-6)
        for key in ("kl", "max_state_kl", "expected_improvement", "actual_improvement", "step_fraction"):
            assert rank_diagnostics[key] == pytest.approx(diagnostics[key], rel=1e-3), key
        torch.testing.assert_close(
            rank_parameters - parameters_before, parameters - parameters_before, rtol=1e-3, atol=1e-6
        )
    assert torch.equal(results[0][2], results[1][2])  # and the ranks agree exactly


@pytest.mark.parametrize(
    ("script", "tiny"), [("ppo_atari_multigpu.py", TINY_ATARI), ("trpo_atari_multigpu.py", TINY_TRPO_ATARI)]
)
def test_torchrun_smoke_run_trains_and_rank_0_logs_and_saves(script, tiny, tmp_path):
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "2",
        "--master-port",
        str(free_port()),
    ]
    command += [os.path.join(REPO, script), *tiny, "--total-timesteps", "1024", "--save-model", "--no-cuda"]
    result = subprocess.run(
        command, cwd=tmp_path, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    # 1024 agent steps over 2 ranks x 2 envs x 32 steps: 8 updates of 128 steps each.
    assert re.search(r"^iter +8/8 step +1024 ", result.stdout, re.MULTILINE)
    assert np.isfinite(eval_mean(result.stdout))
    assert len(list(tmp_path.glob(f"runs/*/{script[:-3]}.model"))) == 1
    assert len(list(tmp_path.glob("runs/*/events.out.tfevents.*"))) == 1


@pytest.mark.parametrize(
    ("script", "tiny"), [("ppo_atari_multigpu.py", TINY_ATARI), ("trpo_atari_multigpu.py", TINY_TRPO_ATARI)]
)
def test_without_torchrun_it_says_so_and_runs_as_one_process(script, tiny, tmp_path):
    env = {key: value for key, value in os.environ.items() if key not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    result = subprocess.run(
        [sys.executable, os.path.join(REPO, script), *tiny, "--no-cuda"],
        cwd=tmp_path,
        env=dict(env, OMP_NUM_THREADS="1"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    expected = f"{script}: not started by torchrun: running as a single process (world size 1)"
    assert result.stderr.strip() == expected
    assert re.search(r"^iter +2/2 step +128 ", result.stdout, re.MULTILINE)


@pytest.mark.parametrize("script", [ppo_atari_multigpu, trpo_atari_multigpu])
def test_more_local_ranks_than_gpus_is_one_clear_error(script, monkeypatch):
    for key, value in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(SystemExit, match=f"{script.__name__}.py: error: 2 processes on this machine but 1 GPUs"):
        script.main(script.Args())


@pytest.mark.parametrize("script", [ppo_atari_multigpu, trpo_atari_multigpu])
def test_the_largest_seed_leaves_room_for_every_ranks_envs(script):
    args = script.Args(num_envs=8)
    args.world_size = 2  # ale-py takes env seeds below 2**31; rank 1's last env gets seed + 15
    args.seed = 2**31 - 16
    assert script.check_inputs(args) > 0
    args.seed += 1
    with pytest.raises(ValueError, match=r"seed must be in \[0, 2\*\*31 - ranks \* num_envs\]"):
        script.check_inputs(args)
