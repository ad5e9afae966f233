"""The package as a Python user meets it (issue 46): integer times, the caller's index round trip,
exceptions that name Python parameters and pickle, and the whole Gymnasium vector contract.

The data files are the shared ones (../shared/data from the checkout); their tests skip where they are absent.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import pathlib
import pickle

import numpy as np
import pandas as pd
import pytest

import tradesim

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = next((p for p in (ROOT.parent / "shared" / "data", pathlib.Path("/work/shared/data")) if p.is_dir()), None)


def shared(name: str) -> pathlib.Path:
    path = None if SHARED is None else SHARED / name
    if path is None or not path.is_file():
        pytest.skip(f"{name} is not in ../shared/data")
    return path


def bars_frame(n: int = 400, seed: int = 5) -> pd.DataFrame:
    """Hourly bars of a random walk on a UTC DatetimeIndex named `time`."""
    rng = np.random.default_rng(seed)
    close = 100 * np.exp(np.cumsum(rng.normal(0, 0.004, n)))
    open_ = np.concatenate([[100.0], close[:-1]])
    return pd.DataFrame(
        {
            "open": open_,
            "high": np.maximum(open_, close) * 1.001,
            "low": np.minimum(open_, close) * 0.999,
            "close": close,
            "volume": np.full(n, 1_000.0),
        },
        index=pd.date_range("2024-01-02", periods=n, freq="h", tz="UTC", name="time"),
    )


GRID = dict(fast=[5, 10], slow=[20, 40], device="cpu")


def same_metrics(a: tradesim.BacktestRun, b: tradesim.BacktestRun) -> None:
    pd.testing.assert_frame_equal(a.metrics, b.metrics)
    assert a.bars_per_year == b.bars_per_year


# --- 1. Time ---------------------------------------------------------------------------------------


def test_integer_dates_are_refused_without_time_unit():
    frame = pd.read_csv(shared("sp500-members-daily-2009-2010.csv"))
    assert frame["Date"].dtype == np.int64
    with pytest.raises(tradesim.DataError) as err:
        tradesim.load(frame)
    (finding,) = err.value.findings
    assert finding["column"] == "Date" and finding["row"] is None, finding
    assert "time_unit" in finding["message"] and "YYYYMMDD" in finding["message"]
    assert "time_unit" in str(err.value)


def test_integer_dates_with_time_unit_give_the_files_numbers():
    path = shared("sp500-members-daily-2009-2010.csv")
    frame = pd.read_csv(path)
    fix = dict(repair=["open-outside-range", "close-outside-range"])
    ours = tradesim.backtest(tradesim.load(frame, time_unit="YYYYMMDD", **fix), symbol="AAPL", **GRID)
    from_file = tradesim.backtest(tradesim.load(path, time_unit="YYYYMMDD", **fix), symbol="AAPL", **GRID)
    same_metrics(ours, from_file)
    # The file's integer dates follow the same rule (the CLI's --time-unit): refused without a unit.
    with pytest.raises(tradesim.DataError) as err:
        tradesim.load(path, **fix)
    (finding,) = err.value.findings
    assert (finding["row"], finding["column"]) == (2, "Date") and "time_unit" in finding["message"], finding
    assert ours.bars_per_year == 252.0, "daily bars: 252 a year, not milliseconds' 60,732"


@pytest.mark.parametrize("unit, scale", [("s", 10**9), ("ms", 10**6), ("us", 10**3), ("ns", 1)])
def test_epoch_integers_in_each_unit(unit, scale):
    frame = bars_frame()
    reference = tradesim.backtest(frame, **GRID)
    epochs = frame.reset_index()
    epochs["time"] = frame.index.as_unit("ns").asi8 // scale
    with pytest.raises(tradesim.DataError, match="time_unit"):
        tradesim.load(epochs)
    same_metrics(tradesim.backtest(epochs, time_unit=unit, **GRID), reference)


def test_bad_time_units_and_dates_are_named():
    frame = bars_frame(10).reset_index()
    frame["time"] = [20240101 + i for i in range(10)]
    frame.loc[3, "time"] = 20241304  # month 13
    with pytest.raises(tradesim.DataError) as err:
        tradesim.load(frame, time_unit="YYYYMMDD")
    (finding,) = err.value.findings
    assert finding["row"] == 3 and finding["column"] == "time", finding
    assert finding["message"].startswith("20241304 is not a date written YYYYMMDD"), finding["message"]
    with pytest.raises(tradesim.ConfigError, match="time_unit='days'"):
        tradesim.load(frame, time_unit="days")


def test_any_datetime_index_is_the_time_and_comes_back_as_it_was():
    base = bars_frame()
    for index in (
        base.index.rename("when"),
        base.index.tz_convert(None).rename(None),
        base.index.tz_convert("America/New_York").rename("Datetime"),
    ):
        frame = base.set_axis(index)
        run = tradesim.backtest(frame, fast=10, slow=40, equity=True, device="cpu")
        assert run.equity.index.equals(frame.index), index
        assert run.equity.index.name == index.name and run.equity.index.tz == index.tz
        joined = frame.join(run.equity)
        assert len(joined) == len(frame) and joined[(10, 40)].notna().all()
        assert "bar" not in run.equity and "time" not in run.equity
        assert list(run.equity.columns) == [(10, 40)] and not isinstance(run.equity.columns, pd.MultiIndex)


def test_a_text_index_with_dst_offsets_parses_as_its_column_does():
    path = shared("aapl-1h-2024-2026.csv")
    frame = pd.read_csv(path, index_col=0, parse_dates=True)
    assert not isinstance(frame.index, pd.DatetimeIndex), "mixed offsets leave pandas a text index"
    run = tradesim.backtest(frame, equity=True, trades=True, **GRID, columns="10/40")
    same_metrics(run, tradesim.backtest(path, **GRID))
    same_metrics(run, tradesim.backtest(pd.read_csv(path), **GRID))
    assert run.equity.index.equals(frame.index) and run.equity.index.name == "datetime"
    assert frame.join(run.equity)[(10, 40)].notna().all()


def test_a_time_column_comes_back_in_its_timezone():
    frame = bars_frame().tz_convert("Europe/Zurich").reset_index()
    run = tradesim.backtest(frame, fast=10, slow=40, equity=True, trades=True, device="cpu")
    # Beside a time column the equity is on the frame's own rows, so frame.join matches row for row; the
    # ledger's times are in the column's timezone.
    assert run.equity.index.equals(frame.index)
    assert frame.join(run.equity)[(10, 40)].notna().all()
    assert str(run.trades["entry_time"].dt.tz) == "Europe/Zurich"


# --- 2. Errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        (dict(fast=-5), ValueError, "fast=-5"),
        (dict(fast=5.0), TypeError, "fast=5.0"),
        (dict(fast=True), TypeError, "fast=True"),
        (dict(fast=[50], slow=[20]), ValueError, "slow: no slow window above a fast one"),
        (dict(spread="abc"), ValueError, "spread='abc'"),
        (dict(commission=-0.001), ValueError, "commission=-0.001"),
        (dict(capital=0), ValueError, "capital=0"),
        (dict(bars_per_year=-1.0), ValueError, "bars_per_year=-1.0"),
        (dict(signal="cros"), ValueError, "signal='cros'"),
        (dict(device="tpu"), ValueError, "device"),
        (dict(columns="9/9", equity=True), ValueError, "columns"),
    ],
)
def test_parameters_are_checked_and_named(kwargs, error, words):
    with pytest.raises(error) as err:
        tradesim.backtest(bars_frame(), **{**GRID, **kwargs})
    message = str(err.value)
    assert words in message and "--" not in message, message
    if error is ValueError:
        assert isinstance(err.value, tradesim.TradesimError), type(err.value)


def test_a_multi_symbol_frame_names_symbol_as_a_parameter():
    a, b = bars_frame(seed=1).reset_index(), bars_frame(seed=2).reset_index()
    frame = pd.concat([a.assign(symbol="A"), b.assign(symbol="B")])
    with pytest.raises(tradesim.ConfigError, match="symbol=") as err:
        tradesim.backtest(frame, **GRID)
    assert "--" not in str(err.value)
    with pytest.raises(tradesim.ConfigError, match="symbol='C'"):
        tradesim.backtest(frame, symbol="C", **GRID)
    same_metrics(tradesim.backtest(frame, symbol="B", **GRID), tradesim.backtest(b, **GRID))


def test_search_parameters_and_configuration_are_named(tmp_path):
    with pytest.raises(tradesim.ConfigError, match="trials=0"):
        tradesim.hyperopt(synthetic=500, trials=0, report=tmp_path / "r")
    with pytest.raises(TypeError, match="epochs=2.5"):
        tradesim.hyperopt(synthetic=500, epochs=2.5, report=tmp_path / "r")
    with pytest.raises(tradesim.ConfigError) as err:
        tradesim.hyperopt("[study\ntrials = 2\n", synthetic=500, report=tmp_path / "r", study=tmp_path / "s.db")
    assert "config (the TOML text)" in str(err.value) and "--" not in str(err.value), str(err.value)


def test_every_exception_is_a_tradesim_error_defined_in_tradesim():
    for cls in (tradesim.DataError, tradesim.ConfigError):
        assert issubclass(cls, tradesim.TradesimError) and issubclass(cls, ValueError)
    for cls in (tradesim.TradesimError, tradesim.DataError, tradesim.ConfigError):
        assert cls.__module__ == "tradesim" and getattr(tradesim, cls.__name__) is cls


def bad_bars() -> dict[str, list[float]]:
    return {
        "time": pd.date_range("2024-01-01", periods=3, freq="D").astype(str).tolist(),
        "open": [1.0, 1.0, 1.0],
        "high": [1.1, 0.5, 1.1],
        "low": [0.9, 0.9, 0.9],
        "close": [1.0, 1.0, 1.0],
    }


def test_exceptions_pickle_with_their_findings():
    with pytest.raises(tradesim.DataError) as err:
        tradesim.load(bad_bars())
    back = pickle.loads(pickle.dumps(err.value))
    assert type(back) is tradesim.DataError and str(back) == str(err.value)
    assert back.findings == err.value.findings and back.findings[0]["row"] == 1
    config = pickle.loads(pickle.dumps(tradesim.ConfigError("fast=-5: at least 1")))
    assert type(config) is tradesim.ConfigError and str(config) == "fast=-5: at least 1"


def test_exceptions_cross_a_process_pool():
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as pool:
        with pytest.raises(tradesim.DataError) as err:
            pool.submit(tradesim.load, bad_bars()).result()
    assert err.value.findings[0]["class"] == "high-below-low" and err.value.findings[0]["row"] == 1


def test_findings_about_the_whole_table_have_no_row():
    frame = bars_frame(10).drop(columns=["close"])
    with pytest.raises(tradesim.DataError) as err:
        tradesim.load(frame)
    (finding,) = [f for f in err.value.findings if f["class"] == "missing-column"]
    assert finding["row"] is None and finding["index"] is None


# --- 3. Gymnasium ----------------------------------------------------------------------------------


gym = pytest.importorskip("gymnasium")


def vec(**kwargs):
    """A small env; same_step unless the case names its mode (the default, next_step, has its own tests in
    test_entry_points.py)."""
    kwargs.setdefault("autoreset_mode", "same_step")
    return tradesim.VectorEnv(tradesim.synthetic(3_000, seed=2), envs=4, episode_len=6, seed=1, device="cpu",
                              **kwargs)


def test_next_step_autoreset_returns_the_last_observation_then_the_restart():
    same, nxt = vec(), vec(autoreset_mode="next_step")
    assert nxt.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP
    same.reset(seed=1)
    nxt.reset(seed=1)
    for _ in range(5):
        a, b = same.step(np.ones(4, dtype=np.int64)), nxt.step(np.ones(4, dtype=np.int64))
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    a, b = same.step(np.ones(4, dtype=np.int64)), nxt.step(np.ones(4, dtype=np.int64))
    assert b[3].all() and not b[2].any(), "the sixth bar truncates every episode"
    assert np.array_equal(b[0], np.stack(list(a[4]["final_obs"]))), "the ending step shows the last observation"
    assert np.array_equal(b[4]["equity"], a[4]["final_info"]["equity"]), "and the equity the episode ended with"
    assert (b[4]["equity"] != 100_000.0).all(), "six bars long with costs: not the capital"
    obs, rewards, terminated, truncated, infos = nxt.step(np.full(4, 2))
    assert (rewards == 0).all() and not terminated.any() and not truncated.any()
    np.testing.assert_array_equal(obs[:, -3:], 0.0)  # flat, no open position: the restart
    assert (infos["equity"] == 100_000.0).all()


@pytest.mark.parametrize(
    "wrap",
    [
        lambda env: gym.wrappers.vector.NormalizeObservation(env),
        lambda env: gym.wrappers.vector.TransformObservation(env, lambda o: o * 2),
        lambda env: gym.wrappers.vector.FlattenObservation(env),
        lambda env: gym.wrappers.vector.ClipReward(env, -1e-4, 1e-4),
        lambda env: gym.wrappers.vector.NormalizeReward(env),
        lambda env: gym.wrappers.vector.RecordEpisodeStatistics(env),
        lambda env: gym.wrappers.vector.DtypeObservation(env, np.float64),
    ],
    ids=["NormalizeObservation", "TransformObservation", "FlattenObservation", "ClipReward", "NormalizeReward",
         "RecordEpisodeStatistics", "DtypeObservation"],
)
def test_gymnasium_vector_wrappers_run_on_next_step_envs(wrap):
    env = wrap(vec(autoreset_mode="next_step"))
    obs, _ = env.reset(seed=3)
    ended = 0
    for step in range(20):
        obs, rewards, terminated, truncated, infos = env.step(np.full(4, step % 3))
        assert obs.shape[0] == 4 and np.isfinite(obs).all() and np.isfinite(rewards).all()
        ended += int((terminated | truncated).sum())
    assert ended >= 8, "episodes ended and restarted under the wrapper"
    env.close()


def test_clip_reward_on_writable_copies():
    env = gym.wrappers.vector.ClipReward(vec(copy=True), -1e-5, 1e-5)
    env.reset(seed=2)
    _, rewards, *_ = env.step(np.ones(4, dtype=np.int64))
    assert rewards.flags.writeable and np.abs(rewards).max() <= 1e-5
    obs, _ = vec(copy=True).reset()
    assert obs.flags.writeable and obs.base is None


def test_same_step_final_obs_and_final_info_as_gymnasium_defines_them():
    env = vec()
    env.reset()
    for _ in range(6):
        obs, _, terminated, truncated, infos = env.step(np.zeros(4, dtype=np.int64))
    assert infos["final_obs"].dtype == object and infos["_final_obs"].all()
    assert infos["_final_info"].all() and infos["final_info"]["truncated"].all()
    assert all(o.shape == obs.shape[1:] for o in infos["final_obs"])


def test_gym_make_and_make_vec():
    bars = tradesim.synthetic(2_000, seed=4)
    env = gym.make("tradesim/Trading-v0", data=bars, episode_len=8)
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs) and info["equity"] == 100_000.0
    venv = gym.make_vec("tradesim/Trading-v0", num_envs=6, data=bars, episode_len=8)
    assert isinstance(venv.unwrapped, tradesim.VectorEnv) and venv.num_envs == 6
    assert venv.reset(seed=0)[0].shape[0] == 6


def test_trading_env_final_step_reports_the_equity_the_episode_ended_with():
    env = tradesim.TradingEnv(tradesim.synthetic(2_000, seed=4), episode_len=5, seed=2, spread=0, commission=0)
    env.reset(seed=2)
    for _ in range(4):
        *_, info = env.step(1)
    before = info["equity"]
    obs, reward, terminated, truncated, info = env.step(1)
    assert truncated and not terminated and info["episode_end"] == "truncated"
    assert env.observation_space.contains(obs)
    # Frictionless, the reward is ln(equity_after / equity_before): the ended episode's equity, not the capital.
    assert info["equity"] != 100_000.0
    assert abs(np.log(info["equity"] / before) - reward) <= 1e-6


def test_final_info_carries_the_equity_each_ended_episode_ended_with():
    env = tradesim.VectorEnv(tradesim.synthetic(3_000, seed=2), trials=2, envs=3, episode_len=6, seed=1,
                             device="cpu", spread=0, commission=0, capital=[100_000, 50_000],
                             autoreset_mode="same_step")
    capital = np.repeat([100_000.0, 50_000.0], 3)
    _, info = env.reset(seed=1)
    equity = info["equity"].copy()
    for step in range(6):
        actions = np.array([1, 2, 0, 1, 2, 0])
        obs, rewards, terminated, truncated, infos = env.step(actions)
        if step < 5:
            equity = infos["equity"].copy()
    assert truncated.all() and infos["final_info"]["_equity"].all()
    ended = infos["final_info"]["equity"]
    # ln(ended / equity before the last step) is the last reward; flat envs (action 0) keep their capital.
    np.testing.assert_allclose(np.log(ended / equity), rewards, rtol=0, atol=1e-6)
    assert (ended[[0, 1, 3, 4]] != capital[[0, 1, 3, 4]]).all() and (ended[[2, 5]] == capital[[2, 5]]).all()
    np.testing.assert_array_equal(infos["equity"], capital)  # the next episodes start at their capital
    # The next step has no ended episode and no final_info.
    assert "final_info" not in env.step(actions)[4]


def test_env_parameters_are_checked_and_named():
    with pytest.raises(TypeError, match="envs=2.0"):
        tradesim.VectorEnv(tradesim.synthetic(500), envs=2.0, device="cpu")
    with pytest.raises(tradesim.ConfigError, match="trials=0"):
        tradesim.VectorEnv(tradesim.synthetic(500), trials=0, device="cpu")
    with pytest.raises(tradesim.ConfigError, match="autoreset_mode"):
        vec(autoreset_mode="disabled")


# --- 4. Results ------------------------------------------------------------------------------------


def test_metrics_are_indexed_by_the_windows_with_integer_counts():
    run = tradesim.backtest(bars_frame(), fast=[5, 10], slow=[20, 40], trades=True, columns="all", device="cpu")
    assert run.metrics.index.names == ["fast", "slow"]
    assert sorted(run.metrics.index) == [(5, 20), (5, 40), (10, 20), (10, 40)]
    for count in ("rank", "trades", "bars", "max_drawdown_bars"):
        assert run.metrics[count].dtype == np.int64, count
    assert (run.metrics["bars"] == 399).all(), "per-bar returns: n - 1 for 400 bars"
    per_column = run.trades.groupby(["fast", "slow"]).size()
    assert per_column.to_dict() == run.metrics["trades"][run.metrics["trades"] > 0].to_dict()
    assert set(run.trades["exit_reason"]) <= {"signal", "end_of_data"} and set(run.trades["side"]) <= {"long", "short"}


def test_a_series_of_closes_is_bars_whose_open_high_low_are_the_close():
    frame = bars_frame()
    closes = frame["close"].rename("EURUSD")
    flat = frame.assign(open=frame["close"], high=frame["close"], low=frame["close"]).drop(columns="volume")
    run = tradesim.backtest(closes, fast=10, slow=40, equity=True, device="cpu")
    same_metrics(run, tradesim.backtest(flat, fast=10, slow=40, device="cpu"))
    assert run.equity.index.equals(closes.index)


def test_feature_names_name_every_observation_column():
    env = vec()
    names = env.feature_names
    assert len(names) == env.single_observation_space.shape[0] == len(set(names))
    assert names[0] == "logret_1" and names[-3:] == ("position", "open_return", "equity_return")
    obs, _ = env.reset()
    env.step(np.ones(4, dtype=np.int64))
    obs, *_ = env.step(np.ones(4, dtype=np.int64))
    assert (obs[:, names.index("position")] == 1.0).all(), "long after two long steps"
    assert tradesim.TradingEnv(tradesim.synthetic(500), episode_len=5).feature_names == names


# --- 5. Types --------------------------------------------------------------------------------------


def test_mypy_strict_sees_the_envs_and_the_errors(tmp_path):
    api = pytest.importorskip("mypy.api", reason="mypy is not installed in this virtualenv")
    script = tmp_path / "user.py"
    script.write_text(
        "import tradesim\n"
        "reveal_type(tradesim.VectorEnv(envs=2).feature_names)\n"
        "reveal_type(tradesim.TradingEnv().reset)\n"
        "reveal_type(tradesim.DataError('x').findings)\n"
        "reveal_type(tradesim.load)\n"
    )
    out, err, status = api.run(["--strict", "--no-incremental", str(script)])
    assert status == 0, out + err
    revealed = [line.split("Revealed type is ", 1)[1] for line in out.splitlines() if "Revealed type" in line]
    assert revealed[0] == '"tuple[str, ...]"', revealed
    assert revealed[1].startswith('"def (*, seed: int | None ='), revealed
    assert revealed[2] == '"list[dict[str, Any]]"', revealed
    assert "time_unit: str | None" in revealed[3] and revealed[3].endswith('-> tradesim._native.Bars"'), revealed


def test_every_entry_point_defaults_to_the_same_costs():
    """backtest, VectorEnv (and TradingEnv through it), greedy_walk and the CLI's search share one set of default
    costs."""
    import inspect

    from tradesim import _native
    from tradesim.envs import VectorEnv

    for fn in (tradesim.backtest, VectorEnv.__init__, tradesim.greedy_walk):
        params = inspect.signature(fn).parameters
        assert params["spread"].default == _native.DEFAULT_SPREAD, fn
        assert params["commission"].default == _native.DEFAULT_COMMISSION, fn
    assert (_native.DEFAULT_SPREAD, _native.DEFAULT_COMMISSION) == ("0.0002", "0.0001")
