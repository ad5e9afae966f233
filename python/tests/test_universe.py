"""The envs over a universe (issue 55, item 6): a long frame or a dict of frames, MultiDiscrete actions,
an account per env stepped as the Rust portfolio env steps it (hand-checked numbers: the same case as
tests/portfolio_vector_env.rs), results indexed by time and symbol, the same bits from the same seed, and
the refusals."""

import math
import os
import pathlib

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

import tradesim

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = next((p for p in (ROOT.parent / "shared" / "data", pathlib.Path("/work/shared/data")) if p.is_dir()), None)
REQUIRE_GPU = os.environ.get("REQUIRE_GPU") == "1"
TIMES = pd.date_range("2024-01-01", periods=4, freq="D", tz="UTC")
#: A: opens 10, 10, 12, 12, closes 10, 11, 12, 13; B: opens 20, 20, 18, 18, closes 20, 19, 18, 17.
PRICES = {"A": [(10, 10), (10, 11), (12, 12), (12, 13)], "B": [(20, 20), (20, 19), (18, 18), (18, 17)]}
#: No costs, 1,000 of cash: every number below is checked by hand.
FREE = dict(capital="1000", spread="0", commission="0", episode_len=3)


def frame(symbol):
    o, c = (np.array(x, dtype=float) for x in zip(*PRICES[symbol]))
    return pd.DataFrame({"open": o, "high": np.maximum(o, c), "low": np.minimum(o, c), "close": c}, index=TIMES)


def long_frame():
    """The two symbols as one long frame: a time column and a symbol column."""
    parts = [frame(s).rename_axis("time").reset_index().assign(symbol=s) for s in PRICES]
    return pd.concat(parts, ignore_index=True)


def test_spaces_are_multidiscrete_and_rows_per_symbol():
    env = tradesim.VectorEnv(long_frame(), envs=3, **FREE)
    assert env.symbols == ("A", "B") and env.num_envs == 3
    assert env.single_action_space == gym.spaces.MultiDiscrete([3, 3])
    # Gymnasium's batch of a MultiDiscrete: integers 0 to 2, one row per env.
    assert env.action_space == gym.spaces.Box(0, 2, (3, 2), np.int64)
    assert env.action_space == gym.vector.utils.batch_space(env.single_action_space, 3)
    f = len(env.feature_names)
    assert f == 51 + 4 + 3 and env.feature_names[-3:] == ("position", "weight", "equity_return")
    assert env.single_observation_space.shape == (2, f) and env.observation_space.shape == (3, 2, f)
    assert list(env.times) == list(TIMES) and str(env.times.tz) == "UTC"
    obs, info = env.reset(seed=0)
    assert obs.shape == (3, 2, f) and obs.dtype == np.float32 and env.observation_space.contains(obs)
    assert info["equity"].tolist() == [1000.0] * 3
    obs, *_ = env.step(env.action_space.sample())
    assert obs.shape == (3, 2, f)


def test_a_buy_a_rebalance_and_a_hold_by_hand():
    """Step 0 (A long): 100 units of A at 10, equity 1,100 at A's close 11. Step 1 (A long, B short): valued
    1,200 at the opens, half each: A sells 50 at 12 and B is sold short 600 / 18 units. Step 2: a hold marked
    at 13 and 17, the segment's end (truncated: the equity it ended with is in final_info)."""
    env = tradesim.VectorEnv(long_frame(), envs=1, autoreset_mode="same_step", copy=True, **FREE)
    env.reset(seed=3)
    obs, reward, terminated, truncated, info = env.step([[1, 0]])
    assert info["equity"][0] == 1100.0 and reward[0] == np.float32(math.log(1.1))
    assert obs[0, :, -3:].tolist() == [[1.0, 1.0, np.float32(0.1)], [0.0, 0.0, np.float32(0.1)]]
    pos = env.positions()
    assert pos.index.names == ["env", "symbol"] and pos.loc[(0, "A"), "units"] == 100.0
    assert pos.loc[(0, "A"), "time"] == TIMES[1] and pos.loc[(0, "B"), "side"] == 0
    obs, reward, terminated, truncated, info = env.step(np.array([[1, 2]], dtype=np.int64))
    short_b = 600.0 / 18.0
    assert info["equity"][0] == pytest.approx(1200.0, rel=1e-12)
    pos = env.positions()
    assert pos.loc[(0, "A"), "units"] == pytest.approx(50.0) and pos.loc[(0, "B"), "units"] == pytest.approx(-short_b)
    assert pos["side"].tolist() == [1, -1] and pos["weight"].tolist() == pytest.approx([0.5, -0.5], abs=1e-6)
    obs, reward, terminated, truncated, info = env.step([[1, 2]])
    ended = 1200.0 + 50.0 + short_b
    assert truncated.tolist() == [True] and terminated.tolist() == [False] and info["_final_obs"].tolist() == [True]
    assert info["final_info"]["equity"][0] == pytest.approx(ended, rel=1e-12)
    assert reward[0] == pytest.approx(math.log(ended / 1200.0), rel=1e-6)
    assert info["final_obs"][0][:, -3].tolist() == [1.0, -1.0]
    # The env started its next episode: flat, at time 0, with its capital.
    assert info["equity"][0] == 1000.0 and env.positions()["units"].tolist() == [0.0, 0.0]
    assert obs[0, :, -3:].tolist() == [[0.0, 0.0, 0.0]] * 2


