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
import importlib.util
import json
import math
import os
import re
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, Sequence, Union

import numpy as np

from . import _native
from ._errors import ConfigError, DataError, TradesimError, pythonic
from ._native import Bars, DLPackArray

__all__ = [
    "Bars",
    "TradesimError",
    "DataError",
    "ConfigError",
    "DLPackArray",
    "BacktestRun",
    "HyperoptRun",
    "backtest",
    "embedded",
    "hyperopt",
    "load",
    "synthetic",
    "device_info",
    "greedy_walk",
    "VectorEnv",
    "TradingEnv",
    "TIME_UNITS",
]

#: What ``time_unit=`` accepts for an integer time column (the CLI's rule, ``src/data/time.rs``).
TIME_UNITS = ("YYYYMMDD", "s", "ms", "us", "ns")

if TYPE_CHECKING:
    import pandas as pd

    from .envs import TradingEnv, VectorEnv

__version__ = _native.__version__

Number = Union[str, int, float, decimal.Decimal]


def _pandas():
    try:
        import pandas as pd
    except ImportError as e:  # pragma: no cover - pandas is a dependency of the package
        raise ImportError("tradesim needs pandas for DataFrames: pip install pandas") from e
    return pd


# The headers the loader reads as the time column (src/data/columns.rs), lower case, `_`/`-` as spaces.
_TIME_HEADERS = {"date", "datetime", "date time", "time", "timestamp", "gmt time", "local time", "dt"}


def _is_time_header(header: Any) -> bool:
    h = str(header).strip().strip('"').lower().replace("_", " ").replace("-", " ")
    return h.strip("<>") in _TIME_HEADERS


def _column(values: Any, is_time: bool = False) -> tuple[str, Any]:
    """One DataFrame column (or numpy array) as the (kind, data) pair the native loader reads; integers
    in the time column are ``int_time``, read only with a ``time_unit``."""
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
        kind = "int_time" if is_time else "int"
        return kind, np.ascontiguousarray(series.to_numpy(dtype=np.int64))
    if pd.api.types.is_numeric_dtype(dtype):
        return "float", np.ascontiguousarray(series.to_numpy(dtype=np.float64, na_value=np.nan))
    texts = [None if (v is None or (isinstance(v, float) and np.isnan(v))) else str(v) for v in series.tolist()]
    return "text", texts


@dataclasses.dataclass(frozen=True)
class _TimeOrigin:
    """Where a DataFrame's times came from, to give results back on the caller's labels: ``labels`` (the
    index, or the time column as an Index named like it), whether they are the frame's index, and each
    row's symbol (None for a single-symbol frame)."""

    labels: Any
    is_index: bool
    symbols: Optional[list[str]]


def _load(
    data: Any,
    *,
    symbol: Optional[str] = None,
    drop: Iterable[str] = (),
    repair: Iterable[str] = (),
    name: Optional[str] = None,
    time_unit: Optional[str] = None,
) -> tuple[Bars, Optional[_TimeOrigin]]:
    if time_unit is not None and time_unit not in TIME_UNITS:
        raise ConfigError(f"time_unit={time_unit!r}: one of {', '.join(TIME_UNITS)}")
    if isinstance(data, Bars):
        return data, None
    if isinstance(data, (str, os.PathLike)):
        with pythonic():
            return _native.load_file(os.fspath(data), list(drop), list(repair), time_unit), None
    pd = _pandas()
    if isinstance(data, Mapping):
        data = pd.DataFrame(dict(data))
    if isinstance(data, pd.Series):
        # Closes only: each bar's open, high and low are its close, so an order fills at the next close.
        close = pd.to_numeric(data)
        data = pd.DataFrame({"open": close, "high": close, "low": close, "close": close}, index=data.index)
    if not isinstance(data, pd.DataFrame):
        raise TypeError(f"data: expected a DataFrame, a Series of closes, a dict of arrays or a path, got {type(data).__name__}")
    headers: list[str] = []
    columns: list[tuple[str, Any]] = []
    index = data.index
    time_columns = [key for key in data.columns if _is_time_header(key)]
    # Any DatetimeIndex is the time, whatever its name; another index (text, integers) is the time when no
    # column is, read as a column of its kind is.
    index_is_time = isinstance(index, pd.DatetimeIndex) or (
        not time_columns and not isinstance(index, pd.RangeIndex)
    )
    if index_is_time:
        headers.append("time")
        columns.append(_column(index.to_series(index=range(len(index))), is_time=True))
    for key in data.columns:
        if index_is_time and key in time_columns:
            continue
        headers.append(str(key))
        columns.append(_column(data[key].reset_index(drop=True), is_time=_is_time_header(key)))
    symbol_columns = [k for k in data.columns if str(k).strip().lower() in ("symbol", "ticker", "instrument", "asset")]
    origin = None
    if index_is_time or time_columns:
        labels = index if index_is_time else pd.Index(data[time_columns[0]], name=time_columns[0])
        symbols = [str(v) for v in data[symbol_columns[0]].tolist()] if symbol_columns else None
        origin = _TimeOrigin(labels, index_is_time, symbols)
    try:
        with pythonic():
            bars = _native.load_columns(
                name or "DataFrame", headers, columns, symbol or "DATA", list(drop), list(repair), time_unit
            )
    except DataError as err:
        # Name each finding's row by the frame's index label too (computed only for the rows named).
        for f in err.findings:
            row = f.get("row")
            if row is not None and 0 <= row < len(index) and not isinstance(index, pd.RangeIndex):
                f["index"] = str(index[row])
        raise
    return bars, origin


