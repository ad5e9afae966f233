"""Issue 56: nothing overwritten, nothing read wrong. One test (or more) per item of the issue, each a case a
new user met: two studies in one folder, the data keywords of every entry point, results on the caller's
rows, strict types, Gymnasium's defaults, Python's words in Python's messages.

Environment: TRADESIM_BIN as in test_tradesim.py (the CLI's study in the same folder).
"""

from __future__ import annotations

import json
import os
import pathlib
import pickle
import sqlite3
import subprocess

import numpy as np
import pandas as pd
import pytest

import tradesim

ROOT = pathlib.Path(__file__).resolve().parents[2]
EMBEDDED_CSV = ROOT / "data" / "eurusd-1h-ask-2017.csv"
BIN = os.environ.get("TRADESIM_BIN", str(ROOT / "target" / "debug" / "tradesim"))
TINY = {"study": {"trials": 2, "parallel": 2, "epochs": 1, "envs": 8, "segment_len": 64}}


def recorded_checkpoints(study: pathlib.Path, name: str = "tradesim") -> dict[str, bytes]:
    """Every checkpoint study `name` recorded (the trials' `checkpoint` user attribute), by path, with its
    bytes."""
    with sqlite3.connect(study) as db:
        rows = db.execute(
            "SELECT a.value_json FROM trial_user_attributes a JOIN trials t ON t.trial_id = a.trial_id "
            "JOIN studies s ON s.study_id = t.study_id WHERE a.key = 'checkpoint' AND s.study_name = ?",
            (name,),
        ).fetchall()
    paths = [json.loads(r[0]) for r in rows]
    assert paths, f"{study}: no checkpoint recorded"
    return {p: pathlib.Path(p).read_bytes() for p in paths}


# Item 1: one folder per study.


