"""Steps per second of our MLP scripts against the reference library at equal batch, network and
update sizes: trpo_discrete.py and trpo_continuous.py against sb3-contrib TRPO, ppo_continuous.py
against stable-baselines3 PPO (benchmarks/sb3_equal.py holds the reference side).

Runs ours, the reference and the raw env throughput with random actions through the same vector
env (the ceiling) in turn, round after round, so a noisy machine hurts all three alike, and
prints a markdown table with the median of each and the ratios ours/reference and ours/ceiling.

    pip install -r benchmarks/requirements.txt
    python benchmarks/speed_mlp.py --rounds 3
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

TRPO_SIZES = {"num-envs": 4, "num-steps": 512, "vf-epochs": 10, "vf-minibatches": 8}
# case name -> (our script, env id, flags both sides get, reference algorithm, flags only the reference gets)
CASES = {
    "trpo CartPole-v1": ("trpo_discrete.py", "CartPole-v1", TRPO_SIZES, "trpo", []),
    "trpo HalfCheetah-v5": (
        "trpo_continuous.py",
        "HalfCheetah-v5",
        {**TRPO_SIZES, "vf-minibatches": 4},
        "trpo",
        ["--normalize", "--critic-width=256"],  # trpo_continuous.py's critic is 256 wide
    ),
    "ppo HalfCheetah-v5": (
        "ppo_continuous.py",
        "HalfCheetah-v5",
        {"num-envs": 4, "num-steps": 512, "update-epochs": 10, "num-minibatches": 32},
        "ppo",
        ["--normalize"],
    ),
}


def run(command, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    with tempfile.TemporaryDirectory() as cwd:
        result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return result.stdout


def ours_sps(script, env_id, flags, total_timesteps, threads):
    command = [sys.executable, os.path.join(REPO, script), f"--env-id={env_id}", *flags]
    stdout = run([*command, f"--total-timesteps={total_timesteps}", "--eval-episodes=1"], threads)
    return float(re.findall(r" sps +(\d+)", stdout)[-1])


def reference_sps(algo, env_id, flags, total_timesteps, threads):
    command = [sys.executable, os.path.join(REPO, "benchmarks", "sb3_equal.py"), f"--algo={algo}", f"--env-id={env_id}"]
    stdout = run([*command, *flags, f"--total-timesteps={total_timesteps}"], threads)
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
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--total-timesteps", type=int, default=40_960)
    parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS for both sides")
    args = parser.parse_args()

    print(
        "| script | env | ours SPS | reference | reference SPS | random-action SPS | ours / reference | ours / ceiling |"
    )
    print("|-|-|-|-|-|-|-|-|")
    for case in args.cases:
        script, env_id, sizes, algo, reference_only = CASES[case]
        flags = [f"--{key}={value}" for key, value in sizes.items()]
        ours, reference, ceiling = [], [], []
        for _ in range(args.rounds):
            ours.append(ours_sps(script, env_id, flags, args.total_timesteps, args.threads))
            reference.append(reference_sps(algo, env_id, flags + reference_only, args.total_timesteps, args.threads))
            ceiling.append(round(ceiling_sps(env_id, sizes["num-envs"])))
        ours_median, reference_median = statistics.median(ours), statistics.median(reference)
        ceiling_median = statistics.median(ceiling)
        reference_name = "sb3-contrib TRPO" if algo == "trpo" else "stable-baselines3 PPO"
        print(
            f"| {script} | {env_id} | {ours_median:.0f} | {reference_name} | {reference_median:.0f} | {ceiling_median:.0f} "
            f"| {ours_median / reference_median:.2f}x | {ours_median / ceiling_median:.0%} |",
            flush=True,
        )
        print(f"<!-- {case} rounds: ours {ours}, reference {reference}, random actions {ceiling} -->", flush=True)


if __name__ == "__main__":
    main()
