"""ppo_atari.py and trpo_atari.py: the training and evaluation envs, checkpoints, bfloat16."""

import re
import sys
import types
from functools import partial

import ale_py
import gymnasium as gym
import numpy as np
import pytest
import torch

import ppo_atari
import ppo_atari_multigpu
import trpo_atari
import trpo_atari_multigpu
from benchmarks.summary import read_scalars
from tests.test_scripts import SCRIPTS, eval_mean, run_main, run_script

TINY_ATARI = [
    "--num-envs", "2", "--num-steps", "32", "--total-timesteps", "128",
    "--num-minibatches", "2", "--update-epochs", "1", "--eval-episodes", "1",
]  # fmt: skip
TINY_TRPO_ATARI = [
    "--num-envs", "2", "--num-steps", "32", "--total-timesteps", "128",
    "--vf-epochs", "1", "--vf-minibatches", "2", "--eval-episodes", "1",
]  # fmt: skip


@pytest.mark.parametrize(
    ("env_id", "game", "sticky"),
    [("BreakoutNoFrameskip-v4", "breakout", 0.0), ("ALE/MsPacman-v5", "ms_pacman", 0.25)],
)
def test_training_envs_play_the_ids_game_with_its_sticky_actions(env_id, game, sticky):
    envs = ppo_atari.make_envs(ppo_atari.Args(env_id=env_id, num_envs=2))
    # The ale vector env keeps its settings in the C++ core; its minimal action set is the game's.
    assert envs.single_action_space.n == ppo_atari.make_env(env_id)().action_space.n
    assert gym.spec(env_id).kwargs["game"] == game and gym.spec(env_id).kwargs["repeat_action_probability"] == sticky
    obs, _ = envs.reset(seed=3)
    assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
    envs.close()


def test_life_loss_terminates_but_game_score_spans_all_lives():
    envs = ppo_atari.make_envs(ppo_atari.Args(num_envs=1))
    _, infos = envs.reset(seed=3)
    scores = ppo_atari.GameScores(infos["lives"])
    rng = np.random.default_rng(0)
    reward_sum, terminations, games = 0.0, 0, []
    for _ in range(20_000):
        _, reward, terminated, truncated, infos = envs.step(rng.integers(envs.single_action_space.n, size=1))
        reward_sum += reward[0]
        terminations += int(terminated[0])
        games = scores.update(reward, terminated, truncated, infos["lives"])
        if games:
            break
    envs.close()
    ((game_return, _),) = games
    # Breakout has five lives: four life-loss terminations, then the game over, reported once;
    # unclipped rewards from the env: the score is their sum over all lives.
    assert terminations == 5
    assert game_return == reward_sum > 0


@pytest.mark.parametrize("script", [ppo_atari, trpo_atari])
def test_training_envs_serve_at_game_start_but_not_after_a_lost_life(script):
    envs = script.make_envs(script.Args(num_envs=1))
    envs.reset(seed=3)
    # NOOP only: the ball served at the start is lost; after that nothing serves it again.
    terminations = sum(int(envs.step(np.zeros(1, dtype=np.int64))[2][0]) for _ in range(1_000))
    envs.close()
    assert terminations == 1


def test_evaluation_env_plays_whole_games_with_unclipped_scores():
    env = ppo_atari.make_env("BreakoutNoFrameskip-v4")()
    obs, _ = env.reset(seed=3)
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    rng = np.random.default_rng(0)
    lives, rewards = [env.unwrapped.ale.lives()], []
    for _ in range(20_000):
        obs, reward, terminated, truncated, _ = env.step(rng.integers(env.action_space.n))
        rewards.append(reward)
        lives.append(env.unwrapped.ale.lives())
        if terminated or truncated:
            break
    env.close()
    assert terminated and lives[0] == 5 and lives[-1] == 0  # one episode is one whole game
    assert sum(rewards) > 0 and set(rewards) <= {0.0, 1.0, 4.0, 7.0}  # Breakout's unclipped brick values


