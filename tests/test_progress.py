"""What a run tells the person who started it: where it writes, how long it will take, where it stopped."""

import os
import re
import signal
import subprocess
import sys

import pytest

from tests.test_atari import TINY_ATARI, TINY_TRPO_ATARI
from tests.test_scripts import REPO, SCRIPTS, run_main

# 2 envs x 64 steps per iteration: of 300 steps asked, 2 whole iterations train 256.
FLAGS = {
    "trpo_discrete.py": ["--num-envs", "2", "--num-steps", "64", "--eval-episodes", "1"],
    "trpo_continuous.py": ["--env-id", "Pendulum-v1", "--num-envs", "2", "--num-steps", "64", "--eval-episodes", "1"],
    "ppo_continuous.py": ["--env-id", "Pendulum-v1", "--num-envs", "2", "--num-steps", "64", "--eval-episodes", "1"],
    "trpo_atari.py": [*TINY_TRPO_ATARI, "--num-steps", "64"],
    "ppo_atari.py": [*TINY_ATARI, "--num-steps", "64"],
}
CLOCK = r"\d+:\d\d:\d\d"


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_run_names_its_folder_and_plan_first_then_time_left_then_what_it_wrote(script, tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    assert run_main(SCRIPTS[script], *FLAGS[script], "--total-timesteps", "300", "--save-model") == 0
    lines = capfd.readouterr().out.strip().splitlines()
    (run_folder,) = (tmp_path / "runs").iterdir()
    assert lines[0] == f"runs/{run_folder.name}: 2 iterations x 128 = 256 of 300 steps"
    progress = [line for line in lines if line.startswith("iter")]
    assert len(progress) == 2 and all(re.search(f" elapsed {CLOCK} left {CLOCK} ", line) for line in progress)
    assert progress[-1].split(" left ")[1].startswith("0:00:00 ")  # nothing left after the last iteration
    model = f"runs/{run_folder.name}/{script[:-3]}.model"
    assert lines[-1] == f"wrote runs/{run_folder.name}, {model}" and (tmp_path / model).exists()


def interrupt_after(command, progress_lines, cwd):
    """Start command, send SIGINT (Ctrl-C) once it has printed progress_lines progress lines; (exit code, stderr)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    process = subprocess.Popen(
        [sys.executable, *command], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    seen = 0
    for line in process.stdout:
        seen += line.startswith("iter")
        if seen == progress_lines:
            process.send_signal(signal.SIGINT)
            break
    _, stderr = process.communicate(timeout=120)
    return process.returncode, stderr


def test_ctrl_c_says_where_the_run_stopped_in_one_line_and_exits_130(tmp_path):
    flags = [*FLAGS["trpo_discrete.py"], "--total-timesteps", "10000000"]
    code, stderr = interrupt_after([os.path.join(REPO, "trpo_discrete.py"), *flags], 1, tmp_path)
    (run_folder,) = (tmp_path / "runs").iterdir()
    lines = [line for line in stderr.strip().splitlines() if "no GPU" not in line]
    assert code == 130 and len(lines) == 1, stderr
    assert re.fullmatch(rf"trpo_discrete.py: stopped at step \d+ of 10000000; wrote runs/{run_folder.name}", lines[0])


def test_ctrl_c_of_an_atari_run_names_the_checkpoint_that_resume_takes(tmp_path):
    flags = [*FLAGS["trpo_atari.py"], "--total-timesteps", "10000000", "--checkpoint-every", "1"]
    code, stderr = interrupt_after([os.path.join(REPO, "trpo_atari.py"), *flags], 2, tmp_path)
    (checkpoint,) = (tmp_path / "runs").glob("*/checkpoint.pt")
    lines = [line for line in stderr.strip().splitlines() if "no GPU" not in line]
    assert code == 130 and len(lines) == 1, stderr
    relative = checkpoint.relative_to(tmp_path)
    expected = rf"trpo_atari.py: stopped at step \d+ of 10000000; wrote {relative.parent}; --resume {relative} goes on from there"
    assert re.fullmatch(expected, lines[0])