def test_two_studies_in_one_folder_keep_their_checkpoints(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = tradesim.hyperopt(TINY, synthetic=3000, seed=3, device="cpu", study="runs/s1.sqlite")
    s1 = recorded_checkpoints(tmp_path / "runs" / "s1.sqlite")
    assert all(os.path.isabs(p) for p in s1), "recorded paths resolve from any working directory"
    assert pathlib.Path(first.checkpoints) == tmp_path / "runs" / "s1-tradesim" / "checkpoints"
    assert pathlib.Path(first.report) == tmp_path / "runs" / "s1-tradesim" / "report"
    # The CLI's study in the same folder, then Python's second study.
    done = subprocess.run(
        [BIN, "hyperopt", "--device", "cpu", "--synthetic", "3000", "--trials", "2", "--parallel", "2",
         "--epochs", "1", "--study", "runs/cli.sqlite"],
        capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stderr
    second = tradesim.hyperopt(TINY, synthetic=3000, seed=4, device="cpu", study="runs/s2.sqlite")
    assert pathlib.Path(second.checkpoints) == tmp_path / "runs" / "s2-tradesim" / "checkpoints"
    assert recorded_checkpoints(tmp_path / "runs" / "s1.sqlite") == s1, "the first study's checkpoints changed"
    s2, cli = recorded_checkpoints(tmp_path / "runs" / "s2.sqlite"), recorded_checkpoints(tmp_path / "runs" / "cli.sqlite")
    assert not set(s1) & set(s2) and not set(s1) & set(cli) and not set(s2) & set(cli)
    # Another study sent to the first one's report folder is refused, both named, nothing written.
    with pytest.raises(tradesim.TradesimError) as err:
        tradesim.hyperopt(TINY, synthetic=3000, device="cpu", study="runs/s3.sqlite", report=first.report)
    assert "s1.sqlite" in str(err.value) and "s3.sqlite" in str(err.value), str(err.value)
    assert not (tmp_path / "runs" / "s3.sqlite").exists()
    assert recorded_checkpoints(tmp_path / "runs" / "s1.sqlite") == s1
    # Integer parameters come back as integers (item 4).
    board = first.leaderboard
    for name in ("hidden", "batch", "target_every"):
        assert board[name].dtype == np.int64, (name, board[name].dtype)


# Item 2: the same data rules everywhere.


def long_frame() -> pd.DataFrame:
    """Two tickers, daily, integer YYYYMMDD dates as pd.read_csv gives them; MSFT has rows with the high
    below the low, AAPL is clean."""
    days = pd.date_range("2020-01-01", periods=400, freq="D")
    dates = [int(d.strftime("%Y%m%d")) for d in days]
    rng = np.random.default_rng(7)
    parts = []
    for ticker in ("AAPL", "MSFT"):
        close = 100 * np.exp(np.cumsum(rng.normal(0, 0.01, len(days))))
        open_ = np.concatenate([[100.0], close[:-1]])
        high, low = np.maximum(open_, close) * 1.01, np.minimum(open_, close) * 0.99
        if ticker == "MSFT":
            high[[5, 9]], low[[5, 9]] = low[[5, 9]], high[[5, 9]]
        parts.append(pd.DataFrame({"date": dates, "symbol": ticker, "open": open_, "high": high, "low": low,
                                   "close": close, "volume": 1000.0}))
    return pd.concat(parts, ignore_index=True)


def test_a_chosen_symbols_rows_are_the_only_ones_checked(tmp_path):
    frame = long_frame()
    with pytest.raises(tradesim.DataError):
        tradesim.load(frame, time_unit="YYYYMMDD")
    run = tradesim.backtest(frame, symbol="AAPL", time_unit="YYYYMMDD", fast=3, slow=10, device="cpu")
    assert run.symbol == "AAPL"
    aapl = tradesim.load(frame, symbol="AAPL", time_unit="YYYYMMDD")
    assert aapl.symbols == ["AAPL"] and aapl.n_bars == 400
    with pytest.raises(tradesim.ConfigError, match="symbol='TSLA'"):
        tradesim.load(frame, symbol="TSLA", time_unit="YYYYMMDD")
    # The chosen symbol's findings name the caller's rows (positions in the whole frame).
    with pytest.raises(tradesim.DataError) as err:
        tradesim.load(frame, symbol="MSFT", time_unit="YYYYMMDD")
    assert {f["row"] for f in err.value.findings if f["class"] == "high-below-low"} == {405, 409}, err.value.findings
    # A file alike, in Python and in the CLI.
    path = tmp_path / "sp.csv"
    frame.to_csv(path, index=False)
    assert tradesim.load(path, symbol="AAPL", time_unit="YYYYMMDD").symbols == ["AAPL"]
    done = subprocess.run([BIN, "backtest", "--device", "cpu", "--data", str(path), "--symbol", "AAPL",
                           "--time-unit", "YYYYMMDD", "--fast", "3", "--slow", "10"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    # Loaded Bars select too, and refuse a symbol they lack.
    both = tradesim.load(frame, time_unit="YYYYMMDD", repair=["high-below-low"])
    assert tradesim.load(both, symbol="msft").symbols == ["MSFT"]
    with pytest.raises(tradesim.ConfigError, match="symbol='TSLA'"):
        tradesim.load(both, symbol="TSLA")


def test_drop_repair_and_time_unit_in_every_entry_point(tmp_path):
    frame = long_frame()
    msft = frame[frame["symbol"] == "MSFT"]
    with pytest.raises(tradesim.DataError):
        tradesim.backtest(msft, time_unit="YYYYMMDD", fast=3, slow=10, device="cpu")
    dropped = tradesim.backtest(msft, time_unit="YYYYMMDD", drop=["high-below-low"], fast=3, slow=10, device="cpu")
    assert int(dropped.metrics["bars"].iloc[0]) == 400 - 2 - 1
    # hyperopt takes time_unit/drop/repair/symbol: the data loads, then the small search runs.
    run = tradesim.hyperopt(TINY, data=frame, symbol="MSFT", time_unit="YYYYMMDD", repair=["high-below-low"],
                            device="cpu", study=tmp_path / "s.sqlite")
    assert len(run.leaderboard) == 2
    metrics, _ = tradesim.greedy_walk(lambda obs: 0, frame, symbol="AAPL", time_unit="YYYYMMDD")
    assert metrics["trades"] == 0
    pytest.importorskip("gymnasium")
    env = tradesim.VectorEnv(frame, symbol="MSFT", time_unit="YYYYMMDD", drop=["high-below-low"], envs=2,
                             episode_len=8, device="cpu")
    obs, _ = env.reset(seed=1)
    assert obs.shape == (2, len(env.feature_names))


def test_bars_pickle():
    frame = long_frame()
    bars = tradesim.load(frame, symbol="AAPL", time_unit="YYYYMMDD")
    back = pickle.loads(pickle.dumps(bars))
    assert isinstance(back, tradesim.Bars) and back.symbols == bars.symbols and back.n_bars == bars.n_bars
    a = tradesim.backtest(bars, fast=3, slow=10, device="cpu").metrics
    b = tradesim.backtest(back, fast=3, slow=10, device="cpu").metrics
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    embedded = tradesim.embedded()
    assert pickle.loads(pickle.dumps(embedded)).n_bars == embedded.n_bars


# Item 3: results on the caller's rows.


def test_equity_joins_the_docs_first_example_row_for_row():
    bars = pd.read_csv(EMBEDDED_CSV)
    run = tradesim.backtest(bars, fast=range(5, 51, 5), slow=range(20, 201, 10), trades=True, equity=True,
                            device="cpu")
    joined = bars.join(run.equity)
    assert run.equity.index.equals(bars.index)
    assert joined[run.equity.columns[0]].notna().all(), "rows of the join without equity"


# Item 4: strict types.


def test_booleans_are_bools_and_columns_are_checked():
    frame = tradesim.embedded()
    for name, value in (("allow_short", "false"), ("whole_units", "no"), ("trades", "yes"), ("equity", 1)):
        with pytest.raises(TypeError, match=name):
            tradesim.backtest(frame, fast=5, slow=20, device="cpu", **{name: value})
    with pytest.raises(tradesim.ConfigError, match="columns"):
        tradesim.backtest(frame, fast=5, slow=20, columns="foo", device="cpu")
    with pytest.raises(tradesim.ConfigError, match="columns"):
        tradesim.backtest(frame, fast=5, slow=20, columns=[(5, 30)], device="cpu")
    run = tradesim.backtest(frame, fast=[5, 10], slow=[20, 40], columns=[(10, 40), (5, 20)], equity=True,
                            device="cpu")
    assert list(run.equity.columns) == [(10, 40), (5, 20)]
    assert set(run.equity.columns) <= set(run.metrics.index)
    with pytest.raises(TypeError, match="resume"):
        tradesim.hyperopt(TINY, synthetic=500, device="cpu", resume="yes")
    metrics, _ = tradesim.greedy_walk(lambda obs: 1)
    assert type(metrics["trades"]) is int, metrics


def test_resume_with_more_trials_runs_them(tmp_path):
    study = tmp_path / "s.sqlite"
    tradesim.hyperopt(TINY, synthetic=3000, seed=3, device="cpu", study=study)
    more = tradesim.hyperopt(synthetic=3000, device="cpu", study=study, resume=True, trials=3)
    assert sorted(more.leaderboard["number"]) == [0, 1, 2]
    with pytest.warns(UserWarning, match="trials=1"):
        fewer = tradesim.hyperopt(synthetic=3000, device="cpu", study=study, resume=True, trials=1)
    assert len(fewer.leaderboard) == 3


# Item 5: Gymnasium's defaults.


def test_gymnasiums_vector_wrappers_run_on_a_default_vector_env():
    gym = pytest.importorskip("gymnasium")
    from gymnasium.wrappers import vector as wrappers

    def make():
        return tradesim.VectorEnv(envs=4, episode_len=6, device="cpu")

    assert make().autoreset_mode == gym.vector.AutoresetMode.NEXT_STEP
    applied = {
        "NormalizeObservation": lambda e: wrappers.NormalizeObservation(e),
        "FlattenObservation": lambda e: wrappers.FlattenObservation(e),
        "TransformObservation": lambda e: wrappers.TransformObservation(e, lambda o: o * 2, e.observation_space),
        "DtypeObservation": lambda e: wrappers.DtypeObservation(e, np.float64),
        "ReshapeObservation": lambda e: wrappers.ReshapeObservation(e, (e.single_observation_space.shape[0], 1)),
        "ClipReward": lambda e: wrappers.ClipReward(e, -0.001, 0.001),
        "NormalizeReward": lambda e: wrappers.NormalizeReward(e),
        "TransformReward": lambda e: wrappers.TransformReward(e, lambda r: r * 10),
        "RecordEpisodeStatistics": lambda e: wrappers.RecordEpisodeStatistics(e),
        "DictInfoToList": lambda e: wrappers.DictInfoToList(e),
        "TransformAction": lambda e: wrappers.TransformAction(e, lambda a: 2 - a, e.action_space),
        "VectorizeTransformObservation": lambda e: wrappers.VectorizeTransformObservation(
            e, gym.wrappers.DtypeObservation, dtype=np.float64),
        "VectorizeTransformReward": lambda e: wrappers.VectorizeTransformReward(
            e, gym.wrappers.ClipReward, min_reward=-0.001, max_reward=0.001),
    }
    # Not applicable: ClipAction, RescaleAction, VectorizeTransformAction's Box wrappers (the actions are
    # Discrete), RescaleObservation (unbounded observations), FilterObservation (not a Dict), Grayscale and
    # ResizeObservation (not images), HumanRendering and RecordVideo (no render mode).
    for name, wrap in applied.items():
        env = wrap(make())
        env.reset(seed=0)
        for _ in range(14):  # past two episode ends
            env.step(np.ones(4, dtype=np.int64))
        env.close()
    # ClipReward writes in place: it clipped.
    env = wrappers.ClipReward(make(), -1e-9, 1e-9)
    env.reset(seed=0)
    rewards = [env.step(np.ones(4, dtype=np.int64))[1] for _ in range(5)]
    assert max(float(np.abs(r).max()) for r in rewards) <= 1e-9


# Item 6: Python's words in Python.


def test_messages_speak_python(tmp_path):
    frame = long_frame()
    with pytest.raises(tradesim.DataError) as err:
        tradesim.load(frame[frame["symbol"] == "MSFT"], time_unit="YYYYMMDD")
    assert "tradesim data check" not in str(err.value) and "drop=" in str(err.value), str(err.value)
    with pytest.raises(tradesim.ConfigError) as err:
        tradesim.hyperopt({"study": {"trails": 2}}, synthetic=500, device="cpu", study=tmp_path / "s.sqlite")
    assert str(err.value).startswith("config['study']['trails']: "), str(err.value)
    assert "TOML" not in str(err.value), str(err.value)
    with pytest.raises(tradesim.ConfigError, match=r"algo='sac': one of 'dqn', 'ppo'"):
        tradesim.hyperopt(TINY, synthetic=500, device="cpu", algo="sac")
    run = tradesim.hyperopt(TINY, synthetic=3000, seed=3, device="cpu", study=tmp_path / "v.sqlite")
    assert "--" not in run.verdict and "placebo=19" in run.verdict, run.verdict
    with pytest.warns(UserWarning) as caught:
        tradesim.hyperopt(synthetic=3000, device="cpu", study=tmp_path / "v.sqlite", resume=True, epochs=3)
    assert all("--" not in str(w.message) for w in caught), [str(w.message) for w in caught]


def test_the_budget_is_sized_for_the_device_and_keywords_win(tmp_path):
    """Issue 59: ``budget`` sizes the defaults of a new study (``'gpu'`` here, on the CPU); ``envs`` and
    ``epochs`` given as keywords win; the study stores the resolved budget and where it came from. A budget
    that is not one of the three is refused, naming the choices."""
    with pytest.raises(tradesim.ConfigError, match="budget='tpu': one of 'auto', 'cpu', 'gpu'"):
        tradesim.hyperopt(synthetic=3_000, budget="tpu", study=tmp_path / "bad.sqlite", device="cpu")
    study = tmp_path / "budget.sqlite"
    tradesim.hyperopt(synthetic=3_000, trials=1, parallel=1, epochs=1, envs=4, segment_len=16, budget="gpu",
                      study=study, device="cpu")
    with sqlite3.connect(study) as db:
        (text,) = db.execute(
            "SELECT value_json FROM study_user_attributes WHERE key = 'tradesim_config'").fetchone()
    stored = json.loads(text)
    cfg = (json.loads(stored) if isinstance(stored, str) else stored)["study"]
    assert (cfg["budget"], cfg["envs"], cfg["segment_len"], cfg["epochs"], cfg["grad_steps"]) == ("gpu", 4, 16, 1, 2)
    assert "budget = gpu" in cfg["budget_from"] and "envs" in cfg["budget_from"], cfg["budget_from"]