def test_costs_follow_the_portfolio_rule():
    """Spread 0.002, commission 0.001: A long buys 1000 / 1.001 / 10.01 units (the cash pays the commission
    on top), so the equity at A's close 11 is that times 11 and the step's costs are the commission and the
    half spread."""
    env = tradesim.TradingEnv(long_frame(), capital="1000", spread="0.002", commission="0.001", episode_len=3)
    env.reset(seed=0)
    _, reward, _, _, info = env.step(np.array([1, 0]))
    units = 1000 / 1.001 / 10.01
    assert info["equity"] == pytest.approx(units * 11, rel=1e-12)
    assert info["costs"] == pytest.approx(units * 10 * 0.001 + (1000 - units * 10.01), rel=1e-9)
    assert reward == pytest.approx(math.log(units * 11 / 1000), rel=1e-6)


def test_the_trading_env_s_history_is_indexed_by_time_and_symbol():
    env = tradesim.TradingEnv(long_frame(), **FREE)
    assert env.action_space == gym.spaces.MultiDiscrete([3, 3]) and env.observation_space.shape == (2, 58)
    obs, info = env.reset(seed=1)
    assert obs.shape == (2, 58) and info["time"] == TIMES[0]
    for action in ([1, 0], [1, 2]):
        _, _, terminated, truncated, info = env.step(action)
    _, _, terminated, truncated, info = env.step([1, 2])
    assert (terminated, truncated, info["episode_end"], info["time"]) == (False, True, "truncated", TIMES[3])
    h = env.history()
    assert list(h.account.index) == list(TIMES) and h.account.index.name == "time"
    assert h.account["equity"].tolist() == pytest.approx([1000.0, 1100.0, 1200.0, 1250.0 + 600 / 18])
    assert math.isnan(h.account["reward"].iloc[0]) and h.account["costs"].tolist() == [0.0] * 4
    assert h.positions.index.names == ["time", "symbol"] and len(h.positions) == 8
    row = h.positions.loc[(TIMES[2], "B")]
    assert (row["units"], row["side"], row["weight"]) == (pytest.approx(-600 / 18), -1, pytest.approx(-0.5, abs=1e-6))
    assert h.positions.xs("A", level="symbol")["units"].tolist() == pytest.approx([0.0, 100.0, 50.0, 50.0])


def test_the_trading_env_passes_gymnasium_s_checker():
    from gymnasium.utils.env_checker import check_env

    check_env(tradesim.TradingEnv(tradesim.synthetic(300, symbols=3, seed=2), episode_len=20), skip_render_check=True)


def test_a_dict_of_frames_is_the_long_frame_and_symbols_choose_and_order():
    def run(data, **kw):
        env = tradesim.VectorEnv(data, envs=2, seed=4, **FREE, **kw)
        out = [env.reset(seed=4)[0]]
        for i in range(6):
            obs, reward, *_ = env.step(np.array([[i % 3, (i + 1) % 3]] * 2))
            out += [obs, reward]
        return out

    by_long = run(long_frame())
    by_dict = run({"A": frame("A"), "B": frame("B")})
    assert all(np.array_equal(a, b) for a, b in zip(by_long, by_dict))
    swapped = tradesim.VectorEnv(long_frame(), symbols=["b", "A"], envs=2, seed=4, **FREE)
    assert swapped.symbols == ("B", "A")
    first = swapped.reset(seed=4)[0]
    assert np.array_equal(first[:, ::-1, :-3], by_long[0][:, :, :-3])
    one = tradesim.TradingEnv({"A": frame("A"), "B": frame("B")}, symbols=["B"], **FREE)
    assert one.action_space == gym.spaces.MultiDiscrete([3]) and one.symbols == ("B",)


