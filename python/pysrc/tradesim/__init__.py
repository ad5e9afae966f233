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
import importlib.util
import json
import math
import os
import re
import warnings
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, Sequence, Union

import numpy as np

from . import _native
from ._errors import ConfigError, DataError, TradesimError, python_names, pythonic
from ._params import (
    Number,
    _decimal,
    _dict_key_error,
    _flag,
    _grid_columns,
    _names,
    _text,
    _to_toml,
    _whole,
    _windows,
)
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
    "hyperparameters",
    "greedy_walk",
    "VectorEnv",
    "TradingEnv",
    "TIME_UNITS",
]

#: The learners ``algo=`` names.
_ALGOS = ("dqn", "ppo")
# The machines a search's default budget can be sized for (docs/CLI.md, "Budgets").
_BUDGETS = ("auto", "cpu", "gpu")

#: What ``time_unit=`` accepts for an integer time column (the CLI's rule, ``src/data/time.rs``).
TIME_UNITS = ("YYYYMMDD", "s", "ms", "us", "ns")

if TYPE_CHECKING:
    import pandas as pd

    from .envs import TradingEnv, VectorEnv

__version__ = _native.__version__


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
    #: The frame's own index (the rows' labels) when the time is a column, else None.
    rows: Any = None


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
        if drop or repair or time_unit is not None:
            raise ConfigError("drop, repair, time_unit: the data is loaded Bars already; pass them to load()")
        return _select(data, symbol), None
    if isinstance(data, (str, os.PathLike)):
        with pythonic():
            bars = _native.load_file(
                os.fspath(data), _names("drop", drop), _names("repair", repair), time_unit,
                None if symbol is None else _text("symbol", symbol),
            )
        return _select(bars, symbol), None
    pd = _pandas()
    if isinstance(data, Mapping):
        data = pd.DataFrame(dict(data))
    if isinstance(data, pd.Series):
        # Closes only: each bar's open, high and low are its close, so an order fills at the next close.
        close = pd.to_numeric(data)
        data = pd.DataFrame({"open": close, "high": close, "low": close, "close": close}, index=data.index)
    if not isinstance(data, pd.DataFrame):
        raise TypeError(f"data: expected a DataFrame, a Series of closes, a dict of arrays or a path, got {type(data).__name__}")
    symbol_columns = [k for k in data.columns if str(k).strip().lower() in ("symbol", "ticker", "instrument", "asset")]
    # The caller's position of each row read (None: every row, in order).
    positions = None
    if symbol is not None and symbol_columns:
        # Only the chosen symbol's rows are read and checked.
        symbol = _text("symbol", symbol)
        held = data[symbol_columns[0]].astype(str).str.strip()
        chosen = held.str.upper() == symbol.upper()
        if not chosen.any():
            names = list(dict.fromkeys(held.tolist()))
            shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
            raise ConfigError(f"symbol={symbol!r}: not in the data (it holds {shown})")
        positions = np.flatnonzero(chosen.to_numpy())
        data = data.iloc[positions]
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
    origin = None
    if index_is_time or time_columns:
        labels = index if index_is_time else pd.Index(data[time_columns[0]], name=time_columns[0])
        symbols = [str(v) for v in data[symbol_columns[0]].tolist()] if symbol_columns else None
        origin = _TimeOrigin(labels, index_is_time, symbols, None if index_is_time else index)
    try:
        with pythonic():
            bars = _native.load_columns(
                name or "DataFrame", headers, columns, symbol or "DATA", _names("drop", drop),
                _names("repair", repair), time_unit
            )
    except DataError as err:
        # Name each finding's row by the frame's index label too (computed only for the rows named).
        for f in err.findings:
            row = f.get("row")
            if row is not None and 0 <= row < len(index) and not isinstance(index, pd.RangeIndex):
                f["index"] = str(index[row])
            if row is not None and positions is not None and 0 <= row < len(positions):
                f["row"] = int(positions[row])
        raise
    return bars, origin


