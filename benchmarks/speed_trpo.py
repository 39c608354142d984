"""Steps per second of our TRPO scripts against sb3-contrib TRPO at equal batch, network and update sizes.

Runs ours and the reference alternately (round after round, so a noisy machine hurts both alike),
plus the raw env throughput with random actions (the ceiling), and prints a markdown table with
the median of each and the ratios ours/reference and ours/ceiling.

    pip install -r benchmarks/requirements.txt
    python benchmarks/speed_trpo.py --rounds 3
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import gymnasium as gym

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# env id -> (our script, shared settings, extra flags for the reference)
CASES = {
    "CartPole-v1": ("trpo_discrete.py", {"num-envs": 4, "num-steps": 512, "vf-epochs": 10, "vf-minibatches": 8}, []),
    "HalfCheetah-v5": (
        "trpo_continuous.py",
        {"num-envs": 4, "num-steps": 512, "vf-epochs": 20, "vf-minibatches": 16},
        ["--normalize"],
    ),
}


def run(command, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    with tempfile.TemporaryDirectory() as cwd:
        result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return result.stdout


def ours_sps(script, settings, total_timesteps, threads):
    flags = [f"--{key}={value}" for key, value in settings.items()]
    stdout = run([sys.executable, os.path.join(REPO, script), *flags, f"--total-timesteps={total_timesteps}"], threads)
    return float(re.findall(r" sps +(\d+)", stdout)[-1])


def reference_sps(env_id, settings, extra, total_timesteps, threads):
    flags = [f"--{key}={value}" for key, value in settings.items()]
    command = [sys.executable, os.path.join(REPO, "benchmarks", "sb3_trpo.py"), f"--env-id={env_id}", *flags, *extra]
    stdout = run([*command, f"--total-timesteps={total_timesteps}"], threads)
    return float(re.search(r"sps (\d+)", stdout).group(1))


def ceiling_sps(env_id, num_envs, steps=20_000):
    """Random actions through the same vector env our scripts use: what no learner can beat."""
    envs = gym.vector.SyncVectorEnv(
        [lambda: gym.make(env_id) for _ in range(num_envs)], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
    )
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)
    envs.reset(seed=0)
    envs.action_space.seed(0)
    start = time.time()
    for _ in range(steps // num_envs):
        envs.step(envs.action_space.sample())
    return steps / (time.time() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--total-timesteps", type=int, default=40_960)
    parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS for both sides")
    args = parser.parse_args()

    print("| env | ours SPS | sb3-contrib SPS | random-action SPS | ours / sb3-contrib | ours / ceiling |")
    print("|-|-|-|-|-|-|")
    for env_id in args.envs:
        script, settings, extra = CASES[env_id]
        ours, reference = [], []
        for _ in range(args.rounds):
            ours.append(ours_sps(script, settings, args.total_timesteps, args.threads))
            reference.append(reference_sps(env_id, settings, extra, args.total_timesteps, args.threads))
        ceiling = ceiling_sps(env_id, settings["num-envs"])
        ours_median, reference_median = statistics.median(ours), statistics.median(reference)
        print(
            f"| {env_id} | {ours_median:.0f} | {reference_median:.0f} | {ceiling:.0f} "
            f"| {ours_median / reference_median:.2f}x | {ours_median / ceiling:.0%} |",
            flush=True,
        )
        print(f"<!-- {env_id} rounds: ours {ours}, reference {reference} -->", flush=True)


if __name__ == "__main__":
    main()