def test_the_same_seed_gives_the_same_bits():
    data = tradesim.synthetic(400, symbols=4, seed=9)

    def run():
        env = tradesim.VectorEnv(data, trials=2, envs=3, episode_len=40, capital=["10000", "50000"], seed=5)
        rng = np.random.default_rng(0)
        out = [env.reset(seed=5)[0]]
        for _ in range(100):
            obs, reward, terminated, truncated, info = env.step(rng.integers(0, 3, (6, 4)))
            out += [obs, reward, terminated, truncated, info["equity"]]
        return out

    a, b = run(), run()
    assert all(x.tobytes() == y.tobytes() for x, y in zip(a, b))
    assert any(t.any() for t in a[4::5]), "some episode was truncated within 100 steps"


def test_single_series_envs_are_unchanged_by_the_universe():
    env = tradesim.VectorEnv(tradesim.synthetic(300), envs=2, episode_len=10)
    assert env.symbols is None and env.single_action_space == gym.spaces.Discrete(3)
    chosen = tradesim.VectorEnv(long_frame(), symbol="B", envs=2, episode_len=2)
    assert chosen.symbols is None and chosen.single_observation_space.shape == (54,)
    with pytest.raises(tradesim.ConfigError, match="universe only"):
        env.positions()


def test_bad_input_is_refused_naming_what_is_wrong():
    data = long_frame()
    cases = [
        (dict(data=data.drop(columns="symbol"), symbols=["A", "B"]), "no symbol column"),
        (dict(data=data, symbols=["A", "C"]), "'C' is not in the data"),
        (dict(data=data, symbols=["A", "a"]), "listed twice"),
        (dict(data=data, symbols=[]), "at least one symbol"),
        (dict(data=data, symbols=["A"], symbol="A"), "give one"),
        (dict(data={"A": frame("A"), "B": frame("B").iloc[:0]}), r"data\['B'\]: an empty frame"),
        (dict(data={"A": frame("A"), "B": frame("B").drop(columns="high")}), r"data\['B'\]: columns"),
        (dict(data={"A": frame("A"), "B": frame("B").rename_axis("time").reset_index()}), "times in a time column"),
        (dict(data={"A": frame("A"), "B": frame("B").tz_convert("Europe/Paris")}), r"DatetimeIndex \(Europe/Paris\)"),
        (dict(data={"A": frame("A"), "B": [1, 2]}), "not both"),
        (dict(data=data, arrays="dlpack"), "numpy arrays only"),
        (dict(data=data, split="train"), "one series only"),
        (dict(data=data, episode_len=4), "episode_len"),
    ]
    for kwargs, message in cases:
        kwargs = {"envs": 1, **FREE, **kwargs}
        with pytest.raises(tradesim.ConfigError, match=message):
            tradesim.VectorEnv(kwargs.pop("data"), **kwargs)
    with pytest.raises(tradesim.DataError):
        tradesim.VectorEnv(data.iloc[:0], envs=1)
    env = tradesim.VectorEnv(data, envs=2, autoreset_mode="same_step", **FREE)
    env.reset(seed=0)
    with pytest.raises(tradesim.ConfigError, match=r"shape \(2,\), expected \(2, 2\)"):
        env.step([1, 1])
    with pytest.raises(tradesim.ConfigError, match=r"actions\[1, 0\] = 3 \(env 1, symbol 'A'\)"):
        env.step([[0, 1], [3, 0]])
    with pytest.raises(tradesim.ConfigError, match=r"env 0, symbol 'B'"):
        env.step([[0, -1], [0, 0]])
    with pytest.raises(TypeError, match="integer codes"):
        env.step(np.ones((2, 2)))
    assert env.positions()["units"].tolist() == [0.0] * 4, "a refused step moves no env"
    one = tradesim.TradingEnv(data, **FREE)
    one.reset(seed=0)
    with pytest.raises(tradesim.ConfigError, match=r"action: shape \(3,\), expected \(2,\)"):
        one.step([1, 0, 0])