def load(
    data: Any,
    *,
    time_unit: Optional[str] = None,
    symbol: Optional[str] = None,
    drop: Iterable[str] = (),
    repair: Iterable[str] = (),
    name: Optional[str] = None,
) -> Bars:
    """Validated bars from a DataFrame, a Series of closes, a dict of numpy arrays, a CSV or Parquet path,
    or :class:`Bars`.

    A Series holds closes only: each bar's open, high and low are taken as its close, so an order decided
    on a bar fills at the next bar's close (with half the spread), and there is no volume.

    **Time.** Any ``DatetimeIndex`` is the time, whatever its name. Otherwise the time is a column named
    ``time``, ``date``, ``datetime``, ``timestamp``, ... (any case), or, when there is none, the index (a
    text index parses as a text column does: ISO 8601 with or without offsets, ``YYYYMMDD``,
    ``DD.MM.YYYY HH:MM:SS``, ``M/D/YYYY``). Times without an offset or a timezone are UTC. **Integer** times
    (pandas reads ``20090102`` as int64; a file's time column of bare integers alike) are refused with a
    :class:`DataError` unless ``time_unit`` says what they count: ``"YYYYMMDD"`` (dates), or ``"s"``,
    ``"ms"``, ``"us"``, ``"ns"`` since 1970 UTC (the CLI's ``--time-unit``).

    **Columns.** OHLCV columns in any case (``open``, ``high``, ``low``, ``close``, ``volume``); a
    ``symbol`` column makes it a multi-symbol (long-format) table. Every row goes through the CLI's
    validation; a finding that is an error raises :class:`DataError`, whose ``findings`` list names the row
    (the DataFrame position, 0-based, and its index label; None for a finding about the whole table), the
    column and the class. ``drop``/``repair`` name finding classes to drop or repair instead, as
    ``tradesim data check --drop/--repair`` does. ``symbol`` names the series when the data has no symbol
    column.
    """
    return _load(data, time_unit=time_unit, symbol=symbol, drop=drop, repair=repair, name=name)[0]


def embedded() -> Bars:
    """The embedded default data (EURUSD ask, 1 hour bars, 2017), as the CLI uses it."""
    return _native.embedded()


def synthetic(n_bars: int, *, symbols: int = 1, seed: Optional[int] = None) -> Bars:
    """Seeded synthetic bars (marked SYNTHETIC in every output); without ``seed``, the bars
    ``tradesim --synthetic N`` gives the CLI."""
    n_bars = _whole("n_bars", n_bars, minimum=2)
    symbols = _whole("symbols", symbols, minimum=1)
    seed = None if seed is None else _whole("seed", seed, minimum=0)
    with pythonic():
        return _native.synthetic(n_bars, symbols, seed)


def device_info(device: str = "auto") -> dict[str, Any]:
    """The backend ``device`` selects: its name and, for CUDA, the device and driver."""
    with pythonic():
        return dict(_native.device_info(_text("device", device)))


