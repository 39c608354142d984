"""The scripts run end to end: smoke runs, bad input, reproducibility, learning."""

import glob
import os
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
import tyro

import ppo_atari
import ppo_continuous
import trpo_atari
import trpo_continuous
import trpo_discrete
from benchmarks.summary import read_scalars

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ["--num-envs", "2", "--num-steps", "64", "--total-timesteps", "256", "--eval-episodes", "2"]
SCRIPTS = {
    f"{module.__name__}.py": module
    for module in (trpo_discrete, trpo_continuous, ppo_continuous, trpo_atari, ppo_atari)
}


def run_script(script, *args, cwd):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, os.path.join(REPO, script), *args],
        check=False,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )


def run_main(module, *args):
    """module's command line in this process, as its __main__ block runs it: main(tyro.cli(Args)).

    Returns the exit status the interpreter would give, and prints a SystemExit's message to stderr
    as the interpreter does; read both streams with capfd. A bad-input check needs no process of its
    own, whose start (importing torch) costs seconds."""
    try:
        module.main(tyro.cli(module.Args, args=list(args)))
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        print(e.code, file=sys.stderr)
        return 1
    return 0


def eval_mean(stdout):
    line = next(line for line in stdout.splitlines() if line.startswith("eval: mean return"))
    return float(line.split()[3])


