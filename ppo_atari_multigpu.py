"""PPO with the Nature CNN on Atari over torch.distributed: ppo_atari.py on many processes, GPUs and machines.

    torchrun --nproc-per-node 2 ppo_atari_multigpu.py --num-envs 8
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-endpoint HOST:29500 ppo_atari_multigpu.py

Every process (rank) steps its own num_envs envs; each minibatch step averages the gradients over the
ranks and normalizes the advantages with the global minibatch's statistics, so the networks stay
identical. Rank 0 alone logs (every rank's games), checkpoints, evaluates and records video. nccl on
CUDA (a GPU per local rank), gloo on the CPU; started without torchrun, a single process.

Proximal Policy Optimization (Schulman et al., 2017) with GAE, on the standard Atari settings
(8 envs x 128 steps, 4 epochs of 4 minibatches, clip 0.1, learning rate 2.5e-4 annealed).
Two environment back ends give the learner uint8 observations (num_envs, 4, 84, 84):
  ale        ale-py's C++ vector env (fast: frame skip, pooling and stacking happen in C++);
  gymnasium  the standard wrapper stack, written below, in a gymnasium vector env.
They differ after a lost life: the gymnasium stack takes a no-op step and starts a new frame stack,
the ale one goes on with neither. Evaluation always plays on the gymnasium stack.
A life loss ends the bootstrapped return (terminated) but not the game; charts/episodic_return
is the unclipped score of a whole game.
The default budget is 10M agent steps (40M frames): --checkpoint-every N and --resume PATH split
a long run into parts.
"""

import glob
import math
import os
import pickle
import random
import re
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal

import ale_py
import gymnasium as gym
import numpy as np
import torch
import torch.distributed as dist
import tyro
from torch import nn
from torch.utils.tensorboard import SummaryWriter

gym.register_envs(ale_py)
# ALE prints a banner to stderr whenever it starts a game; keep its warnings and errors only.
ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Warning)

# Resuming with other values of these would not continue the same training run.
RESUME_MUST_MATCH = ("env_id", "num_envs", "num_steps", "world_size")
# Ranks wait in a collective while rank 0 evaluates or saves: NCCL's default 10 minutes can be too short.
COLLECTIVE_TIMEOUT = timedelta(hours=2)


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """the name of this experiment"""
    seed: int = 1
    """seed of python, numpy, torch, every env and action space"""
    torch_deterministic: bool = True
    """if toggled, `torch.backends.cudnn.deterministic=True`"""
    cuda: bool = True
    """if toggled, train on CUDA when a GPU is available (else on the CPU, with a warning)"""
    track: bool = False
    """if toggled, track the run with Weights and Biases"""
    wandb_project_name: str = "ppo"
    """the wandb project name"""
    wandb_entity: str | None = None
    """the wandb entity (team)"""
    capture_video: bool = False
    """if toggled, record videos of env 0 into videos/{run_name} (uses the gymnasium back end) and of the final evaluation into videos/{run_name}/eval"""
    save_model: bool = False
    """if toggled, save the network to runs/{run_name}/{exp_name}.model"""
    checkpoint_every: int = 0
    """if positive, save all a resumed run needs to runs/{run_name}/checkpoint.pt every this many updates"""
    resume: str | None = None
    """a checkpoint.pt to continue training from (same env_id, num_envs, num_steps, number of processes)"""

    env_id: str = "BreakoutNoFrameskip-v4"
    """the id of an Atari env: {Game}NoFrameskip-v4 (no sticky actions) or ALE/{Game}-v5 (sticky actions)"""
    backend: Literal["ale", "gymnasium"] = "ale"
    """the environment back end: ale-py's C++ vector env, or gymnasium wrappers in a vector env"""
    total_timesteps: int = 10_000_000
    """total agent steps over all envs of all processes (each is 4 frames)"""
    learning_rate: float = 2.5e-4
    """the Adam learning rate"""
    anneal_lr: bool = True
    """if toggled, anneal the learning rate linearly to 0 over training"""
    num_envs: int = 8
    """the number of parallel environments of each process"""
    num_steps: int = 128
    """the number of steps per env per policy update"""
    gamma: float = 0.99
    """the discount factor"""
    gae_lambda: float = 0.95
    """the GAE lambda"""
    num_minibatches: int = 4
    """the number of minibatches per epoch"""
    update_epochs: int = 4
    """passes over the batch per update"""
    clip_coef: float = 0.1
    """the surrogate clipping coefficient"""
    ent_coef: float = 0.01
    """coefficient of the entropy bonus"""
    vf_coef: float = 0.5
    """coefficient of the value loss"""
    max_grad_norm: float = 0.5
    """the largest global gradient norm"""
    bf16: bool = False
    """if toggled, run the CNN trunk in bfloat16 autocast (fast on CPUs with AVX512-BF16 or AMX and on recent GPUs)"""
    eval_episodes: int = 10
    """games per evaluation (greedy actions, 5% random; see evaluate): after training and every eval_every iterations"""
    eval_every: int = 0
    """if positive, evaluate the current policy every this many iterations, logged against global_step"""
    eval_only: str | None = None
    """a .model (--save-model) or checkpoint.pt file: evaluate (and with --capture-video record) it instead of training"""

    # Computed at runtime, not flags.
    world_size: int = field(default=1, init=False)
    """the number of processes"""
    batch_size: int = field(default=0, init=False)
    """the batch size, num_envs * num_steps"""
    minibatch_size: int = field(default=0, init=False)
    """the minibatch size, batch_size // num_minibatches"""
    num_iterations: int = field(default=0, init=False)
    """the number of policy updates"""