@pytest.mark.parametrize("script", ["ppo_atari.py", "trpo_atari.py"])
def test_atari_smoke(script, tmp_path):
    tiny = TINY_ATARI if script == "ppo_atari.py" else TINY_TRPO_ATARI
    result = run_script(script, *tiny, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert re.search(r"^iter +2/2 ", result.stdout, re.MULTILINE)
    assert np.isfinite(eval_mean(result.stdout))


@pytest.mark.parametrize(
    "make_network", [partial(ppo_atari.Agent, 4), trpo_atari.Critic], ids=["ppo_agent", "trpo_critic"]
)
def test_bf16_networks_stay_close_to_float32_and_train_float32_weights(make_network):
    torch.manual_seed(0)
    network, network_bf16 = make_network(), make_network(bf16=True)
    network_bf16.load_state_dict(network.state_dict())
    frames = torch.randint(0, 256, (64, 4, 84, 84), dtype=torch.uint8)
    outputs, outputs_bf16 = network(frames), network_bf16(frames)
    if isinstance(outputs, torch.Tensor):
        outputs, outputs_bf16 = (outputs,), (outputs_bf16,)
    for ours, reference in zip(outputs_bf16, outputs):
        assert ours.dtype == torch.float32
        relative_error = ((ours - reference).abs().max() / reference.abs().max()).item()
        # bfloat16 keeps 8 significant bits: the trunk really ran in it, and stayed within a few 2**-8.
        assert 1e-4 < relative_error < 0.03
    sum(output.sum() for output in outputs_bf16).backward()
    assert all(p.dtype == p.grad.dtype == torch.float32 for p in network_bf16.parameters())


@pytest.mark.parametrize(
    ("make_network", "plain_forward"),
    [
        (partial(ppo_atari.Agent, 4), lambda agent, x: (agent.actor(h := agent.trunk(x)), agent.critic(h).squeeze(-1))),
        (partial(trpo_atari.Actor, 4), lambda actor, x: actor.net(x)),
        (trpo_atari.Critic, lambda critic, x: critic.net(x).squeeze(-1)),
    ],
    ids=["ppo_agent", "trpo_actor", "trpo_critic"],
)
def test_channels_last_frames_give_the_outputs_and_gradients_of_the_plain_layout(make_network, plain_forward):
    torch.manual_seed(0)
    network, plain = make_network(), make_network()
    plain.load_state_dict(network.state_dict())
    frames = torch.randint(0, 256, (16, 4, 84, 84), dtype=torch.uint8)
    outputs, expected = network(frames), plain_forward(plain, frames.float() / 255.0)
    if isinstance(outputs, torch.Tensor):
        outputs, expected = (outputs,), (expected,)
    torch.testing.assert_close(outputs, expected, rtol=1e-4, atol=1e-5)
    sum((output**2).sum() for output in outputs).backward()
    sum((output**2).sum() for output in expected).backward()
    for ours, reference in zip(network.parameters(), plain.parameters()):
        torch.testing.assert_close(ours.grad, reference.grad, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("script", ["ppo_atari.py", "trpo_atari.py"])
def test_atari_bf16_smoke(script, tmp_path):
    tiny = TINY_ATARI if script == "ppo_atari.py" else TINY_TRPO_ATARI
    result = run_script(script, "--bf16", *tiny, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert re.search(r"^iter +2/2 ", result.stdout, re.MULTILINE)
    assert np.isfinite(eval_mean(result.stdout))


@pytest.mark.parametrize("script", ["ppo_atari.py", "trpo_atari.py"])
def test_atari_save_model_and_capture_video(script, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tiny = TINY_ATARI if script == "ppo_atari.py" else TINY_TRPO_ATARI
    assert run_main(SCRIPTS[script], *tiny, "--save-model", "--capture-video") == 0
    assert list(tmp_path.glob(f"runs/*/{script[:-3]}.model"))
    # The final evaluation's games, one video each; training runs in ale-py's vector env, unrecorded.
    assert len(list(tmp_path.glob("videos/BreakoutNoFrameskip-v4__*/eval/*.mp4"))) == 1
    assert not list(tmp_path.glob("videos/BreakoutNoFrameskip-v4__*/*.mp4"))


@pytest.mark.parametrize(("script", "other"), [("ppo_atari.py", "trpo_atari.py"), ("trpo_atari.py", "ppo_atari.py")])
def test_atari_refuses_a_bare_tensor_and_the_other_scripts_checkpoint_before_writing(
    script, other, tmp_path, monkeypatch, capfd
):
    (tmp_path / "other").mkdir()
    monkeypatch.chdir(tmp_path / "other")
    tiny = TINY_ATARI if other == "ppo_atari.py" else TINY_TRPO_ATARI
    assert run_main(SCRIPTS[other], *tiny, "--checkpoint-every", "1") == 0
    (checkpoint,) = (tmp_path / "other").glob("runs/*/checkpoint.pt")
    before = sorted((tmp_path / "other").rglob("*"))
    torch.save(torch.zeros(3), tmp_path / "bare.model")
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    capfd.readouterr()
    for flags, mentions in [
        (["--eval-only", "../bare.model"], "not a model"),
        (["--resume", str(checkpoint)], "not a checkpoint"),
    ]:
        assert run_main(SCRIPTS[script], *flags) != 0
        (line,) = capfd.readouterr().err.strip().splitlines()
        assert line.startswith(f"{script}: error:") and mentions in line, line
    assert not any((tmp_path / "here").iterdir())
    assert sorted((tmp_path / "other").rglob("*")) == before  # nothing written into the other run's folder


@pytest.mark.parametrize("script", ["ppo_atari.py", "trpo_atari.py"])
def test_atari_eval_only_plays_a_saved_model_and_records_it(script, tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    tiny = TINY_ATARI if script == "ppo_atari.py" else TINY_TRPO_ATARI
    assert run_main(SCRIPTS[script], *tiny, "--save-model") == 0
    train_stdout = capfd.readouterr().out
    (model_path,) = tmp_path.glob(f"runs/*/{script[:-3]}.model")
    assert run_main(SCRIPTS[script], "--eval-only", str(model_path), "--eval-episodes", "1", "--capture-video") == 0
    assert eval_mean(capfd.readouterr().out) == eval_mean(train_stdout)  # same policy, same evaluation seed
    assert list(tmp_path.glob("videos/BreakoutNoFrameskip-v4__*/eval/*.mp4"))
    other = "trpo_atari.py" if script == "ppo_atari.py" else "ppo_atari.py"
    assert run_main(SCRIPTS[other], "--eval-only", str(model_path)) != 0
    (line,) = capfd.readouterr().err.strip().splitlines()
    assert line.startswith(f"{other}: error:") and "not a model of this script" in line


def test_trpo_atari_bootstraps_a_time_limit_with_integer_ale_rewards(tmp_path, monkeypatch):
    """ale-py's vector env returns int32 rewards; adding gamma * V(final obs) to them must work."""
    monkeypatch.chdir(tmp_path)
    truncations = []

    class ShortGames(ale_py.vector_env.AtariVectorEnv):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "max_num_frames_per_episode": 80})

        def step(self, actions):
            result = super().step(actions)
            truncations.append(result[3].copy())
            return result

    monkeypatch.setattr(ale_py.vector_env, "AtariVectorEnv", ShortGames)
    trpo_atari.main(tiny_args(trpo_atari, total_timesteps=128))
    assert np.concatenate(truncations).any()  # the time limit did cut games during the rollout


@pytest.mark.parametrize("script", [ppo_atari, trpo_atari])
def test_a_time_limit_stores_the_clipped_reward_plus_gamma_times_the_value_of_the_final_frame(
    script, tmp_path, monkeypatch
):
    """Every state's value is 7: a truncated step stores sign(r) + 0.99 * 7, any other step sign(r)."""
    monkeypatch.chdir(tmp_path)
    steps = []  # (reward, terminated, truncated) as the env returned them

    class ShortGames(ale_py.vector_env.AtariVectorEnv):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "max_num_frames_per_episode": 80})

        def step(self, actions):
            result = super().step(actions)
            steps.append((np.array(result[1], dtype=np.float64), result[2].copy(), result[3].copy()))
            return result

    stored = []  # the rewards each update's GAE gets

    def recording_gae(rewards, *rest):
        stored.append(rewards.clone())
        return gae(rewards, *rest)

    if script is ppo_atari:

        class Network(ppo_atari.Agent):
            def forward(self, obs):
                logits, values = super().forward(obs)
                return logits, torch.full_like(values, 7.0)

        monkeypatch.setattr(script, "Agent", Network)
    else:

        class Network(trpo_atari.Critic):
            def forward(self, obs):
                return 0.0 * super().forward(obs) + 7.0  # still a graph for the critic's fit

        monkeypatch.setattr(script, "Critic", Network)
        monkeypatch.setattr(script.RunningMeanStd, "update", lambda self, batch: None)  # rewards scaled by 1
    gae = script.compute_gae
    monkeypatch.setattr(script, "compute_gae", recording_gae)
    monkeypatch.setattr(ale_py.vector_env, "AtariVectorEnv", ShortGames)
    script.main(tiny_args(script, total_timesteps=128))
    rewards, terminated, truncated = (np.stack(column) for column in zip(*steps))
    time_limit = truncated & ~terminated
    assert time_limit.any()
    expected = np.sign(rewards) + 0.99 * 7.0 * time_limit
    np.testing.assert_allclose(torch.cat(stored).numpy(), expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("script", [ppo_atari, trpo_atari])
def test_atari_evaluation_during_training_leaves_the_training_run_unchanged(script, tmp_path, monkeypatch):
    runs = {}
    for eval_every in (0, 1):
        (tmp_path / str(eval_every)).mkdir()
        monkeypatch.chdir(tmp_path / str(eval_every))
        args = tiny_args(script, total_timesteps=128)
        args.eval_every, args.save_model = eval_every, True
        runs[eval_every] = (script.main(args), torch.load(next((tmp_path / str(eval_every)).glob("runs/*/*.model"))))
    (returns_without, model_without), (returns_with, model_with) = runs[0], runs[1]
    assert returns_with == returns_without
    network = "agent" if script is ppo_atari else "actor"
    for name, weight in model_without[network].items():
        assert torch.equal(model_with[network][name], weight), name
    steps, _ = read_scalars(tmp_path / "1")["eval/episodic_return"]
    assert list(steps) == [64, 128, 128]


def tiny_args(script, total_timesteps):
    """In-process Args for a few updates of 2 envs x 32 steps, one small update pass each."""
    args = script.Args(num_envs=2, num_steps=32, total_timesteps=total_timesteps, eval_episodes=1)
    if script in (trpo_atari, trpo_atari_multigpu):
        args.vf_epochs, args.vf_minibatches = 1, 2
    else:
        args.update_epochs, args.num_minibatches = 1, 2
    return args


@pytest.mark.parametrize("script", [trpo_atari, trpo_atari_multigpu])
def test_bf16_runs_the_critic_in_bfloat16_and_never_the_policy(script, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    calls = set()  # (outputs of the network's last layer, bf16): 4 for Breakout's policy, 1 for the critic
    forward = script.nature_cnn_forward

    def recording_forward(net, obs, bf16):
        calls.add((net[-1].out_features, bf16))
        return forward(net, obs, bf16)

    monkeypatch.setattr(script, "nature_cnn_forward", recording_forward)
    args = tiny_args(script, total_timesteps=64)
    args.bf16 = True
    script.main(args)
    assert calls == {(4, False), (1, True)}


@pytest.mark.parametrize("script", [ppo_atari, ppo_atari_multigpu])
@pytest.mark.parametrize("bf16", [False, True])
def test_ppo_bf16_runs_the_trunk_in_bfloat16(script, bf16, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    trunk_dtypes = set()

    class Recorded(script.Agent):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.trunk.register_forward_hook(lambda module, inputs, output: trunk_dtypes.add(output.dtype))

    monkeypatch.setattr(script, "Agent", Recorded)
    args = tiny_args(script, total_timesteps=64)
    args.bf16 = bf16
    script.main(args)
    assert trunk_dtypes == {torch.bfloat16 if bf16 else torch.float32}


@pytest.mark.parametrize("script", [trpo_atari, trpo_atari_multigpu])
def test_trpo_atari_turns_tf32_convolutions_off(script, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", True)
    script.main(tiny_args(script, total_timesteps=64))
    assert torch.backends.cudnn.allow_tf32 is False


@pytest.mark.parametrize("script", [ppo_atari, trpo_atari, ppo_atari_multigpu, trpo_atari_multigpu])
def test_resume_continues_the_run_from_its_checkpoint(script, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    is_trpo = script in (trpo_atari, trpo_atari_multigpu)
    networks = ("actor", "critic") if is_trpo else ("agent",)

    def run(total_timesteps, resume=None):
        args = tiny_args(script, total_timesteps)
        args.checkpoint_every, args.save_model, args.resume = 2, True, resume
        script.main(args)

    run(total_timesteps=192)  # 3 updates; the checkpoint is taken after the 2nd
    (run_folder,) = (tmp_path / "runs").iterdir()
    saved = torch.load(run_folder / "checkpoint.pt", weights_only=True)
    assert (saved["iteration"], saved["global_step"]) == (2, 128)
    torch.save(saved, tmp_path / "at_2.pt")

    # Nothing left to train: the model written at the end is the checkpoint's, weight for weight.
    run(total_timesteps=128, resume=str(tmp_path / "at_2.pt"))
    model = torch.load(run_folder / f"{script.__name__}.model")
    for network in networks:
        for name, weight in saved[network].items():
            assert torch.equal(model[network][name], weight), (network, name)

    # Update 3 again, in the same log folder: what the interrupted run logged for update 3 is
    # purged, and the schedules go on from where the checkpoint left them.
    run(total_timesteps=192, resume=str(tmp_path / "at_2.pt"))
    assert list((tmp_path / "runs").iterdir()) == [run_folder]
    scalars = read_scalars(tmp_path)
    assert list(scalars["charts/SPS"][0]) == [64, 128, 192]
    if is_trpo:
        # The entropy bonus adapted to the entropies of updates 1 and 2 (a restarted one would be back
        # at its initial value, which the near-uniform tiny policy moves it away from).
        defaults, max_entropy = trpo_atari.Args(), np.log(4)  # Breakout: 4 actions
        ent_coef = defaults.ent_coef
        for entropy in scalars["losses/entropy"][1][:2]:
            gap = (defaults.target_entropy_frac * max_entropy - entropy) / max_entropy
            ent_coef = trpo_atari.adapt_entropy_coef(ent_coef, gap)
        assert ent_coef < 0.97 * defaults.ent_coef
        assert saved["ent_coef"] == pytest.approx(ent_coef, rel=1e-5)
        assert scalars["trpo/ent_coef"][1][-1] == pytest.approx(ent_coef, rel=1e-5)
        final = torch.load(run_folder / f"{script.__name__}.model")
        assert final["return_rms"]["count"] > saved["return_rms"]["count"]  # statistics keep counting
    else:
        assert scalars["charts/learning_rate"][1][-1] == pytest.approx(2.5e-4 / 3)  # annealed at update 3 of 3


@pytest.mark.parametrize("script", [ppo_atari, trpo_atari])
def test_tracked_run_resumes_in_the_same_wandb_run(script, tmp_path, monkeypatch):
    """W&B is replaced by a stub that records what wandb.init was given; nothing goes online."""
    init_calls = []

    def init(**kwargs):
        init_calls.append(kwargs)
        fake_wandb.run = types.SimpleNamespace(id=kwargs["id"] or "first-run-id")

    fake_wandb = types.ModuleType("wandb")
    fake_wandb.init = init
    monkeypatch.setitem(sys.modules, "wandb", fake_wandb)
    monkeypatch.chdir(tmp_path)

    def run(total_timesteps, resume=None):
        args = tiny_args(script, total_timesteps)
        args.track, args.checkpoint_every, args.resume = True, 1, resume
        script.main(args)

    run(total_timesteps=64)
    (run_folder,) = (tmp_path / "runs").iterdir()
    assert torch.load(run_folder / "checkpoint.pt", weights_only=True)["wandb_id"] == "first-run-id"
    run(total_timesteps=128, resume=str(run_folder / "checkpoint.pt"))
    assert [(call["id"], call["resume"]) for call in init_calls] == [(None, "allow"), ("first-run-id", "allow")]
    assert init_calls[1]["name"] == init_calls[0]["name"]
