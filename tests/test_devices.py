"""What GPU users rely on, checked on the CPU where it can be: the tests' own device, the torchrun
twins' process group and the GPU day's script. The tests marked cuda run on a GPU and skip without one."""

import os
import runpy
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.distributed as dist

import ppo_atari_multigpu
import trpo_atari_multigpu
from tests.test_atari import TINY_ATARI, TINY_TRPO_ATARI, tiny_args
from tests.test_scripts import REPO, SCRIPTS, TINY, eval_mean, run_script

TWINS = [ppo_atari_multigpu, trpo_atari_multigpu]
TORCHRUN_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def test_a_test_not_marked_cuda_sees_no_gpu_and_neither_do_the_scripts_it_starts():
    assert not torch.cuda.is_available() and os.environ["CUDA_VISIBLE_DEVICES"] == ""


@pytest.mark.parametrize("script", TWINS)
@pytest.mark.parametrize("torchrun", [False, True])
def test_a_twin_with_one_process_makes_no_collective_call(script, torchrun, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in TORCHRUN_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    if torchrun:  # torchrun --nproc-per-node 1
        for name, value in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1"}.items():
            monkeypatch.setenv(name, value)
    for name in ("init_process_group", "all_reduce", "broadcast", "gather_object", "all_gather_object", "barrier"):
        monkeypatch.setattr(dist, name, lambda *a, name=name, **kw: pytest.fail(f"dist.{name} called"))
    args = tiny_args(script, total_timesteps=128)
    args.checkpoint_every = args.eval_every = 1
    assert len(script.main(args)) == 1
    assert len(list(tmp_path.glob("runs/*/checkpoint.pt"))) == 1


@pytest.mark.parametrize("script", TWINS)
@pytest.mark.parametrize("argv", [["--num-envs", "0"], ["--eval-only", "missing.model"]])
def test_a_twin_run_as_main_destroys_its_process_group_when_it_stops_with_an_error(script, argv, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    destroyed = []
    monkeypatch.setattr(dist, "is_initialized", lambda: True)  # as if torchrun had formed a group
    monkeypatch.setattr(dist, "destroy_process_group", lambda *a: destroyed.append(1))
    monkeypatch.setattr(sys, "argv", [script.__file__, *argv])
    with pytest.raises(SystemExit, match="error"):
        runpy.run_path(script.__file__, run_name="__main__")
    assert destroyed == [1]


def test_gpu_check_without_a_gpu_says_so_in_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "gpu_check.md"
    result = subprocess.run(
        ["bash", os.path.join(REPO, "benchmarks", "gpu_check.sh"), str(out)],
        check=False,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0 and result.stdout == "gpu_check.sh: no GPU visible to torch, nothing to check\n"
    assert not out.exists()


@pytest.mark.cuda
@pytest.mark.parametrize(("script", "flags"), [(name, TINY) for name in SCRIPTS if "atari" not in name])
def test_cuda_smoke_run_of_the_mlp_scripts(script, flags, tmp_path):
    result = run_script(script, *flags, "--cuda", cwd=tmp_path)
    assert result.returncode == 0 and "no GPU" not in result.stderr and np.isfinite(eval_mean(result.stdout))


@pytest.mark.cuda
@pytest.mark.parametrize(
    ("script", "flags"),
    [(f"{name}.py", tiny) for name, tiny in [("ppo_atari", TINY_ATARI), ("trpo_atari", TINY_TRPO_ATARI)]],
)
@pytest.mark.parametrize("bf16", [[], ["--bf16"]])
def test_cuda_smoke_run_of_the_atari_scripts(script, flags, bf16, tmp_path):
    result = run_script(script, *flags, *bf16, "--cuda", cwd=tmp_path)
    assert result.returncode == 0 and "no GPU" not in result.stderr and np.isfinite(eval_mean(result.stdout))
