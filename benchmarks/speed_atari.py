"""Steps per second on Atari: ppo_atari.py with each back end against stable-baselines3 PPO
(the same Nature CNN, 8 envs x 128 steps, 4 epochs of 4 minibatches), and trpo_atari.py at its
defaults with the same back end and env count, each of ours in float32 and with --bf16. The runs
alternate, round after round, and the table shows medians and ratios, and the raw env throughput
of each back end with random actions (what the env side alone allows).

    pip install -r benchmarks/requirements.txt
    python benchmarks/speed_atari.py --rounds 2
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sps(command, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    with tempfile.TemporaryDirectory() as cwd:
        stdout = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout
    return float(re.findall(r"sps +(\d+)", stdout)[-1])


def random_action_sps(env_id, backend, seconds=15.0):
    sys.path.insert(0, REPO)
    import ppo_atari

    envs = ppo_atari.make_envs(ppo_atari.Args(env_id=env_id, backend=backend), run_name="speed")
    envs.reset(seed=0)
    rng = np.random.default_rng(0)
    steps, start = 0, time.time()
    while time.time() - start < seconds:
        envs.step(rng.integers(envs.single_action_space.n, size=envs.num_envs))
        steps += envs.num_envs
    envs.close()
    return steps / (time.time() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="BreakoutNoFrameskip-v4")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--total-timesteps", type=int, default=8192)
    parser.add_argument("--threads", type=int, default=2, help="OMP_NUM_THREADS for every run")
    args = parser.parse_args()

    runs = [
        ("ppo_atari.py", ["--backend=ale"]),
        ("ppo_atari.py", ["--backend=ale", "--bf16"]),
        ("ppo_atari.py", ["--backend=gymnasium"]),
        ("ppo_atari.py", ["--backend=gymnasium", "--bf16"]),
        ("trpo_atari.py", ["--backend=ale"]),
        ("trpo_atari.py", ["--backend=ale", "--bf16"]),
    ]
    commands = {
        f"{script} {' '.join(flags)}": [
            sys.executable,
            os.path.join(REPO, script),
            f"--env-id={args.env_id}",
            "--eval-episodes=1",
            # trpo_atari.py: two updates at its default batch of 8 x 1024
            f"--total-timesteps={args.total_timesteps if script == 'ppo_atari.py' else 2 * 8 * 1024}",
            *flags,
        ]
        for script, flags in runs
    }
    commands["stable-baselines3 PPO"] = [
        sys.executable,
        os.path.join(REPO, "benchmarks", "reference.py"),
        "--algo=ppo",  # rl-zoo's Atari PPO settings, which are ppo_atari.py's defaults
        f"--env-id={args.env_id}",
        "--eval-episodes=1",
        f"--total-timesteps={args.total_timesteps}",
    ]
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
    ceilings = {backend: random_action_sps(args.env_id, backend) for backend in ("ale", "gymnasium")}
    print(f"\nrandom actions, 8 envs: ale {ceilings['ale']:.0f} SPS, gymnasium {ceilings['gymnasium']:.0f} SPS")
    for precision in ("", " --bf16"):
        ppo_ale = medians[f"ppo_atari.py --backend=ale{precision}"]
        ppo_gymnasium = medians[f"ppo_atari.py --backend=gymnasium{precision}"]
        trpo_ale = medians[f"trpo_atari.py --backend=ale{precision}"]
        print(f"\nppo_atari.py{precision}, ale / gymnasium back end: {ppo_ale / ppo_gymnasium:.2f}x")
        print(f"trpo_atari.py / ppo_atari.py (ale{precision}): {trpo_ale / ppo_ale:.2f}x")


if __name__ == "__main__":
    main()
