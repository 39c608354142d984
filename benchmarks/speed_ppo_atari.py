"""Steps per second of ppo_atari.py with each back end, against stable-baselines3 PPO.

All three train the same Nature CNN on the same env with 8 envs x 128 steps, 4 epochs of 4
minibatches; they run alternately, round after round, and the table shows medians and ratios.

    pip install -r benchmarks/requirements.txt
    python benchmarks/speed_ppo_atari.py --rounds 3
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sps(command, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    with tempfile.TemporaryDirectory() as cwd:
        stdout = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout
    return float(re.findall(r"sps +(\d+)", stdout)[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="BreakoutNoFrameskip-v4")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--total-timesteps", type=int, default=8192)
    parser.add_argument("--threads", type=int, default=2, help="OMP_NUM_THREADS for every run")
    args = parser.parse_args()

    ours = [sys.executable, os.path.join(REPO, "ppo_atari.py"), f"--env-id={args.env_id}", "--eval-episodes=1"]
    commands = {
        "ppo_atari.py --backend ale": [*ours, "--backend=ale", f"--total-timesteps={args.total_timesteps}"],
        "ppo_atari.py --backend gymnasium": [*ours, "--backend=gymnasium", f"--total-timesteps={args.total_timesteps}"],
        "stable-baselines3 PPO": [
            sys.executable,
            os.path.join(REPO, "benchmarks", "sb3_ppo_atari.py"),
            f"--env-id={args.env_id}",
            f"--total-timesteps={args.total_timesteps}",
        ],
    }
    results = {name: [] for name in commands}
    for _ in range(args.rounds):
        for name, command in commands.items():
            results[name].append(sps(command, args.threads))
    medians = {name: statistics.median(values) for name, values in results.items()}
    reference = medians["stable-baselines3 PPO"]
    print(f"{args.env_id}, {args.total_timesteps} agent steps per run, {args.threads} threads, {args.rounds} rounds\n")
    print("| implementation | SPS (median) | rounds | vs stable-baselines3 |")
    print("|-|-|-|-|")
    for name, median in medians.items():
        print(f"| {name} | {median:.0f} | {results[name]} | {median / reference:.2f}x |")
    print(
        f"\nale / gymnasium back end: {medians['ppo_atari.py --backend ale'] / medians['ppo_atari.py --backend gymnasium']:.2f}x"
    )


if __name__ == "__main__":
    main()
