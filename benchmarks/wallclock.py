"""Wall-clock of whole training runs: trpo_continuous.py with its defaults against sb3-contrib TRPO
with the rl-baselines3-zoo settings (benchmarks/reference.py), each as the user would run it.

Unlike speed_mlp.py (equal sizes on both sides), each side keeps its own recipe, so the ratio is
the time to a trained policy, algorithmic choices included. Runs alternate, ours then the
reference, round after round, so a noisy machine hurts both alike. A run's time is its whole
process: start-up, training and the final 10-episode evaluation. Prints a markdown table with
every round (times and final evaluation returns), the medians and the ratio reference / ours
(2.00x: ours takes half the time).

    pip install -r benchmarks/requirements.txt
    python benchmarks/wallclock.py --rounds 2
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed_run(command, threads):
    """(seconds from start to exit, final evaluation mean return) of a training command, run in a
    scratch folder with `threads` torch threads."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    with tempfile.TemporaryDirectory() as cwd:
        start = time.perf_counter()
        result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=True)
        seconds = time.perf_counter() - start
    return seconds, float(re.search(r"^eval: mean return (-?[\d.]+)", result.stdout, re.MULTILINE).group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="HalfCheetah-v5")
    parser.add_argument("--total-timesteps", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS for both sides")
    args = parser.parse_args()

    common = [f"--env-id={args.env_id}", f"--seed={args.seed}", f"--total-timesteps={args.total_timesteps}"]
    ours_command = [sys.executable, os.path.join(REPO, "trpo_continuous.py"), *common]
    reference_command = [sys.executable, os.path.join(REPO, "benchmarks", "reference.py"), "--algo=trpo", *common]

    print(f"{args.env_id}, {args.total_timesteps} steps, seed {args.seed}, {args.threads} torch thread(s)\n")
    print("| round | trpo_continuous.py: s (eval) | sb3-contrib TRPO, rl-zoo: s (eval) | time, reference / ours |")
    print("|-|-|-|-|")
    ours, reference = [], []
    for round_index in range(1, args.rounds + 1):
        (ours_seconds, ours_eval), (reference_seconds, reference_eval) = (
            timed_run(ours_command, args.threads),
            timed_run(reference_command, args.threads),
        )
        ours.append(ours_seconds)
        reference.append(reference_seconds)
        print(
            f"| {round_index} | {ours_seconds:.0f} ({ours_eval:.1f}) | {reference_seconds:.0f} ({reference_eval:.1f}) "
            f"| {reference_seconds / ours_seconds:.2f}x |",
            flush=True,
        )
    ours_median, reference_median = statistics.median(ours), statistics.median(reference)
    print(f"| median | {ours_median:.0f} | {reference_median:.0f} | {reference_median / ours_median:.2f}x |")


if __name__ == "__main__":
    main()
