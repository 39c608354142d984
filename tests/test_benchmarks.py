"""benchmarks/run.py and benchmarks/report.py on a tiny grid they run themselves; memory.py's batches;
fvp_atari.py's warm-started CG and its probe of the training run; directions_atari.py's probe."""

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks import directions_atari, fvp_atari, memory
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


def test_summary_table_gives_each_label_its_seeds_mean_and_difference(tmp_path):
    for label, returns in {"base": [[1.0, 3.0], [4.0, 4.0]], "other": [[0.0], [1.0], [2.0]]}.items():
        for seed, final_eval in enumerate(returns, start=1):
            summary = {"env_id": "Env-v0", "label": label, "seed": seed, "final_eval": final_eval}
            summary_module.write_summary(summary, tmp_path)
    rows = summary_module.table(tmp_path, "Env-v0", 3.0, ["base", "other"]).splitlines()[-2:]
    assert rows[0] == "| base | 1,2 | 3.0 +- 1.0 | 1 | base |"
    assert rows[1].startswith("| other | 1,2,3 | 1.0 +- 0.8 | 0 | -2.0, p = ")


def test_summary_curves_are_bin_means_that_skip_non_finite_values():
    steps, values = np.arange(1000), np.where(np.arange(1000) % 2, np.nan, 1.0 * np.arange(1000))
    curve = summary_module.binned(steps, values, end=1000, points=10)
    assert len(curve) == 10
    assert curve[0] == [round(np.mean(np.arange(100))), np.mean(np.arange(0, 100, 2))]
    assert summary_module.binned(np.array([5]), np.array([np.nan]), end=10) == [[5, None]]


def test_report_table_matches_the_runs_and_writes_a_png(tiny_grid, tmp_path):
    work, _, _ = tiny_grid
    markdown = report_module.report(work, tmp_path)
    rows = [line for line in markdown.splitlines() if line.startswith("| trpo_discrete |")]
    assert len(rows) == 1
    cells = [cell.strip() for cell in rows[0].strip("|").split("|")]
    eval_mean, eval_std = (float(x) for x in cells[1].split("+-"))
    # The table's eval column is the mean over seeds of each run's printed evaluation mean.
    printed = []
    for seed in (1, 2):
        log = (work / "CartPole-v1" / "trpo_discrete" / f"seed{seed}" / "stdout.log").read_text()
        printed.append(float(re.search(r"^eval: mean return (-?[\d.]+)", log, re.MULTILINE).group(1)))
    assert eval_mean == pytest.approx(np.mean(printed), abs=0.06)
    assert eval_std == pytest.approx(np.std(printed), abs=0.06)
    assert cells[4] == "2"
    assert float(cells[3]) > 0  # steps per second
    png = tmp_path / "CartPole-v1.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    assert (tmp_path / "CartPole-v1.md").read_text().startswith("### CartPole-v1")


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


