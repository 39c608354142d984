"""Loading a model or checkpoint never runs code that the file holds."""

import os

import pytest
import torch

import ppo_atari_multigpu
import trpo_atari_multigpu
from tests.test_scripts import SCRIPTS, run_main

ALL_SCRIPTS = SCRIPTS | {f"{m.__name__}.py": m for m in (ppo_atari_multigpu, trpo_atari_multigpu)}
LOADING_FLAGS = [
    (script, flag)
    for script in ALL_SCRIPTS
    for flag in (["--eval-only", "--resume"] if "atari" in script else ["--eval-only"])
]


class RunsCode:
    """Pickled as a call of os.system: an unpickler that allows it creates the marker file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.mark.parametrize(("script", "flag"), LOADING_FLAGS)
def test_a_file_whose_unpickling_runs_code_is_refused_in_one_line_and_runs_nothing(
    script, flag, tmp_path, monkeypatch, capfd
):
    marker = tmp_path / "marker"
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(key, raising=False)
    torch.save({"actor": RunsCode(marker), "agent": RunsCode(marker), "iteration": 1}, tmp_path / "evil.pt")
    (tmp_path / "run").mkdir()
    monkeypatch.chdir(tmp_path / "run")
    env_id = [] if "atari" in script or script == "trpo_discrete.py" else ["--env-id", "Pendulum-v1"]
    assert run_main(ALL_SCRIPTS[script], *env_id, flag, str(tmp_path / "evil.pt")) != 0
    lines = [line for line in capfd.readouterr().err.strip().splitlines() if "not started by torchrun" not in line]
    assert len(lines) == 1 and lines[0].startswith(f"{script}: error: cannot read"), lines
    assert not marker.exists()
    assert not any((tmp_path / "run").iterdir())
