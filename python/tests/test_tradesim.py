"""The Python package against the CLI's numbers and the data contract.

Environment: TRADESIM_BIN (the tradesim binary of the same checkout, for the round trips; the project's
test command sets it), REQUIRE_GPU=1 (a skipped GPU case fails).
"""

from __future__ import annotations

import csv
import decimal
import json
import math
import os
import pathlib
import sqlite3
import subprocess

import numpy as np
import pandas as pd
import pytest

import tradesim

ROOT = pathlib.Path(__file__).resolve().parents[2]
EMBEDDED_CSV = ROOT / "data" / "eurusd-1h-ask-2017.csv"
BIN = os.environ.get("TRADESIM_BIN", str(ROOT / "target" / "debug" / "tradesim"))
REQUIRE_GPU = os.environ.get("REQUIRE_GPU") == "1"


def cli(*args: str) -> str:
    done = subprocess.run([BIN, *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"tradesim {' '.join(args)}: {done.stderr}"
    return done.stdout


def has_gpu() -> bool:
    return tradesim.device_info("auto")["backend"] == "cuda"


def gpu_or_skip() -> None:
    if not has_gpu():
        if REQUIRE_GPU:
            pytest.fail(f"REQUIRE_GPU=1 but no usable GPU: {tradesim.device_info('auto')['fallback_reason']}")
        pytest.skip("no GPU")


def embedded_frame() -> pd.DataFrame:
    """The embedded data as a pandas user reads it: a DatetimeIndex and capitalised columns."""
    frame = pd.read_csv(EMBEDDED_CSV)
    time_col = frame.columns[0]
    frame[time_col] = pd.to_datetime(frame[time_col], format="%d.%m.%Y %H:%M:%S.%f", utc=True)
    frame = frame.set_index(time_col)
    frame.columns = [str(c).capitalize() for c in frame.columns]
    return frame


def read_cli_csv(path: pathlib.Path) -> dict[str, list[str]]:
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return {k: [r[k] for r in rows] for k in rows[0]}


def test_backtest_equals_the_cli_bit_for_bit(tmp_path):
    out = tmp_path / "bt.csv"
    cli("backtest", "--device", "cpu", "--fast", "5:15:5", "--slow", "20:40:10", "--csv", str(out))
    theirs = read_cli_csv(out)
    run = tradesim.backtest(tradesim.embedded(), fast=range(5, 16, 5), slow=range(20, 41, 10), device="cpu")
    ours = run.metrics
    assert len(ours) == len(theirs["fast"]) == 9
    assert ours.index.names == ["fast", "slow"]
    assert list(ours.index) == [(int(f), int(s)) for f, s in zip(theirs["fast"], theirs["slow"])]
    assert list(ours["rank"]) == [int(x) for x in theirs["rank"]]
    assert ours["trades"].dtype == np.int64 and ours["bars"].dtype == np.int64
    metric_names = [k for k in theirs if k not in ("fast", "slow", "rank")]
    assert {"sharpe", "total_return", "max_drawdown", "trades"} <= set(metric_names)
    for name in metric_names:
        for got, want in zip(ours[name], theirs[name]):
            want = float(want)
            assert (math.isnan(got) and math.isnan(want)) or float(got) == want, (name, got, want)
    assert run.device == "cpu" and run.symbol and "embedded" in run.data
    assert "audit" in run.audit.lower() or "decimal" in run.audit.lower(), run.audit


def test_a_dataframe_gives_the_embedded_numbers():
    frame = embedded_frame()
    from_frame = tradesim.backtest(frame, fast=[10], slow=[30, 50], device="cpu").metrics
    from_embedded = tradesim.backtest(tradesim.embedded(), fast=[10], slow=[30, 50], device="cpu").metrics
    pd.testing.assert_frame_equal(from_frame, from_embedded, check_exact=True)
    # The same bars as numpy arrays in a dict, with a time column instead of an index.
    arrays = {"timestamp": frame.index.to_numpy(), **{c.lower(): frame[c].to_numpy() for c in frame.columns}}
    from_arrays = tradesim.backtest(arrays, fast=[10], slow=[30, 50], device="cpu").metrics
    pd.testing.assert_frame_equal(from_arrays, from_embedded, check_exact=True)


def test_trades_and_equity_match_the_cli_exports(tmp_path):
    trades_csv, equity_csv = tmp_path / "trades.csv", tmp_path / "equity.csv"
    cli(
        "backtest", "--device", "cpu", "--fast", "10", "--slow", "30",
        "--trades", str(trades_csv), "--equity", str(equity_csv),
    )
    run = tradesim.backtest(tradesim.embedded(), fast=10, slow=30, trades=True, equity=True, device="cpu")
    theirs = read_cli_csv(trades_csv)
    assert len(run.trades) == len(theirs["pnl"]) == run.metrics.loc[(10, 30), "trades"] > 0
    assert list(run.trades["pnl"]) == [float(x) for x in theirs["pnl"]]
    assert list(run.trades["side"]) == theirs["side"]
    assert list(run.trades["exit_reason"]) == [
        {"Signal": "signal", "EndOfData": "end_of_data"}[r] for r in theirs["exit_reason"]
    ]
    assert (run.trades["fast"] == 10).all() and (run.trades["slow"] == 30).all()
    assert list(run.trades["entry_time"]) == list(pd.to_datetime(theirs["entry_time"], utc=True))
    eq_theirs = read_cli_csv(equity_csv)
    assert list(run.equity[(10, 30)]) == [float(x) for x in eq_theirs["sma_10_30"]]
    assert isinstance(run.equity.index, pd.DatetimeIndex)
    total = run.equity[(10, 30)].iloc[-1] / 100_000 - 1
    assert abs(total - run.metrics.loc[(10, 30), "total_return"]) < 1e-9


def test_money_parameters_are_exact_decimals():
    bars = tradesim.synthetic(3_000, seed=4)
    a = tradesim.backtest(bars, fast=5, slow=20, spread=0.0002, device="cpu").metrics
    b = tradesim.backtest(bars, fast=5, slow=20, spread="0.0002", device="cpu").metrics
    c = tradesim.backtest(bars, fast=5, slow=20, spread=decimal.Decimal("0.0002"), device="cpu").metrics
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    pd.testing.assert_frame_equal(a, c, check_exact=True)
    with pytest.raises(ValueError, match="spread"):
        tradesim.backtest(bars, fast=5, slow=20, spread="1%", device="cpu")
    with pytest.raises(TypeError, match="spread"):
        tradesim.backtest(bars, fast=5, slow=20, spread=[1], device="cpu")


def small_frame(n: int = 50) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    close = 100 * np.exp(np.cumsum(rng.normal(0, 0.01, n)))
    open_ = np.concatenate([[100.0], close[:-1]])
    frame = pd.DataFrame(
        {
            "Open": open_,
            "High": np.maximum(open_, close) * 1.001,
            "Low": np.minimum(open_, close) * 0.999,
            "Close": close,
            "Volume": np.full(n, 10.0),
        },
        index=pd.date_range("2024-01-01", periods=n, freq="h", tz="UTC"),
    )
    return frame


def test_bad_dataframes_raise_with_every_row_named():
    frame = small_frame()
    frame.iloc[7, frame.columns.get_loc("Close")] = np.nan
    frame.iloc[12, frame.columns.get_loc("High")] = frame["Low"].iloc[12] * 0.5
    with pytest.raises(tradesim.DataError) as err:
        tradesim.load(frame)
    findings = err.value.findings
    by_row = {(f["row"], f["class"]) for f in findings}
    assert (7, "non-finite") in by_row, findings
    assert (12, "high-below-low") in by_row, findings
    nan = next(f for f in findings if f["row"] == 7)
    assert nan["column"] == "Close" and nan["index"].startswith("2024-01-01 07:00:00"), nan
    assert "7" in str(err.value) and "Close" in str(err.value)


def test_unsorted_duplicate_and_missing_columns_are_refused():
    frame = small_frame()
    swapped = frame.iloc[[0, 1, 3, 2, 4, 5]]
    with pytest.raises(tradesim.DataError) as err:
        tradesim.load(swapped)
    assert any(f["class"] == "decreasing-time" and f["row"] == 3 for f in err.value.findings), err.value.findings
    duplicated = frame.iloc[[0, 1, 1, 2]]
    with pytest.raises(tradesim.DataError) as err:
        tradesim.load(duplicated)
    assert any(f["class"] == "duplicate-time" and f["row"] == 2 for f in err.value.findings), err.value.findings
    with pytest.raises(tradesim.DataError) as err:
        tradesim.load(frame.drop(columns=["Low"]))
    assert [f["class"] for f in err.value.findings] == ["missing-column"], err.value.findings
    with pytest.raises(TypeError):
        tradesim.load(42)


def test_drop_and_repair_follow_the_cli_policy():
    frame = small_frame()
    frame.iloc[9, frame.columns.get_loc("Low")] = -1.0
    with pytest.raises(tradesim.DataError) as err:
        tradesim.load(frame)
    assert [(f["row"], f["class"]) for f in err.value.findings] == [(9, "non-positive-price")]
    dropped = tradesim.load(frame, drop=["non-positive-price"])
    assert dropped.n_bars == len(frame) - 1
    assert any(f["row"] == 9 and f["severity"] == "warning" for f in dropped.findings), dropped.findings
    # High and low swapped: refused as it is, kept by the repair (which swaps them back), as
    # `tradesim data check --repair high-below-low` does.
    swapped = small_frame()
    high, low = swapped["High"].iloc[12], swapped["Low"].iloc[12]
    swapped.iloc[12, swapped.columns.get_loc("High")] = low
    swapped.iloc[12, swapped.columns.get_loc("Low")] = high
    with pytest.raises(tradesim.DataError) as err:
        tradesim.load(swapped)
    assert {f["class"] for f in err.value.findings} >= {"high-below-low"}, err.value.findings
    repaired = tradesim.load(swapped, repair=["high-below-low"])
    assert repaired.n_bars == len(swapped)
    assert any(f["row"] == 12 and "repaired" in f["message"] for f in repaired.findings), repaired.findings
    with pytest.raises(ValueError):
        tradesim.load(frame, drop=["no-such-class"])


def test_multi_symbol_frames_need_a_symbol():
    a, b = small_frame().assign(Symbol="AAA"), small_frame().assign(Symbol="BBB")
    both = pd.concat([a, b])
    bars = tradesim.load(both)
    assert bars.symbols == ["AAA", "BBB"] and bars.n_bars == len(both)
    with pytest.raises(ValueError, match="symbol"):
        tradesim.backtest(bars, fast=3, slow=5, device="cpu")
    run = tradesim.backtest(bars, symbol="BBB", fast=3, slow=5, device="cpu")
    alone = tradesim.backtest(b.drop(columns=["Symbol"]), fast=3, slow=5, device="cpu")
    pd.testing.assert_frame_equal(run.metrics, alone.metrics, check_exact=True)


def test_hyperopt_gives_the_cli_study(tmp_path):
    config = {
        "study": {"algo": "dqn", "trials": 2, "parallel": 2, "epochs": 1, "envs": 8, "segment_len": 64},
    }
    toml = tmp_path / "search.toml"
    toml.write_text("[study]\n" + "\n".join(f'{k} = {v!r}'.replace("'", '"') for k, v in config["study"].items()) + "\n")
    cli_study = tmp_path / "cli" / "study.sqlite"
    cli("hyperopt", "--config", str(toml), "--synthetic", "3000", "--seed", "3", "--device", "cpu",
        "--study", str(cli_study))
    run = tradesim.hyperopt(config, synthetic=3000, seed=3, device="cpu", study=tmp_path / "py" / "study.sqlite")
    board = run.leaderboard
    assert len(board) == 2 and set(board["status"]) <= {"complete", "pruned", "fail"}
    assert board["number"].dtype == np.int64 and board["pruned_at"].dtype == "Int64"
    assert (board["pruned_at"].isna() == (board["status"] != "pruned")).all()
    assert ((board["fail_reason"] != "") == (board["status"] == "fail")).all(), "a reason for each failed trial"
    assert run.storage.startswith("sqlite:///") and run.study_name == "tradesim"
    with sqlite3.connect(cli_study) as db:
        theirs = dict(db.execute(
            "SELECT t.number, v.value FROM trials t LEFT JOIN trial_values v ON v.trial_id = t.trial_id"
        ).fetchall())
    for number, value in zip(board["number"], board["value"]):
        want = theirs[int(number)]
        assert (want is None and math.isnan(value)) or value == want, (number, value, want)
    assert pathlib.Path(run.report, "index.html").is_file()


def test_hyperopt_uploads_artifacts(tmp_path):
    config = {"study": {"trials": 2, "parallel": 2, "epochs": 1, "envs": 8, "segment_len": 64}}
    study, store = tmp_path / "study.sqlite", tmp_path / "store"
    tradesim.hyperopt(config, synthetic=3000, seed=3, device="cpu", study=study, artifacts=store)
    with sqlite3.connect(study) as db:
        links = db.execute(
            "SELECT t.number, a.key, a.value_json FROM trial_system_attributes a JOIN trials t "
            "ON t.trial_id = a.trial_id WHERE a.key LIKE 'artifacts:%'"
        ).fetchall()
    # Optuna's layout: the attribute's value is a JSON string holding the meta's JSON.
    metas = [(number, key, json.loads(json.loads(value))) for number, key, value in links]
    assert sorted(m["filename"] for _, _, m in metas) == [
        "trial-0-trades.csv", "trial-0.safetensors", "trial-1-trades.csv", "trial-1.safetensors"]
    for number, key, meta in metas:
        assert key == "artifacts:" + meta["artifact_id"] and meta["filename"].startswith(f"trial-{number}")
        assert (store / meta["artifact_id"]).is_file()
    assert len(list(store.iterdir())) == 4


def test_walk_forward_search_runs_the_search_on_each_folds_past(tmp_path):
    config = {"study": {"trials": 2, "parallel": 2, "epochs": 1, "envs": 8, "segment_len": 64}}
    study = tmp_path / "study.sqlite"
    run = tradesim.hyperopt(config, synthetic=6000, seed=3, device="cpu", study=study, walk_forward_search=2)
    folds = run.evidence["walk_forward_search"]
    assert [f["fold"] for f in folds] == [1, 2]
    # Each fold is searched on the bars just before it and tested on its own.
    assert all(f["valid"][1] == f["test"][0] for f in folds) and folds[0]["test"][1] == folds[1]["test"][0]
    assert all("lr" in f["params"] for f in folds)
    assert run.evidence["walk_forward_search_oos"]["n_obs"] > 100
    assert "walk-forward optimisation PSR" in run.verdict
    with sqlite3.connect(study) as db:
        names = {r[0] for r in db.execute("SELECT study_name FROM studies")}
    assert names == {"tradesim", "tradesim.wfo-1", "tradesim.wfo-2"}


def test_side_searches_at_once_give_the_evidence_of_one_at_a_time(tmp_path):
    config = {"study": {"trials": 2, "parallel": 2, "epochs": 1, "envs": 8, "segment_len": 64}}
    runs = [
        tradesim.hyperopt(config, synthetic=6000, seed=3, device="cpu", study=tmp_path / f"s{n}.sqlite",
                          placebo=2, walk_forward=2, side_searches=n)
        for n in (1, 3)
    ]
    assert [len(r.evidence["placebo"]["searches"]) for r in runs] == [2, 2]
    assert runs[0].evidence == runs[1].evidence and runs[0].verdict == runs[1].verdict
    with pytest.raises(tradesim.ConfigError, match="side_searches"):
        tradesim.hyperopt(config, synthetic=6000, device="cpu", study=tmp_path / "zero.sqlite", side_searches=0)


def test_hyperopt_returns_its_evidence_and_verdict(tmp_path):
    config = {"study": {"trials": 2, "parallel": 2, "epochs": 1, "envs": 8, "segment_len": 64}}
    study = tmp_path / "study.sqlite"
    run = tradesim.hyperopt(config, synthetic=3000, seed=3, device="cpu", study=study, placebo=1, walk_forward=2)
    # One placebo search can never show p <= 0.05: the verdict says so, whatever the rest.
    assert run.verdict.startswith("no evidence: ") and "1 placebo searches cannot show" in run.verdict
    assert len(run.evidence["placebo"]["searches"]) == 1
    assert 0.5 <= run.evidence["placebo"]["p_value"] <= 1.0
    assert [f["fold"] for f in run.evidence["walk_forward"]] == [1, 2]
    assert set(run.evidence) >= {"valid", "test", "pbo", "placebo", "walk_forward", "verdict"}
    with sqlite3.connect(study) as db:
        attrs = dict(db.execute(
            "SELECT a.key, a.value_json FROM study_user_attributes a JOIN studies s ON s.study_id = a.study_id "
            "WHERE s.study_name = 'tradesim'"
        ).fetchall())
        names = {r[0] for r in db.execute("SELECT study_name FROM studies")}
    # The study keeps the CLI's words; Python's verdict names the keyword (`placebo=19`, not `--placebo 19`).
    assert tradesim._errors.python_names(json.loads(attrs["verdict"])) == run.verdict
    assert names == {"tradesim", "tradesim.placebo-1"}


def test_bad_search_configuration_names_the_key(tmp_path):
    with pytest.raises(ValueError, match="study.trials"):
        tradesim.hyperopt({"study": {"trials": 0}}, synthetic=3000, device="cpu", study=tmp_path / "s.sqlite")


def test_cuda_request_without_a_gpu_is_a_clear_error():
    if has_gpu():
        pytest.skip("a GPU is present")
    with pytest.raises(ValueError, match="CUDA"):
        tradesim.backtest(tradesim.synthetic(500), fast=3, slow=5, device="cuda")


def test_gpu_backtest_equals_cpu():
    gpu_or_skip()
    bars = tradesim.embedded()
    cpu = tradesim.backtest(bars, fast=range(5, 30, 5), slow=range(20, 100, 20), device="cpu", trades=True)
    gpu = tradesim.backtest(bars, fast=range(5, 30, 5), slow=range(20, 100, 20), device="cuda", trades=True)
    assert gpu.device == "cuda"
    pd.testing.assert_frame_equal(cpu.metrics, gpu.metrics, check_exact=True)
    pd.testing.assert_frame_equal(cpu.trades, gpu.trades, check_exact=True)


def test_ctrl_c_stops_a_search_that_resumes(tmp_path):
    import signal
    import sys
    import time

    study = tmp_path / "study.sqlite"
    # Python leaves SIGINT ignored when its parent ignored it (a job started with `&` from a script, as CI
    # runners do): the child then never sees the Ctrl-C and runs to the end. It installs Python's own
    # handler, as in an interactive session.
    script = (
        "import signal, tradesim\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "tradesim.hyperopt({'study': {'trials': 2, 'parallel': 2, 'epochs': 40, 'envs': 8, 'segment_len': 64}},\n"
        f"    synthetic=3000, seed=2, device='cpu', study={str(study)!r})\n"
    )
    # stderr goes to a file, not a pipe nobody reads while the search runs (a full pipe would stall it).
    log = tmp_path / "stderr.txt"
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-c", script], stderr=err)
    deadline = time.time() + 120
    while time.time() < deadline:
        if study.exists():
            # The file exists before its tables do, and the search may hold the write lock:
            # both read as "not yet".
            db = sqlite3.connect(study, timeout=1)
            try:
                if db.execute("SELECT COUNT(*) FROM trial_intermediate_values").fetchone()[0] > 0:
                    break
            except sqlite3.OperationalError:
                pass
            finally:
                db.close()
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"the search did not stop within 120 s of SIGINT; its stderr ends:\n{log.read_text()[-3000:]}")
    stderr = log.read_text()
    assert proc.returncode != 0 and "KeyboardInterrupt" in stderr and "resume=True" in stderr, stderr
    with sqlite3.connect(study) as db:
        states = [s for (s,) in db.execute("SELECT state FROM trials")]
    assert states and "COMPLETE" not in states, states
    run = tradesim.hyperopt(synthetic=3000, device="cpu", study=study, resume=True)
    assert len(run.leaderboard) == 2 and set(run.leaderboard["status"]) <= {"complete", "pruned", "fail"}


def test_hyperparameters_list_each_parameter_once_with_its_learners_defaults():
    params = tradesim.hyperparameters()
    names = [p["name"] for p in params]
    assert len(names) == len(set(names)) and {"lr", "gamma", "hidden", "eps_decay", "clip", "barriers"} <= set(names)
    by = {p["name"]: p for p in params}
    assert by["lr"]["dqn"]["kind"] == "range" and by["lr"]["dqn"]["log"] is True
    assert by["eps_decay"]["ppo"]["kind"] == "none" and by["clip"]["dqn"]["kind"] == "none"
    assert by["hidden"]["integer"] and not by["lr"]["integer"]
    assert by["barriers"]["stored"] == 1.0 and by["lr"]["stored"] is None
    for p in params:
        for learner in ("dqn", "ppo"):
            d = p[learner]
            for v in d.get("choices", []) + [d[k] for k in ("low", "high", "value") if k in d]:
                assert p["min"] <= v <= p["max"], (p["name"], learner, v)
