"""Reference for the speed benchmarks: sb3-contrib TRPO or stable-baselines3 PPO configured with the
batch, network and update sizes of our scripts (not rl-zoo's tuned settings; see reference.py).
On Atari ids it uses stable-baselines3's Atari wrappers and frame stack, and the Nature CNN with a
separate copy for the critic, as in trpo_atari.py (ppo_atari.py's defaults are rl-zoo's Atari PPO
settings, so speed_atari.py compares it with reference.py).

Prints one line `sps N eval M` so benchmarks/speed_mlp.py and speed_atari.py can compare it with ours.
"""

import argparse
import time

import torch
from reference import is_atari, make_sb3_env
from sb3_contrib import TRPO
from stable_baselines3 import PPO
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecNormalize


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--algo", choices=["trpo", "ppo"], required=True)
    parser.add_argument("--env-id", default="CartPole-v1")
    parser.add_argument("--total-timesteps", type=int, default=50_000)
    parser.add_argument("--num-envs", type=int, default=4)
    parser.add_argument("--num-steps", type=int, default=512)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--normalize", action="store_true", help="VecNormalize observations and rewards")
    parser.add_argument("--eval-episodes", type=int, default=10)
    trpo = parser.add_argument_group("trpo (our trpo_*.py flags)")
    trpo.add_argument("--vf-epochs", type=int, default=10)
    trpo.add_argument("--vf-minibatches", type=int, default=8)
    trpo.add_argument("--max-kl", type=float, default=0.02)
    trpo.add_argument(
        "--sub-sampling-factor",
        type=int,
        default=1,
        help="sb3-contrib's: the whole policy step uses every k-th sample (ours sub-sample only the Fisher products)",
    )
    trpo.add_argument(
        "--critic-width", type=int, default=64, help="units in each of the MLP critic's two hidden layers"
    )
    ppo = parser.add_argument_group("ppo (our ppo_continuous.py flags)")
    ppo.add_argument("--update-epochs", type=int, default=10)
    ppo.add_argument("--num-minibatches", type=int, default=32)
    args = parser.parse_args()

    env = make_sb3_env(args.env_id, args.num_envs, args.seed)
    if is_atari(args.env_id):
        # The Nature CNN (stable-baselines3's default for images), with its own copy for the critic.
        policy, policy_kwargs = "CnnPolicy", {"share_features_extractor": False}
    else:
        # Separate tanh actor (64-64) and critic, as in our scripts.
        policy = "MlpPolicy"
        critic_layers = [args.critic_width, args.critic_width]
        policy_kwargs = {"net_arch": {"pi": [64, 64], "vf": critic_layers}, "activation_fn": torch.nn.Tanh}
    if args.normalize:
        env = VecNormalize(env, gamma=0.99)
    batch_size = args.num_envs * args.num_steps
    common = {"n_steps": args.num_steps, "policy_kwargs": policy_kwargs, "seed": args.seed, "device": "cpu"}
    if args.algo == "trpo":
        model = TRPO(
            policy,
            env,
            batch_size=batch_size // args.vf_minibatches,
            n_critic_updates=args.vf_epochs,
            cg_max_steps=10,
            target_kl=args.max_kl,
            sub_sampling_factor=args.sub_sampling_factor,
            learning_rate=1e-3,
            **common,
        )
    else:
        model = PPO(
            policy,
            env,
            batch_size=batch_size // args.num_minibatches,
            n_epochs=args.update_epochs,
            learning_rate=3e-4,
            clip_range=0.2,
            clip_range_vf=0.2,
            ent_coef=0.0,
            vf_coef=0.5,
            max_grad_norm=0.5,
            gae_lambda=0.95,
            **common,
        )
    start = time.time()
    model.learn(total_timesteps=args.total_timesteps)
    sps = model.num_timesteps / (time.time() - start)
    if args.normalize:
        env.training, env.norm_reward = False, False
    mean_return, _ = evaluate_policy(model, env, n_eval_episodes=args.eval_episodes, deterministic=True)
    print(f"sps {sps:.0f} eval {mean_return:.2f}")


if __name__ == "__main__":
    main()
