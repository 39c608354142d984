"""Reference: stable-baselines3 PPO on Atari with the same envs, batch and network as ppo_atari.py.

Prints one line `sps N` so benchmarks/speed_ppo_atari.py can compare it with ours.
"""

import argparse
import time

import ale_py
import gymnasium as gym
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_atari_env
from stable_baselines3.common.vec_env import VecFrameStack

gym.register_envs(ale_py)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--env-id", default="BreakoutNoFrameskip-v4")
    parser.add_argument("--total-timesteps", type=int, default=8192)
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    # rl-zoo's Atari PPO settings, which are also ppo_atari.py's defaults; Nature CNN policy.
    envs = VecFrameStack(make_atari_env(args.env_id, n_envs=args.num_envs, seed=args.seed), n_stack=4)
    model = PPO(
        "CnnPolicy",
        envs,
        n_steps=128,
        n_epochs=4,
        batch_size=256,
        learning_rate=2.5e-4,
        clip_range=0.1,
        vf_coef=0.5,
        ent_coef=0.01,
        seed=args.seed,
        device="cpu",
    )
    start = time.time()
    model.learn(total_timesteps=args.total_timesteps)
    print(f"sps {model.num_timesteps / (time.time() - start):.0f}")


if __name__ == "__main__":
    main()
