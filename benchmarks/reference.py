"""Reference runs: sb3-contrib TRPO and stable-baselines3 PPO with the rl-baselines3-zoo
hyperparameters as the rl_zoo3 package ships them (its hyperparams/trpo.yml and ppo.yml), logged
with our TensorBoard keys so benchmarks/report.py reads both alike; the zoo entry used and its
settings go into the run's hyperparameters table, and so into its summary.

    python benchmarks/reference.py --algo trpo --env-id CartPole-v1 --seed 1

Logs charts/episodic_return and charts/episodic_length per finished episode (whole games on
Atari), charts/SPS, and eval/final_episodic_return (one point per episode) for the final
deterministic evaluation, whose mean is printed as `eval: mean return X`, like our scripts.
"""

import argparse
import ast
import time
from pathlib import Path

import ale_py
import gymnasium as gym
import numpy as np
import rl_zoo3
import torch
import yaml
from sb3_contrib import TRPO
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_atari_env, make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecFrameStack, VecNormalize
from torch.utils.tensorboard import SummaryWriter

gym.register_envs(ale_py)

# rl_zoo3 ships the zoo's tuned settings; its MuJoCo entries name the ids of their time (-v4, some -v2).
ZOO = Path(rl_zoo3.__file__).parent / "hyperparams"
ZOO_VERSIONS = ("-v4", "-v2")
# Keys of a zoo entry that say how to build the env, not the algorithm: make_sb3_env builds what they name.
ENV_KEYS = ("policy", "n_timesteps", "n_envs", "normalize", "env_wrapper", "frame_stack")


def linear(start):
    return lambda progress_remaining: progress_remaining * start


def zoo_value(node):
    """The value of a zoo policy_kwargs expression such as "dict(net_arch=[64], activation_fn=nn.ReLU)":
    literals, dict(...) and torch.nn attributes, read from its syntax tree; nothing in the file is run."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args:
        return {keyword.arg: zoo_value(keyword.value) for keyword in node.keywords}
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "nn":
        return getattr(torch.nn, node.attr)
    if isinstance(node, ast.List):
        return [zoo_value(element) for element in node.elts]
    return ast.literal_eval(node)


def zoo_entry(algo, env_id):
    """(name, settings) of the zoo's entry for env_id in rl_zoo3's hyperparams/{algo}.yml: the id's own,
    for a -v5 id the zoo's -v4 or -v2 one, else its atari entry on Atari, else its default entry."""
    entries = yaml.safe_load((ZOO / f"{algo}.yml").read_text())
    names = [env_id] + [env_id.replace("-v5", version) for version in ZOO_VERSIONS if env_id.endswith("-v5")]
    name = next((name for name in names if name in entries), "atari" if is_atari(env_id) else "default")
    if name not in entries:
        raise SystemExit(f"reference.py: error: rl_zoo3 has no {algo} settings for {env_id}")
    return name, dict(entries[name])


def algorithm_kwargs(settings):
    """The algorithm's keyword arguments of a zoo entry: "lin_X" as a schedule falling linearly from X
    to 0, policy_kwargs read by zoo_value."""
    kwargs = {key: value for key, value in settings.items() if key not in ENV_KEYS}
    for key, value in kwargs.items():
        if isinstance(value, str) and value.startswith("lin_"):
            kwargs[key] = linear(float(value.removeprefix("lin_")))
    if "policy_kwargs" in kwargs:
        kwargs["policy_kwargs"] = zoo_value(ast.parse(kwargs["policy_kwargs"].strip(), mode="eval").body)
    return kwargs


def is_atari(env_id):
    return "NoFrameskip" in env_id or env_id.startswith("ALE/")


def make_sb3_env(env_id, n_envs, seed):
    """stable-baselines3's vector env, with its Atari wrappers and a 4-frame stack on Atari ids."""
    if is_atari(env_id):
        return VecFrameStack(make_atari_env(env_id, n_envs=n_envs, seed=seed), n_stack=4)
    return make_vec_env(env_id, n_envs=n_envs, seed=seed)


class EpisodeLogger(BaseCallback):
    """Writes every finished episode (Monitor's "episode" info) under our TensorBoard keys."""

    def __init__(self, writer):
        super().__init__()
        self.writer = writer

    def _on_step(self):
        for info in self.locals["infos"]:
            if "episode" in info:
                self.writer.add_scalar("charts/episodic_return", info["episode"]["r"], self.num_timesteps)
                self.writer.add_scalar("charts/episodic_length", info["episode"]["l"], self.num_timesteps)
        return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", choices=["trpo", "ppo"], required=True)
    parser.add_argument("--env-id", required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--total-timesteps", type=int, help="default: the zoo's n_timesteps")
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--gamma", type=float, help="the discount, in place of the zoo's")
    args = parser.parse_args()

    entry, settings = zoo_entry(args.algo, args.env_id)
    if args.gamma is not None:
        settings["gamma"] = args.gamma
    total_timesteps = args.total_timesteps or int(settings["n_timesteps"])
    env = make_sb3_env(args.env_id, settings.get("n_envs", 1), args.seed)
    normalize = settings.get("normalize", False)  # true, or the keyword arguments of VecNormalize as text
    if normalize:
        normalize_kwargs = ast.literal_eval(normalize) if isinstance(normalize, str) else {}
        env = VecNormalize(env, **{"gamma": settings.get("gamma", 0.99), **normalize_kwargs})

    algo = TRPO if args.algo == "trpo" else PPO
    model = algo(settings["policy"], env, seed=args.seed, device="cpu", **algorithm_kwargs(settings))
    run_name = f"{args.env_id}__{args.algo}_reference__{args.seed}__{int(time.time())}"
    writer = SummaryWriter(f"runs/{run_name}")
    # The settings as run, in the table benchmarks/summary.py reads into a summary's args.
    recorded = {"env-id": args.env_id, "seed": args.seed, "zoo_entry": entry, "total_timesteps": total_timesteps}
    table = "".join(f"|{key}|{' '.join(str(value).split())}|\n" for key, value in (recorded | settings).items())
    writer.add_text("hyperparameters", f"|param|value|\n|-|-|\n{table}")
    start = time.time()
    model.learn(total_timesteps=total_timesteps, callback=EpisodeLogger(writer))
    sps = model.num_timesteps / (time.time() - start)
    writer.add_scalar("charts/SPS", sps, model.num_timesteps)

    if normalize:
        env.training, env.norm_reward = False, False
    episode_returns, _ = evaluate_policy(
        model, env, n_eval_episodes=args.eval_episodes, deterministic=True, return_episode_rewards=True
    )
    for i, episode_return in enumerate(episode_returns):
        writer.add_scalar("eval/final_episodic_return", episode_return, i)
    writer.close()
    print(f"sps {sps:.0f}")
    print(f"eval: mean return {np.mean(episode_returns):.2f} +- {np.std(episode_returns):.2f}")


if __name__ == "__main__":
    main()