def _whole(name: str, value: Any, *, minimum: int) -> int:
    """``value`` as an int, refused (naming ``name``) when it is not a whole number or below ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name}={value!r}: expected a whole number (int), got {type(value).__name__}")
    if value < minimum:
        raise ConfigError(f"{name}={value!r}: at least {minimum}")
    return int(value)


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name}={value!r}: expected a string, got {type(value).__name__}")
    return value


def _decimal(name: str, value: Number, *, positive: bool = False) -> Any:
    """A money parameter for the native call, its sign checked: ``positive`` (capital) or at least 0."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float, decimal.Decimal, np.integer, np.floating)):
        raise TypeError(f"{name}={value!r}: expected a number or a decimal string, got {type(value).__name__}")
    if isinstance(value, np.generic):
        value = value.item()
    try:
        exact = decimal.Decimal(value.strip() if isinstance(value, str) else str(value))
    except decimal.InvalidOperation:
        raise ConfigError(f"{name}={value!r}: not a number (write fractions: 0.001 for 0.1%)") from None
    if not exact.is_finite():
        raise ConfigError(f"{name}={value!r}: not a finite number")
    if exact < 0 or (positive and exact == 0):
        raise ConfigError(f"{name}={value!r}: must be {'above' if positive else 'at least'} 0")
    return value if isinstance(value, (int, float)) else str(value)


def _windows(name: str, value: Union[int, Iterable[int]]) -> list[int]:
    if isinstance(value, (str, bytes)) or not (isinstance(value, (int, np.integer)) or hasattr(value, "__iter__")):
        raise TypeError(f"{name}={value!r}: expected a window (int) or an iterable of windows")
    values = [value] if isinstance(value, (int, np.integer)) else list(value)
    if not values:
        raise ConfigError(f"{name}: no windows")
    return [_whole(name, v, minimum=1) for v in values]


def _frame(columns: Optional[Sequence[tuple[str, Any]]]):
    if columns is None:
        return None
    pd = _pandas()
    frame = pd.DataFrame({name: values for name, values in columns})
    for name, _ in columns:
        if name.endswith("time") and pd.api.types.is_string_dtype(frame[name].dtype):
            frame[name] = pd.to_datetime(frame[name].replace("", None), utc=True, format="ISO8601")
    return frame


# Metrics that count (trades, bars): integers, as pandas users expect of counts.
_COUNTS = ("rank", "trades", "bars", "max_drawdown_bars")


def _metrics(frame: Any) -> Any:
    """One row per grid column, indexed by ``(fast, slow)``, counts as integers."""
    for name in _COUNTS:
        if name in frame and frame[name].notna().all():
            frame[name] = frame[name].astype(np.int64)
    return frame.set_index(["fast", "slow"])


