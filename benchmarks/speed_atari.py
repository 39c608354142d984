"""Steps per second on Atari: ppo_atari.py against stable-baselines3 PPO (the same Nature CNN,
8 envs x 128 steps, 4 epochs of 4 minibatches), and trpo_atari.py with 8 envs x 1024 steps and
max_kl 0.001 against sb3-contrib TRPO set to the same sizes (benchmarks/sb3_equal.py), each of ours
in float32 and with --bf16. The runs alternate, round after round, and the table shows medians and
ratios, and the raw throughput of ale-py's vector env with random actions (what the env side alone
allows). sb3-contrib TRPO at its default sub_sampling_factor of 1 needs about 9 GB of memory.
With --recipes it times our own recipes instead, 24,576 agent steps each:
trpo_atari.py at its defaults (8 envs x 128 steps per update), with 8 x 1024 steps per update (the
entropy target at 90%), with OpenAI baselines' Atari trust region on 8 x 1024 steps (max_kl 0.001)
and a weak constant entropy bonus, and ppo_atari.py at its defaults.

    pip install -r benchmarks/requirements.txt
    python benchmarks/speed_atari.py --rounds 3
    python benchmarks/speed_atari.py --rounds 2 --scripts trpo
    python benchmarks/speed_atari.py --rounds 3 --precisions float32   # CPUs without bfloat16 instructions
    python benchmarks/speed_atari.py --recipes --rounds 3 --threads 1 --precisions bf16
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
sys.path.insert(0, REPO)


def sps(command, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    with tempfile.TemporaryDirectory() as cwd:
        stdout = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout
    return float(re.findall(r"sps +(\d+)", stdout)[-1])


def random_action_sps(env_id, seconds=15.0):
    import ppo_atari

    envs = ppo_atari.make_envs(ppo_atari.Args(env_id=env_id))
    envs.reset(seed=0)
    rng = np.random.default_rng(0)
    steps, start = 0, time.time()
    while time.time() - start < seconds:
        envs.step(rng.integers(envs.single_action_space.n, size=envs.num_envs))
        steps += envs.num_envs
    envs.close()
    return steps / (time.time() - start)


def library_commands(args, precision_suffixes):
    """Our scripts beside the reference libraries: {row: command}, {row: reference row}."""
    import trpo_atari

    trpo_defaults = trpo_atari.Args()
    # Two updates of 8 x 1024 steps: sb3-contrib TRPO on the whole batch runs at about 20 steps/s.
    trpo_sizes = {"num_envs": trpo_defaults.num_envs, "num_steps": 1024, "max_kl": 0.001}
    size_flags = {"ppo": [], "trpo": [f"--{key.replace('_', '-')}={value}" for key, value in trpo_sizes.items()]}
    timesteps = {"ppo": args.total_timesteps, "trpo": 2 * trpo_sizes["num_envs"] * trpo_sizes["num_steps"]}
    reference_name = {"ppo": "stable-baselines3 PPO", "trpo": "sb3-contrib TRPO"}
    commands, reference_of = {}, {}
    for script in args.scripts:
        for suffix in precision_suffixes:
            name = f"{script}_atari.py{suffix}"
            commands[name] = [
                sys.executable,
                os.path.join(REPO, f"{script}_atari.py"),
                f"--env-id={args.env_id}",
                "--eval-episodes=1",
                f"--total-timesteps={timesteps[script]}",
                *size_flags[script],
                *suffix.split(),
            ]
            reference_of[name] = reference_name[script]
    if "ppo" in args.scripts:
        commands["stable-baselines3 PPO"] = [
            sys.executable,
            os.path.join(REPO, "benchmarks", "reference.py"),
            "--algo=ppo",  # rl-zoo's Atari PPO settings, which are ppo_atari.py's defaults
            f"--env-id={args.env_id}",
            "--eval-episodes=1",
            f"--total-timesteps={timesteps['ppo']}",
        ]
    if "trpo" in args.scripts:
        # rl-zoo has no Atari TRPO: sb3_equal.py sets sb3-contrib to our sizes (batch, separate CNN
        # critic, critic epochs and minibatches, max_kl; its CG iterations are fixed at 10).
        sb3_contrib = [
            sys.executable,
            os.path.join(REPO, "benchmarks", "sb3_equal.py"),
            "--algo=trpo",
            f"--env-id={args.env_id}",
            *size_flags["trpo"],
            f"--vf-epochs={trpo_defaults.vf_epochs}",
            f"--vf-minibatches={trpo_defaults.vf_minibatches}",
            "--eval-episodes=1",
            f"--total-timesteps={timesteps['trpo']}",
        ]
        commands["sb3-contrib TRPO"] = sb3_contrib
        # Its whole policy step on every 10th sample: cheaper than our 10% subsample of the Fisher products alone.
        commands["sb3-contrib TRPO --sub-sampling-factor=10"] = [*sb3_contrib, "--sub-sampling-factor=10"]
    return commands, reference_of


def recipe_commands(args, precision_suffixes):
    """Our recipes, each beside trpo_atari.py's defaults: {row: command}, {row: reference row}."""
    import trpo_atari

    trpo_defaults = trpo_atari.Args()
    # Three batches of 8 x 1024 steps: a run's first update also pays for oneDNN's warm-up.
    timesteps = 3 * trpo_defaults.num_envs * 1024
    large_batch = ["--num-steps=1024", "--target-entropy-frac=0.9"]
    small_trust_region = ["--num-steps=1024", "--max-kl=0.001", "--target-entropy-frac=0", "--ent-coef=0.01"]
    commands, reference_of = {}, {}
    for suffix in precision_suffixes:
        common = [f"--env-id={args.env_id}", "--eval-episodes=1", f"--total-timesteps={timesteps}", *suffix.split()]
        trpo = [sys.executable, os.path.join(REPO, "trpo_atari.py"), *common]
        rows = {
            f"trpo_atari.py{suffix}": trpo,
            " ".join(["trpo_atari.py", *large_batch]) + suffix: [*trpo, *large_batch],
            " ".join(["trpo_atari.py", *small_trust_region]) + suffix: [*trpo, *small_trust_region],
            f"ppo_atari.py{suffix}": [sys.executable, os.path.join(REPO, "ppo_atari.py"), *common],
        }
        commands.update(rows)
        reference_of.update({name: f"trpo_atari.py{suffix}" for name in rows if name != f"trpo_atari.py{suffix}"})
    return commands, reference_of


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="BreakoutNoFrameskip-v4")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--total-timesteps", type=int, default=8192, help="agent steps per PPO run")
    parser.add_argument("--threads", type=int, default=2, help="OMP_NUM_THREADS for every run")
    parser.add_argument("--scripts", nargs="+", choices=["ppo", "trpo"], default=["ppo", "trpo"])
    parser.add_argument(
        "--precisions", nargs="+", choices=["float32", "bf16"], default=["float32", "bf16"],
        help="which of our rows to run: --bf16 is many times slower on CPUs without bfloat16 instructions",
    )  # fmt: skip
    parser.add_argument("--recipes", action="store_true", help="time our recipes against each other instead")
    args = parser.parse_args()
    # Our rows are named by their flags: "ppo_atari.py" and "ppo_atari.py --bf16".
    precision_suffixes = [{"float32": "", "bf16": " --bf16"}[precision] for precision in args.precisions]
    commands, reference_of = (recipe_commands if args.recipes else library_commands)(args, precision_suffixes)

    results = {name: [] for name in commands}
    for round_number in range(1, args.rounds + 1):
        for name, command in commands.items():
            results[name].append(sps(command, args.threads))
            print(f"round {round_number}: {name} {results[name][-1]:.0f} SPS", file=sys.stderr, flush=True)
    medians = {name: statistics.median(values) for name, values in results.items()}
    print(f"{args.env_id}, 8 envs, {args.threads} threads, {args.rounds} rounds\n")
    print("| implementation | SPS (median) | rounds | vs reference |")
    print("|-|-|-|-|")
    for name, median in medians.items():
        versus = [f"{median / medians[reference_of[name]]:.2f}x {reference_of[name]}"] if name in reference_of else []
        if name.startswith("trpo_atari.py"):
            versus.append(f"{median / medians['sb3-contrib TRPO --sub-sampling-factor=10']:.2f}x its 10% sub-sampling")
        print(f"| {name} | {median:.0f} | {results[name]} | {', '.join(versus) or 'reference'} |")
    if args.recipes:
        return
    print(f"\nrandom actions, 8 envs: {random_action_sps(args.env_id):.0f} SPS")
    if len(args.scripts) == 2:
        for suffix in precision_suffixes:
            trpo, ppo = (medians[f"{script}_atari.py{suffix}"] for script in ("trpo", "ppo"))
            print(f"trpo_atari.py / ppo_atari.py{suffix}: {trpo / ppo:.2f}x")


if __name__ == "__main__":
    main()