@pytest.mark.parametrize(
    ("script", "env_id"),
    [
        ("trpo_discrete.py", "CartPole-v1"),
        ("trpo_discrete.py", "Acrobot-v1"),
        ("trpo_continuous.py", "Pendulum-v1"),
        ("trpo_continuous.py", "HalfCheetah-v5"),
        ("ppo_continuous.py", "Pendulum-v1"),
        ("ppo_continuous.py", "HalfCheetah-v5"),
    ],
)
def test_smoke_run_trains_logs_and_evaluates(script, env_id, tmp_path):
    result = run_script(script, "--env-id", env_id, *TINY, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    if not torch.cuda.is_available():  # --cuda is the default: without a GPU the run says so and goes on
        assert f"{script}: no GPU available, running on the CPU" in result.stderr
    assert re.search(r"^iter +2/2 ", result.stdout, re.MULTILINE)
    assert np.isfinite(eval_mean(result.stdout))
    event_files = glob.glob(str(tmp_path / "runs" / f"{env_id}__*" / "events.out.tfevents.*"))
    assert len(event_files) == 1


@pytest.mark.parametrize(
    ("script", "env_id"),
    [("trpo_discrete.py", "CartPole-v1"), ("trpo_continuous.py", "Pendulum-v1"), ("ppo_continuous.py", "Pendulum-v1")],
)
def test_save_model_and_capture_video(script, env_id, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run_main(SCRIPTS[script], "--env-id", env_id, *TINY, "--save-model", "--capture-video") == 0
    (model_path,) = glob.glob(str(tmp_path / "runs" / "*" / "*.model"))
    checkpoint = torch.load(model_path)
    assert {"actor", "critic", "obs_rms", "args"} <= checkpoint.keys()
    assert glob.glob(str(tmp_path / "videos" / f"{env_id}__*" / "*.mp4"))
    assert glob.glob(str(tmp_path / "videos" / f"{env_id}__*" / "eval" / "*.mp4"))  # the final evaluation


BAD_INPUTS = [
    ("trpo_discrete.py", ["--env-id", "Pendulum-v1"], "Discrete"),
    ("trpo_continuous.py", ["--env-id", "CartPole-v1"], "Box"),
    ("trpo_discrete.py", ["--env-id", "NoSuchEnv-v0"], "NoSuchEnv-v0"),
    ("trpo_continuous.py", ["--env-id", "NoSuchEnv-v0"], "NoSuchEnv-v0"),
    ("trpo_discrete.py", ["--num-steps", "0"], "num_steps"),
    ("trpo_continuous.py", ["--num-envs", "0"], "num_envs"),
    ("trpo_discrete.py", ["--max-kl", "0"], "max_kl"),
    ("trpo_continuous.py", ["--max-kl", "-0.01"], "max_kl"),
    ("trpo_continuous.py", ["--max-kl", "0.005"], "final_max_kl must be in [0, max_kl = 0.005]"),
    ("ppo_continuous.py", ["--env-id", "CartPole-v1"], "Box"),
    ("ppo_continuous.py", ["--env-id", "NoSuchEnv-v0"], "NoSuchEnv-v0"),
    ("ppo_continuous.py", ["--num-steps", "0"], "num_steps"),
    ("ppo_continuous.py", ["--num-minibatches", "0"], "num_minibatches"),
    ("trpo_discrete.py", ["--max-kl", "nan"], "max_kl"),
    ("trpo_continuous.py", ["--max-kl", "inf"], "max_kl"),
    ("trpo_discrete.py", ["--gamma", "1.5"], "gamma"),
    ("ppo_continuous.py", ["--gae-lambda", "-1"], "gae_lambda"),
    ("trpo_continuous.py", ["--vf-minibatches", "0"], "vf_minibatches"),
    ("trpo_discrete.py", ["--backtrack-coeff", "1"], "backtrack_coeff"),
    ("ppo_continuous.py", ["--learning-rate", "nan"], "learning_rate"),
    ("ppo_continuous.py", ["--clip-coef", "0"], "clip_coef"),
    ("trpo_continuous.py", ["--eval-episodes", "0"], "eval_episodes"),
    ("trpo_continuous.py", ["--target-entropy", "inf"], "target_entropy"),
    ("trpo_continuous.py", ["--target-entropy", "400"], "target_entropy must be in [-20, 20]"),
    ("trpo_continuous.py", ["--seed", "-1"], "seed must be in"),
    ("trpo_discrete.py", ["--seed", "4294967296"], "seed must be in"),
    ("ppo_continuous.py", ["--seed", "-1"], "seed must be in"),
    ("trpo_continuous.py", ["--num-envs", "1", "--num-steps", "1", "--vf-minibatches", "1"], "at least 2"),
    ("trpo_discrete.py", ["--num-envs", "1", "--num-steps", "1", "--vf-minibatches", "1"], "at least 2"),
    ("ppo_continuous.py", ["--num-envs", "1", "--num-steps", "64", "--num-minibatches", "64"], "num_minibatches"),
    ("ppo_continuous.py", ["--num-minibatches", "3"], "num_minibatches must divide"),
    ("trpo_discrete.py", ["--exp-name", "foo/bar", "--save-model"], "exp_name must not contain '/'"),
    # MuJoCo's default env: making it for the checks adds no line of its own.
    ("trpo_continuous.py", ["--eval-only", "notes.txt"], "cannot read model file 'notes.txt'"),
    ("ppo_continuous.py", ["--eval-only", "notes.txt"], "cannot read model file 'notes.txt'"),
    ("ppo_continuous.py", ["--exp-name", "a/b"], "exp_name must not contain '/'"),
    ("trpo_discrete.py", ["--env-id", "ALE/Pong-v5"], "trpo_atari.py"),
    ("trpo_continuous.py", ["--env-id", "BrokenRenderPendulum-v1", "--capture-video"], "--capture-video cannot render"),
    ("ppo_continuous.py", ["--env-id", "BrokenRenderPendulum-v1", "--capture-video"], "no OpenGL context"),
    # An env whose maker takes no render_mode cannot record either.
    ("trpo_discrete.py", ["--env-id", "NaNRewardCartPole-v1", "--capture-video"], "--capture-video cannot render"),
    # The Atari scripts.
    ("ppo_atari.py", ["--env-id", "CartPole-v1"], "CartPole-v1"),
    ("ppo_atari.py", ["--env-id", "NoSuchGameNoFrameskip-v4"], "NoSuchGameNoFrameskip-v4"),
    ("ppo_atari.py", ["--num-envs", "0"], "num_envs"),
    ("ppo_atari.py", ["--num-minibatches", "0"], "num_minibatches"),
    ("ppo_atari.py", ["--checkpoint-every", "-1"], "checkpoint_every"),
    ("ppo_atari.py", ["--resume", "missing.pt"], "missing.pt"),
    ("trpo_atari.py", ["--env-id", "Pendulum-v1"], "Pendulum-v1"),
    ("trpo_atari.py", ["--env-id", "ALE/NoSuchGame-v5"], "ALE/NoSuchGame-v5"),
    ("trpo_atari.py", ["--num-steps", "0"], "num_steps"),
    ("trpo_atari.py", ["--max-kl", "0"], "max_kl"),
    ("trpo_atari.py", ["--checkpoint-every", "-1"], "checkpoint_every"),
    ("trpo_atari.py", ["--resume", "missing.pt"], "missing.pt"),
    ("trpo_atari.py", ["--max-kl", "nan"], "max_kl"),
    ("trpo_atari.py", ["--max-kl", "0.2"], "max_state_kl"),
    ("trpo_atari.py", ["--cg-damping", "-1"], "cg_damping"),
    ("trpo_atari.py", ["--gamma", "1.5"], "gamma"),
    ("trpo_atari.py", ["--vf-minibatches", "0"], "vf_minibatches"),
    ("trpo_atari.py", ["--target-entropy-frac", "1"], "target_entropy_frac"),
    ("ppo_atari.py", ["--gae-lambda", "-1"], "gae_lambda"),
    ("ppo_atari.py", ["--learning-rate", "inf"], "learning_rate"),
    ("ppo_atari.py", ["--eval-only", "missing.model"], "missing.model"),
    ("trpo_atari.py", ["--eval-only", "missing.model"], "missing.model"),
    ("ppo_atari.py", ["--seed", "2147483648"], "seed must be in [0, 2**31 - num_envs]"),
    ("trpo_atari.py", ["--seed", "4294967295"], "seed must be in [0, 2**31 - num_envs]"),
    ("trpo_atari.py", ["--num-envs", "1", "--num-steps", "1", "--vf-minibatches", "1"], "at least 2"),
    (
        "ppo_atari.py",
        ["--num-envs", "2", "--num-steps", "2", "--num-minibatches", "4"],
        "num_minibatches must divide",
    ),
    ("ppo_atari.py", ["--exp-name", "a/b"], "exp_name must not contain '/'"),
    ("trpo_atari.py", ["--env-id", "CartPole-v1"], "not an Atari game"),
]


@pytest.mark.parametrize(("script", "args", "mentions"), BAD_INPUTS)
def test_bad_input_gives_one_line_error(script, args, mentions, tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    assert run_main(SCRIPTS[script], *args) != 0
    lines = capfd.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{script}: error:") and mentions in lines[0]
    assert not any(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize("script", SCRIPTS)
def test_fields_computed_at_runtime_are_not_flags(script, capfd):
    assert run_main(SCRIPTS[script], "--batch-size", "64") != 0
    assert "--batch-size" in capfd.readouterr().err
    assert run_main(SCRIPTS[script], "--help") == 0
    help_text = capfd.readouterr().out
    assert "--num-envs" in help_text and "--batch-size" not in help_text


@pytest.mark.parametrize(
    ("script", "env_id", "other_env_id"),
    [
        ("trpo_discrete.py", "CartPole-v1", "Acrobot-v1"),
        ("trpo_continuous.py", "Pendulum-v1", "MountainCarContinuous-v0"),
    ],
)
def test_eval_only_plays_and_records_a_saved_model_and_rejects_a_bad_file_in_one_line(
    script, env_id, other_env_id, tmp_path, monkeypatch, capfd
):
    module = SCRIPTS[script]
    for folder in ("train", "bad"):
        (tmp_path / folder).mkdir()
    monkeypatch.chdir(tmp_path / "train")
    assert run_main(module, "--env-id", env_id, *TINY, "--save-model") == 0
    train_stdout = capfd.readouterr().out
    (model_path,) = glob.glob(str(tmp_path / "train" / "runs" / "*" / "*.model"))
    monkeypatch.chdir(tmp_path)
    assert (
        run_main(module, "--env-id", env_id, "--eval-only", model_path, "--eval-episodes", "2", "--capture-video") == 0
    )
    # The same policy, the same evaluation seed: the score the training run printed.
    assert eval_mean(capfd.readouterr().out) == eval_mean(train_stdout)
    assert glob.glob(str(tmp_path / "videos" / f"{env_id}__*" / "eval" / "*.mp4"))
    assert not (tmp_path / "runs").exists()  # watching a model writes no training logs
    (tmp_path / "one").mkdir()
    monkeypatch.chdir(tmp_path / "one")
    assert (
        run_main(module, "--env-id", env_id, "--eval-only", model_path, "--eval-episodes", "1", "--capture-video") == 0
    )
    assert len(glob.glob(str(tmp_path / "one" / "videos" / "*" / "eval" / "*.mp4"))) == 1  # no stray video after it
    capfd.readouterr()

    data = Path(model_path).read_bytes()
    (tmp_path / "truncated.model").write_bytes(data[: len(data) // 2])
    (tmp_path / "garbage.model").write_bytes(b"not a model")
    torch.save(torch.zeros(3), tmp_path / "bare.model")
    monkeypatch.chdir(tmp_path / "bad")
    for bad_model, bad_env, mentions in [
        ("../truncated.model", env_id, "cannot read"),
        ("../garbage.model", env_id, "cannot read"),
        ("missing.model", env_id, "cannot read"),
        (model_path, other_env_id, "not a model of this script"),
        ("../bare.model", env_id, "not a model of this script"),
    ]:
        assert run_main(module, "--env-id", bad_env, "--eval-only", bad_model) != 0
        (line,) = capfd.readouterr().err.strip().splitlines()
        assert line.startswith(f"{script}: error:") and mentions in line, line


@pytest.mark.parametrize("script", [trpo_discrete, trpo_continuous, ppo_continuous])
def test_evaluation_during_training_leaves_the_training_run_unchanged(script, tmp_path, monkeypatch):
    env_id = "CartPole-v1" if script is trpo_discrete else "Pendulum-v1"
    runs = {}
    for eval_every in (0, 1):
        (tmp_path / str(eval_every)).mkdir()
        monkeypatch.chdir(tmp_path / str(eval_every))
        args = script.Args(env_id=env_id, num_envs=2, num_steps=128, total_timesteps=768, eval_episodes=2)
        args.eval_every = eval_every
        final_returns = script.main(args)
        runs[eval_every] = (final_returns, read_scalars(tmp_path / str(eval_every)))
    (returns_without, scalars_without), (returns_with, scalars_with) = runs[0], runs[1]
    assert returns_with == returns_without
    for tag in (
        "charts/episodic_return",
        "losses/value_loss",
        "trpo/kl" if script is not ppo_continuous else "losses/approx_kl",
    ):
        np.testing.assert_array_equal(scalars_with[tag][1], scalars_without[tag][1], err_msg=tag)
    # One point per iteration with --eval-every 1, and the final evaluation's mean as the last one.
    steps, means = scalars_with["eval/episodic_return"]
    assert list(steps) == [256, 512, 768, 768]
    assert means[-1] == pytest.approx(np.mean(returns_with))
    assert list(scalars_without["eval/episodic_return"][0]) == [768]


@pytest.mark.parametrize("script", [trpo_discrete, trpo_continuous, ppo_continuous])
def test_same_seed_gives_same_model_and_returns_and_another_seed_does_not(script, tmp_path, monkeypatch):
    env_id = "CartPole-v1" if script is trpo_discrete else "Pendulum-v1"
    results = []
    for run, seed in (("a", 1), ("b", 1), ("c", 2)):
        (tmp_path / run).mkdir()
        monkeypatch.chdir(tmp_path / run)
        args = script.Args(env_id=env_id, seed=seed, num_envs=2, num_steps=128, total_timesteps=768, eval_episodes=3)
        args.save_model = True
        eval_returns = script.main(args)
        (model_path,) = glob.glob(str(tmp_path / run / "runs" / "*" / "*.model"))
        results.append((eval_returns, torch.load(model_path)["actor"]))
    (returns_a, actor_a), (returns_b, actor_b), (returns_c, actor_c) = results
    assert returns_a == returns_b
    for name in actor_a:
        assert torch.equal(actor_a[name], actor_b[name]), name
    assert returns_c != returns_a
    assert any(not torch.equal(actor_a[name], actor_c[name]) for name in actor_a)


def test_trpo_discrete_solves_cartpole_within_100k_steps(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    eval_returns = trpo_discrete.main(trpo_discrete.Args(env_id="CartPole-v1", seed=1, total_timesteps=100_000))
    assert np.mean(eval_returns) >= 475


def test_trpo_continuous_learns_pendulum_within_200k_steps(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # rl-zoo's Pendulum setting: gamma 0.9, with sb3-contrib's GAE lambda 0.95. At gamma 0.99 some
    # runs had not learned by 200k steps (every evaluation episode near -640 or -900), and at gamma
    # 0.9 with the script's default lambda 0.9 seed 1 failed with two torch threads; which runs fail
    # depends on float rounding, so a change of threads or of summation order turned this test red.
    args = trpo_continuous.Args(env_id="Pendulum-v1", seed=1, gamma=0.9, gae_lambda=0.95, total_timesteps=200_000)
    # The median: most episodes swing the pendulum up and hold it; one bad start can cost -1500.
    assert np.median(trpo_continuous.main(args)) >= -300


@pytest.mark.parametrize(("script", "log_std"), [(trpo_continuous, -1.0), (ppo_continuous, 0.0)])
def test_the_gaussian_policy_starts_at_its_log_std(script, log_std, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    entropies = []
    dist = script.Actor.dist
    monkeypatch.setattr(
        script.Actor, "dist", lambda self, obs: entropies.append(self.log_std.tolist()) or dist(self, obs)
    )
    script.main(script.Args(env_id="Pendulum-v1", num_envs=1, num_steps=64, total_timesteps=64, eval_episodes=1))
    assert entropies[0] == [log_std]  # the rollout's policy, the initial one


def short_pendulum_entropy_run(tmp_path, monkeypatch, name, *flags):
    """(entropy, ent_coef) per update of a 10,240-step Pendulum run of trpo_continuous.py with a
    fast controller, run in tmp_path/name."""
    (tmp_path / name).mkdir()
    monkeypatch.chdir(tmp_path / name)
    size = ["--env-id", "Pendulum-v1", "--num-envs", "2", "--num-steps", "256", "--total-timesteps", "10240"]
    monkeypatch.setattr(trpo_continuous, "ENT_COEF_RATE", 5.0)
    assert run_main(trpo_continuous, *size, *flags) == 0
    scalars = read_scalars(tmp_path / name)
    return scalars["losses/entropy"][1], scalars["trpo/ent_coef"][1]


def test_trpo_continuous_entropy_bonus_holds_the_entropy_up_only_with_a_target(tmp_path, monkeypatch):
    # A target above the starting entropy (0.92 nats at std 0.61, Pendulum has one action dimension):
    # the bonus climbs to its cap, the entropy rises to the target and the bonus falls back. Without a
    # target the bonus stays 0 and the entropy stays far below 1.5. Whether it rises or falls a little
    # within so short a run depends on float rounding (the thread count), so that is not asserted.
    monkeypatch.setattr(trpo_continuous, "LOG_STD_INIT", -0.5)
    entropy, bonus = short_pendulum_entropy_run(tmp_path, monkeypatch, "1.5", "--target-entropy", "1.5")
    assert bonus.max() == pytest.approx(0.1) and bonus[-1] < 0.05
    assert entropy[-1] > 1.4 > entropy[0]
    entropy, bonus = short_pendulum_entropy_run(tmp_path, monkeypatch, "None", "--target-entropy", "None")
    assert (bonus == 0).all() and entropy.max() < 1.2


def test_trpo_continuous_critic_is_wider_than_the_actor(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run_main(trpo_continuous, "--env-id", "Pendulum-v1", *TINY, "--save-model") == 0
    (model_path,) = glob.glob(str(tmp_path / "runs" / "*" / "*.model"))
    checkpoint = torch.load(model_path)
    # Pendulum's 3 observation dimensions -> 256 -> 256 -> 1 for the critic, -> 64 -> 64 -> 1 for the actor.
    shapes = {net: [tuple(w.shape) for k, w in checkpoint[net].items() if k.endswith("weight")] for net in checkpoint}
    assert shapes["critic"] == [(256, 3), (256, 256), (1, 256)]
    assert shapes["actor"] == [(64, 3), (64, 64), (1, 64)]


def scalars_of_four_updates(flags_by_run, tmp_path, monkeypatch):
    """trpo_continuous on Pendulum for four updates of 128 samples, once per entry of flags_by_run (run
    name: list of arguments): the logged scalars of each run, by name."""
    scalars = {}
    for name, flags in flags_by_run.items():
        folder = tmp_path / name
        folder.mkdir()
        monkeypatch.chdir(folder)
        tiny = ["--env-id", "Pendulum-v1", "--num-envs", "2", "--num-steps", "64", "--total-timesteps", "512"]
        assert run_main(trpo_continuous, *tiny, "--eval-episodes", "1", *flags) == 0
        scalars[name] = read_scalars(folder)
    return scalars


def test_trpo_continuous_trust_region_shrinks_linearly_to_final_max_kl_by_default(tmp_path, monkeypatch):
    runs = {"constant": ["--final-max-kl", "0.04"], "default": [], "to0.02": ["--final-max-kl", "0.02"]}
    scalars = scalars_of_four_updates(runs, tmp_path, monkeypatch)
    # Four updates: max_kl = 0.04 for the first, then down by a quarter of the way to final_max_kl
    # (0.01 by default) per update.
    radii = {"constant": [0.04] * 4, "default": [0.04, 0.0325, 0.025, 0.0175], "to0.02": [0.04, 0.035, 0.03, 0.025]}
    for name, run_radii in radii.items():
        assert list(scalars[name]["trpo/max_kl"][1]) == pytest.approx(run_radii)
        # Every accepted step stays inside its own update's radius (a radius only logged, not used,
        # would let the later steps reach 0.04); the first update is the same in every run.
        kl = np.array(scalars[name]["trpo/kl"][1])
        assert np.isfinite(kl).all()
        assert (kl <= np.array(run_radii) + 1e-6).all()
        assert kl[0] == scalars["constant"]["trpo/kl"][1][0]


def test_ppo_continuous_learns_pendulum_within_200k_steps(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # rl-zoo's Pendulum gamma (0.9) and learning rate (1e-3), in 4 minibatches of 512 rather than 32
    # of 64: an eighth of the Adam steps, each of which costs torch's per-call overhead more than its
    # arithmetic. Seeds 1-5 evaluate at a median near -128 with one or two torch threads.
    args = ppo_continuous.Args(
        env_id="Pendulum-v1", seed=1, gamma=0.9, learning_rate=1e-3, num_minibatches=4, total_timesteps=200_000
    )
    # The median, as for TRPO above: one bad start can cost -1500.
    assert np.median(ppo_continuous.main(args)) >= -300


class NaNRewardAt300(gym.Wrapper):
    """Returns a NaN reward at the 300th step of the env's life, as a broken reward function would."""

    def __init__(self, env):
        super().__init__(env)
        self.steps = 0

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        return obs, float("nan") if self.steps == 300 else reward, terminated, truncated, info


gym.register("NaNRewardCartPole-v1", lambda: NaNRewardAt300(gym.make("CartPole-v1")))
gym.register("NaNRewardPendulum-v1", lambda: NaNRewardAt300(gym.make("Pendulum-v1")))


class BrokenRender(gym.Wrapper):
    """Renders as MuJoCo does on a machine without an OpenGL back end."""

    def render(self):
        raise RuntimeError("no OpenGL context\n(and a long explanation on further lines)")


gym.register("BrokenRenderPendulum-v1", lambda **kwargs: BrokenRender(gym.make("Pendulum-v1", **kwargs)))


@pytest.mark.parametrize("script", [trpo_discrete, trpo_continuous, ppo_continuous])
def test_non_finite_reward_skips_that_update_and_training_goes_on(script, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    env_id = "NaNRewardCartPole-v1" if script is trpo_discrete else "NaNRewardPendulum-v1"
    # 4 envs x 128 steps per rollout: every env's NaN lands in the third rollout.
    args = script.Args(env_id=env_id, num_envs=4, num_steps=128, total_timesteps=4 * 128 * 6, eval_episodes=2)
    args.save_model = True
    script.main(args)
    progress = [line for line in capsys.readouterr().out.splitlines() if line.startswith("iter")]
    assert len(progress) == 6
    assert "non-finite" in progress[2]
    # Nothing of the NaN outlives its rollout (running reward statistics included).
    assert not any("non-finite" in line for line in progress[:2] + progress[3:]), progress
    (model_path,) = glob.glob(str(tmp_path / "runs" / "*" / "*.model"))
    checkpoint = torch.load(model_path, weights_only=True)
    for network in ("actor", "critic"):
        for name, value in checkpoint[network].items():
            assert torch.isfinite(value).all(), f"{network}.{name}"


def test_an_atari_id_in_the_discrete_script_points_to_the_atari_scripts(tmp_path):
    """In a process of its own: no other script has registered ALE's ids there."""
    result = run_script("trpo_discrete.py", "--env-id", "BreakoutNoFrameskip-v4", cwd=tmp_path)
    assert result.returncode != 0 and not any(tmp_path.iterdir())
    (line,) = [line for line in result.stderr.strip().splitlines() if "no GPU" not in line]
    assert (
        line
        == "trpo_discrete.py: error: BreakoutNoFrameskip-v4 is an Atari game, which trpo_atari.py learns from its frames"
    )
