"""Compact JSON summaries of runs: what stays in the repo from a run once its TensorBoard logs are gone.

benchmarks/run.py writes one after each run, at {out}/{env_id}/{label}/seed{n}.json. Given a work
folder of finished runs ({work}/{env}/{label}/seed{n}/ as run.py lays them out), this writes the
summaries of all of them, or of the labels named:

    python benchmarks/summary.py --work benchmarks/work --out benchmarks/results/runs
    python benchmarks/summary.py --work benchmarks/work --labels trpo_continuous sb3-contrib-trpo
"""

import argparse
import json
import math
import re
import shlex
import sys
from pathlib import Path

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
# The curves a summary keeps: returns, entropy, speed and the trust-region (TRPO) or clipping (PPO) keys.
CURVE_KEYS = (
    "charts/episodic_return",
    "eval/episodic_return",
    "losses/entropy",
    "charts/SPS",
    "trpo/kl",
    "trpo/max_kl",
    "trpo/line_search_success",
    "losses/approx_kl",
    "losses/clipfrac",
)
CURVE_POINTS = 200


def read_events(run_folder):
    """({tag: (steps, values)}, wall-clock seconds, {Args field: value as text}) from the TensorBoard
    logs of one run; the last is {} for a run that logs no hyperparameters table.

    Each log folder is read as a whole, so the events a resumed run purged are dropped, as TensorBoard
    does; of the final evaluation's games (logged at steps 0, 1, ...) only the last evaluation's are kept.
    The wall-clock is the time between the first and the last event of each log folder, summed."""
    scalars, wall_clock, args_table = {}, 0.0, {}
    for log_folder in sorted({path.parent for path in Path(run_folder).glob("runs/**/events.out.tfevents.*")}):
        accumulator = EventAccumulator(str(log_folder), size_guidance={"scalars": 0, "tensors": 0})
        accumulator.Reload()
        if "hyperparameters/text_summary" in accumulator.Tags()["tensors"]:
            text = accumulator.Tensors("hyperparameters/text_summary")[-1].tensor_proto.string_val[0].decode()
            args_table = dict(re.findall(r"^\|([^|]+)\|([^|]*)\|$", text, re.MULTILINE)[2:])
        times = []
        for tag in accumulator.Tags()["scalars"]:
            events = accumulator.Scalars(tag)
            times += [events[0].wall_time, events[-1].wall_time] if events else []
            if tag.endswith("final_episodic_return"):
                last_start = max((i for i, e in enumerate(events) if e.step == 0), default=0)
                events = events[last_start:]
            steps, values = scalars.get(tag, ([], []))
            scalars[tag] = (steps + [e.step for e in events], values + [e.value for e in events])
        wall_clock += max(times) - min(times) if times else 0.0
    scalars = {tag: (np.array(steps), np.array(values)) for tag, (steps, values) in scalars.items()}
    return scalars, wall_clock, args_table


def read_scalars(run_folder):
    """{tag: (steps, values)} from the TensorBoard logs of one run."""
    return read_events(run_folder)[0]


def binned(steps, values, end, points=CURVE_POINTS):
    """[[step, value], ...]: the means of steps and of finite values over `points` equal bins of [0, end]."""
    order = np.argsort(steps, kind="stable")
    steps, values = steps[order].astype(float), values[order].astype(float)
    bins = np.minimum((steps / max(end, 1) * points).astype(int), points - 1)
    curve = []
    for b in np.unique(bins):
        in_bin = bins == b
        finite = values[in_bin][np.isfinite(values[in_bin])]
        value = float(finite.mean()) if len(finite) else None
        curve.append([round(float(steps[in_bin].mean())), None if value is None else float(f"{value:.5g}")])
    return curve


def parse_machine(text):
    """(cpu, {package: version}) from a machine.txt line that run.py wrote."""
    line = text.strip().splitlines()[-1] if text.strip() else ""
    cpu, _, packages = line.removeprefix("cpu: ").partition("; ")
    versions = dict(word.split("==", 1) for word in packages.split() if "==" in word)
    return cpu or None, versions


def summarize_run(run_folder, label, commit=None):
    """The summary dict of one finished run folder ({...}/{env}/{label}/seed{n}/)."""
    run_folder = Path(run_folder)
    command = (run_folder / "command.txt").read_text().strip().splitlines()[-1]
    words = shlex.split(command)
    flags = dict(word[2:].split("=", 1) for word in words if word.startswith("--") and "=" in word)
    script = Path(words[0]).name + (f" --algo={flags['algo']}" if "algo" in flags else "")
    machine = run_folder / "machine.txt"
    cpu, versions = parse_machine(machine.read_text() if machine.exists() else "")
    scalars, wall_clock, args_table = read_events(run_folder)
    global_steps = int(
        max((steps.max() for tag, (steps, _) in scalars.items() if tag.startswith("charts/")), default=0)
    )
    final_eval = scalars.get("eval/final_episodic_return", (None, np.array([])))[1]
    return {
        "script": script,
        "label": label,
        "env_id": flags["env-id"],
        "seed": int(flags["seed"]),
        "args": args_table or {key: value for key, value in flags.items() if key != "algo"},
        "command": command,
        "commit": commit,
        "machine": {"cpu": cpu, "gpu": None},
        "versions": versions,
        "global_steps": global_steps,
        "wall_clock_s": round(wall_clock, 1),
        "final_eval": [float(f"{value:.6g}") for value in final_eval],
        "curves": {
            key: binned(*scalars[key], end=global_steps)
            for key in CURVE_KEYS
            if key in scalars and len(scalars[key][0])
        },
    }


def write_summary(summary, out):
    """Writes summary to {out}/{env_id}/{label}/seed{n}.json; returns the path."""
    path = Path(out) / summary["env_id"].replace("/", "-") / summary["label"] / f"seed{summary['seed']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, separators=(",", ":"), allow_nan=False) + "\n")
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", help="a folder laid out by run.py")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "runs"))
    parser.add_argument("--labels", nargs="+", help="only these labels (default: all)")
    parser.add_argument("--commit", help="the commit of the code that ran, if known")
    args = parser.parse_args()
    for folder in sorted(Path(args.work).glob("*/*/seed*")):
        label = folder.parent.name
        if args.labels and label not in args.labels or not (folder / "command.txt").exists():
            continue
        summary = summarize_run(folder, label, args.commit)
        print(f"{write_summary(summary, args.out)}: final eval {np.mean(summary['final_eval'] or [math.nan]):.2f}")


if __name__ == "__main__":
    main()
