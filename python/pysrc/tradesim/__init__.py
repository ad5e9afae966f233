"""tradesim from Python: validated bars from pandas or numpy, SMA-crossover backtest grids and the
hyperparameter search, on the GPU when there is one.

The Rust library is the single source of every rule: this package converts pandas and numpy to and from
it and adds nothing to the numbers (``tradesim.backtest`` gives the CLI's numbers, bit for bit).

    >>> import pandas as pd, tradesim
    >>> bars = pd.read_csv("bars.csv", index_col=0, parse_dates=True)
    >>> run = tradesim.backtest(bars, fast=range(5, 50, 5), slow=range(20, 200, 20))
    >>> run.metrics.sort_values("rank").head()
"""

from __future__ import annotations

import dataclasses
import decimal
import json
import os
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

import numpy as np

from . import _native
from ._native import Bars, DataError, DLPackArray

__all__ = [
    "Bars",
    "DataError",
    "DLPackArray",
    "BacktestRun",
    "HyperoptRun",
    "backtest",
    "embedded",
    "hyperopt",
    "load",
    "synthetic",
    "device_info",
    "VectorEnv",
    "TradingEnv",
]

__version__ = _native.__version__

Number = Union[str, int, float, decimal.Decimal]


def _pandas():
    try:
        import pandas as pd
    except ImportError as e:  # pragma: no cover - pandas is a dependency of the package
        raise ImportError("tradesim needs pandas for DataFrames: pip install pandas") from e
    return pd


def _column(values: Any) -> tuple[str, Any]:
    """One DataFrame column (or numpy array) as the (kind, data) pair the native loader reads."""
    pd = _pandas()
    series = values if isinstance(values, pd.Series) else pd.Series(values)
    dtype = series.dtype
    if pd.api.types.is_datetime64_any_dtype(dtype):
        if isinstance(dtype, pd.DatetimeTZDtype):
            series = series.dt.tz_convert("UTC").dt.tz_localize(None)
        ns = series.astype("datetime64[ns]").to_numpy()
        return "time_ns", np.ascontiguousarray(ns.view(np.int64))
    if pd.api.types.is_bool_dtype(dtype):
        return "int", np.ascontiguousarray(series.to_numpy(dtype=np.int64))
    if pd.api.types.is_integer_dtype(dtype) and not series.isna().any():
        return "int", np.ascontiguousarray(series.to_numpy(dtype=np.int64))
    if pd.api.types.is_numeric_dtype(dtype):
        return "float", np.ascontiguousarray(series.to_numpy(dtype=np.float64, na_value=np.nan))
    texts = [None if (v is None or (isinstance(v, float) and np.isnan(v))) else str(v) for v in series.tolist()]
    return "text", texts


def load(
    data: Any,
    *,
    symbol: Optional[str] = None,
    drop: Iterable[str] = (),
    repair: Iterable[str] = (),
    name: Optional[str] = None,
) -> Bars:
    """Validated bars from a DataFrame, a dict of numpy arrays, a CSV or Parquet path, or :class:`Bars`.

    A DataFrame may hold its times in a ``DatetimeIndex`` or in a time column (``time``, ``date``,
    ``timestamp``, ... in any case), and OHLCV columns in any case; a ``symbol`` column makes it a
    multi-symbol (long-format) table. Every row goes through the CLI's validation; a finding that is an
    error raises :class:`DataError`, whose ``findings`` list names the row (the DataFrame position, 0-based,
    and its index label), the column and the class. ``drop``/``repair`` name finding classes to drop or
    repair instead, as ``tradesim data check --drop/--repair`` does. ``symbol`` names the series when the
    data has no symbol column.
    """
    if isinstance(data, Bars):
        return data
    if isinstance(data, (str, os.PathLike)):
        return _native.load_file(os.fspath(data), list(drop), list(repair))
    pd = _pandas()
    if isinstance(data, Mapping):
        data = pd.DataFrame(dict(data))
    if not isinstance(data, pd.DataFrame):
        raise TypeError(f"tradesim.load: expected a DataFrame, a dict of arrays or a path, got {type(data).__name__}")
    headers: list[str] = []
    columns: list[tuple[str, Any]] = []
    index = data.index
    if isinstance(index, pd.DatetimeIndex):
        headers.append(str(index.name) if index.name is not None else "time")
        columns.append(_column(index.to_series(index=range(len(index)))))
    for key in data.columns:
        headers.append(str(key))
        columns.append(_column(data[key].reset_index(drop=True)))
    try:
        return _native.load_columns(name or "DataFrame", headers, columns, symbol or "DATA", list(drop), list(repair))
    except DataError as err:
        # Name each finding's row by the frame's index label too (computed only for the rows named).
        for f in getattr(err, "findings", []):
            row = f.get("row")
            if row is not None and 0 <= row < len(index) and not isinstance(index, pd.RangeIndex):
                f["index"] = str(index[row])
        raise


def embedded() -> Bars:
    """The embedded default data (EURUSD ask, 1 hour bars, 2017), as the CLI uses it."""
    return _native.embedded()