def test_next_step_autoreset_over_a_universe():
    """Gymnasium's default: the ending step returns the episode's last observation; the next step ignores
    that env's actions and returns the next episode's start after one flat step, with reward 0."""
    env = tradesim.VectorEnv(long_frame(), envs=1, **FREE)
    env.reset(seed=0)
    for action in ([[1, 0]], [[1, 2]]):
        env.step(action)
    obs, reward, terminated, truncated, info = env.step([[1, 2]])
    assert truncated.tolist() == [True] and obs[0, :, -3].tolist() == [1.0, -1.0]
    assert info["equity"][0] == pytest.approx(1250 + 600 / 18)
    obs, reward, terminated, truncated, info = env.step([[1, 1]])
    assert reward.tolist() == [0.0] and not truncated[0] and obs[0, :, -3].tolist() == [0.0, 0.0]
    assert info["equity"][0] == 1000.0


def test_five_real_stocks_with_a_late_listing():
    """AAPL, FB, GOOG, IBM, MSFT daily 2000-2013: FB trades from 2012 only, so before that it has no bar,
    holds nothing and its weight stays 0 whatever the actions."""
    if SHARED is None or not (SHARED / "stocks-daily-5-tickers.csv").exists():
        pytest.skip("stocks-daily-5-tickers.csv is not in ../shared/data")
    env = tradesim.TradingEnv(SHARED / "stocks-daily-5-tickers.csv", episode_len=50, seed=1)
    assert env.symbols == ("AAPL", "FB", "GOOG", "IBM", "MSFT")
    assert env.times[0] == pd.Timestamp("2000-03-01", tz="UTC") and len(env.times) > 3000
    obs, info = env.reset(seed=1)
    assert info["time"].year < 2012, "this seed starts before FB's listing"
    for _ in range(50):
        obs, reward, terminated, truncated, info = env.step(np.ones(5, dtype=np.int64))
    assert truncated
    pos = env.history().positions
    fb = pos.xs("FB", level="symbol")
    assert (fb["units"] == 0).all() and (pos.xs("AAPL", level="symbol")["units"].iloc[1:] > 0).all()
    assert np.isfinite(env.history().account["equity"]).all()


def test_the_gpu_steps_the_same_bits_as_the_cpu():
    if tradesim.device_info("auto")["backend"] != "cuda":
        if REQUIRE_GPU:
            pytest.fail("REQUIRE_GPU=1 but no usable GPU")
        pytest.skip("no GPU")
    data = tradesim.synthetic(300, symbols=3, seed=1)

    def run(device):
        env = tradesim.VectorEnv(data, envs=8, episode_len=30, device=device, autoreset_mode="same_step", copy=True)
        rng = np.random.default_rng(1)
        out = [env.reset(seed=2)[0]]
        for _ in range(60):
            obs, reward, *_ = env.step(rng.integers(0, 3, (8, 3)))
            out += [obs, reward]
        return out

    assert all(a.tobytes() == b.tobytes() for a, b in zip(run("cpu"), run("cuda")))


def test_gymnasium_s_wrappers_and_make_take_a_universe():
    """The default next_step mode with Gymnasium's vector wrappers: FlattenObservation flattens the rows,
    RecordEpisodeStatistics sums the episode's rewards (both long: 50 A at 10 and 25 B at 20, held to the
    closes 13 and 17: 1,075); gymnasium.make and make_vec pass the universe through."""
    env = gym.wrappers.vector.RecordEpisodeStatistics(
        gym.wrappers.vector.FlattenObservation(tradesim.VectorEnv(long_frame(), envs=2, **FREE)))
    obs, _ = env.reset(seed=0)
    assert obs.shape == (2, 2 * 58) and env.single_observation_space.shape == (2 * 58,)
    for _ in range(3):
        obs, reward, terminated, truncated, info = env.step(np.ones((2, 2), dtype=np.int64))
    assert truncated.all() and info["episode"]["l"].tolist() == [3, 3]
    assert info["episode"]["r"] == pytest.approx([math.log(1075 / 1000)] * 2, rel=1e-6)
    one = gym.make("tradesim/Trading-v0", data={"A": frame("A"), "B": frame("B")}, **FREE)
    assert one.action_space == gym.spaces.MultiDiscrete([3, 3])
    vec = gym.make_vec("tradesim/Trading-v0", num_envs=3, data=long_frame(), **FREE)
    assert vec.unwrapped.symbols == ("A", "B") and vec.action_space.shape == (3, 2)