def _select(bars: Bars, symbol: Optional[str]) -> Bars:
    """``bars`` reduced to ``symbol``'s series (any case), refused when it holds no such symbol."""
    if symbol is None:
        return bars
    symbol = _text("symbol", symbol)
    names = bars.symbols
    if len(names) == 1 and names[0].upper() == symbol.upper():
        return bars
    match = [n for n in names if n.upper() == symbol.upper()]
    if not match:
        shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        raise ConfigError(f"symbol={symbol!r}: not in the data (it holds {shown})")
    return bars._select(match[0])


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
    ``tradesim data check --drop/--repair`` does. ``symbol`` chooses one symbol of a multi-symbol table or
    file (any case): only its rows are read and checked, and a symbol the data does not hold raises
    :class:`ConfigError`; a DataFrame without a symbol column takes it as its series' name.

    The same keywords (``time_unit``, ``symbol``, ``drop``, ``repair``) mean the same in
    :func:`backtest`, :func:`hyperopt`, :func:`greedy_walk`, :class:`VectorEnv` and :class:`TradingEnv`.
    ``Bars`` pickle (the bars, symbols and source; the load's findings and notes are not kept).
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


def hyperparameters() -> list[dict[str, Any]]:
    """The hyperparameters a search samples, as ``tradesim hyperopt --list-params`` lists them: for each a dict
    with ``name``, ``integer``, ``min``, ``max``, ``dqn`` and ``ppo`` (that learner's default: ``kind`` one of
    ``range`` (``low``, ``high``, ``log``), ``choice`` (``choices``), ``fixed`` / ``unsearched`` (``value``) or
    ``none`` (not a parameter of that learner)), ``stored`` (the value of a stored trial without it, or None)
    and ``about``. The keys of a configuration's ``space`` table (``hyperopt(config={"space": ...})``)."""
    return [dict(p) for p in _native.hyperparameters()]


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
    """The symbol to run: the data's name of ``symbol`` (any case), refused unless the data has it, or the
    data's only one."""
    names = bars.symbols
    if symbol is None:
        if len(names) > 1:
            shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
            raise ConfigError(f"symbol: the data holds {len(names)} symbols ({shown}); choose one with symbol=")
        return None
    symbol = _text("symbol", symbol)
    match = [n for n in names if n.upper() == symbol.upper()]
    if not match:
        raise ConfigError(f"symbol={symbol!r}: not in the data (it holds {', '.join(names[:5])})")
    return match[0]


def _caller_positions(origin: _TimeOrigin, symbol: str) -> Any:
    """The caller's labels of ``symbol``'s rows, in order: the time index's, or the frame's own index's
    when the time is a column."""
    labels = origin.labels if origin.is_index else origin.rows
    if origin.symbols is None:
        return labels
    return labels[[s.strip().upper() == symbol.upper() for s in origin.symbols]]


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
    """The per-bar equity on the caller's rows: the frame's own index labels (its time index, or its index
    beside a time column) when every row of the symbol became a bar, so ``df.join`` matches them exactly;
    else the bars' times in the caller's timezone."""
    if frame is None:
        return None
    bars = frame.pop("bar").to_numpy()
    times = frame.pop("time")
    # Each column labelled by its windows, ``(fast, slow)``, on one level (a flat Index of tuples, not a
    # MultiIndex: joining a single-level frame onto a MultiIndex one raises in pandas).
    pd = _pandas()
    windows = [tuple(int(w) for w in str(c).split("_")[1:]) for c in frame.columns]
    frame.columns = pd.Index(windows, tupleize_cols=False)
    if origin is not None and (origin.is_index or origin.rows is not None):
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
    columns: Union[str, Iterable[tuple[int, int]]] = "best",
    trades: bool = False,
    equity: bool = False,
    device: str = "auto",
    time_unit: Optional[str] = None,
    drop: Iterable[str] = (),
    repair: Iterable[str] = (),
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
    ``trades``/``equity`` add the ledger and the per-bar equity of the ``columns`` selection (``"best"``,
    ``"top:N"``, ``"all"``, ``"FAST/SLOW,..."`` or a list of ``(fast, slow)`` pairs, the metrics' index;
    checked whether or not it is used). ``allow_short``, ``whole_units``, ``trades`` and ``equity`` are
    ``bool`` (a string is a ``TypeError``). ``device`` is ``auto``, ``cpu`` or ``cuda``. The GIL is
    released while the grid runs. ``data`` is anything :func:`load` takes, with ``time_unit``, ``symbol``,
    ``drop`` and ``repair`` as there (only the chosen symbol's rows are checked).

    The equity comes back on the caller's rows: a DataFrame's index as it was (a time index with its
    labels, timezone or naivety, and name; or, when the time is a column, the frame's own index, such as
    the ``RangeIndex`` of ``pd.read_csv``), so ``df.join(run.equity)`` matches row for row. When rows were
    dropped (``drop=``) or the data is not a DataFrame, it comes back on the bars' times (a
    ``DatetimeIndex`` named like the time column, in its timezone; UTC when it had none).
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
    flags = [_flag(k, v) for k, v in
             (("allow_short", allow_short), ("whole_units", whole_units), ("trades", trades), ("equity", equity))]
    selection = _grid_columns(columns, fast_windows, slow_windows)
    bars, origin = _load(data, time_unit=time_unit, symbol=symbol, drop=drop, repair=repair)
    symbol = _symbol(bars, symbol)
    with pythonic():
        out = _native.backtest(
            bars,
            symbol,
            fast_windows,
            slow_windows,
            signal,
            flags[0],
            *money,
            flags[1],
            None if bars_per_year is None else float(bars_per_year),
            selection,
            flags[2],
            flags[3],
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
    #: ``walk_forward`` (one dict per fold) and ``walk_forward_unseen`` (their PSR), ``walk_forward_search``
    #: (walk-forward optimisation's folds: winner, chosen parameters, out-of-sample result) and
    #: ``walk_forward_search_oos`` (their concatenated PSR).
    evidence: Any = None
    #: The universe's symbols when the search ran on a universe (docs/CLI.md, "A universe"); None for one
    #: series.
    symbols: Optional[list[str]] = None


def hyperopt(
    config: Union[None, str, os.PathLike, Mapping[str, Any]] = None,
    *,
    data: Any = None,
    synthetic: Optional[int] = None,
    symbol: Optional[str] = None,
    symbols: Optional[Sequence[str]] = None,
    algo: Optional[str] = None,
    trials: Optional[int] = None,
    parallel: Optional[int] = None,
    epochs: Optional[int] = None,
    envs: Optional[int] = None,
    segment_len: Optional[int] = None,
    budget: Optional[str] = None,
    seed: Optional[int] = None,
    placebo: Optional[int] = None,
    walk_forward: Optional[int] = None,
    walk_forward_search: Optional[int] = None,
    side_searches: Optional[int] = None,
    study: Union[None, str, os.PathLike] = None,
    storage: Optional[str] = None,
    study_name: str = "tradesim",
    resume: bool = False,
    load_if_exists: bool = False,
    report: Union[None, str, os.PathLike] = None,
    artifacts: Union[None, str, os.PathLike] = None,
    device: str = "auto",
    time_unit: Optional[str] = None,
    drop: Iterable[str] = (),
    repair: Iterable[str] = (),
) -> HyperoptRun:
    """The search ``tradesim hyperopt`` runs (TPE, trials trained together, pruning, an Optuna-readable
    study), returning its leaderboard as a DataFrame.

    ``config`` is a TOML file path, TOML text, or a dict of the same tables (``{"study": {...}, "env":
    {...}, "space": {...}}``); the keyword overrides win over it as the CLI's flags do. ``data`` is anything
    :func:`load` takes (default: the embedded data; ``synthetic=N`` for N seeded synthetic bars).
    ``study`` is a SQLite path (shorthand for ``storage="sqlite:///PATH"``); ``storage`` a URL as Optuna
    spells it (SQLite or PostgreSQL). The GIL is released while the search runs; Ctrl-C stops it at the
    next epoch and raises ``KeyboardInterrupt`` (the study stays resumable with ``resume=True``).
    ``budget`` (``'auto'``, the device the search runs on; ``'cpu'``; ``'gpu'``) sizes the defaults of
    ``envs``, ``segment_len``, ``epochs``, ``parallel`` and DQN's gradient steps (on a GPU 1,048,576 env steps
    a trial, docs/CLI.md, "Budgets"); those keywords always win over it.
    ``placebo=N`` also runs the search on N surrogate series without any predictable direction and
    ``walk_forward=K`` retrains the best configuration on K anchored folds, ``walk_forward_search=K`` runs the
    whole search again on each of K anchored folds' past and tests its winner on the fold (walk-forward
    optimisation: studies ``NAME.wfo-k`` in the same storage); ``side_searches=N`` runs N of those placebo
    searches and folds at once (default 8 on a GPU, fewer where its memory holds fewer, 1 on the CPU; the
    results do not depend on it); the run's ``verdict`` and
    ``evidence`` say how much of the answer could be luck (docs/EVIDENCE.md). ``artifacts`` is an Optuna
    artifact store folder (``FileSystemArtifactStore``'s layout; overrides ``[study] artifacts``): each
    finished trial's checkpoint and test ledger are uploaded there and linked to the trial, so
    ``optuna.artifacts.download_artifact`` finds them from any host that mounts it; a new study stores it
    (as an absolute path), so workers that join without it use it too. ``time_unit``, ``symbol``, ``drop``
    and ``repair`` read ``data`` as :func:`load` does.

    **Universes.** Data of several symbols (a long DataFrame with a ``symbol`` column, a dict
    ``{symbol: frame}``, or a file of several symbols) without ``symbol=`` is searched as a universe, as
    ``tradesim hyperopt`` does (docs/CLI.md, "A universe"): one account trading every symbol, universe
    learners, the verdict on the account's returns against the universe's equal-weight buy-and-hold, and
    the report folder's ``trades.csv`` (the best trial's test fills, with a symbol column) and
    ``equity.csv``; ``symbols=[...]`` chooses some of them (any case). The run's ``symbols`` name them;
    ``checkpoints`` holds each trial's network (the shared per-symbol head).

    **Where the files go.** The study's checkpoints and report go in a folder of its own beside the study
    file, named by the file's stem and the study's name (``study="runs/s1.sqlite"`` ->
    ``runs/s1-tradesim/checkpoints/`` and ``runs/s1-tradesim/report/``; ``runs/DATABASE-NAME/`` for a
    PostgreSQL study); ``report=`` moves the report. A folder another study owns is refused, naming both.
    The run's ``report`` and ``checkpoints`` are absolute paths, as the study records them.

    **Continuing.** ``resume=True`` or ``load_if_exists=True`` with a ``trials`` above the study's count
    runs the extra trials (as Optuna's ``optimize(n_trials=...)`` adds trials); a smaller ``trials``, and
    the other overrides of an existing study, are ignored with a ``UserWarning`` saying so.
    """
    # The name the configuration's errors are reported under: a path, or what the caller passed.
    dict_keys: dict[int, tuple[Any, ...]] = {}
    if isinstance(config, Mapping):
        (toml_text, dict_keys), config_name = _to_toml(config), "config (the dict)"
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
    from ._universe import chosen_symbols, is_frame_dict, long_frame

    names: Optional[list[str]] = None
    if symbols is not None:
        if symbol is not None:
            raise ConfigError("symbol, symbols: pass one (symbol= searches one series, symbols= a universe)")
        if isinstance(symbols, str) or not hasattr(symbols, "__iter__"):
            raise TypeError(f"symbols={symbols!r}: expected a list of symbol names")
        names = [_text("symbols", s) for s in symbols]
        if not names:
            raise ConfigError("symbols=[]: name at least one symbol")
    if data is not None and is_frame_dict(data):
        data = long_frame(data)
    if study is not None and storage is not None:
        raise ConfigError("study, storage: pass study (a SQLite path) or storage (a URL), not both")
    counts = {"trials": 1, "parallel": 1, "epochs": 1, "envs": 1, "segment_len": 1, "seed": 0, "placebo": 0,
              "walk_forward": 0, "walk_forward_search": 0, "side_searches": 1}
    given = {"trials": trials, "parallel": parallel, "epochs": epochs, "envs": envs, "segment_len": segment_len,
             "seed": seed, "placebo": placebo, "walk_forward": walk_forward,
             "walk_forward_search": walk_forward_search, "side_searches": side_searches}
    overrides: dict[str, Any] = {k: _whole(k, v, minimum=counts[k]) for k, v in given.items() if v is not None}
    if budget is not None:
        budget = _text("budget", budget)
        if budget not in _BUDGETS:
            raise ConfigError(f"budget={budget!r}: one of {', '.join(repr(b) for b in _BUDGETS)}")
        overrides["budget"] = budget
    if algo is not None:
        algo = _text("algo", algo)
        if algo.lower() not in _ALGOS:
            raise ConfigError(f"algo={algo!r}: one of {', '.join(repr(a) for a in _ALGOS)}")
        overrides["algo"] = algo
    resume, load_if_exists = _flag("resume", resume), _flag("load_if_exists", load_if_exists)
    if synthetic is not None:
        if drop or repair or time_unit is not None:
            raise ConfigError("drop, repair, time_unit: synthetic bars are not read from data")
        bars = _select(synthetic_bars(_whole("synthetic", synthetic, minimum=2)), symbol)
    elif data is not None:
        bars = load(data, time_unit=time_unit, symbol=symbol, drop=drop, repair=repair)
    else:
        bars = _select(embedded(), symbol)
    if names is not None:
        names = chosen_symbols(bars.symbols, names)
    elif symbol is None and len(bars.symbols) > 1:
        names = list(bars.symbols)
    if names is None:
        symbol = _symbol(bars, symbol)
    try:
        with pythonic():
            out = _native.hyperopt(
                bars,
                symbol,
                toml_text,
                overrides,
                None if study is None else os.fspath(study),
                storage,
                _text("study_name", study_name),
                resume,
                load_if_exists,
                None if report is None else os.fspath(report),
                _text("device", device),
                config_name,
                None if artifacts is None else os.fspath(artifacts),
                names,
            )
    except ConfigError as err:
        _dict_key_error(err, dict_keys)
        raise
    for note in out["notes"]:
        warnings.warn(python_names(note), UserWarning, stacklevel=2)
    return HyperoptRun(
        leaderboard=_leaderboard(_frame(out["leaderboard"]), out["integer_params"]),
        storage=out["storage"],
        study_name=out["study_name"],
        report=out["report"],
        checkpoints=out["checkpoints"],
        verdict=python_names(out["verdict"]),
        evidence=json.loads(out["evidence_json"]),
        symbols=out["symbols"],
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
    drop: Iterable[str] = (),
    repair: Iterable[str] = (),
) -> tuple[dict[str, Any], np.ndarray]:
    """Scores ``policy`` as ``tradesim train`` scores its own policies after each epoch: one env walks every
    bar of a part of the trainer's time split (``split``: ``"train"``, ``"valid"`` or ``"test"``; 70/15/15%
    of the bars after the features' warm-up, features normalized on the train part), calling
    ``policy(obs)`` (one float32 observation of ``obs_dim`` floats) for an action code (0 flat, 1 long,
    2 short) at each bar's close; the actions that took effect are then backtested by the backtest engine.
    Returns (the metrics as a dict: ``sharpe``, ``total_return``, ``trades``... annualized with the bars per
    year the trainer infers from the whole series' times; ``sharpe`` is NaN for a policy that never
    trades; ``trades`` and the other counts are ``int``), the actions that took effect (uint8, the split's
    bars - 1)). ``time_unit``, ``symbol``, ``drop`` and ``repair`` read ``data`` as :func:`load` does. Pair it with
    ``VectorEnv(split="train")`` to train another learner on the trainer's envs."""
    flags = _flag("allow_short", allow_short), _flag("whole_units", whole_units)
    if data is None:
        bars = _select(embedded(), symbol)
    else:
        bars = load(data, time_unit=time_unit, symbol=symbol, drop=drop, repair=repair)
    with pythonic():
        walk = _native.SplitWalk(
            bars, None if symbol is None else _text("symbol", symbol), _text("split", split),
            _decimal("capital", capital, positive=True), _decimal("spread", spread),
            _decimal("commission", commission), *flags,
        )
        for _ in range(walk.steps):
            action = int(policy(walk.observation()))
            if action not in (0, 1, 2):
                raise ConfigError(f"policy: action {action!r} at step {walk.taken}: 0 (flat), 1 (long) or 2 (short)")
            walk.step(action)
        metrics, actions = walk.finish()
    for name in _COUNTS:
        value = metrics.get(name)
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            metrics[name] = int(value)
    return metrics, actions


def _leaderboard(frame: Any, integer_params: Iterable[str] = ()) -> Any:
    """The leaderboard with ``pruned_at`` (an epoch, absent for trials not pruned) and the integer
    parameters as integers (nullable ``Int64`` where a trial has none)."""
    if "pruned_at" in frame:
        frame["pruned_at"] = frame["pruned_at"].astype("Int64")
    for name in set(integer_params):
        if name in frame:
            values = frame[name]
            frame[name] = values.astype(np.int64) if values.notna().all() else values.astype("Int64")
    return frame


def synthetic_bars(n_bars: int, symbols: int = 1, seed: Optional[int] = None) -> Bars:
    """Alias of :func:`synthetic` for use where ``synthetic`` is a parameter name."""
    return synthetic(n_bars, symbols=symbols, seed=seed)


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
