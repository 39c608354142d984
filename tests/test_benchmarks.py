"""benchmarks/run.py, summary.py and report.py on a tiny grid they run themselves and on fixture summaries;
memory.py's batches; speed_mlp.py's cases;
fvp_atari.py's warm-started CG and its probe of the training run; directions_atari.py's probe."""

import ast
import dataclasses
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import matplotlib
import numpy as np
import pytest
import torch

import trpo_continuous
from benchmarks import directions_atari, fvp_atari, memory, speed_mlp
from benchmarks import report as report_module
from benchmarks import run as run_module
from benchmarks import summary as summary_module

REPO = Path(__file__).resolve().parent.parent
TINY = ["--num-envs", "2", "--num-steps", "128", "--total-timesteps", "1024", "--eval-episodes", "3"]


@pytest.fixture(scope="module")
def tiny_grid(tmp_path_factory):
    work = tmp_path_factory.mktemp("work")
    command = [sys.executable, str(REPO / "benchmarks" / "run.py"), "trpo_discrete.py", "--envs", "CartPole-v1"]
    command += ["--seeds", "1", "2", "--work", str(work), "--summaries", str(work / "summaries"), "--", *TINY]
    first = subprocess.run(command, capture_output=True, text=True, check=True)
    again = subprocess.run(command, capture_output=True, text=True, check=True)
    return work, first.stdout, again.stdout


def test_runner_records_commands_and_resumes(tiny_grid):
    work, first, again = tiny_grid
    for seed in (1, 2):
        folder = work / "CartPole-v1" / "trpo_discrete" / f"seed{seed}"
        assert f"--seed={seed}" in (folder / "command.txt").read_text()
        assert "eval: mean return" in (folder / "stdout.log").read_text()
        machine = (folder / "machine.txt").read_text()
        assert f"numpy=={np.__version__} " in machine
        cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
        family = re.search(r"^cpu family\s*:\s*(\d+)$", cpuinfo, re.MULTILINE)
        if family:
            assert f"(family {family.group(1)}, model " in machine
    assert first.count("exit 0") == 2
    assert again.count("skipped (done)") == 2


def test_runner_writes_a_compact_summary_of_each_run(tiny_grid):
    work, _, _ = tiny_grid
    for seed in (1, 2):
        summary = json.loads((work / "summaries" / "CartPole-v1" / "trpo_discrete" / f"seed{seed}.json").read_text())
        log = (work / "CartPole-v1" / "trpo_discrete" / f"seed{seed}" / "stdout.log").read_text()
        printed = float(re.search(r"^eval: mean return (-?[\d.]+)", log, re.MULTILINE).group(1))
        assert summary["seed"] == seed and summary["env_id"] == "CartPole-v1" and summary["label"] == "trpo_discrete"
        assert summary["script"] == "trpo_discrete.py" and f"--seed={seed}" in summary["command"]
        assert summary["args"]["num_envs"] == "2" and summary["args"]["seed"] == str(seed)
        assert len(summary["final_eval"]) == 3 and np.mean(summary["final_eval"]) == pytest.approx(printed, abs=0.006)
        assert summary["global_steps"] == 1024 and summary["wall_clock_s"] > 0
        assert summary["versions"]["numpy"] == np.__version__ and summary["machine"]["gpu"] is None
        assert re.fullmatch(r"[0-9a-f]{40}(\+modified)?", summary["commit"])
        returns = summary["curves"]["charts/episodic_return"]
        assert 0 < len(returns) <= summary_module.CURVE_POINTS and "losses/entropy" in summary["curves"]
        assert all(0 <= step <= 1024 for step, _ in returns) and [s for s, _ in returns] == sorted(
            s for s, _ in returns
        )


def test_summary_curves_are_bin_means_that_skip_non_finite_values():
    steps, values = np.arange(1000), np.where(np.arange(1000) % 2, np.nan, 1.0 * np.arange(1000))
    curve = summary_module.binned(steps, values, end=1000, points=10)
    assert len(curve) == 10
    assert curve[0] == [round(np.mean(np.arange(100))), np.mean(np.arange(0, 100, 2))]
    assert summary_module.binned(np.array([5]), np.array([np.nan]), end=10) == [[5, None]]


