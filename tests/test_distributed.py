"""ppo_atari_multigpu.py: two gloo ranks on this machine behave as one process holding both halves."""

import os
import re
import socket
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.utils import parameters_to_vector

import ppo_atari_multigpu
from tests.test_atari import TINY_ATARI
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


def training_worker(rank, world_size, port, folder, results):
    join_group(rank, world_size, port)
    os.chdir(folder)
    agents = []

    class RecordedAgent(ppo_atari_multigpu.Agent):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            agents.append(self)

    ppo_atari_multigpu.Agent = RecordedAgent
    args = ppo_atari_multigpu.Args(num_envs=2, num_steps=32, total_timesteps=256, eval_episodes=1)
    args.update_epochs, args.num_minibatches = 2, 2
    eval_returns = ppo_atari_multigpu.main(args)
    results[rank] = (eval_returns, parameters_to_vector(agents[0].parameters()).detach().clone())


def test_after_a_distributed_run_every_rank_holds_the_same_networks(tmp_path):
    results = mp.Manager().dict()
    mp.spawn(training_worker, args=(2, free_port(), str(tmp_path), results), nprocs=2, join=True)
    (returns_0, parameters_0), (returns_1, parameters_1) = results[0], results[1]
    assert torch.equal(parameters_0, parameters_1)
    assert len(returns_0) == 1 and returns_1 is None  # rank 0 alone evaluates
    # It trained: the weights moved from their (broadcast) initial values.
    torch.manual_seed(1)
    assert not torch.equal(parameters_0, parameters_to_vector(ppo_atari_multigpu.Agent(4).parameters()))
    assert len(list(tmp_path.glob("runs/*/events.out.tfevents.*"))) == 1  # rank 0 alone logs


def test_torchrun_smoke_logs_every_ranks_games_once(tmp_path):
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "2",
        "--master-port",
        str(free_port()),
    ]
    command += [os.path.join(REPO, "ppo_atari_multigpu.py"), *TINY_ATARI, "--total-timesteps", "1024", "--save-model"]
    result = subprocess.run(
        command, cwd=tmp_path, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    # 1024 agent steps over 2 ranks x 2 envs x 32 steps: 8 updates of 128 steps each.
    assert re.search(r"^iter +8/8 step +1024 ", result.stdout, re.MULTILINE)
    assert np.isfinite(eval_mean(result.stdout))
    assert len(list(tmp_path.glob("runs/*/ppo_atari_multigpu.model"))) == 1


def test_without_torchrun_it_says_so_and_runs_as_one_process(tmp_path):
    env = {key: value for key, value in os.environ.items() if key not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    result = subprocess.run(
        [sys.executable, os.path.join(REPO, "ppo_atari_multigpu.py"), *TINY_ATARI, "--no-cuda"],
        cwd=tmp_path,
        env=dict(env, OMP_NUM_THREADS="1"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert (
        result.stderr.strip()
        == "ppo_atari_multigpu.py: not started by torchrun: running as a single process (world size 1)"
    )
    assert re.search(r"^iter +2/2 step +128 ", result.stdout, re.MULTILINE)


def test_more_local_ranks_than_gpus_is_one_clear_error(monkeypatch):
    for key, value in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(SystemExit, match="ppo_atari_multigpu.py: error: 2 processes on this machine but 1 GPUs"):
        ppo_atari_multigpu.main(ppo_atari_multigpu.Args())