def ale_game_and_sticky_actions(env_id):
    """'BreakoutNoFrameskip-v4' -> ('breakout', 0.0); 'ALE/MsPacman-v5' -> ('ms_pacman', 0.25)."""
    match = re.fullmatch(r"ALE/(\w+)-v5", env_id) or re.fullmatch(r"(\w+)NoFrameskip-v4", env_id)
    if match is None:
        raise ValueError(f"{env_id!r} is neither {{Game}}NoFrameskip-v4 nor ALE/{{Game}}-v5")
    game = re.sub(r"(?<!^)(?=[A-Z])", "_", match.group(1)).lower()
    if game not in ale_py.roms.get_all_rom_ids():
        raise ValueError(f"ale-py has no ROM for the game {game!r}")
    return game, 0.25 if env_id.startswith("ALE/") else 0.0


class EpisodicLife(gym.Wrapper):
    """A life loss ends the episode for the learner; only a game over really resets the game."""

    def __init__(self, env):
        super().__init__(env)
        self.lives = 0
        self.game_over = True

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.game_over = terminated or truncated
        lives = self.env.unwrapped.ale.lives()
        terminated = terminated or 0 < lives < self.lives
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs):
        if self.game_over:
            obs, info = self.env.reset(**kwargs)
        else:  # continue the game after a lost life with a no-op
            obs, _, _, _, info = self.env.step(0)
        self.lives = self.env.unwrapped.ale.lives()
        return obs, info


class FireReset(gym.Wrapper):
    """Press FIRE when a new game starts, for games that wait for it to start."""

    def reset(self, **kwargs):
        self.env.reset(**kwargs)
        obs, _, terminated, truncated, info = self.env.step(1)
        if terminated or truncated:
            obs, info = self.env.reset(**kwargs)
        return obs, info


def make_env(env_id, idx, capture_video, run_name):
    """The standard Atari stack: no-op reset (30), frame skip 4 with max-pool, life-loss
    termination, FIRE when a game starts, reward clipping to {-1, 0, 1}, 84x84 grayscale, stack of 4."""

    def thunk():
        _, sticky = ale_game_and_sticky_actions(env_id)
        kwargs = {"frameskip": 1, "repeat_action_probability": sticky, "max_num_frames_per_episode": 108_000}
        if capture_video and idx == 0:
            env = gym.make(env_id, render_mode="rgb_array", **kwargs)
            env = gym.wrappers.RecordVideo(env, f"videos/{run_name}")
        else:
            env = gym.make(env_id, **kwargs)
        env = gym.wrappers.AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84)
        # Below the life and reward wrappers, so it records whole games with unclipped scores.
        env = gym.wrappers.RecordEpisodeStatistics(env)
        # Below EpisodicLife, so FIRE is pressed when a game starts but not after a lost life: the
        # ale back end (use_fire_reset) does the same, and the agent learns to serve again itself.
        if "FIRE" in env.unwrapped.get_action_meanings():
            env = FireReset(env)
        env = EpisodicLife(env)
        env = gym.wrappers.TransformReward(env, np.sign)
        return gym.wrappers.FrameStackObservation(env, 4)

    return thunk