def _snake(text: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", text).lower()


def _trades(frame: Any) -> Any:
    """The ledger with each trade's ``fast``/``slow`` beside ``column``, and ``exit_reason`` in the lower
    case of ``side`` (``signal``, ``end_of_data``, ...)."""
    if frame is None:
        return None
    if "column" in frame:
        windows = frame["column"].str.extract(r"^sma_(\d+)_(\d+)$").astype(np.int64)
        frame.insert(1, "fast", windows[0])
        frame.insert(2, "slow", windows[1])
    if "exit_reason" in frame:
        frame["exit_reason"] = [_snake(str(r)) for r in frame["exit_reason"]]
    return frame


def _symbol(bars: Bars, symbol: Optional[str]) -> Optional[str]:
    """The symbol to run: ``symbol``, refused unless the data has it, or the data's only one."""
    names = bars.symbols
    if symbol is None:
        if len(names) > 1:
            shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
            raise ConfigError(f"symbol: the data holds {len(names)} symbols ({shown}); choose one with symbol=")
        return None
    symbol = _text("symbol", symbol)
    if symbol not in names:
        raise ConfigError(f"symbol={symbol!r}: not in the data (it holds {', '.join(names[:5])})")
    return symbol


def _caller_positions(origin: _TimeOrigin, symbol: str) -> Any:
    """The caller's labels of ``symbol``'s rows, in order."""
    if origin.symbols is None:
        return origin.labels
    return origin.labels[[s == symbol for s in origin.symbols]]


def _caller_times(times: Any, origin: Optional[_TimeOrigin]) -> Any:
    """UTC times in the caller's timezone (or naive, as the caller's were), named like the caller's."""
    pd = _pandas()
    index = pd.DatetimeIndex(times)
    if origin is None:
        return index
    labels = origin.labels
    if isinstance(labels, pd.DatetimeIndex):
        index = index.tz_convert(labels.tz) if labels.tz is not None else index.tz_convert(None)
    elif pd.api.types.is_integer_dtype(labels.dtype):
        index = index.tz_convert(None)
    return index.rename(labels.name)


def _equity_on_caller_index(frame: Any, origin: Optional[_TimeOrigin], symbol: str) -> Any:
    """The per-bar equity indexed by the caller's time: the caller's own labels when every row of the
    symbol became a bar (so ``df.join`` matches them exactly), else its times in the caller's timezone."""
    if frame is None:
        return None
    bars = frame.pop("bar").to_numpy()
    times = frame.pop("time")
    # Each column labelled by its windows, ``(fast, slow)``, on one level (a flat Index of tuples, not a
    # MultiIndex: joining a single-level frame onto a MultiIndex one raises in pandas).
    pd = _pandas()
    windows = [tuple(int(w) for w in str(c).split("_")[1:]) for c in frame.columns]
    frame.columns = pd.Index(windows, tupleize_cols=False)
    if origin is not None and origin.is_index:
        labels = _caller_positions(origin, symbol)
        if len(labels) == len(frame) and (len(bars) == 0 or int(bars.max()) < len(labels)):
            frame.index = labels[bars]
            return frame
    frame.index = _caller_times(times, origin)
    return frame


def _on_caller_times(frame: Any, origin: Optional[_TimeOrigin]) -> Any:
    """The trade ledger's times in the caller's timezone (or naive, as the caller's were)."""
    if frame is None or origin is None:
        return frame
    for name in ("entry_time", "exit_time"):
        if name in frame:
            frame[name] = _caller_times(frame[name], origin)
    return frame


@dataclasses.dataclass(frozen=True)
class BacktestRun:
    """What :func:`backtest` returns."""

    #: One row per grid column, indexed by ``(fast, slow)``: ``rank`` (by Sharpe, 1 = best) and every
    #: metric (``trades``, ``bars``, ``max_drawdown_bars`` are integers; returns are fractions, 0.01 = 1%).
    metrics: pd.DataFrame
    #: The trade ledger of the selected columns (``column`` names them ``sma_FAST_SLOW``, ``fast`` and
    #: ``slow`` give the windows; ``side`` is ``long``/``short``, ``exit_reason`` ``signal``,
    #: ``end_of_data``, ...), or None.
    trades: Optional[pd.DataFrame]
    #: Per-bar equity of the selected columns (one column each, labelled ``(fast, slow)`` on a single level
    #: so that ``df.join`` works: ``run.equity[(10, 50)]``) on the caller's time index, or None.
    equity: Optional[pd.DataFrame]
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
    time_unit: Optional[str] = None,
) -> BacktestRun:
    """An SMA-crossover grid (every ``fast`` x ``slow`` pair with ``slow > fast``) over one symbol's bars,
    ranked by Sharpe, exactly as ``tradesim backtest`` runs it (the defaults are the CLI's).

    **Fills and costs.** The signal is decided at bar t's close and fills at bar t+1's open: buys at
    ``open x (1 + spread/2)``, sells at ``open x (1 - spread/2)``, plus ``commission x |notional|`` in cash;
    a reversal is a close and an open at the same fill. ``spread`` and ``commission`` are fractions
    (0.0001 = 1 basis point), ``capital`` in the quote currency; an open invests all the equity
    (``whole_units=True`` floors to whole units). Without ``allow_short`` a short signal goes flat.

    **Results.** ``metrics`` is indexed by ``(fast, slow)``; returns and drawdowns are fractions (0.01 =
    1%), ``annual_*`` and ``sharpe``/``sortino`` annualized with ``bars_per_year`` (inferred from the
    times: 252 x the median bars per day, unless given); ``trades``, ``bars`` (per-bar returns, n - 1) and
    ``max_drawdown_bars`` are integers; ``total_costs`` and ``final_equity`` are money.

    ``signal`` is ``"cross"`` (act on crossover events) or ``"state"`` (follow the side of the averages).
    Money parameters (``spread``, ``commission``, ``capital``) are exact decimals: pass strings or
    ``decimal.Decimal`` for exactness (a float is read as the decimal it was written as when that has at
    most 15 significant digits: 0.0001 -> ``0.0001``).
    ``trades``/``equity`` add the ledger and the per-bar equity of the ``columns`` selection (``best``,
    ``top:N``, ``all`` or ``FAST/SLOW,...``). ``device`` is ``auto``, ``cpu`` or ``cuda``. The GIL is
    released while the grid runs. ``data`` is anything :func:`load` takes (``time_unit`` as there).

    The equity comes back on the caller's time labels: a DataFrame's time index as it was (the same
    labels, timezone or naivety, and name), so ``df.join(run.equity)`` works; times from a column come back
    as a ``DatetimeIndex`` named like the column, in its timezone (UTC when it had none).
    """
    fast_windows, slow_windows = _windows("fast", fast), _windows("slow", slow)
    if not any(s > f for f in fast_windows for s in slow_windows):
        raise ConfigError(
            f"slow: no slow window above a fast one (fast={fast_windows}, slow={slow_windows}); the grid is empty"
        )
    if signal not in ("cross", "state"):
        raise ConfigError(f"signal={signal!r}: 'cross' or 'state'")
    if bars_per_year is not None:
        if isinstance(bars_per_year, bool) or not isinstance(bars_per_year, (int, float, np.integer, np.floating)):
            raise TypeError(f"bars_per_year={bars_per_year!r}: expected a number")
        if not (math.isfinite(bars_per_year) and bars_per_year > 0):
            raise ConfigError(f"bars_per_year={bars_per_year!r}: a positive number")
    money = (_decimal("spread", spread), _decimal("commission", commission), _decimal("capital", capital, positive=True))
    bars, origin = _load(data, time_unit=time_unit)
    symbol = _symbol(bars, symbol)
    with pythonic():
        out = _native.backtest(
            bars,
            symbol,
            fast_windows,
            slow_windows,
            signal,
            bool(allow_short),
            *money,
            bool(whole_units),
            None if bars_per_year is None else float(bars_per_year),
            _text("columns", columns),
            bool(trades),
            bool(equity),
            _text("device", device),
        )
    return BacktestRun(
        metrics=_metrics(_frame(out["metrics"])),
        trades=_trades(_on_caller_times(_frame(out["trades"]), origin)),
        equity=_equity_on_caller_index(_frame(out["equity"]), origin, out["symbol"]),
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
    leaderboard: pd.DataFrame
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
    #: ``psr``, ``min_track_record``...; the test split deflated for one trial), ``baselines``
    #: (buy-and-hold's and flat's test Sharpe, the excess over buy-and-hold), ``spa_valid`` and
    #: ``spa_test`` (SPA's p-values, StepM's trials), ``pbo``, ``placebo`` (``p_value`` and each search),
    #: ``walk_forward`` (one dict per fold) and ``walk_forward_unseen`` (their PSR).
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
    artifacts: Union[None, str, os.PathLike] = None,
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
    ``evidence`` say how much of the answer could be luck (docs/EVIDENCE.md). ``artifacts`` is an Optuna
    artifact store folder (``FileSystemArtifactStore``'s layout; overrides ``[study] artifacts``): each
    finished trial's checkpoint and test ledger are uploaded there and linked to the trial, so
    ``optuna.artifacts.download_artifact`` finds them from any host that mounts it; a new study stores it
    (as an absolute path), so workers that join without it use it too.
    """
    # The name the configuration's errors are reported under: a path, or what the caller passed.
    if isinstance(config, Mapping):
        toml_text, config_name = _to_toml(config), "config (the dict)"
    elif config is None:
        toml_text, config_name = None, "config"
    elif isinstance(config, os.PathLike) or (isinstance(config, str) and "\n" not in config and "=" not in config):
        with open(os.fspath(config), encoding="utf-8") as f:
            toml_text, config_name = f.read(), os.fspath(config)
    elif isinstance(config, str):
        toml_text, config_name = config, "config (the TOML text)"
    else:
        raise TypeError(f"config: a TOML path, TOML text or a dict, got {type(config).__name__}")
    if data is not None and synthetic is not None:
        raise ConfigError("data, synthetic: pass one, not both")
    if study is not None and storage is not None:
        raise ConfigError("study, storage: pass study (a SQLite path) or storage (a URL), not both")
    counts = {"trials": 1, "parallel": 1, "epochs": 1, "seed": 0, "placebo": 0, "walk_forward": 0}
    given = {"trials": trials, "parallel": parallel, "epochs": epochs, "seed": seed, "placebo": placebo,
             "walk_forward": walk_forward}
    overrides: dict[str, Any] = {k: _whole(k, v, minimum=counts[k]) for k, v in given.items() if v is not None}
    if algo is not None:
        overrides["algo"] = _text("algo", algo)
    if synthetic is not None:
        bars = synthetic_bars(_whole("synthetic", synthetic, minimum=2))
    else:
        bars = load(data) if data is not None else embedded()
    symbol = _symbol(bars, symbol)
    with pythonic():
        out = _native.hyperopt(
            bars,
            symbol,
            toml_text,
            overrides,
            None if study is None else os.fspath(study),
            storage,
            _text("study_name", study_name),
            bool(resume),
            bool(load_if_exists),
            None if report is None else os.fspath(report),
            _text("device", device),
            config_name,
            None if artifacts is None else os.fspath(artifacts),
        )
    return HyperoptRun(
        leaderboard=_leaderboard(_frame(out["leaderboard"])),
        storage=out["storage"],
        study_name=out["study_name"],
        report=out["report"],
        checkpoints=out["checkpoints"],
        verdict=out["verdict"],
        evidence=json.loads(out["evidence_json"]),
    )


def greedy_walk(
    policy: Any,
    data: Any = None,
    *,
    split: str = "valid",
    symbol: Optional[str] = None,
    capital: Number = "100000",
    spread: Number = _native.DEFAULT_SPREAD,
    commission: Number = _native.DEFAULT_COMMISSION,
    allow_short: bool = True,
    whole_units: bool = False,
    time_unit: Optional[str] = None,
) -> tuple[dict[str, float], np.ndarray]:
    """Scores ``policy`` as ``tradesim train`` scores its own policies after each epoch: one env walks every
    bar of a part of the trainer's time split (``split``: ``"train"``, ``"valid"`` or ``"test"``; 70/15/15%
    of the bars after the features' warm-up, features normalized on the train part), calling
    ``policy(obs)`` (one float32 observation of ``obs_dim`` floats) for an action code (0 flat, 1 long,
    2 short) at each bar's close; the actions that took effect are then backtested by the backtest engine.
    Returns (the metrics as a dict: ``sharpe``, ``total_return``, ``trades``... annualized with the bars per
    year the trainer infers from the whole series' times; ``sharpe`` is NaN for a policy that never
    trades), the actions that took effect (uint8, the split's bars - 1)). Pair it with
    ``VectorEnv(split="train")`` to train another learner on the trainer's envs."""
    bars = embedded() if data is None else load(data, time_unit=time_unit)
    with pythonic():
        walk = _native.SplitWalk(
            bars, None if symbol is None else _text("symbol", symbol), _text("split", split),
            _decimal("capital", capital, positive=True), _decimal("spread", spread),
            _decimal("commission", commission), bool(allow_short), bool(whole_units),
        )
        for _ in range(walk.steps):
            action = int(policy(walk.observation()))
            if action not in (0, 1, 2):
                raise ConfigError(f"policy: action {action!r} at step {walk.taken}: 0 (flat), 1 (long) or 2 (short)")
            walk.step(action)
        metrics, actions = walk.finish()
    return metrics, actions


def _leaderboard(frame: Any) -> Any:
    """The leaderboard with ``pruned_at`` (an epoch, absent for trials not pruned) as nullable integers."""
    if "pruned_at" in frame:
        frame["pruned_at"] = frame["pruned_at"].astype("Int64")
    return frame


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
    raise TypeError(f"config: cannot write {value!r} as TOML")


def _to_toml(config: Mapping[str, Any]) -> str:
    lines = []
    for table, body in config.items():
        if not isinstance(body, Mapping):
            raise TypeError(f"config[{table!r}]: a table (a dict), got {type(body).__name__}")
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


# `gym.make("tradesim/Trading-v0")` and `gym.make_vec(...)` where gymnasium is installed (the envs module,
# which imports it, loads only when an env is made).
if importlib.util.find_spec("gymnasium") is not None:
    import gymnasium as _gym

    if "tradesim/Trading-v0" not in _gym.registry:
        _gym.register(
            id="tradesim/Trading-v0",
            entry_point="tradesim.envs:TradingEnv",
            vector_entry_point="tradesim.envs:VectorEnv",
        )
