"""Tables and learning curves from the TensorBoard logs that benchmarks/run.py leaves behind.

For every env under the work folder: a markdown table (one row per implementation: final
deterministic eval mean +- std over seeds, mean of the last 10 training episodes, steps per
second, seeds), under it each pair of implementations with a permutation test of their eval
means (and, for runs that also evaluated their last iterate, the two evaluations seed by seed with
a paired test), and a PNG of episodic return against env steps (mean over seeds, shaded band of +- one
std), written to the output folder; the tables are also printed.

    python benchmarks/report.py --work benchmarks/work --out benchmarks/results
    python benchmarks/report.py --work benchmarks/results/logs --thresholds HalfCheetah-v5=4000
    python benchmarks/report.py --work benchmarks/results/atari-learning/logs --window 100000

With --plot ENV=NAME,NAME,... the PNG of ENV draws only those rows' curves, for envs with more rows
than one axes can show apart; the tables keep every row.

With --window N each page also gets, per implementation, the mean training-episode return and the
mean policy entropy (losses/entropy) in each window [k N, (k + 1) N) of env steps, mean over seeds.

A row is named after its folder, unless labels.txt in the work folder names it: one `FOLDER NAME`
per line, for that folder under every env. The name a row has can then follow what its runs are
(the defaults, or a variant of them) while the folders, and the event files in them, stay put.
"""

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from benchmarks.summary import read_events


def read_scalars(run_folder):
    """{tag: (steps, values)} from the TensorBoard logs of one run (summary.read_events)."""
    return read_events(run_folder)[0]


def read_labels(work):
    """{folder name: row name} from work/labels.txt (`FOLDER NAME` per line, # starts a comment), if any."""
    path = work / "labels.txt"
    if not path.exists():
        return {}
    labels = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        words = line.partition("#")[0].split()
        if not words:
            continue
        if len(words) != 2:
            raise SystemExit(f"report.py: error: {path}:{number}: expected `FOLDER NAME`, got {line.strip()!r}")
        if words[0] in labels:
            raise SystemExit(f"report.py: error: {path}:{number}: {words[0]} is already named {labels[words[0]]}")
        labels[words[0]] = words[1]
    return labels


def summarize(seed_runs):
    """One table row's numbers from the runs of one implementation on one env."""
    # The final evaluation only: eval/episodic_return also holds the evaluations made during training.
    evals = [runs["eval/final_episodic_return"][1].mean() for runs in seed_runs if "eval/final_episodic_return" in runs]
    last_train = [
        runs["charts/episodic_return"][1][-10:].mean() for runs in seed_runs if "charts/episodic_return" in runs
    ]
    sps = [runs["charts/SPS"][1][-1] for runs in seed_runs if "charts/SPS" in runs]
    # A run that evaluates an average of its policy iterates also evaluates its last iterate.
    last_iterate_pairs = [
        (runs["eval/final_episodic_return"][1].mean(), runs["eval/last_iterate_final_episodic_return"][1].mean())
        for runs in seed_runs
        if "eval/final_episodic_return" in runs and "eval/last_iterate_final_episodic_return" in runs
    ]
    return {
        "eval_mean": np.mean(evals) if evals else float("nan"),
        "eval_std": np.std(evals) if evals else float("nan"),
        "last10": np.mean(last_train) if last_train else float("nan"),
        "sps": np.mean(sps) if sps else float("nan"),
        "seeds": len(seed_runs),
        "per_seed_eval": evals,
        "last_iterate_pairs": last_iterate_pairs,
        "last_step": max(steps.max() for runs in seed_runs for steps, _ in runs.values()),
    }


def curve(seed_runs, num_points=100):
    """Episodic return on a common grid of env steps: per seed, a 10-episode running mean
    interpolated onto the grid; returns (grid, mean, std) over seeds."""
    series = [runs["charts/episodic_return"] for runs in seed_runs if "charts/episodic_return" in runs]
    end = min(steps.max() for steps, _ in series)
    grid = np.linspace(0, end, num_points)
    smoothed = []
    for steps, values in series:
        order = np.argsort(steps, kind="stable")
        steps, values = steps[order], values[order]
        running = np.convolve(values, np.ones(10), "full")[: len(values)] / np.minimum(
            np.arange(1, len(values) + 1), 10
        )
        smoothed.append(np.interp(grid, steps, running))
    smoothed = np.array(smoothed)
    return grid, smoothed.mean(0), smoothed.std(0)


def step_label(steps):
    """100000 -> 100k, 1000000 -> 1M."""
    if steps >= 1_000_000 and steps % 1_000_000 == 0:
        return f"{steps // 1_000_000}M"
    return f"{steps / 1000:g}k" if steps >= 1000 else str(steps)