class GameScores:
    """Whole-game scores from the ale back end, which reports none: sum the unclipped rewards
    and close a game when it really ends (lives did not drop on a termination, or truncation)."""

    def __init__(self, lives):
        """lives: the lives of each env's game at the start, from the reset's infos."""
        self.returns = np.zeros(len(lives))
        self.lengths = np.zeros(len(lives), dtype=int)
        self.lives = lives

    def update(self, rewards, terminations, truncations, lives):
        """Add one step; return [(return, length)] of the games that ended."""
        self.returns += rewards
        self.lengths += 1
        # With same-step autoreset, `lives` already belongs to the next game when one ended.
        ended = np.flatnonzero(truncations | (terminations & (lives >= self.lives)))
        self.lives = lives
        finished = list(zip(self.returns[ended], self.lengths[ended]))
        self.returns[ended] = 0
        self.lengths[ended] = 0
        return finished


def finished_games(infos, scores, rewards, terminations, truncations):
    """[(return, length)] of the whole games that ended this step, from either back end."""
    if scores is not None:
        return scores.update(rewards, terminations, truncations, infos["lives"])
    final_info = infos.get("final_info", {})
    if "_episode" not in final_info:
        return []
    ended = np.flatnonzero(final_info["_episode"])
    return list(zip(final_info["episode"]["r"][ended], final_info["episode"]["l"][ended]))


def make_envs(args, run_name, record):
    """Both back ends, same-step autoreset: the obs returned with a done is the next episode's.
    With capture_video every rank uses the gymnasium stack; only the one given record=True records."""
    game, sticky = ale_game_and_sticky_actions(args.env_id)
    if args.backend == "ale" and not args.capture_video:
        return ale_py.vector_env.AtariVectorEnv(
            game,
            args.num_envs,
            repeat_action_probability=sticky,
            noop_max=30,
            life_loss_info=True,  # terminate on a life loss; episodic_life=True would restart the game
            reward_clipping=False,  # clipped in the loop, so that game scores stay unclipped
            autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
        )
    return gym.vector.SyncVectorEnv(
        [make_env(args.env_id, i, args.capture_video and record, run_name) for i in range(args.num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )


def layer_init(layer, std=2**0.5, bias_const=0.0):
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    """Nature CNN trunk shared by a policy head and a value head."""

    def __init__(self, num_actions, bf16=False):
        super().__init__()
        self.bf16 = bf16
        self.trunk = nn.Sequential(
            layer_init(nn.Conv2d(4, 32, 8, stride=4)),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)),
            nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)),
            nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * 7 * 7, 512)),
            nn.ReLU(),
        )
        self.actor = layer_init(nn.Linear(512, num_actions), std=0.01)
        self.critic = layer_init(nn.Linear(512, 1), std=1.0)

    def forward(self, obs):
        """Logits and values for uint8 frames.

        With bf16 the scaled frames, the convolutions and the 3136 x 512 layer, nearly all of the
        compute, are bfloat16 (the weights and their gradients stay float32); the two small heads get
        the hidden features back in float32, so log-probs and values are computed in float32."""
        dtype = torch.bfloat16 if self.bf16 else torch.float32
        # Channels-last (NHWC) frames: oneDNN's CPU convolutions and their gradients are faster in
        # that layout. Converted as uint8, the smallest copy.
        frames = obs.contiguous(memory_format=torch.channels_last)
        with torch.autocast(obs.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            hidden = self.trunk(frames.to(dtype) / 255.0)
        hidden = hidden.float()
        return self.actor(hidden), self.critic(hidden).squeeze(-1)


def sample_action(logits):
    """Sample a ~ softmax(logits) for each row, by inverse CDF.

    Written out rather than through torch.distributions.Categorical, whose construction costs
    more than the rest of the step at rollout batch sizes."""
    cumulative = torch.softmax(logits, dim=-1).cumsum(-1)
    return (cumulative < torch.rand_like(cumulative[:, :1])).sum(-1).clamp(max=logits.shape[-1] - 1)


def compute_gae(rewards, values, dones, next_value, gamma, gae_lambda):
    """GAE over (num_steps, num_envs) tensors, all envs at once.

    Convention: dones[t] = 1 when transition t ended its episode (a life loss, a game over or a
    truncation), so s_{t+1} is not bootstrapped from. A truncated transition already carries
    gamma * V(final obs) in rewards[t]. next_value = V(obs after the last step).
    """
    num_steps = rewards.shape[0]
    advantages = torch.zeros_like(rewards)
    last_gae = torch.zeros_like(next_value)
    for t in reversed(range(num_steps)):
        next_values = next_value if t == num_steps - 1 else values[t + 1]
        not_done = 1.0 - dones[t]
        delta = rewards[t] + gamma * next_values * not_done - values[t]
        last_gae = delta + gamma * gae_lambda * not_done * last_gae
        advantages[t] = last_gae
    return advantages, advantages + values


def clipped_policy_loss(ratio, advantages, clip_coef):
    """PPO's clipped surrogate (Schulman et al., 2017, eq. 7) as a loss: -E[min(r A, clip(r, 1 - eps, 1 + eps) A)].
    The clip takes away the incentive to move r out of [1 - eps, 1 + eps] in the direction A favours."""
    clipped_ratio = torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)
    return -torch.min(ratio * advantages, clipped_ratio * advantages).mean()


