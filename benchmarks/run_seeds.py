"""Train one of our scripts on one env over several seeds and report the deterministic evaluations.

Each run's stdout goes to benchmarks/work/{env}__{script}__{seed}.log with the command on its
first line; a run whose log already ends in an evaluation is skipped, so an interrupted grid
resumes. Jobs run in parallel with one torch thread each (two torch processes with default
threads oversubscribe a 2-core machine).

    python benchmarks/run_seeds.py trpo_discrete.py CartPole-v1 --seeds 1 2 3
    python benchmarks/run_seeds.py trpo_continuous.py HalfCheetah-v5 --seeds 1 2 3 -- --total-timesteps 1000000
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.path.join(REPO, "benchmarks", "work")
EVAL_LINE = re.compile(r"^eval: mean return (-?[\d.]+)", re.MULTILINE)


def run_one(script, env_id, seed, extra):
    log_path = os.path.join(WORK, f"{env_id}__{script[:-3]}__{seed}.log")
    if os.path.exists(log_path) and EVAL_LINE.search(Path(log_path).read_text()):
        return log_path
    command = [sys.executable, os.path.join(REPO, script), f"--env-id={env_id}", f"--seed={seed}", *extra]
    with open(log_path, "w") as log:
        log.write("$ " + " ".join(command[1:]) + "\n")
        log.flush()
        env = dict(os.environ, OMP_NUM_THREADS="1")
        subprocess.run(command, cwd=WORK, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
    return log_path


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("script")
    parser.add_argument("env_id")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("extra", nargs="*", help="flags passed to the script, after --")
    args = parser.parse_args()
    os.makedirs(WORK, exist_ok=True)

    with ThreadPoolExecutor(args.jobs) as pool:
        logs = list(pool.map(lambda seed: run_one(args.script, args.env_id, seed, args.extra), args.seeds))
    evals, speeds = [], []
    for seed, log_path in zip(args.seeds, logs):
        text = Path(log_path).read_text()
        match = EVAL_LINE.search(text)
        evals.append(float(match.group(1)) if match else float("nan"))
        speeds.append(float(re.findall(r" sps +(\d+)", text)[-1]))
        print(f"seed {seed}: eval {evals[-1]:.1f}, {speeds[-1]:.0f} steps/s ({log_path})")
    spread = statistics.stdev(evals) if len(evals) > 1 else 0.0
    print(f"| {args.env_id} | {args.script} | {statistics.mean(evals):.1f} +- {spread:.1f} | {evals} |")


if __name__ == "__main__":
    main()