def test_runner_continues_a_stopped_run_from_its_checkpoint(tmp_path, monkeypatch):
    folder = run_module.run_dir(tmp_path, "BreakoutNoFrameskip-v4", "trpo_atari_long", 1)
    (folder / "runs" / "the_run").mkdir(parents=True)
    (folder / "runs" / "the_run" / "checkpoint.pt").touch()
    (folder / "command.txt").write_text("first command\n")
    (folder / "stdout.log").write_text("iter 1/9\n")  # stopped before its evaluation
    commands = []

    def fake_run(command, cwd, stdout, **kwargs):
        commands.append(command)
        stdout.write("iter 2/9\neval: mean return 1.00 +- 0.00 over 1 games\n")
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(run_module.subprocess, "run", fake_run)
    run_module.run_one(
        "trpo_atari.py", "BreakoutNoFrameskip-v4", 1, ["--checkpoint-every", "10"], tmp_path, "trpo_atari_long"
    )
    assert commands[0][-1] == "--resume=runs/the_run/checkpoint.pt"
    assert (folder / "command.txt").read_text().splitlines()[0] == "first command"
    assert (folder / "command.txt").read_text().splitlines()[1].endswith("--resume=runs/the_run/checkpoint.pt")
    assert (folder / "stdout.log").read_text().startswith("iter 1/9\niter 2/9\neval:")
    # Finished now: a second call skips it.
    assert (
        run_module.run_one("trpo_atari.py", "BreakoutNoFrameskip-v4", 1, [], tmp_path, "trpo_atari_long")[1]
        == "skipped (done)"
    )


def test_permutation_p_value_is_the_exact_share_of_relabellings_for_small_samples():
    import itertools

    a, b = np.array([5400.0, 1500.0, 5100.0, 4900.0]), np.array([3000.0, 3100.0, 2900.0, 1800.0])
    pooled, observed = np.concatenate([a, b]), abs(a.mean() - b.mean())
    # Every way of choosing which 4 of the 8 values form the first sample.
    differences = [
        abs(pooled[list(chosen)].mean() - np.delete(pooled, list(chosen)).mean())
        for chosen in itertools.combinations(range(8), 4)
    ]
    exact = np.mean(np.array(differences) >= observed - 1e-9)
    assert report_module.permutation_p_value(a, b) == pytest.approx(exact, abs=0.005)
    assert report_module.permutation_p_value(a, a.copy()) == 1.0
    # Fully separated samples of 4: only the observed split and its mirror are as extreme, 2 of 70.
    assert report_module.permutation_p_value(a + 1e4, b) == pytest.approx(2 / 70, abs=0.003)
    # The p-value is a function of the two samples alone: renaming rows (which reorders the pair or
    # the seeds) leaves it as it is, also for samples of different sizes.
    c = np.array([2500.0, 4700.0, 3300.0, 3900.0, 1200.0, 3600.0])
    assert report_module.permutation_p_value(b, a) == report_module.permutation_p_value(a, b)
    assert report_module.permutation_p_value(c, a) == report_module.permutation_p_value(a[::-1], c[::-1])


def write_page(folder, spec, before="# A page\n\nText above.\n\n", after="\nText below.\n"):
    """A page with stale generated text between the markers, and pages.json naming it; returns their paths."""
    page = folder / "docs" / "page.md"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(before + report_module.BEGIN + "\nstale\n" + report_module.END + after)
    pages = folder / "pages.json"
    pages.write_text(json.dumps({"docs/page.md": spec}))
    return page, pages


def fake_summary(label, seed, final_eval, command_flags="", steps=1000, slope=1.0):
    curve = [[step, slope * step] for step in range(0, steps + 1, 100)]
    return {
        "script": "trpo_continuous.py",
        "label": label,
        "env_id": "Env-v0",
        "seed": seed,
        "command": f"/x/trpo_continuous.py --env-id=Env-v0 --seed={seed} {command_flags}".strip(),
        "machine": {"cpu": "CPU X", "gpu": None},
        "versions": {"torch": "2.13.0", "numpy": "2.4.6"},
        "global_steps": steps,
        "final_eval": final_eval,
        "curves": {"charts/episodic_return": curve},
    }