def all_reduce_mean(tensors):
    """Average tensors over the ranks in place, with one all-reduce of their concatenation (a single
    process, with no process group, has nothing to average)."""
    if dist.is_initialized():
        flat = torch.cat([tensor.reshape(-1) for tensor in tensors])
        dist.all_reduce(flat)
        for tensor, chunk in zip(tensors, (flat / dist.get_world_size()).split([t.numel() for t in tensors])):
            tensor.copy_(chunk.view_as(tensor))


def global_mean_std(x):
    """Mean and std of x over all ranks' values together: x.mean() and x.std() of their concatenation."""
    moments = torch.stack([x.sum(), (x * x).sum(), torch.tensor(float(x.numel()), device=x.device)])
    if dist.is_initialized():
        dist.all_reduce(moments)
    total, total_sq, count = moments
    mean = total / count
    return mean, ((total_sq - count * mean**2) / (count - 1)).clamp(min=0).sqrt()


def gather_on_rank0(value):
    """[every rank's value] on rank 0, None on the others; [value] without a process group."""
    if not dist.is_initialized():
        return [value]
    gathered = [None] * dist.get_world_size() if dist.get_rank() == 0 else None
    dist.gather_object(value, gathered, dst=0)
    return gathered


def ppo_update(agent, optimizer, batch, args):
    """update_epochs passes of Adam over shuffled minibatches of the batch (b_obs, b_actions, b_logprobs,
    b_advantages, b_returns, b_values) on L = clipped surrogate + vf_coef * clipped value loss - ent_coef * H,
    advantages normalized per minibatch. Returns the last minibatch's losses, the mean approximate KL
    and clip fraction, and how many steps were skipped as non-finite."""
    b_obs, b_actions, b_logprobs, b_advantages, b_returns, b_values = batch
    clip_fractions, approx_kls, skipped_steps = [], [], 0
    for _ in range(args.update_epochs):
        permutation = torch.randperm(args.batch_size, device=b_obs.device)
        for start in range(0, args.batch_size, args.minibatch_size):
            idx = permutation[start : start + args.minibatch_size]
            logits, new_values = agent(b_obs[idx])
            log_probs_all = torch.log_softmax(logits, dim=-1)
            log_ratio = log_probs_all.gather(-1, b_actions[idx, None]).squeeze(-1) - b_logprobs[idx]
            ratio = log_ratio.exp()
            with torch.no_grad():
                # KL(old || new) estimated by E[(r - 1) - log r] (low variance, never negative).
                approx_kl = ((ratio - 1) - log_ratio).mean()
                clip_fraction = ((ratio - 1.0).abs() > args.clip_coef).float().mean()
            mean, std = global_mean_std(b_advantages[idx])
            mb_advantages = (b_advantages[idx] - mean) / (std + 1e-8)
            policy_loss = clipped_policy_loss(ratio, mb_advantages, args.clip_coef)
            # The value may move at most clip_coef from its rollout estimate before the loss stops pulling.
            clipped_values = b_values[idx] + torch.clamp(new_values - b_values[idx], -args.clip_coef, args.clip_coef)
            value_loss = (
                0.5 * torch.max((new_values - b_returns[idx]) ** 2, (clipped_values - b_returns[idx]) ** 2).mean()
            )
            entropy = -(log_probs_all.exp() * log_probs_all).sum(-1).mean()
            loss = policy_loss - args.ent_coef * entropy + args.vf_coef * value_loss

            optimizer.zero_grad()
            loss.backward()
            # One all-reduce averages the gradients, the losses and the statistics over the ranks:
            # every rank then sees the same numbers and takes (or skips) the same step.
            stats = torch.stack([loss, policy_loss, value_loss, entropy, approx_kl, clip_fraction]).detach()
            all_reduce_mean([parameter.grad for parameter in agent.parameters()] + [stats])
            mean_loss, policy_loss, value_loss, entropy, approx_kl, clip_fraction = stats
            approx_kls.append(approx_kl)
            clip_fractions.append(clip_fraction)
            grad_norm = nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
            if not torch.isfinite(mean_loss + grad_norm):  # a non-finite step never reaches the weights
                skipped_steps += 1
                continue
            optimizer.step()
    # The minibatches' statistics stay on the device until here: one read per update.
    approx_kl, clip_fraction = torch.stack([torch.stack(approx_kls), torch.stack(clip_fractions)]).mean(1).tolist()
    return {
        "value_loss": value_loss.item(),
        "policy_loss": policy_loss.item(),
        "entropy": entropy.item(),
        "approx_kl": approx_kl,
        "clipfrac": clip_fraction,
        "nonfinite_skipped": skipped_steps,
    }


