"""Whether today's script reproduces the start of a committed run: rerun the run's command for a prefix
of its steps and compare the curves, bin by bin, with its summary's.

    python benchmarks/prefix.py benchmarks/results/runs/BreakoutNoFrameskip-v4/trpo_atari-defaults/seed1.json --steps 30720

The command is the summary's (its flags, without --resume and --checkpoint-every) on today's script, run in
a temporary folder and stopped with Ctrl-C once its progress line passes --steps. Every bin of every curve
that both have (but charts/SPS and the evaluations) and that lies wholly within the rerun's steps is
compared. If all are the same, the summary records {"prefix_rerun": {"commit", "steps", "curves"}} and
report.py prints its row's command as today's; otherwise the bins that differ are printed and nothing is
written. For runs whose command cannot tell today's script what they ran (an older script's defaults), a
difference is the expected answer. A reference run (benchmarks/reference.py, which prints no progress) is
rerun with --total-timesteps --steps instead: its start is the full run's start only where no zoo setting is
a schedule over the run ("lin_..."), so such runs are refused.
"""

import argparse
import json
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from benchmarks.report import NOT_RECIPE, flag_pairs, join_flags, split_command
from benchmarks.run import code_commit
from benchmarks.summary import CURVE_POINTS, binned, read_scalars

# Curves that depend on the machine or on evaluations the prefix does not reach.
NOT_COMPARED = ("charts/SPS", "eval/episodic_return")
STEP = re.compile(r"\bstep +(\d+)")


def rerun(summary, steps, folder):
    """Run the summary's command on today's script in folder until its progress passes `steps`."""
    script, _, words = split_command(summary["command"])
    pairs = [pair for pair in flag_pairs(summary["command"]) if pair[0] not in NOT_RECIPE]
    command = [sys.executable, str(REPO / script)]
    if script == "reference.py":
        from benchmarks.reference import zoo_entry  # sb3, sb3-contrib and rl_zoo3, for reference runs only

        algo = next(word.removeprefix("--algo=") for word in words if word.startswith("--algo="))
        if any(str(value).startswith("lin_") for value in zoo_entry(algo, summary["env_id"])[1].values()):
            sys.exit(f"prefix.py: the zoo's {algo} settings for {summary['env_id']} hold a schedule over the run")
        command = [sys.executable, str(REPO / "benchmarks" / script), f"--algo={algo}", "--total-timesteps", str(steps)]
        pairs = [pair for pair in pairs if pair[0] != "--total-timesteps"]
    command += [f"--env-id={summary['env_id']}", f"--seed={summary['seed']}"]
    flags = join_flags(pairs)
    log_path = Path(folder) / "stdout.log"
    with log_path.open("w") as log:
        # Ctrl-C's default action restored: a shell starting this in the background would have it ignored
        # (this process starts no threads, which is what makes preexec_fn unsafe).
        process = subprocess.Popen(
            command + flags.split(),
            cwd=folder,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
        )
        while process.poll() is None:
            reached = [int(step) for step in STEP.findall(log_path.read_text())]
            if reached and reached[-1] >= steps:
                process.send_signal(signal.SIGINT)
                process.wait()
            time.sleep(1)
    return read_scalars(folder)


def compare(summary, scalars):
    """(curves compared, [(curve, committed bin, rerun bin)] that differ, the steps the rerun reached)."""
    reached = max(int(steps.max()) for key, (steps, _) in scalars.items() if key.startswith("charts/"))
    bin_width = summary["global_steps"] / CURVE_POINTS
    compared, different = [], []
    for key, committed in summary["curves"].items():
        if key in NOT_COMPARED or key not in scalars:
            continue
        rerun_bins = binned(*scalars[key], end=summary["global_steps"])
        whole = [point for point in rerun_bins if (point[0] // bin_width + 1) * bin_width <= reached]
        compared.append(key)
        different += [(key, a, b) for a, b in zip(committed, whole) if a != b]
    return compared, different, reached


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("summary", type=Path, help="a committed summary (benchmarks/results/runs/...json)")
    parser.add_argument("--steps", type=int, required=True, help="how far to rerun")
    args = parser.parse_args()
    summary = json.loads(args.summary.read_text())
    with tempfile.TemporaryDirectory() as folder:
        compared, different, reached = compare(summary, rerun(summary, args.steps, folder))
    if different or not compared:
        for key, committed, rerun_bin in different[:10]:
            print(f"{key}: committed {committed}, rerun {rerun_bin}")
        sys.exit(f"prefix.py: {args.summary}: the rerun differs ({len(different)} bins) or logged no curve")
    script = split_command(summary["command"])[0]
    impl = "sb3:" if script == "reference.py" else script  # what code_commit takes
    summary["prefix_rerun"] = {"commit": code_commit(impl), "steps": reached, "curves": compared}
    args.summary.write_text(json.dumps(summary, separators=(",", ":"), allow_nan=False) + "\n")
    print(f"{args.summary}: the same {', '.join(compared)} over the first {reached} steps")


if __name__ == "__main__":
    main()