def test_report_rebuilds_a_page_between_its_markers_with_the_runs_printed_evaluations(tiny_grid, tmp_path):
    work, _, _ = tiny_grid
    spec = {"tables": [{"env": "CartPole-v1", "threshold": 10, "rows": [["trpo_discrete", "ours"]]}]}
    page, pages = write_page(tmp_path, spec)
    argv = ["--pages", str(pages), "--runs", str(work / "summaries"), "--repo", str(tmp_path)]
    assert report_module.main(argv) == 0
    text = page.read_text()
    assert text.startswith("# A page\n\nText above.\n\n" + report_module.BEGIN) and text.endswith("\nText below.\n")
    assert "stale" not in text
    row = next(line for line in text.splitlines() if line.startswith("| ours |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    printed = []
    for seed in (1, 2):
        log = (work / "CartPole-v1" / "trpo_discrete" / f"seed{seed}" / "stdout.log").read_text()
        printed.append(float(re.search(r"^eval: mean return (-?[\d.]+)", log, re.MULTILINE).group(1)))
    mean, std = (float(x) for x in cells[4].split("+-"))
    assert mean == pytest.approx(np.mean(printed), abs=0.06) and std == pytest.approx(np.std(printed), abs=0.06)
    assert cells[1] == "`--num-envs 2 --num-steps 128 --eval-episodes 3`" and cells[3] == "1-2"
    assert cells[6] == f"{sum(value >= 10 for value in printed)} of 2" and cells[7] == "base"
    assert (
        "- ours: `python benchmarks/run.py trpo_discrete.py --envs CartPole-v1 --seeds 1 2 --label trpo_discrete"
        in text
    )
    png = page.with_suffix(".png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    # A second render gives the same bytes, and --check agrees until the page is edited.
    assert report_module.main(argv) == 0
    assert page.read_text() == text and page.with_suffix(".png").read_bytes() == png
    assert report_module.main([*argv, "--check"]) == 0
    page.write_text(text.replace(cells[4], "1.0 +- 0.0"))
    assert report_module.main([*argv, "--check"]) == 1


def test_report_compares_rows_with_the_first_and_ablations_with_their_base_on_shared_seeds(tmp_path):
    runs = tmp_path / "runs"
    for seed, value in zip((1, 2, 3), (100.0, 200.0, 300.0)):
        summary_module.write_summary(fake_summary("base", seed, [value, value]), runs)
    for seed, value in zip((2, 3, 4), (250.0, 350.0, 9000.0)):
        tuned = fake_summary("tuned", seed, [value], "--gamma 0.9 --no-norm-obs", slope=2.0)
        # The taken steps' mean KL, binned: seed 2 at half of seed 3's and 4's.
        tuned["curves"]["trpo/kl"] = [
            [step, 0.01 * (1 + (seed > 2)) * (1 - step / 1000) or None] for step in (0, 100, 900, 1000)
        ]
        summary_module.write_summary(tuned, runs)
    table = {"env": "Env-v0", "threshold": 260, "rows": [["base", "defaults"], ["tuned", "tuned"]]}
    titled = {"env": "Env-v0", "title": "Env-v0, tuned alone", "rows": [["tuned", "tuned"]]}
    ablation = {"env": "Env-v0", "base": "base", "label": "tuned", "name": "lower gamma"}
    spec = {"tables": [table, titled], "ablations": [ablation], "ablation_plots": ["Env-v0"]}
    page, pages = write_page(tmp_path, spec)
    assert report_module.main(["--pages", str(pages), "--runs", str(runs), "--repo", str(tmp_path)]) == 0
    lines = page.read_text().splitlines()
    # A second table of the same env goes under its title, with its own first row as the base.
    assert "### Env-v0" in lines and "### Env-v0, tuned alone" in lines
    assert sum(line.startswith("| tuned |") and line.endswith("| base |") for line in lines) == 1
    tuned = next(line for line in lines if line.startswith("| tuned |"))
    p_value = report_module.permutation_p_value(np.array([250.0, 350.0, 9000.0]), np.array([100.0, 200.0, 300.0]))
    mean, std = np.mean([250.0, 350.0, 9000.0]), np.std([250.0, 350.0, 9000.0])
    # Training return over the last 10% of 1000 steps: the mean of the curve's points at 900 and 1000.
    assert f"| 2-4 | {mean:.1f} +- {std:.1f} | 1900.0 | 2 of 3 | {mean - 200:+.1f}, p = {p_value:.3f} |" in tuned
    assert "CPU: CPU X; GPU: none; versions: torch 2.13.0, numpy 2.4.6." in lines
    # The ablation row: its flags as run, and the difference on seeds 2 and 3 alone.
    shared_p = report_module.permutation_p_value(np.array([250.0, 350.0]), np.array([200.0, 300.0]))
    ablation_row = f"| lower gamma | `--gamma 0.9 --no-norm-obs` | Env-v0 | 2-3 | 300.0 | +50.0 | {shared_p:.3f} |"
    # Its steps' mean KL over the first 10% of the steps (bins at 0 and 100) and the last (900; 1000 has none),
    # on seeds 2 and 3: ((0.01 + 0.009) / 2 + (0.02 + 0.018) / 2) / 2 and (0.001 + 0.002) / 2; none for the base.
    assert f"{ablation_row} 1900.0 | +950.0 | 0.014 / 0.0015 | - |" in lines
    # Every setting tried on the envs the page lists, in one plot linked under the ablations.
    assert "![every setting tried](page_ablations.png)" in lines
    assert (page.parent / "page_ablations.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_ablation_stopped_before_its_final_evaluation_is_compared_over_the_steps_it_ran(tmp_path):
    runs = tmp_path / "runs"
    summary_module.write_summary(fake_summary("base", 1, [100.0]), runs)
    summary_module.write_summary(fake_summary("stopped", 1, [], steps=500, slope=2.0), runs)
    ablation = {"env": "Env-v0", "base": "base", "label": "stopped", "name": "stopped early"}
    page, pages = write_page(tmp_path, {"tables": [], "ablations": [ablation]})
    assert report_module.main(["--pages", str(pages), "--runs", str(runs), "--repo", str(tmp_path)]) == 0
    # No final evaluation to compare; training returns over the last 10% of 500 steps: 2 * 500 against 500.
    assert (
        "| stopped early | (none) | Env-v0 | 1 | - | - | - | 1000.0 | +500.0 | - | - |" in page.read_text().splitlines()
    )


def test_report_refuses_a_page_without_markers_or_a_row_without_summaries(tmp_path):
    page, pages = write_page(tmp_path, {"tables": [{"env": "Env-v0", "rows": [["missing", "missing"]]}]})
    with pytest.raises(SystemExit, match="no summaries at"):
        report_module.main(["--pages", str(pages), "--runs", str(tmp_path / "runs"), "--repo", str(tmp_path)])
    page.write_text("no markers\n")
    summary_module.write_summary(fake_summary("missing", 1, [1.0]), tmp_path / "runs")
    with pytest.raises(SystemExit, match="has no results markers"):
        report_module.main(["--pages", str(pages), "--runs", str(tmp_path / "runs"), "--repo", str(tmp_path)])


def test_the_flags_column_shows_how_a_row_differs_from_todays_defaults(tmp_path):
    runs = tmp_path / "runs"
    defaults = {f.name: str(f.default) for f in dataclasses.fields(trpo_continuous.Args) if f.init}
    for seed in (1, 2):
        summary = fake_summary("defaults", seed, [100.0])
        summary["args"] = defaults | {"seed": str(seed), "total_timesteps": "1000"}
        summary_module.write_summary(summary, runs)
        # Run with --gamma 0.9 typed, by a script whose default vf_minibatches was 8 and which had --entropy-ceiling.
        older = fake_summary("older", seed, [100.0], "--gamma 0.9 --entropy-ceiling")
        older["args"] = defaults | {"gamma": "0.9", "vf_minibatches": "8", "entropy_ceiling": "True"}
        summary_module.write_summary(older, runs)
        # An older script's run whose start benchmarks/prefix.py found today's script repeating.
        checked = fake_summary("checked", seed, [100.0]) | {"args": defaults | {"backtrack_iters": "10"}}
        checked["prefix_rerun"] = {"commit": "abc", "steps": 30_720 - seed, "curves": ["charts/episodic_return"]}
        summary_module.write_summary(checked, runs)
        # norm_obs is no flag any more: the script always normalizes, as this run did.
        fixed = fake_summary("fixed", seed, [100.0]) | {"args": defaults | {"norm_obs": "True"}}
        summary_module.write_summary(fixed, runs)
    # A run that switched normalization off ran an older script.
    assert report_module.older_code({1: fixed | {"args": defaults | {"norm_obs": "False"}}}) == "an older script"
    rows = [["defaults", "defaults"], ["older", "older"], ["checked", "checked"], ["fixed", "fixed"]]
    table = {"env": "Env-v0", "rows": rows}
    page, pages = write_page(tmp_path, {"tables": [table]})
    assert report_module.main(["--pages", str(pages), "--runs", str(runs), "--repo", str(tmp_path)]) == 0
    lines = page.read_text().splitlines()
    assert next(line for line in lines if line.startswith("| defaults |")).startswith("| defaults |  | ")
    assert next(line for line in lines if line.startswith("| older |")).startswith(
        "| older | `--gamma 0.9 --vf-minibatches 8 --entropy-ceiling` | "
    )
    command = "python benchmarks/run.py trpo_continuous.py --envs Env-v0 --seeds 1 2 --label"
    assert f"- defaults: `{command} defaults`" in lines and f"- fixed: `{command} fixed`" in lines
    # An argument today's script lacks: the runs recorded no commit to check out, so the command says so.
    assert (
        f"- older: `{command} older -- --gamma 0.9 --entropy-ceiling  # ran an older script (its runs: not recorded)`"
        in lines
    )
    assert (
        f"- checked: `{command} checked  # its first 31k steps rerun on the current script: the same curves`" in lines
    )


def test_the_grid_sets_implementations_side_by_side_and_marks_older_runs(tmp_path):
    runs = tmp_path / "runs"
    for seed in (1, 2):
        summary_module.write_summary(fake_summary("ours", seed, [float(seed)]), runs)
        older = fake_summary("theirs", seed, [10.0])
        older["args"] = {"a_removed_option": "1"}
        summary_module.write_summary(older, runs)
    columns = [["ours", "ours.py"], ["theirs", "theirs.py"]]
    spec = {"grid": {"title": "A grid.", "envs": ["Env-v0", "Other-v0"], "columns": columns}}
    page, pages = write_page(tmp_path, spec)
    assert report_module.main(["--pages", str(pages), "--runs", str(runs), "--repo", str(tmp_path)]) == 0
    lines = page.read_text().splitlines()
    assert "| env | ours.py | theirs.py |" in lines
    assert "| Env-v0 | 1.5 +- 0.5, seeds 1-2 | 10.0 +- 0.0†, seeds 1-2 |" in lines
    assert "| Other-v0 | - | - |" in lines and any(line.startswith("† ran an older version") for line in lines)


def test_every_label_has_its_own_colour_on_every_plot():
    pages = json.loads(report_module.PAGES.read_text())
    colours = report_module.label_colours(pages)
    assert set(colours) == {label for _, label in shown_rows(pages)}
    assert len(set(colours.values())) == len(colours)
    # The same mapping whatever page is drawn first.
    assert report_module.label_colours(dict(reversed(list(pages.items())))).keys() == colours.keys()


def test_report_check_compares_the_plots_too(tmp_path):
    if matplotlib.__version__ != report_module.pinned_matplotlib():
        pytest.skip(f"plots are compared under matplotlib {report_module.pinned_matplotlib()} alone")
    runs = tmp_path / "runs"
    summary_module.write_summary(fake_summary("base", 1, [100.0]), runs)
    page, pages = write_page(tmp_path, {"tables": [{"env": "Env-v0", "rows": [["base", "base"]]}]})
    argv = ["--pages", str(pages), "--runs", str(runs), "--repo", str(tmp_path)]
    assert report_module.main(argv) == 0 and report_module.main([*argv, "--check"]) == 0
    plot = page.with_suffix(".png")
    plot.write_bytes(plot.read_bytes() + b"\0")
    assert report_module.main([*argv, "--check"]) == 1
    plot.unlink()
    assert report_module.main([*argv, "--check"]) == 1


def test_the_references_take_the_zoo_settings_from_the_rl_zoo3_package():
    pytest.importorskip("rl_zoo3")
    pytest.importorskip("sb3_contrib")
    reference = importlib.import_module("benchmarks.reference")
    name, settings = reference.zoo_entry("trpo", "HalfCheetah-v5")  # the zoo names the MuJoCo ids of its time
    assert name == "HalfCheetah-v4" and settings["target_kl"] == 0.04 and settings["normalize"] is True
    assert reference.zoo_entry("trpo", "Pusher-v5")[0] == "default"  # no entry: the zoo's defaults
    assert reference.zoo_entry("ppo", "Reacher-v5")[0] == "Reacher-v2"
    kwargs = reference.algorithm_kwargs(reference.zoo_entry("ppo", "HalfCheetah-v5")[1])
    assert kwargs["policy_kwargs"]["activation_fn"] is torch.nn.ReLU and "normalize" not in kwargs
    name, settings = reference.zoo_entry("ppo", "BreakoutNoFrameskip-v4")
    assert name == "atari" and reference.algorithm_kwargs(settings)["learning_rate"](0.5) == pytest.approx(1.25e-4)
    with pytest.raises(ValueError):  # an expression that would call anything is refused, not run
        reference.zoo_value(ast.parse("__import__('os').getcwd()", mode="eval").body)
    with pytest.raises(SystemExit, match="no trpo settings"):
        reference.zoo_entry("trpo", "BreakoutNoFrameskip-v4")


def shown_rows(pages):
    """{(env_id, label)} of every row that some page of pages.json shows, ablation bases included."""
    rows = set()
    for spec in pages.values():
        rows |= {(table["env"], label) for table in spec.get("tables", []) for label, _ in table["rows"]}
        rows |= {(item["env"], item[key]) for item in spec.get("ablations", []) for key in ("base", "label")}
        rows |= {(env_id, label) for env_id, label, _ in spec.get("headline", [])}
    return rows


def test_committed_pages_are_what_the_committed_summaries_give_and_every_summary_is_shown():
    assert report_module.main(["--check"]) == 0
    committed = {(path.parent.parent.name, path.parent.name) for path in report_module.RUNS.glob("*/*/seed*.json")}
    assert committed == shown_rows(json.loads(report_module.PAGES.read_text()))


def test_every_file_linked_from_the_readme_and_docs_pages_exists():
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    checked = 0
    for page in pages:
        # Markdown links and images: [text](target) and ![alt](target); web addresses are not files.
        for target in re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", page.read_text()):
            if not re.match(r"[a-z]+://", target):
                assert (page.parent / target).exists(), f"{page.relative_to(REPO)} links to missing {target}"
                checked += 1
    assert checked >= 10  # the README's links to every docs page and LICENSE, the pages' plots


def test_gitignore_drops_raw_logs_and_checkpoints_and_keeps_run_summaries():
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    for path, ignored in [
        ("benchmarks/work/Hopper-v5/trpo_continuous/seed1/stdout.log", True),
        ("benchmarks/results/logs/Hopper-v5/trpo_continuous/seed1/runs/run/events.out.tfevents.1", True),
        ("benchmarks/results/any-root/logs/BreakoutNoFrameskip-v4/x/seed1/runs/run/checkpoint.pt", True),
        ("runs/Hopper-v5__trpo_continuous__1__1/events.out.tfevents.1", True),
        ("benchmarks/results/runs/Hopper-v5/trpo_continuous/seed1.json", False),
    ]:
        check = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=REPO, check=False)
        assert check.returncode == (0 if ignored else 1), path


def test_the_speed_benchmark_gives_our_scripts_their_default_sizes_and_only_flags_they_take():
    for script, _, sizes, _, _ in speed_mlp.CASES.values():
        module = importlib.import_module(script[: -len(".py")])
        flags = [f"--{key}={value}" for key, value in sizes.items()]
        assert module.tyro.cli(module.Args, args=flags) == module.Args(), script


def test_memory_benchmark_runs_one_update_at_each_scripts_defaults():
    for script, batch_size in memory.SCRIPTS.items():
        defaults = importlib.import_module(script[: -len(".py")]).Args()
        assert batch_size == defaults.num_envs * defaults.num_steps, script


def test_warm_started_conjugate_gradient_solves_from_a_scaled_guess_or_from_zero():
    torch = pytest.importorskip("torch")
    generator = torch.Generator().manual_seed(0)
    basis = torch.linalg.qr(torch.randn(20, 20, generator=generator, dtype=torch.float64))[0]
    matrix = basis @ torch.diag(torch.linspace(1, 30, 20, dtype=torch.float64)) @ basis.T
    b = torch.randn(20, generator=generator, dtype=torch.float64)
    solution = torch.linalg.solve(matrix, b)
    # A guess along the solution is scaled onto it, so no iteration is needed.
    assert torch.allclose(fvp_atari.warm_conjugate_gradient(lambda v: matrix @ v, b, 0, -3 * solution), solution)
    # From any other guess, CG is exact in 20 steps for a 20 x 20 system; a zero guess starts from zero.
    for guess in (-b, torch.zeros(20, dtype=torch.float64)):
        assert torch.allclose(
            fvp_atari.warm_conjugate_gradient(lambda v: matrix @ v, b, 20, guess), solution, atol=1e-4
        )
    near = fvp_atari.warm_conjugate_gradient(lambda v: matrix @ v, b, 3, solution + 0.01 * b)
    far = fvp_atari.warm_conjugate_gradient(lambda v: matrix @ v, b, 3, b)
    assert (near - solution).norm() < 0.1 * (far - solution).norm()


ATARI_TINY = ["--env-id", "BreakoutNoFrameskip-v4", "--num-envs", "2", "--num-steps", "32", "--total-timesteps", "384"]


def train_tiny_atari(folder, probe_fn=None):
    """trpo_atari.py for 6 updates of 2 x 32 steps in folder, its trpo_step replaced by
    probe_fn(training_args) if given; returns (the logged trpo/kl per update, the probe)."""
    import trpo_atari

    folder.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        training_args = trpo_atari.tyro.cli(trpo_atari.Args, args=[*ATARI_TINY, "--eval-episodes", "1"])
        probe = probe_fn(training_args) if probe_fn else None
        if probe:
            patch.setattr(trpo_atari, "trpo_step", probe)
        trpo_atari.main(training_args)
    return summary_module.read_scalars(folder)["trpo/kl"][1], probe


@pytest.fixture(scope="module")
def plain_tiny_atari_kls(tmp_path_factory):
    kls, _ = train_tiny_atari(tmp_path_factory.mktemp("atari") / "plain")
    assert len(kls) == 6
    return kls


def test_fvp_probe_measures_every_way_and_leaves_the_training_run_unchanged(tmp_path, plain_tiny_atari_kls):
    kls, probe = train_tiny_atari(
        tmp_path / "probed",
        lambda training_args: fvp_atari.Probe(3, training_args.seed, fvp_atari.trpo_atari.FVP_SUBSAMPLE),
    )
    np.testing.assert_array_equal(kls, plain_tiny_atari_kls)
    assert [record["update"] for record in probe.records] == [3, 6]
    assert len(probe.plain_update_seconds) == 2  # updates 1 and 4 neither measure nor remember
    for record in probe.records:
        assert list(record["ways"]) == [name for name, *_ in fvp_atari.WAYS]
        for way in record["ways"].values():
            assert way["seconds"] > 0 and way["full_step_kl_ratio"] > 0 and 1 <= way["trials"]
    # The default way is the script's own step on the same sample: its line search accepts the same KL.
    default = probe.records[-1]["ways"][fvp_atari.WAYS[0][0]]
    assert default["kl"] == pytest.approx(kls[5], rel=1e-5)
    rows = [
        line
        for line in fvp_atari.report(probe.records, probe.plain_update_seconds, 1).splitlines()
        if line.startswith("| ")
    ]
    assert len(rows) == 1 + len(fvp_atari.WAYS)
    assert rows[1].startswith(f"| {fvp_atari.WAYS[0][0]} | 11 |") and rows[1].endswith("(1.00x +- 0.00) | 1.00x |")


def test_step_size_for_kl_finds_the_largest_step_within_the_kl_quadratic_or_not():
    for kl_at in (lambda s: 2 * s**2, lambda s: 2 * s**2 + 50 * s**4, lambda s: 0.001 * s**2):
        step_size = directions_atari.step_size_for_kl(kl_at, curvature=4.0, target_kl=0.01)
        assert kl_at(step_size) <= 0.01 and kl_at(step_size) == pytest.approx(0.01, rel=1e-4)


def test_directions_probe_scales_every_way_to_the_kl_and_leaves_the_training_run_unchanged(
    tmp_path, plain_tiny_atari_kls
):
    kls, probe = train_tiny_atari(
        tmp_path / "probed", lambda training_args: directions_atari.Probe(3, training_args.seed, 2, 0.002)
    )
    np.testing.assert_array_equal(kls, plain_tiny_atari_kls)
    assert [record["update"] for record in probe.records] == [3, 6]
    for record in probe.records:
        assert list(record["ways"]) == [name for name, *_ in directions_atari.WAYS]
        for way in record["ways"].values():
            assert way["kl"] == pytest.approx(0.002, rel=1e-3) and way["max_state_kl"] >= way["kl"]
            assert way["improvement"] > 0 and way["held_out_kl"] > 0
    # The default's damping and a damping of 1 give different directions, so different steps.
    last = probe.records[-1]["ways"]
    assert last[directions_atari.WAYS[0][0]]["improvement"] != last[directions_atari.WAYS[1][0]]["improvement"]
    rows = [line for line in directions_atari.report(probe.records, 0.002).splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + len(directions_atari.WAYS)
    assert rows[1].startswith(f"| {directions_atari.WAYS[0][0]} |") and "+0.00e+00 (+- 0.0e+00)" in rows[1]


def test_a_row_of_one_seed_shows_its_value_and_no_spread():
    assert report_module.mean_and_spread(np.array([12.7])) == "12.7 (1 seed)"
    assert report_module.mean_and_spread(np.array([1.0, 3.0])) == "2.0 +- 1.0"


def test_prefix_compares_the_bins_a_rerun_completed_and_nothing_after():
    from benchmarks import prefix

    steps = np.arange(100, 10_001, 100)
    returns, kls = np.sin(steps / 700.0), np.full(len(steps), 0.01)
    summary = {"global_steps": 10_000, "curves": {}}
    for key, values in (("charts/episodic_return", returns), ("trpo/kl", kls), ("charts/SPS", steps * 0.0)):
        summary["curves"][key] = summary_module.binned(steps, values, end=10_000)
    # A rerun that stopped at step 3000: 60 of the 200 bins are whole; its speed is never compared.
    head = steps <= 3000
    rerun = {"charts/episodic_return": (steps[head], returns[head]), "trpo/kl": (steps[head], kls[head])}
    rerun["charts/SPS"] = (steps[head], steps[head] * 1.0)
    compared, different, reached = prefix.compare(summary, rerun)
    assert compared == ["charts/episodic_return", "trpo/kl"] and different == [] and reached == 3000
    # One step's KL changed inside the prefix: its bin differs; a change after the prefix is not seen.
    changed = kls.copy()
    changed[[4, 50]] = 0.02
    rerun["trpo/kl"] = (steps[head], changed[head])
    assert [key for key, _, _ in prefix.compare(summary, rerun)[1]] == ["trpo/kl"]
    summary["curves"]["trpo/kl"] = summary_module.binned(steps, np.where(steps > 3000, 0.5, kls), end=10_000)
    rerun["trpo/kl"] = (steps[head], kls[head])
    assert prefix.compare(summary, rerun)[1] == []