def model_state(agent, args):
    """What --save-model writes and --eval-only reads."""
    return {"agent": agent.state_dict(), "args": vars(args)}


def save_atomically(state, path):
    """torch.save to a temporary file, then rename: a run killed while saving keeps its last checkpoint."""
    torch.save(state, f"{path}.tmp")
    os.replace(f"{path}.tmp", path)


def seed_everything(seed):
    """Seed python's, numpy's and torch's random number generators."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def to_device(array, device, pinned, name):
    """A numpy array of the rollout as a tensor on device. On a GPU it goes through a page-locked host
    buffer cached in pinned under name, copied without blocking, so the copy overlaps the work queued
    before it; the buffer is only rewritten a step later, after the action's copy back has waited for
    the GPU. On the CPU the tensor shares the array's memory."""
    if device.type != "cuda":
        return torch.from_numpy(array)
    if name not in pinned or pinned[name].shape != array.shape:
        pinned[name] = torch.from_numpy(array).clone().pin_memory()
    else:
        pinned[name].numpy()[...] = array
    return pinned[name].to(device, non_blocking=True)


def evaluate(agent, args, device, video_name=None, epsilon=0.05):
    """args.eval_episodes whole games of the agent's policy through the gymnasium stack, recorded into
    videos/{video_name} if given; returns their scores.

    Epsilon-greedy (argmax, a random action with probability 5%, the usual Atari evaluation):
    a fully greedy policy can stall forever in games like Breakout that wait for FIRE. Its env and
    its epsilon draws are seeded with seed + 10_000 and it draws from no global random generator,
    so evaluating during training leaves the run unchanged."""
    env = gym.vector.SyncVectorEnv(
        [make_env(args.env_id, 0, video_name is not None, video_name)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    rng = np.random.default_rng(args.seed + 10_000)
    obs, _ = env.reset(seed=args.seed + 10_000)
    scores = []
    while len(scores) < args.eval_episodes:
        with torch.no_grad():
            logits, _ = agent(torch.as_tensor(obs, device=device))
        action = logits.argmax(-1).cpu().numpy()
        if rng.random() < epsilon:
            action = rng.integers(env.single_action_space.n, size=1)
        obs, _, _, _, infos = env.step(action)
        final_info = infos.get("final_info", {})
        if "_episode" in final_info and final_info["_episode"][0]:
            scores.append(float(final_info["episode"]["r"][0]))
    env.close()
    return scores


def final_evaluation(agent, args, device, run_name, writer, global_step):
    """The evaluation after training (or of an --eval-only model, writer None), recorded with --capture-video:
    logged game by game and as the last point of the evaluation curve, printed, uploaded with --track."""
    scores = evaluate(agent, args, device, f"{run_name}/eval" if args.capture_video else None)
    for i, score in enumerate(scores if writer is not None else []):
        writer.add_scalar("eval/final_episodic_return", score, i)
    print(f"eval: {log_evaluation(writer, scores, global_step)}")
    if writer is not None and args.track and args.capture_video:
        import wandb

        for video in sorted(glob.glob(f"videos/{run_name}/**/*.mp4", recursive=True)):
            wandb.log({"videos": wandb.Video(video)})
    return scores


def log_evaluation(writer, scores, global_step):
    """Log an evaluation as a point of the evaluation curve; return its one-line summary."""
    summary = f"mean return {np.mean(scores):.2f} +- {np.std(scores):.2f} over {len(scores)} games"
    if writer is not None:
        writer.add_scalar("eval/episodic_return", np.mean(scores), global_step)
    return summary


def load_model(path, num_actions, bf16):
    """The agent saved in a .model or checkpoint.pt file; raises ValueError saying why it cannot be used here."""
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError) as e:
        raise ValueError(f"cannot read model file {path!r} ({type(e).__name__})") from e
    try:
        if not isinstance(checkpoint, dict):  # a bare tensor, say, which indexing by name would only warn about
            raise TypeError(type(checkpoint).__name__)
        agent = Agent(num_actions, bf16)
        agent.load_state_dict(checkpoint["agent"])
    except (KeyError, TypeError, ValueError, AttributeError, RuntimeError) as e:
        raise ValueError(f"{path!r} is not a model of this script for this game ({type(e).__name__})") from e
    return agent


def start_logging(args, run_name, resumed):
    """(the TensorBoard writer of runs/{run_name}, with the hyperparameters as a table; the id of the
    Weights and Biases run that mirrors it with --track, else None). A resumed run goes on in its logs."""
    if args.track:
        import wandb

        wandb.init(
            project=args.wandb_project_name,
            entity=args.wandb_entity,
            sync_tensorboard=True,
            config=vars(args),
            name=run_name,
            save_code=True,
            id=resumed.get("wandb_id") if resumed else None,
            resume="allow",
        )
    wandb_id = wandb.run.id if args.track else None
    # On resume, TensorBoard drops what the interrupted run logged after its checkpoint.
    writer = SummaryWriter(f"runs/{run_name}", purge_step=resumed["global_step"] + 1 if resumed else None)
    hyperparameters = "\n".join(f"|{key}|{value}|" for key, value in vars(args).items())
    writer.add_text("hyperparameters", f"|param|value|\n|-|-|\n{hyperparameters}")
    return writer, wandb_id


def check_inputs(args):
    """The env's number of actions; raises ValueError naming the first argument no run can use.
    Every comparison with NaN is false, so each check rejects NaN; `< inf` rejects infinity."""
    inf, batch_size = math.inf, args.num_envs * args.num_steps
    requirements = [
        (0 <= args.seed < 2**32, "seed must be in [0, 2**32)"),
        (args.num_envs >= 1 and args.num_steps >= 1, "num_envs and num_steps must be at least 1"),
        (args.total_timesteps >= args.world_size * batch_size, "total_timesteps must cover one update of all ranks"),
        (0 < args.learning_rate < inf, "learning_rate must be positive and finite"),
        (0 <= args.gamma <= 1 and 0 <= args.gae_lambda <= 1, "gamma and gae_lambda must be in [0, 1]"),
        (1 <= args.num_minibatches <= batch_size, "num_minibatches must be in [1, num_envs * num_steps]"),
        (args.update_epochs >= 1, "update_epochs must be at least 1"),
        (0 < args.clip_coef < inf, "clip_coef must be positive and finite"),
        (0 <= args.ent_coef < inf and 0 <= args.vf_coef < inf, "ent_coef and vf_coef must be >= 0 and finite"),
        (0 < args.max_grad_norm < inf, "max_grad_norm must be positive and finite"),
        (args.eval_episodes >= 1 and args.eval_every >= 0, "eval_episodes must be >= 1 and eval_every >= 0"),
        (args.checkpoint_every >= 0, "checkpoint_every must be at least 0"),
    ]
    for ok, message in requirements:
        if not ok:
            raise ValueError(message)
    try:
        env = make_env(args.env_id, 0, False, None)()
    except (ValueError, gym.error.Error) as e:
        raise ValueError(f"cannot make env {args.env_id!r}: {e}") from e
    env.close()
    return env.action_space.n


def load_training_state(path, args):
    """The training state saved at path; raises ValueError saying why this run cannot resume from it."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError) as e:
        raise ValueError(f"cannot read checkpoint {path!r} ({type(e).__name__})") from e
    if not isinstance(state, dict) or not {"iteration", "agent", "optimizer"} <= state.keys():
        raise ValueError(f"{path!r} is not a checkpoint.pt this script saved with --checkpoint-every")
    changed = [key for key in RESUME_MUST_MATCH if state["args"][key] != getattr(args, key)]
    if changed:
        raise ValueError(f"{path!r} was saved with other {', '.join(changed)}")
    return state


def init_distributed(use_cuda, script):
    """Join torchrun's process group (RANK, LOCAL_RANK, WORLD_SIZE, ...): (rank, local_rank, world_size,
    error or None). Without torchrun, or with one process, no group: no collective runs."""
    if "RANK" not in os.environ:
        print(f"{script}: not started by torchrun: running as a single process (world size 1)", file=sys.stderr)
        return 0, 0, 1, None
    if int(os.environ["WORLD_SIZE"]) == 1:
        return 0, int(os.environ["LOCAL_RANK"]), 1, None
    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    local_world_size = int(os.environ["LOCAL_WORLD_SIZE"])
    if use_cuda and torch.cuda.device_count() < local_world_size:
        return rank, local_rank, 0, f"{local_world_size} processes on this machine but {torch.cuda.device_count()} GPUs"
    if use_cuda:
        torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl" if use_cuda else "gloo", timeout=COLLECTIVE_TIMEOUT)
    return rank, local_rank, dist.get_world_size(), None


def main(args):
    script = os.path.basename(__file__)
    use_cuda = args.cuda and torch.cuda.is_available()
    rank, local_rank, args.world_size, error = init_distributed(use_cuda, script)
    try:  # nothing is written before the arguments and the input files have been checked
        if error:
            raise ValueError(error)
        num_actions = check_inputs(args)
        watched = load_model(args.eval_only, num_actions, args.bf16) if args.eval_only else None
        resumed = load_training_state(args.resume, args) if args.resume and not args.eval_only else None
    except ValueError as e:  # one line from rank 0; the other ranks stop without repeating it
        sys.exit(f"{script}: error: {e}" if rank == 0 else 1)
    args.batch_size = args.num_envs * args.num_steps
    args.minibatch_size = args.batch_size // args.num_minibatches
    args.num_iterations = args.total_timesteps // (args.world_size * args.batch_size)
    # A resumed run keeps its name, so its TensorBoard logs and checkpoints stay in one folder.
    run_name = resumed["run_name"] if resumed else f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
    if rank == 0 and args.cuda and not use_cuda:
        print(f"{script}: no GPU available, running on the CPU", file=sys.stderr)
    device = torch.device(f"cuda:{local_rank}" if use_cuda else "cpu")
    if watched is not None:  # rank 0 plays; the other ranks have nothing to do
        return final_evaluation(watched.to(device), args, device, run_name, None, 0) if rank == 0 else None

    envs = make_envs(args, run_name, record=rank == 0)
    writer, wandb_id = start_logging(args, run_name, resumed) if rank == 0 else (None, None)

    seed_everything(args.seed + rank)  # each rank samples its own actions; the networks start as rank 0's
    torch.backends.cudnn.deterministic = args.torch_deterministic
    agent = Agent(num_actions, args.bf16).to(device)
    for parameter in agent.parameters():
        if dist.is_initialized():
            dist.broadcast(parameter.data, src=0)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5, fused=True)
    start_iteration, global_step = 1, 0
    if resumed is not None:  # the envs are not saved: a resumed run starts new games
        agent.load_state_dict(resumed["agent"])
        optimizer.load_state_dict(resumed["optimizer"])
        start_iteration, global_step = resumed["iteration"] + 1, resumed["global_step"]

    # Rollout storage, (num_steps, num_envs, ...) everywhere; frames stay uint8 until the network.
    obs_shape = envs.single_observation_space.shape
    observations = torch.zeros((args.num_steps, args.num_envs) + obs_shape, dtype=torch.uint8, device=device)
    actions = torch.zeros((args.num_steps, args.num_envs), dtype=torch.long, device=device)
    logprobs = torch.zeros((args.num_steps, args.num_envs), device=device)
    rewards = torch.zeros((args.num_steps, args.num_envs), device=device)
    dones = torch.zeros((args.num_steps, args.num_envs), device=device)
    values = torch.zeros((args.num_steps, args.num_envs), device=device)

    start_step, start_time = global_step, time.time()
    recent_returns = deque(maxlen=20)
    # Rank r's envs get the seeds seed + r * num_envs + i: rank 0's are the single-process script's.
    envs.action_space.seed(args.seed + rank * args.num_envs)
    next_obs, infos = envs.reset(seed=args.seed + rank * args.num_envs)
    scores = GameScores(infos["lives"]) if isinstance(envs, ale_py.vector_env.AtariVectorEnv) else None
    pinned = {}  # page-locked host buffers of the rollout's copies to the GPU (to_device)
    next_obs = to_device(next_obs, device, pinned, "obs")

    for iteration in range(start_iteration, args.num_iterations + 1):
        if args.anneal_lr:
            optimizer.param_groups[0]["lr"] = args.learning_rate * (1.0 - (iteration - 1.0) / args.num_iterations)
        finished = []  # the games that ended in this rollout, logged after it
        for step in range(args.num_steps):
            global_step += args.world_size * args.num_envs
            observations[step] = next_obs
            with torch.no_grad():
                logits, values[step] = agent(next_obs)
                action = sample_action(logits)
                logprobs[step] = torch.log_softmax(logits, dim=-1).gather(-1, action[:, None]).squeeze(-1)
            actions[step] = action
            next_obs, reward, terminations, truncations, infos = envs.step(action.cpu().numpy())
            for game_return, game_length in finished_games(infos, scores, reward, terminations, truncations):
                finished.append((float(game_return), int(game_length), global_step))
            reward = np.sign(reward).astype(np.float32)
            # Truncation is not termination: bootstrap a time-limit cut with gamma * V(final obs).
            truncated = truncations & ~terminations
            if truncated.any():
                final_obs = to_device(np.stack(infos["final_obs"][truncated]), device, pinned, "final_obs")
                with torch.no_grad():
                    reward[truncated] += args.gamma * agent(final_obs)[1].cpu().numpy()
            rewards[step] = to_device(reward, device, pinned, "reward")
            dones[step] = to_device(terminations | truncations, device, pinned, "done")
            next_obs = to_device(next_obs, device, pinned, "obs")

        games = [game for rank_games in gather_on_rank0(finished) or [] for game in rank_games]
        for game_return, game_length, step_of_end in sorted(games, key=lambda game: game[2]):
            recent_returns.append(game_return)
            writer.add_scalar("charts/episodic_return", game_return, step_of_end)
            writer.add_scalar("charts/episodic_length", game_length, step_of_end)

        with torch.no_grad():
            next_value = agent(next_obs)[1]
        advantages, returns = compute_gae(rewards, values, dones, next_value, args.gamma, args.gae_lambda)
        # (num_steps, num_envs, ...) -> (num_steps * num_envs, ...), the same row order for every field.
        batch = [x.flatten(0, 1) for x in (observations, actions, logprobs, advantages, returns, values)]
        losses = ppo_update(agent, optimizer, batch, args)

        *_, b_returns, b_values = batch
        returns_var = b_returns.var()
        explained_var = (1 - (b_returns - b_values).var() / returns_var).item() if returns_var > 0 else float("nan")
        sps = int((global_step - start_step) / (time.time() - start_time))
        losses["explained_variance"] = explained_var
        scalars = {"charts/SPS": sps, "charts/learning_rate": optimizer.param_groups[0]["lr"]}
        scalars |= {f"losses/{key}": value for key, value in losses.items()}
        recent = f"{np.mean(recent_returns):8.1f}" if recent_returns else "     n/a"
        progress = (
            f"iter {iteration:5d}/{args.num_iterations} step {global_step:9d} sps {sps:5d} return {recent} "
            f"kl {losses['approx_kl']:.4f} clipfrac {losses['clipfrac']:.3f}"
            + (f" [non-finite: {losses['nonfinite_skipped']} steps skipped]" if losses["nonfinite_skipped"] else "")
        )
        if rank == 0:  # the losses are means over the ranks; explained variance and SPS are rank 0's
            for key, value in scalars.items():
                writer.add_scalar(key, value, global_step)
            print(progress)
        if args.checkpoint_every and iteration % args.checkpoint_every == 0 and rank == 0:
            training_state = {
                **model_state(agent, args),
                "optimizer": optimizer.state_dict(),
                "run_name": run_name,
                "wandb_id": wandb_id,
                "iteration": iteration,
                "global_step": global_step,
            }
            save_atomically(training_state, f"runs/{run_name}/checkpoint.pt")
        if args.eval_every and iteration % args.eval_every == 0 and rank == 0:
            eval_returns = evaluate(agent, args, device)
            print(f"eval at step {global_step}: {log_evaluation(writer, eval_returns, global_step)}")

    if args.save_model and rank == 0:
        model_path = f"runs/{run_name}/{args.exp_name}.model"
        torch.save(model_state(agent, args), model_path)
        print(f"model saved to {model_path}")
    eval_returns = final_evaluation(agent, args, device, run_name, writer, global_step) if rank == 0 else None
    envs.close()
    if writer is not None:
        writer.close()
    return eval_returns


if __name__ == "__main__":
    try:
        main(tyro.cli(Args))
    finally:  # on every exit path, errors and --eval-only included
        if dist.is_initialized():
            dist.destroy_process_group()
