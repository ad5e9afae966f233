"""The Gymnasium envs: the checker, zero-copy buffers, rewards, autoreset, errors, GPU == CPU."""

from __future__ import annotations

import os

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")

import tradesim  # noqa: E402

REQUIRE_GPU = os.environ.get("REQUIRE_GPU") == "1"


def bars():
    return tradesim.synthetic(4_000, seed=2)


def test_single_env_passes_the_gymnasium_checker():
    from gymnasium.utils.env_checker import check_env

    env = tradesim.TradingEnv(bars(), episode_len=30, seed=1)
    check_env(env, skip_render_check=True)
    obs, info = env.reset(seed=3)
    assert env.observation_space.contains(obs) and info["equity"] == 100_000.0
    for step in range(30):
        obs, reward, terminated, truncated, info = env.step(step % 3)
        assert env.observation_space.contains(obs)
    assert truncated and not terminated, "an episode is truncated at its last bar"


def test_vector_env_buffers_are_the_envs_own():
    env = tradesim.VectorEnv(bars(), trials=2, envs=8, episode_len=25, seed=4, device="cpu")
    assert isinstance(env, gym.vector.VectorEnv) and env.num_envs == 16
    obs, _ = env.reset(seed=4)
    address = obs.__array_interface__["data"][0]
    assert obs.base is env._env, "the array is a view whose base is the native env, not a copy"
    assert not obs.flags.writeable and obs.dtype == np.float32 and obs.shape == (16, env.single_observation_space.shape[0])
    before = obs.copy()
    obs2, rewards, terminated, truncated, infos = env.step(np.ones(16, dtype=np.int64))
    assert obs2.__array_interface__["data"][0] == address, "the step wrote the same buffer"
    assert rewards.base is env._env and terminated.dtype == np.bool_ and truncated.dtype == np.bool_
    assert not np.array_equal(before, obs2)
    assert env.observation_space.contains(obs2)


def test_rewards_are_log_returns_and_episodes_autoreset():
    env = tradesim.VectorEnv(bars(), envs=6, episode_len=12, seed=8, spread=0, commission=0, device="cpu")
    _, info = env.reset()
    equity = info["equity"].copy()
    rng = np.random.default_rng(0)
    for step in range(12):
        obs, rewards, terminated, truncated, infos = env.step(rng.integers(0, 3, 6))
        last = step == 11
        assert truncated.all() == last and not terminated.any()
        if not last:
            np.testing.assert_allclose(rewards, np.log(infos["equity"] / equity).astype(np.float32), rtol=0, atol=1e-6)
            assert "final_obs" not in infos
        equity = infos["equity"].copy()
    assert infos["_final_obs"].all()
    assert (infos["equity"] == 100_000.0).all(), "the next episode starts with the capital"
    assert not np.array_equal(infos["final_obs"], obs)
    np.testing.assert_array_equal(obs[:, -3:], 0.0)


def test_bad_actions_and_arguments_are_refused():
    env = tradesim.VectorEnv(bars(), envs=4, episode_len=10, device="cpu")
    with pytest.raises(ValueError, match="0 \\(flat\\)"):
        env.step(np.array([0, 1, 3, 0]))
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros(5, dtype=np.int64))
    with pytest.raises(TypeError):
        env.step(np.zeros(4) + 0.5)
    with pytest.raises(ValueError, match="episode_len"):
        tradesim.VectorEnv(bars(), envs=4, episode_len=10_000, device="cpu")


def run(device: str) -> list[np.ndarray]:
    env = tradesim.VectorEnv(bars(), trials=2, envs=32, episode_len=40, seed=9, device=device)
    obs, _ = env.reset()
    out = [obs.copy()]
    for step in range(100):
        actions = (np.arange(64) * 7 + step) % 3
        obs, rewards, terminated, truncated, _ = env.step(actions)
        out += [obs.copy(), rewards.copy(), terminated.copy(), truncated.copy()]
    return out


def test_vector_env_runs_repeat():
    for a, b in zip(run("cpu"), run("cpu")):
        np.testing.assert_array_equal(a, b)


def test_gpu_vector_env_equals_cpu():
    if tradesim.device_info("auto")["backend"] != "cuda":
        if REQUIRE_GPU:
            pytest.fail("REQUIRE_GPU=1 but no usable GPU")
        pytest.skip("no GPU")
    for a, b in zip(run("cpu"), run("cuda")):
        assert a.tobytes() == b.tobytes()


def test_the_pytorch_example_trains_a_few_hundred_steps():
    pytest.importorskip("torch", reason="PyTorch is not installed here (the GPU host has it)")
    import pathlib
    import subprocess
    import sys

    script = pathlib.Path(__file__).resolve().parents[1] / "examples" / "ppo_torch.py"
    done = subprocess.run(
        [sys.executable, str(script), "--envs", "32", "--steps", "256", "--rollout", "32", "--episode-len", "48",
         "--synthetic", "3000", "--env-device", "cpu"],
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert sum(line.startswith("update ") for line in lines) == 8, done.stdout
    assert lines[-1].startswith("done: 8192 env steps"), done.stdout
    assert "nan" not in done.stdout.split("update 8/8")[1].lower(), "episodes ended within the run"
