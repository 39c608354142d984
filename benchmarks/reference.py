"""Reference runs: sb3-contrib TRPO and stable-baselines3 PPO with the rl-baselines3-zoo
hyperparameters, logged with our TensorBoard keys so benchmarks/report.py reads both alike.

    python benchmarks/reference.py --algo trpo --env-id CartPole-v1 --seed 1

Logs charts/episodic_return and charts/episodic_length per finished episode (whole games on
Atari), charts/SPS, and eval/final_episodic_return (one point per episode) for the final
deterministic evaluation, whose mean is printed as `eval: mean return X`, like our scripts.
"""

import argparse
import time

import ale_py
import gymnasium as gym
import numpy as np
import torch
from sb3_contrib import TRPO
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_atari_env, make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecFrameStack, VecNormalize
from torch.utils.tensorboard import SummaryWriter

gym.register_envs(ale_py)

# The zoo tunes TRPO on the first three; its MuJoCo defaults serve the others (Swimmer's gamma 0.9999 by --gamma).
MUJOCO = ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5")
MUJOCO += ("Swimmer-v5", "InvertedDoublePendulum-v5", "Reacher-v5", "Pusher-v5", "HumanoidStandup-v5", "Humanoid-v5")
BIG_MLP = {"log_std_init": -2, "ortho_init": False, "activation_fn": torch.nn.ReLU}
BIG_MLP["net_arch"] = {"pi": [256, 256], "vf": [256, 256]}


def linear(start):
    return lambda progress_remaining: progress_remaining * start


# rl-baselines3-zoo hyperparams/trpo.yml and ppo.yml (its -v3/-v4 MuJoCo entries used for -v5).
HYPERPARAMS = {
    ("trpo", "CartPole-v1"): {
        "n_timesteps": 100_000, "n_envs": 2, "n_steps": 512, "batch_size": 512, "cg_damping": 1e-3,
        "gae_lambda": 0.98, "gamma": 0.99, "learning_rate": 1e-3, "n_critic_updates": 20,
    },
    ("trpo", "Acrobot-v1"): {"n_timesteps": 100_000, "normalize": True, "n_envs": 2, "n_steps": 1024},
    ("trpo", "MountainCar-v0"): {
        "n_timesteps": 100_000, "normalize": True, "n_envs": 2, "n_steps": 1024, "n_critic_updates": 20,
    },
    ("trpo", "Pendulum-v1"): {
        "n_timesteps": 100_000, "n_envs": 2, "n_steps": 1024, "gamma": 0.9, "n_critic_updates": 15,
        "use_sde": True, "sde_sample_freq": 4,
    },
    **{
        ("trpo", env_id): {
            "n_timesteps": 1_000_000, "normalize": True, "n_envs": 2, "batch_size": 128, "n_steps": 1024,
            "gamma": 0.99, "gae_lambda": 0.95, "sub_sampling_factor": 1, "cg_max_steps": 25, "cg_damping": 0.1,
            "n_critic_updates": 20, "learning_rate": 1e-3, **({"target_kl": 0.04} if "Cheetah" in env_id else {}),
        }
        for env_id in MUJOCO
    },
    ("ppo", "Pendulum-v1"): {
        "n_timesteps": 100_000, "n_envs": 4, "n_steps": 1024, "gae_lambda": 0.95, "gamma": 0.9, "n_epochs": 10,
        "ent_coef": 0.0, "learning_rate": 1e-3, "clip_range": 0.2, "use_sde": True, "sde_sample_freq": 4,
    },
    ("ppo", "HalfCheetah-v5"): {
        "n_timesteps": 1_000_000, "normalize": True, "n_envs": 1, "batch_size": 64, "n_steps": 512,
        "gamma": 0.98, "learning_rate": 2.0633e-05, "ent_coef": 0.000401762, "clip_range": 0.1, "n_epochs": 20,
        "gae_lambda": 0.92, "max_grad_norm": 0.8, "vf_coef": 0.58096, "policy_kwargs": BIG_MLP,
    },
    ("ppo", "Hopper-v5"): {
        "n_timesteps": 1_000_000, "normalize": True, "n_envs": 1, "batch_size": 32, "n_steps": 512,
        "gamma": 0.999, "learning_rate": 9.80828e-05, "ent_coef": 0.00229519, "clip_range": 0.2, "n_epochs": 5,
        "gae_lambda": 0.99, "max_grad_norm": 0.7, "vf_coef": 0.835671, "policy_kwargs": BIG_MLP,
    },
    ("ppo", "Walker2d-v5"): {
        "n_timesteps": 1_000_000, "normalize": True, "n_envs": 1, "batch_size": 32, "n_steps": 512,
        "gamma": 0.99, "learning_rate": 5.05041e-05, "ent_coef": 0.000585045, "clip_range": 0.1, "n_epochs": 20,
        "gae_lambda": 0.95, "max_grad_norm": 1, "vf_coef": 0.871923, "policy_kwargs": BIG_MLP,
    },
    ("ppo", "atari"): {
        "n_timesteps": 10_000_000, "n_envs": 8, "n_steps": 128, "n_epochs": 4, "batch_size": 256,
        "learning_rate": linear(2.5e-4), "clip_range": linear(0.1), "vf_coef": 0.5, "ent_coef": 0.01,
    },
}  # fmt: skip


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

    key = (args.algo, "atari" if is_atari(args.env_id) else args.env_id)
    if key not in HYPERPARAMS:
        raise SystemExit(f"reference.py: error: no rl-zoo hyperparameters here for {key}")
    hyperparams = dict(HYPERPARAMS[key])
    total_timesteps = args.total_timesteps or hyperparams.pop("n_timesteps")
    hyperparams.pop("n_timesteps", None)
    if args.gamma is not None:
        hyperparams["gamma"] = args.gamma
    n_envs, normalize = hyperparams.pop("n_envs"), hyperparams.pop("normalize", False)
    env = make_sb3_env(args.env_id, n_envs, args.seed)
    policy = "CnnPolicy" if is_atari(args.env_id) else "MlpPolicy"
    if normalize:
        env = VecNormalize(env, gamma=hyperparams.get("gamma", 0.99))

    algo = TRPO if args.algo == "trpo" else PPO
    model = algo(policy, env, seed=args.seed, device="cpu", **hyperparams)
    run_name = f"{args.env_id}__{args.algo}_reference__{args.seed}__{int(time.time())}"
    writer = SummaryWriter(f"runs/{run_name}")
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
