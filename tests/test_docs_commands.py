"""Every command the README and the docs pages show in their code blocks parses against today's scripts."""

import importlib
import re
import shlex
from pathlib import Path

import pytest
import tyro

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
CODE_BLOCK = re.compile(r"```bash\n(.*?)```", re.DOTALL)


def shown_commands():
    """(page, script, flags) of every `python SCRIPT.py ...` or `torchrun ... SCRIPT.py ...` in a bash block."""
    commands = []
    for page in PAGES:
        for block in CODE_BLOCK.findall(page.read_text()):
            for line in block.replace("\\\n", " ").splitlines():
                for command in line.split("#")[0].split("&&"):
                    words = shlex.split(command)
                    scripts = [i for i, word in enumerate(words) if re.fullmatch(r"\w+\.py", word)]
                    if words and words[0] in ("python", "torchrun") and scripts and "--help" not in words:
                        commands.append((page.name, words[scripts[0]], words[scripts[0] + 1 :]))
    return commands


def test_the_pages_show_commands_of_every_script():
    assert {script for _, script, _ in shown_commands()} >= {
        "trpo_discrete.py", "trpo_continuous.py", "ppo_continuous.py", "trpo_atari.py", "ppo_atari.py",
        "trpo_atari_multigpu.py", "ppo_atari_multigpu.py",
    }  # fmt: skip


@pytest.mark.parametrize(("page", "script", "flags"), shown_commands())
def test_a_shown_command_parses(page, script, flags):
    module = importlib.import_module(script[: -len(".py")])
    tyro.cli(module.Args, args=flags)  # an unknown or malformed flag exits