def synthetic(n_bars: int, *, symbols: int = 1, seed: Optional[int] = None) -> Bars:
    """Seeded synthetic bars (marked SYNTHETIC in every output); without ``seed``, the bars
    ``--synthetic N`` gives the CLI."""
    return _native.synthetic(int(n_bars), int(symbols), None if seed is None else int(seed))


def device_info(device: str = "auto") -> dict[str, Any]:
    """The backend ``device`` selects: its name and, for CUDA, the device and driver."""
    return dict(_native.device_info(device))


def _decimal(name: str, value: Number) -> Any:
    if isinstance(value, bool) or not isinstance(value, (str, int, float, decimal.Decimal)):
        raise TypeError(f"{name}: expected a number or a decimal string, got {type(value).__name__}")
    return value if isinstance(value, (int, float)) else str(value)


def _windows(name: str, value: Union[int, Iterable[int]]) -> list[int]:
    values = [value] if isinstance(value, (int, np.integer)) else list(value)
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{name}: windows are whole numbers, got {v!r}")
        out.append(int(v))
    return out


def _frame(columns: Optional[Sequence[tuple[str, Any]]], time_index: Optional[str] = None):
    if columns is None:
        return None
    pd = _pandas()
    frame = pd.DataFrame({name: values for name, values in columns})
    for name, _ in columns:
        if name.endswith("time") and pd.api.types.is_string_dtype(frame[name].dtype):
            frame[name] = pd.to_datetime(frame[name].replace("", None), utc=True, format="ISO8601")
    if time_index is not None and time_index in frame:
        frame = frame.set_index(time_index)
    return frame


@dataclasses.dataclass(frozen=True)
class BacktestRun:
    """What :func:`backtest` returns."""

    #: One row per grid column: ``fast``, ``slow``, ``rank`` (by Sharpe, 1 = best) and every metric.
    metrics: Any
    #: The trade ledger of the selected columns (``column`` names them ``sma_FAST_SLOW``), or None.
    trades: Any
    #: Per-bar equity of the selected columns, indexed by time, or None.
    equity: Any
    #: The backend that ran it (``cpu`` or ``cuda``).
    device: str
    #: Wall seconds of the grid.
    seconds: float
    #: The annualization used.
    bars_per_year: float
    #: The symbol and the data's label (``SYNTHETIC (...)`` for generated data).
    symbol: str
    data: str
    #: The Decimal audit of the best column (the ledger replayed in exact arithmetic).
    audit: str


def backtest(
    data: Any,
    *,
    fast: Union[int, Iterable[int]] = range(5, 51, 5),
    slow: Union[int, Iterable[int]] = range(20, 201, 10),
    signal: str = "cross",
    allow_short: bool = False,
    spread: Number = "0.0002",
    commission: Number = "0.0001",
    capital: Number = "100000",
    whole_units: bool = False,
    bars_per_year: Optional[float] = None,
    symbol: Optional[str] = None,
    columns: str = "best",
    trades: bool = False,
    equity: bool = False,
    device: str = "auto",
) -> BacktestRun:
    """An SMA-crossover grid (every ``fast`` x ``slow`` pair with ``slow > fast``) over one symbol's bars,
    ranked by Sharpe, exactly as ``tradesim backtest`` runs it (the defaults are the CLI's).

    ``signal`` is ``"cross"`` (act on crossover events) or ``"state"`` (follow the side of the averages).
    Money parameters (``spread``, ``commission``, ``capital``) are exact decimals: pass strings or
    ``decimal.Decimal`` for exactness (a float is read as the decimal it was written as when that has at
    most 15 significant digits: 0.0001 -> ``0.0001``).
    ``trades``/``equity`` add the ledger and the per-bar equity of the ``columns`` selection (``best``,
    ``top:N``, ``all`` or ``FAST/SLOW,...``). ``device`` is ``auto``, ``cpu`` or ``cuda``. The GIL is
    released while the grid runs.
    """
    bars = load(data)
    out = _native.backtest(
        bars,
        symbol,
        _windows("fast", fast),
        _windows("slow", slow),
        signal,
        bool(allow_short),
        _decimal("spread", spread),
        _decimal("commission", commission),
        _decimal("capital", capital),
        bool(whole_units),
        None if bars_per_year is None else float(bars_per_year),
        columns,
        bool(trades),
        bool(equity),
        device,
    )
    return BacktestRun(
        metrics=_frame(out["metrics"]),
        trades=_frame(out["trades"]),
        equity=_frame(out["equity"], time_index="time"),
        device=out["device"],
        seconds=out["seconds"],
        bars_per_year=out["bars_per_year"],
        symbol=out["symbol"],
        data=out["data"],
        audit=out["audit"],
    )


@dataclasses.dataclass(frozen=True)
class HyperoptRun:
    """What :func:`hyperopt` returns."""

    #: Every trial, best first (complete, then pruned, then failed): number, status, value, the test
    #: metrics and the sampled parameters.
    leaderboard: Any
    #: The study's storage URL (its password masked) and name: Optuna opens it with
    #: ``optuna.load_study(study_name=..., storage=...)`` (with the real password).
    storage: str
    study_name: str
    #: Where the report and the checkpoints were written.
    report: str
    checkpoints: str
    #: One line that starts with ``evidence`` or ``no evidence`` and says why (docs/EVIDENCE.md).
    verdict: str = ""
    #: The evidence behind it: ``valid`` and ``test`` (the best trial's deflated Sharpe ratio ``dsr``,
    #: ``psr``, ``min_track_record``...), ``pbo``, ``placebo`` (``p_value`` and each search), and
    #: ``walk_forward`` (one dict per fold).
    evidence: Any = None