def random_universe(symbols=("AAA", "BBB", "CCC"), days=320, seed=5):
    """Independent random walks of ``symbols``, one long frame (time, symbol, OHLCV)."""
    rng = np.random.default_rng(seed)
    times = pd.date_range("2022-01-03", periods=days, freq="D", tz="UTC")
    parts = []
    for s in symbols:
        close = 100.0 * np.exp(np.cumsum(rng.normal(0.0, 0.01, days)))
        open_ = np.r_[close[0], close[:-1]]
        parts.append(pd.DataFrame({
            "time": times, "symbol": s, "open": open_, "high": np.maximum(open_, close) * 1.002,
            "low": np.minimum(open_, close) * 0.998, "close": close, "volume": 1000.0,
        }))
    return pd.concat(parts, ignore_index=True)


SEARCH = {"study": {"algo": "dqn", "trials": 2, "parallel": 2, "epochs": 1, "envs": 12, "segment_len": 32}}


def test_hyperopt_searches_a_universe_as_the_cli_does(tmp_path):
    """Data of several symbols without ``symbol=`` is a universe search: on a file, the CLI's study (the
    same trials and values, bit for bit); on a long frame or a dict of frames, the same study either way,
    its symbols named, the report's fills ledger with a symbol column; ``symbols=`` chooses some, as the
    data spells them."""
    import subprocess

    data = random_universe()
    run = tradesim.hyperopt(SEARCH, data=data, seed=3, device="cpu", study=tmp_path / "py.sqlite")
    assert run.symbols == ["AAA", "BBB", "CCC"]
    assert len(run.leaderboard) == 2
    assert run.verdict.startswith(("evidence", "no evidence")), run.verdict
    assert math.isfinite(run.evidence["baselines"]["buy_and_hold_test_sharpe"])
    trades = pd.read_csv(pathlib.Path(run.report) / "trades.csv")
    assert "symbol" in trades.columns and set(trades["symbol"]) <= {"AAA", "BBB", "CCC"}
    assert (pathlib.Path(run.report) / "equity.csv").is_file()
    saved = sorted(p.name for p in pathlib.Path(run.checkpoints).glob("trial-*.safetensors"))
    assert saved == ["trial-0.safetensors", "trial-1.safetensors"], saved
    csv = tmp_path / "universe.csv"
    data.to_csv(csv, index=False)
    toml = tmp_path / "search.toml"
    toml.write_text("[study]\n" + "\n".join(
        f"{k} = {v}" if not isinstance(v, str) else f'{k} = "{v}"' for k, v in SEARCH["study"].items()) + "\n")
    binary = os.environ.get("TRADESIM_BIN", str(ROOT / "target" / "debug" / "tradesim"))
    done = subprocess.run([binary, "hyperopt", "--config", str(toml), "--data", str(csv), "--seed", "3",
                           "--device", "cpu", "--study", str(tmp_path / "cli.sqlite")],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "on a universe" in done.stdout and "3 symbols" in done.stdout, done.stdout
    import sqlite3
    with sqlite3.connect(tmp_path / "cli.sqlite") as db:
        cli_values = dict(db.execute(
            "SELECT t.number, v.value FROM trials t JOIN trial_values v ON v.trial_id = t.trial_id").fetchall())
    # The same file read by both: the same study, bit for bit (a frame's floats reach the loader by
    # another road than a CSV's text, so the frame's run is compared with the dict's below instead).
    from_file = tradesim.hyperopt(SEARCH, data=csv, seed=3, device="cpu", study=tmp_path / "file.sqlite")
    assert from_file.symbols == ["AAA", "BBB", "CCC"]
    assert dict(zip(from_file.leaderboard["number"], from_file.leaderboard["value"])) == cli_values
    py_values = dict(zip(run.leaderboard["number"], run.leaderboard["value"]))
    chosen = tradesim.hyperopt(SEARCH, data=data, symbols=["ccc", "AAA"], seed=3, device="cpu",
                               study=tmp_path / "two.sqlite")
    assert sorted(chosen.symbols) == ["AAA", "CCC"]
    with pytest.raises(ValueError, match="symbols"):
        tradesim.hyperopt(SEARCH, data=data, symbols=["ZZZ"], device="cpu", study=tmp_path / "bad.sqlite")
    with pytest.raises(ValueError, match="symbol, symbols"):
        tradesim.hyperopt(SEARCH, data=data, symbol="AAA", symbols=["BBB"], device="cpu",
                          study=tmp_path / "bad2.sqlite")
    # A dict of frames is the same universe.
    frames = {s: g.drop(columns="symbol").set_index("time") for s, g in data.groupby("symbol")}
    again = tradesim.hyperopt(SEARCH, data=frames, seed=3, device="cpu", study=tmp_path / "dict.sqlite")
    assert dict(zip(again.leaderboard["number"], again.leaderboard["value"])) == py_values