def window_rows(name, seed_runs, window, end):
    """Markdown rows of the mean of each tag ("score": charts/episodic_return, "entropy":
    losses/entropy) in each window [start, start + window) of env steps up to end, mean over seeds."""
    rows = []
    for label, tag in (("score", "charts/episodic_return"), ("entropy", "losses/entropy")):
        series = [runs[tag] for runs in seed_runs if tag in runs]
        if not series:
            continue
        cells = []
        for start in range(0, end, window):
            chunks = [values[(steps >= start) & (steps < start + window)] for steps, values in series]
            means = [chunk.mean() for chunk in chunks if len(chunk)]
            cells.append(f"{np.mean(means):.2f}" if means else "")
        rows.append(f"| {name} {label} | " + " | ".join(cells) + " |")
    return rows


def permutation_p_value(a, b, permutations=100_000, seed=0):
    """Two-sided p-value for the difference of the means of samples a and b: the share of random
    relabellings of the pooled values whose difference of means is at least the observed one.

    It assumes no shape of distribution, which matters for per-seed results that split into a
    good and a poor mode. The relabellings are seeded and drawn over the sorted pooled values, so the
    p-value depends only on the two samples: not on their order, nor on the names of their rows."""
    pooled = np.sort(np.concatenate([a, b]))
    observed = abs(np.mean(a) - np.mean(b))
    shuffled = pooled[np.argsort(np.random.default_rng(seed).random((permutations, len(pooled))), axis=1)]
    smaller = min(len(a), len(b))
    differences = np.abs(shuffled[:, :smaller].mean(1) - shuffled[:, smaller:].mean(1))
    return (np.sum(differences >= observed * (1 - 1e-9)) + 1) / (permutations + 1)


def paired_p_value(differences, permutations=100_000, seed=0):
    """Two-sided p-value for a mean of paired differences (two evaluations of each seed's run): the
    share of random sign flips of the differences whose mean is at least as far from 0 as the observed one."""
    differences = np.asarray(differences)
    signs = np.random.default_rng(seed).choice([-1.0, 1.0], size=(permutations, len(differences)))
    flipped = np.abs((signs * differences).mean(1))
    return (np.sum(flipped >= abs(differences.mean()) * (1 - 1e-9)) + 1) / (permutations + 1)


def last_iterate_line(name, pairs):
    """The bullet comparing an implementation's evaluated policy (an average of iterates) with its
    last iterate, seed by seed."""
    evals, last_iterates = np.array(pairs).T
    return (
        f"- {name} - its own last iterate (same runs and episodes, last iterate {last_iterates.mean():.1f} +- "
        f"{last_iterates.std():.1f}): {(evals - last_iterates).mean():+.1f} eval, paired permutation test p = "
        f"{paired_p_value(evals - last_iterates):.3f} ({len(pairs)} seeds)"
    )


def comparison_lines(per_seed_evals, threshold=None):
    """Markdown bullets under an env's table: each pair of implementations (with 2+ evaluated seeds
    each) with the difference of their eval means and its permutation p-value, and, given a
    threshold, how many seeds of each reach it."""
    lines = []
    if threshold is not None:
        lines += [
            f"- {name}: {sum(value >= threshold for value in evals)} of {len(evals)} seeds reach eval >= {threshold:g}"
            for name, evals in per_seed_evals.items()
        ]
    names = [name for name, evals in per_seed_evals.items() if len(evals) >= 2]
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            a, b = np.array(per_seed_evals[first]), np.array(per_seed_evals[second])
            lines.append(
                f"- {first} - {second}: {a.mean() - b.mean():+.1f} eval, permutation test p = "
                f"{permutation_p_value(a, b):.3f} ({len(a)} and {len(b)} seeds)"
            )
    return lines