def test_report_marks_a_run_without_evaluation_with_where_its_logs_end(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(tmp_path / "work" / "PongNoFrameskip-v4" / "ppo_atari" / "seed1" / "runs" / "the_run")
    for step, game_return in [(1000, -21.0), (2500, -20.0)]:
        writer.add_scalar("charts/episodic_return", game_return, step)
    writer.add_scalar("charts/SPS", 100, 3072)
    writer.add_scalar("eval/episodic_return", -19.0, 2048)  # an evaluation during training is not the final one
    writer.close()
    markdown = report_module.report(tmp_path / "work", tmp_path / "out")
    assert "| ppo_atari | none (logs end at 3,072 steps) | -20.5 | 100 | 1 |  |" in markdown


def test_report_lists_per_seed_evaluations_in_seed_order(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    for seed, evaluation in [(10, 300.0), (2, 200.0), (1, 100.0)]:
        writer = SummaryWriter(tmp_path / "work" / "CartPole-v1" / "trpo_discrete" / f"seed{seed}" / "runs" / "run")
        writer.add_scalar("charts/episodic_return", evaluation, 1000)
        writer.add_scalar("charts/SPS", 100, 1000)
        writer.add_scalar("eval/final_episodic_return", evaluation, 0)
        writer.close()
    markdown = report_module.report(tmp_path / "work", tmp_path / "out")
    assert "| 3 | 100.0, 200.0, 300.0 |" in markdown  # seed10 after seed2, not after seed1


def test_report_names_a_row_as_labels_txt_says_and_sorts_by_that_name(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    for folder, evaluation in [("trpo_continuous", 100.0), ("trpo_continuous-logstd-1", 200.0), ("zeta", 300.0)]:
        writer = SummaryWriter(tmp_path / "work" / "Hopper-v5" / folder / "seed1" / "runs" / "run")
        writer.add_scalar("charts/episodic_return", evaluation, 1000)
        writer.add_scalar("eval/final_episodic_return", evaluation, 0)
        writer.close()
    labels = "# the defaults moved\ntrpo_continuous trpo_continuous-base\n\ntrpo_continuous-logstd-1 trpo_continuous  # now\n"
    (tmp_path / "work" / "labels.txt").write_text(labels)
    markdown = report_module.report(tmp_path / "work", tmp_path / "out")
    rows = [line.split(" | ")[:2] for line in markdown.splitlines() if line.startswith("| ") and "eval" not in line]
    assert rows == [
        ["| trpo_continuous", "200.0 +- 0.0"],
        ["| trpo_continuous-base", "100.0 +- 0.0"],
        ["| zeta", "300.0 +- 0.0"],
    ]


@pytest.mark.parametrize(
    "labels, message",
    [
        ("trpo_continuous\n", r"labels.txt:1: expected `FOLDER NAME`, got 'trpo_continuous'"),
        ("# a comment\na b c\n", r"labels.txt:2: expected `FOLDER NAME`, got 'a b c'"),
        ("a b\na c\n", r"labels.txt:2: a is already named b"),
        ("trpo_continuous zeta\n", r"two folders of Hopper-v5 are both named zeta"),
    ],
)
def test_report_refuses_labels_txt_that_is_malformed_or_merges_two_folders(tmp_path, labels, message):
    from torch.utils.tensorboard import SummaryWriter

    for folder in ["trpo_continuous", "zeta"]:
        writer = SummaryWriter(tmp_path / "work" / "Hopper-v5" / folder / "seed1" / "runs" / "run")
        writer.add_scalar("eval/final_episodic_return", 100.0, 0)
        writer.close()
    (tmp_path / "work" / "labels.txt").write_text(labels)
    with pytest.raises(SystemExit, match=message):
        report_module.report(tmp_path / "work", tmp_path / "out")


def test_report_keeps_only_the_last_final_evaluation_of_a_run_resumed_after_it_finished(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    run_folder = tmp_path / "work" / "BreakoutNoFrameskip-v4" / "trpo_atari" / "seed1" / "runs" / "run"
    first = SummaryWriter(run_folder)  # finishes at 1M steps with its final evaluation
    first.add_scalar("charts/episodic_return", 5.0, 1_000_000)
    for game, score in enumerate([4.0, 6.0, 8.0]):
        first.add_scalar("eval/final_episodic_return", score, game)
    first.close()
    resumed = SummaryWriter(run_folder, purge_step=983_041)  # resumed from a checkpoint with a larger budget
    resumed.add_scalar("charts/episodic_return", 9.0, 2_500_000)
    resumed.add_scalar("charts/SPS", 100, 2_500_000)
    for game, score in enumerate([20.0, 30.0]):
        resumed.add_scalar("eval/final_episodic_return", score, game)
    resumed.close()
    assert list(report_module.read_scalars(run_folder.parent.parent)["eval/final_episodic_return"][1]) == [20, 30]
    markdown = report_module.report(tmp_path / "work", tmp_path / "out")
    assert "| trpo_atari | 25.0 +- 0.0 | 9.0 | 100 | 1 | 25.0 |" in markdown


def test_report_plots_only_the_rows_it_is_given_and_keeps_every_row_in_the_table(tmp_path, monkeypatch):
    from torch.utils.tensorboard import SummaryWriter

    for folder in ["ours", "theirs", "variant"]:
        writer = SummaryWriter(tmp_path / "work" / "Hopper-v5" / folder / "seed1" / "runs" / "run")
        writer.add_scalar("charts/episodic_return", 100.0, 1000)
        writer.add_scalar("eval/final_episodic_return", 100.0, 0)
        writer.close()
    drawn = []
    plot = report_module.plt.plot
    monkeypatch.setattr(report_module.plt, "plot", lambda *a, **kw: drawn.append(kw["label"]) or plot(*a, **kw))
    markdown = report_module.report(tmp_path / "work", tmp_path / "all")
    assert drawn == ["ours", "theirs", "variant"]
    drawn.clear()
    plotted = {"Hopper-v5": {"ours", "theirs"}, "Walker2d-v5": {"variant"}}
    assert report_module.report(tmp_path / "work", tmp_path / "some", plotted=plotted) == markdown
    assert drawn == ["ours", "theirs"]
    with pytest.raises(SystemExit, match="--plot names ourz, which is no row of Hopper-v5"):
        report_module.report(tmp_path / "work", tmp_path / "typo", plotted={"Hopper-v5": {"ours", "ourz"}})


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


def test_paired_p_value_is_the_exact_share_of_sign_flips_and_the_report_pairs_an_average_with_its_last_iterate(
    tmp_path,
):
    import itertools

    from torch.utils.tensorboard import SummaryWriter

    differences = np.array([300.0, 250.0, 400.0, -50.0, 200.0])
    flipped = [abs((differences * signs).mean()) for signs in itertools.product([-1, 1], repeat=5)]
    exact = np.mean(np.array(flipped) >= abs(differences.mean()) - 1e-9)
    assert exact == pytest.approx(4 / 32)
    assert report_module.paired_p_value(differences) == pytest.approx(exact, abs=0.005)
    assert report_module.paired_p_value(np.array([100.0, -100.0])) == 1.0

    for seed, (average, last_iterate) in enumerate([(3000.0, 2500.0), (3200.0, 3300.0), (1000.0, 900.0)], start=1):
        writer = SummaryWriter(tmp_path / "work" / "Hopper-v5" / "averaged" / f"seed{seed}" / "runs" / "run")
        for episode in range(2):
            writer.add_scalar("eval/final_episodic_return", average, episode)
            writer.add_scalar("eval/last_iterate_final_episodic_return", last_iterate, episode)
        writer.close()
    markdown = report_module.report(tmp_path / "work", tmp_path / "out")
    p_value = report_module.paired_p_value(np.array([500.0, -100.0, 100.0]))
    assert (
        "- averaged - its own last iterate (same runs and episodes, last iterate 2233.3 +- 997.8): +166.7 eval, "
        f"paired permutation test p = {p_value:.3f} (3 seeds)"
    ) in markdown
    assert "| averaged | 2400.0 +- 993.3 |" in markdown


def test_report_compares_implementations_and_counts_seeds_over_a_threshold(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    evaluations = {"ours": [5000.0, 5200.0, 1500.0], "theirs": [1000.0, 1200.0, 1100.0]}
    for name, values in evaluations.items():
        for seed, evaluation in enumerate(values, start=1):
            writer = SummaryWriter(tmp_path / "work" / "HalfCheetah-v5" / name / f"seed{seed}" / "runs" / "run")
            writer.add_scalar("charts/episodic_return", evaluation, 1000)
            writer.add_scalar("eval/final_episodic_return", evaluation, 0)
            writer.close()
    markdown = report_module.report(tmp_path / "work", tmp_path / "out", {"HalfCheetah-v5": 4000})
    assert "- ours: 2 of 3 seeds reach eval >= 4000" in markdown
    assert "- theirs: 0 of 3 seeds reach eval >= 4000" in markdown
    # The best 3 of 6 values form "ours" in 1 of the 20 splits (and in its mirror): p = 2/20.
    p_value = report_module.permutation_p_value(np.array(evaluations["ours"]), np.array(evaluations["theirs"]))
    assert p_value == pytest.approx(0.1, abs=0.005)
    assert f"- ours - theirs: +2800.0 eval, permutation test p = {p_value:.3f} (3 and 3 seeds)" in markdown


def test_every_file_linked_from_the_readme_results_and_docs_pages_exists():
    pages = [REPO / "README.md", REPO / "benchmarks" / "RESULTS.md"]
    pages += sorted((REPO / "benchmarks" / "results").glob("*.md")) + sorted((REPO / "docs").glob("*.md"))
    checked = 0
    for page in pages:
        # Markdown links and images: [text](target) and ![alt](target); web addresses are not files.
        for target in re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", page.read_text()):
            if not re.match(r"[a-z]+://", target):
                assert (page.parent / target).exists(), f"{page.relative_to(REPO)} links to missing {target}"
                checked += 1
    assert checked >= 5  # the README's links to RESULTS.md, LICENSE and the plots, at least


def test_every_committed_run_folder_holds_its_tensorboard_logs():
    # A clean clone (as CI makes) holds only what git tracks: a run folder without event files is a
    # run whose page report.py cannot rebuild.
    run_folders = sorted(path.parent for path in (REPO / "benchmarks" / "results").glob("**/command.txt"))
    assert len(run_folders) > 100
    without_logs = [str(f.relative_to(REPO)) for f in run_folders if not any(f.glob("runs/**/events.out.tfevents.*"))]
    assert without_logs == []


def test_gitignore_keeps_the_event_files_of_any_logs_root_and_drops_checkpoints():
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    run = "benchmarks/results/{}/BreakoutNoFrameskip-v4/trpo_atari/seed1/runs/run_name/{}"
    for root in ["logs", "atari-learning/logs", "any-new-root/logs"]:
        for name, ignored in [("events.out.tfevents.1", False), ("checkpoint.pt", True), ("trpo_atari.model", True)]:
            path = run.format(root, name)
            check = subprocess.run(["git", "check-ignore", "-q", path], cwd=REPO, check=False)
            assert check.returncode == (0 if ignored else 1), path


def test_report_window_table_averages_each_window_per_seed_then_over_seeds(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    # Seed 1 has two games in the first window; seed 2 none in the second, which averages seed 1 only.
    # Two envs under a labels.txt: the second env's rows are still named by it.
    games = {1: [(100, 1.0), (900, 3.0), (1500, 10.0)], 2: [(500, 6.0), (2500, 7.0)]}
    for env_id in ["BreakoutNoFrameskip-v4", "PongNoFrameskip-v4"]:
        for seed, seed_games in games.items():
            writer = SummaryWriter(tmp_path / "work" / env_id / "trpo_atari" / f"seed{seed}" / "runs" / "r")
            for step, game_return in seed_games:
                writer.add_scalar("charts/episodic_return", game_return, step)
            writer.add_scalar("losses/entropy", 1.5 + seed, 1000)  # a step on a window's edge starts the next window
            writer.close()
    (tmp_path / "work" / "labels.txt").write_text("trpo_atari trpo_atari-defaults\n")
    markdown = report_module.report(tmp_path / "work", tmp_path / "out", window=1000)
    assert markdown.count("| implementation, per window of env steps | 0-1k | 1k-2k | 2k-3k |") == 2
    assert markdown.count("| trpo_atari-defaults score | 4.00 | 10.00 | 7.00 |") == 2  # (2 + 6) / 2, then 10, then 7
    assert markdown.count("| trpo_atari-defaults entropy |  | 3.00 |  |") == 2
    assert "per window" not in report_module.report(tmp_path / "work", tmp_path / "out2")


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
    return report_module.read_scalars(folder)["trpo/kl"][1], probe


@pytest.fixture(scope="module")
def plain_tiny_atari_kls(tmp_path_factory):
    kls, _ = train_tiny_atari(tmp_path_factory.mktemp("atari") / "plain")
    assert len(kls) == 6
    return kls


def test_fvp_probe_measures_every_way_and_leaves_the_training_run_unchanged(tmp_path, plain_tiny_atari_kls):
    kls, probe = train_tiny_atari(
        tmp_path / "probed", lambda training_args: fvp_atari.Probe(3, training_args.seed, training_args.fvp_subsample)
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