def hyperopt(
    config: Union[None, str, os.PathLike, Mapping[str, Any]] = None,
    *,
    data: Any = None,
    synthetic: Optional[int] = None,
    symbol: Optional[str] = None,
    algo: Optional[str] = None,
    trials: Optional[int] = None,
    parallel: Optional[int] = None,
    epochs: Optional[int] = None,
    seed: Optional[int] = None,
    placebo: Optional[int] = None,
    walk_forward: Optional[int] = None,
    study: Union[None, str, os.PathLike] = None,
    storage: Optional[str] = None,
    study_name: str = "tradesim",
    resume: bool = False,
    load_if_exists: bool = False,
    report: Union[None, str, os.PathLike] = None,
    device: str = "auto",
) -> HyperoptRun:
    """The search ``tradesim hyperopt`` runs (TPE, trials trained together, pruning, an Optuna-readable
    study), returning its leaderboard as a DataFrame.

    ``config`` is a TOML file path, TOML text, or a dict of the same tables (``{"study": {...}, "env":
    {...}, "space": {...}}``); the keyword overrides win over it as the CLI's flags do. ``data`` is anything
    :func:`load` takes (default: the embedded data; ``synthetic=N`` for N seeded synthetic bars).
    ``study`` is a SQLite path (shorthand for ``storage="sqlite:///PATH"``); ``storage`` a URL as Optuna
    spells it (SQLite or PostgreSQL). The GIL is released while the search runs; Ctrl-C stops it at the
    next epoch and raises ``KeyboardInterrupt`` (the study stays resumable with ``resume=True``).
    ``placebo=N`` also runs the search on N surrogate series without any predictable direction and
    ``walk_forward=K`` retrains the best configuration on K anchored folds; the run's ``verdict`` and
    ``evidence`` say how much of the answer could be luck (docs/EVIDENCE.md).
    """
    if isinstance(config, Mapping):
        toml_text = _to_toml(config)
    elif config is None:
        toml_text = None
    elif isinstance(config, os.PathLike) or (isinstance(config, str) and "\n" not in config and "=" not in config):
        with open(os.fspath(config), encoding="utf-8") as f:
            toml_text = f.read()
    else:
        toml_text = str(config)
    if data is not None and synthetic is not None:
        raise ValueError("hyperopt: pass data or synthetic, not both")
    bars = synthetic_bars(synthetic) if synthetic is not None else (load(data) if data is not None else embedded())
    if study is not None and storage is not None:
        raise ValueError("hyperopt: pass study (a SQLite path) or storage (a URL), not both")
    overrides = {
        "algo": algo,
        "trials": trials,
        "parallel": parallel,
        "epochs": epochs,
        "seed": seed,
        "placebo": placebo,
        "walk_forward": walk_forward,
    }
    out = _native.hyperopt(
        bars,
        symbol,
        toml_text,
        {k: v for k, v in overrides.items() if v is not None},
        None if study is None else os.fspath(study),
        storage,
        study_name,
        bool(resume),
        bool(load_if_exists),
        None if report is None else os.fspath(report),
        device,
    )
    return HyperoptRun(
        leaderboard=_frame(out["leaderboard"]),
        storage=out["storage"],
        study_name=out["study_name"],
        report=out["report"],
        checkpoints=out["checkpoints"],
        verdict=out["verdict"],
        evidence=json.loads(out["evidence_json"]),
    )


def synthetic_bars(n_bars: int, symbols: int = 1, seed: Optional[int] = None) -> Bars:
    """Alias of :func:`synthetic` for use where ``synthetic`` is a parameter name."""
    return synthetic(n_bars, symbols=symbols, seed=seed)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, np.integer, np.floating)):
        return repr(value.item() if isinstance(value, np.generic) else value)
    if isinstance(value, (str, decimal.Decimal)):
        text = str(value).replace("\\", "\\\\").replace('"', '\\"')
        return f'"{text}"'
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, (list, tuple, range)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"hyperopt config: cannot write {value!r} as TOML")


def _to_toml(config: Mapping[str, Any]) -> str:
    lines = []
    for table, body in config.items():
        if not isinstance(body, Mapping):
            raise TypeError(f"hyperopt config: `{table}` must be a table (a dict), got {type(body).__name__}")
        lines.append(f"[{table}]")
        for key, value in body.items():
            lines.append(f"{key} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"



def __getattr__(name: str) -> Any:
    # The Gymnasium envs import gymnasium, an optional dependency: loaded on first use.
    if name in ("VectorEnv", "TradingEnv"):
        from . import envs

        return getattr(envs, name)
    raise AttributeError(f"module 'tradesim' has no attribute {name!r}")
