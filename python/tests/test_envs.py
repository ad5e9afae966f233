"""The Gymnasium envs: the checker, zero-copy buffers, rewards, autoreset, errors, GPU == CPU."""

from __future__ import annotations

import math
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
    env = tradesim.VectorEnv(bars(), trials=2, envs=8, episode_len=25, seed=4, device="cpu", autoreset_mode="same_step")
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
    env = tradesim.VectorEnv(bars(), envs=6, episode_len=12, seed=8, spread=0, commission=0, device="cpu",
                             autoreset_mode="same_step")
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
    final_obs = np.stack(list(infos["final_obs"]))
    assert final_obs.shape == obs.shape and not np.array_equal(final_obs, obs)
    assert infos["_final_info"].all() and infos["final_info"]["truncated"].all()
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


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_the_pytorch_example_trains_a_few_hundred_steps(device):
    pytest.importorskip("torch", reason="PyTorch is not installed here (the GPU host has it)")
    if device == "cuda":
        need_gpu()
    import pathlib
    import subprocess
    import sys

    script = pathlib.Path(__file__).resolve().parents[1] / "examples" / "ppo_torch.py"
    done = subprocess.run(
        [sys.executable, str(script), "--envs", "32", "--steps", "256", "--rollout", "32", "--episode-len", "48",
         "--synthetic", "3000", "--env-device", device],
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert sum(line.startswith("update ") for line in lines) == 8, done.stdout
    assert lines[-1].startswith(f"done: 8192 env steps on {device}"), done.stdout
    assert "nan" not in done.stdout.split("update 8/8")[1].lower(), "episodes ended within the run"


def need_gpu() -> None:
    if tradesim.device_info("auto")["backend"] != "cuda":
        if REQUIRE_GPU:
            pytest.fail("REQUIRE_GPU=1 but no usable GPU")
        pytest.skip("no GPU")


def test_dlpack_arrays_on_the_cpu_are_the_envs_buffers():
    env = tradesim.VectorEnv(bars(), trials=2, envs=4, episode_len=6, seed=3, device="cpu", arrays="dlpack")
    obs, info = env.reset()
    assert isinstance(obs, tradesim.DLPackArray) and obs.__dlpack_device__() == (1, 0)
    assert obs.shape == (8, env.single_observation_space.shape[0]) and obs.dtype == "float32"
    view = np.from_dlpack(obs)
    assert view.__array_interface__["data"][0] == obs.address, "numpy reads the env's buffer, no copy"
    reference = tradesim.VectorEnv(bars(), trials=2, envs=4, episode_len=6, seed=3, device="cpu",
                                        autoreset_mode="same_step")
    ref_obs, _ = reference.reset()
    for step in range(6):
        actions = np.arange(8) % 3
        obs2, rewards, terminated, truncated, infos = env.step(actions)
        assert obs2 is obs, "the same exported buffer every step"
        ref = reference.step(actions)
        assert view.tobytes() == ref[0].tobytes(), "the view taken before the steps sees each step's values"
        assert np.from_dlpack(rewards).tobytes() == ref[1].tobytes()
        flags = np.from_dlpack(truncated)
        assert flags.dtype == np.bool_ and flags.tolist() == ref[3].tolist()
        assert "final_obs" in infos and "_final_obs" in infos, "device-style infos always carry the mask"
    assert np.from_dlpack(infos["_final_obs"]).all()
    assert np.from_dlpack(infos["equity"]).dtype == np.float64
    # The capsule keeps the env alive after the env object is gone.
    del env, obs2, rewards, terminated, truncated, infos
    assert view.sum() == view.sum()
    with pytest.raises(BufferError, match="without copies"):
        reference._env.dlpack_buffers()[0].__dlpack__(copy=True)
    with pytest.raises(ValueError, match="arrays"):
        tradesim.VectorEnv(bars(), envs=2, episode_len=6, device="cpu", arrays="jax")


def test_money_parameters_per_trial():
    env = tradesim.VectorEnv(bars(), trials=3, envs=2, episode_len=6, device="cpu", capital=[1_000, "2500.50", 4_000],
                             commission=["0", "0.001", "0.002"])
    _, info = env.reset()
    assert info["equity"].tolist() == [1_000.0, 1_000.0, 2_500.5, 2_500.5, 4_000.0, 4_000.0]
    with pytest.raises(ValueError, match="capital: 2 values for 3 trials"):
        tradesim.VectorEnv(bars(), trials=3, envs=2, episode_len=6, device="cpu", capital=[1, 2])
    with pytest.raises(ValueError, match="spread"):
        tradesim.VectorEnv(bars(), trials=2, envs=2, episode_len=6, device="cpu", spread=["0.1", "-1"])


def test_torch_tensors_on_the_gpu_without_copies():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed here (the GPU host has it)")
    need_gpu()
    kwargs = dict(trials=2, envs=32, episode_len=40, seed=9)
    env = tradesim.VectorEnv(bars(), device="cuda", arrays="torch", **kwargs)
    # Torch arrays step in place, so their env autoresets at the same step; the numpy reference must too (its
    # default is Gymnasium's next_step).
    reference = tradesim.VectorEnv(bars(), device="cpu", autoreset_mode="same_step", **kwargs)
    obs, _ = env.reset()
    ref_obs, _ = reference.reset()
    assert obs.is_cuda and obs.dtype == torch.float32 and obs.shape == (64, env.single_observation_space.shape[0])
    assert obs.data_ptr() == env._env.dlpack_buffers()[0].address, "the tensor is the env's device buffer"
    assert obs.cpu().numpy().tobytes() == ref_obs.tobytes()
    ended = 0
    for step in range(100):
        codes = (torch.arange(64, device="cuda") * 7 + step) % 3  # int64 on the GPU, as a policy gives them
        obs2, rewards, terminated, truncated, infos = env.step(codes)
        ref = reference.step(codes.cpu().numpy())
        assert obs2.data_ptr() == obs.data_ptr(), "stepped in place"
        assert obs2.cpu().numpy().tobytes() == ref[0].tobytes()
        assert rewards.cpu().numpy().tobytes() == ref[1].tobytes()
        assert truncated.dtype == torch.bool and truncated.cpu().numpy().tolist() == ref[3].tolist()
        ended += int(infos["_final_obs"].sum())
    assert ended >= 64, "episodes ended and restarted on the device"
    # Other integer types, on a non-default torch stream.
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        codes = torch.ones(64, dtype=torch.int32, device="cuda")
        env.step(codes)
    torch.cuda.current_stream().wait_stream(stream)
    assert obs.cpu().numpy().tobytes() == reference.step(np.ones(64, dtype=np.int32))[0].tobytes()
    env.step(torch.zeros(64, dtype=torch.uint8, device="cuda"))
    assert obs.cpu().numpy().tobytes() == reference.step(np.zeros(64, dtype=np.uint8))[0].tobytes()
    # An invalid code fails the step on the device, naming the env; nothing moves.
    before = obs.clone()
    bad = torch.zeros(64, dtype=torch.int64, device="cuda")
    bad[17] = -1
    with pytest.raises(ValueError, match="env 17.*code -1"):
        env.step(bad)
    assert torch.equal(before, obs)
    with pytest.raises(ValueError, match="shape"):
        env.step(torch.zeros(63, dtype=torch.int64, device="cuda"))
    with pytest.raises(ValueError, match="contiguous"):
        env.step(torch.zeros(128, dtype=torch.int64, device="cuda")[::2])
    with pytest.raises(TypeError, match="integer"):
        env.step(torch.zeros(64, dtype=torch.float32, device="cuda"))
    with pytest.raises(ValueError, match="runs on the cpu"):
        reference.step(torch.zeros(64, dtype=torch.int64, device="cuda"))
    # numpy arrays on the CUDA env: copied to the host each step, the same bits.
    numpy_env = tradesim.VectorEnv(bars(), device="cuda", **kwargs)
    numpy_env.reset()
    cpu_env = tradesim.VectorEnv(bars(), device="cpu", **kwargs)
    cpu_env.reset()
    for step in range(50):
        codes = torch.full((64,), step % 3, dtype=torch.int64, device="cuda")
        a = numpy_env.step(codes)
        b = cpu_env.step(np.full(64, step % 3))
        assert a[0].tobytes() == b[0].tobytes() and a[1].tobytes() == b[1].tobytes()


def test_torch_tensors_on_the_cpu():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed here (the GPU host has it)")
    env = tradesim.VectorEnv(bars(), envs=4, episode_len=6, device="cpu", arrays="torch")
    obs, _ = env.reset()
    assert obs.device.type == "cpu" and obs.data_ptr() == env._env.dlpack_buffers()[0].address
    obs2, rewards, *_ = env.step(torch.tensor([0, 1, 2, 1]))
    assert obs2.data_ptr() == obs.data_ptr() and rewards.dtype == torch.float32


def test_the_trainers_split_and_cost_weight():
    # VectorEnv(split=...) walks a part of tradesim train's time split; w_cost is the reward's cost weight.
    data = tradesim.synthetic(3000, seed=3)
    free = tradesim.VectorEnv(data, envs=4, episode_len=64, seed=1, device="cpu", split="train", copy=True)
    costly = tradesim.VectorEnv(data, envs=4, episode_len=64, seed=1, device="cpu", split="train", w_cost=1.0,
                                copy=True)
    whole = tradesim.VectorEnv(data, envs=4, episode_len=64, seed=1, device="cpu", copy=True)
    o_free, _ = free.reset(seed=1)
    o_costly, _ = costly.reset(seed=1)
    o_whole, _ = whole.reset(seed=1)
    assert np.array_equal(o_free, o_costly)
    assert not np.array_equal(o_free, o_whole)  # features normalized on the train part, not on every bar
    _, r_free, *_ = free.step(np.ones(4, dtype=np.int64))
    _, r_costly, *_ = costly.step(np.ones(4, dtype=np.int64))
    # Opening costs half the spread and the commission, about 2e-4 of the equity.
    np.testing.assert_allclose(r_free - r_costly, 0.0002 / 2 + 0.0001, rtol=0.05)
    with pytest.raises(tradesim.ConfigError, match="split"):
        tradesim.VectorEnv(data, split="holdout")
    with pytest.raises(tradesim.ConfigError, match="episode_len"):
        tradesim.VectorEnv(data, split="valid", episode_len=2000)


def test_greedy_walk_covers_the_split():
    data = tradesim.synthetic(3000, seed=3)
    flat, valid_actions = tradesim.greedy_walk(lambda obs: 0, data, split="valid")
    assert math.isnan(flat["sharpe"]) and flat["trades"] == 0 and not valid_actions.any()
    long, actions = tradesim.greedy_walk(lambda obs: 1, data, split="test")
    assert long["trades"] == 1 and (actions == 1).all() and long["bars"] == len(actions)
    seen = []
    tradesim.greedy_walk(lambda obs: seen.append(obs.shape) or 2, data, split="valid")
    assert len(seen) == len(valid_actions)
    assert set(seen) == {(len(tradesim.VectorEnv(data, envs=1, device="cpu").feature_names),)}
    with pytest.raises(tradesim.ConfigError, match="action 3"):
        tradesim.greedy_walk(lambda obs: 3, data)


class _DeviceCodes:
    """Action codes posing as a CUDA array (DLPack device type 2) that copies to the host by ``cpu()``."""

    def __init__(self, codes, cpu=True):
        self._codes = np.asarray(codes)
        if cpu:
            self.cpu = lambda: self._codes

    def __dlpack_device__(self):
        return (2, 0)


def test_next_step_copies_device_actions_to_the_host():
    kwargs = dict(trials=2, envs=4, episode_len=5, seed=3, device="cpu")
    env, twin = tradesim.VectorEnv(bars(), **kwargs), tradesim.VectorEnv(bars(), **kwargs)
    assert "NEXT_STEP" in str(env.autoreset_mode)
    env.reset()
    twin.reset()
    for step in range(12):
        codes = (np.arange(8) + step) % 3
        a, b = env.step(_DeviceCodes(codes)), twin.step(codes)
        for x, y in zip(a[:4], b[:4]):
            assert x.tobytes() == y.tobytes()
    with pytest.raises(tradesim.ConfigError, match="same_step"):
        env.step(_DeviceCodes(np.zeros(8, dtype=np.int64), cpu=False))