def report(work, out, thresholds=None, window=None, plotted=None):
    """Write {env}.md and {env}.png for every env under work; return the markdown of all tables.

    thresholds maps an env id to the eval return whose reach is counted per implementation; with a
    window (env steps), each page also gets the table of window_rows; plotted maps an env id to the
    row names whose curves its PNG draws (all of them for an env it does not name)."""
    out.mkdir(parents=True, exist_ok=True)
    thresholds = thresholds or {}
    plotted = plotted or {}
    labels = read_labels(work)
    tables = []
    for env_folder in sorted(p for p in work.iterdir() if p.is_dir()):
        named_folders = sorted((labels.get(p.name, p.name), p) for p in env_folder.iterdir() if p.is_dir())
        # Two folders under one row would mix their seeds; the later one's would replace the other's
        # in the comparisons.
        names = [name for name, _ in named_folders]
        shared = sorted({name for name in names if names.count(name) > 1})
        if shared:
            raise SystemExit(f"report.py: error: two folders of {env_folder.name} are both named {shared[0]}")
        unknown = sorted(set(plotted.get(env_folder.name, names)) - set(names))
        if unknown:
            raise SystemExit(f"report.py: error: --plot names {unknown[0]}, which is no row of {env_folder.name}")
        curve_names = [name for name in names if name in plotted.get(env_folder.name, names)]
        # The legend sits beside the axes, one line per curve: the figure grows with their number.
        figure = plt.figure(figsize=(11, max(4.0, 0.25 * len(curve_names) + 1)))
        rows, per_seed_evals, last_iterate_lines = [], {}, []
        windows, window_end = [], 0
        # Twenty distinct colours, the ten dark ones first, solid and then dashed, so that up to forty
        # folders of one env never share a line style.
        colours = plt.cm.tab20.colors[::2] + plt.cm.tab20.colors[1::2]
        plt.gca().set_prop_cycle(plt.cycler(linestyle=["-", "--"]) * plt.cycler(color=colours))
        for name, impl_folder in named_folders:
            seeds = sorted(impl_folder.glob("seed*"), key=lambda folder: int(folder.name[len("seed") :]))
            seed_runs = [read_scalars(seed) for seed in seeds]
            seed_runs = [runs for runs in seed_runs if runs]
            if not seed_runs:
                continue
            s = summarize(seed_runs)
            if s["per_seed_eval"]:
                per_seed_evals[name] = s["per_seed_eval"]
            if len(s["last_iterate_pairs"]) >= 2:
                last_iterate_lines.append(last_iterate_line(name, s["last_iterate_pairs"]))
            per_seed = ", ".join(f"{value:.1f}" for value in s["per_seed_eval"])
            # A run stopped before its end (or still going) has no final evaluation, only training episodes.
            evaluation = (
                f"{s['eval_mean']:.1f} +- {s['eval_std']:.1f}"
                if s["per_seed_eval"]
                else f"none (logs end at {s['last_step']:,} steps)"
            )
            rows.append(f"| {name} | {evaluation} | {s['last10']:.1f} | {s['sps']:.0f} | {s['seeds']} | {per_seed} |")
            if window:
                windows.append((name, seed_runs))
                window_end = max(window_end, s["last_step"])
            if name in curve_names and any("charts/episodic_return" in runs for runs in seed_runs):
                grid, mean, std = curve(seed_runs)
                (line,) = plt.plot(grid, mean, label=name)
                plt.fill_between(grid, mean - std, mean + std, color=line.get_color(), alpha=0.2)
        plt.title(
            env_folder.name
            if len(curve_names) == len(names)
            else f"{env_folder.name}: {len(curve_names)} rows of the table"
        )
        plt.xlabel("env steps")
        plt.ylabel("episodic return")
        plt.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
        plt.tight_layout()
        figure.savefig(out / f"{env_folder.name}.png", dpi=100)
        plt.close(figure)
        comparisons = comparison_lines(per_seed_evals, thresholds.get(env_folder.name)) + last_iterate_lines
        window_table = []
        if windows:
            # Windows up to the last logged step, rounded up to a whole window.
            end = -(-window_end // window) * window
            window_names = [f"{step_label(start)}-{step_label(start + window)}" for start in range(0, end, window)]
            window_table = [
                "| implementation, per window of env steps | " + " | ".join(window_names) + " |",
                "|-|" + "-|" * len(window_names),
                *[row for name, seed_runs in windows for row in window_rows(name, seed_runs, window, end)],
                "",
            ]
        table = "\n".join(
            [
                f"### {env_folder.name}",
                "",
                "| implementation | eval mean +- std over seeds | last 10 training episodes | steps/s | seeds | eval per seed |",
                "|-|-|-|-|-|-|",
                *rows,
                "",
                *([*comparisons, ""] if comparisons else []),
                *window_table,
                f"![{env_folder.name}]({env_folder.name}.png)",
                "",
            ]
        )
        (out / f"{env_folder.name}.md").write_text(table)
        tables.append(table)
    return "\n".join(tables)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=REPO / "benchmarks" / "work")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    parser.add_argument(
        "--thresholds",
        nargs="*",
        default=[],
        metavar="ENV=RETURN",
        help="count the seeds whose eval reaches RETURN on ENV, e.g. HalfCheetah-v5=4000",
    )
    parser.add_argument(
        "--plot",
        nargs="*",
        default=[],
        metavar="ENV=NAME,NAME",
        help="draw only these rows' curves in ENV's plot (its table keeps every row)",
    )
    parser.add_argument(
        "--window",
        type=int,
        metavar="STEPS",
        help="add a table of mean training return and entropy per window of STEPS env steps",
    )
    args = parser.parse_args()
    thresholds = {}
    for item in args.thresholds:
        env_id, _, value = item.partition("=")
        thresholds[env_id] = float(value)
    plotted = {}
    for item in args.plot:
        env_id, _, names = item.partition("=")
        plotted[env_id] = set(names.split(","))
    print(report(args.work, args.out, thresholds, args.window, plotted))


if __name__ == "__main__":
    main()
