"""A universe for the envs: a dict of frames made one long frame, the symbols chosen, the calendar on the
caller's times, and the pandas frames of positions and of a walk's history (indexed by time and symbol)."""

from __future__ import annotations

import dataclasses
import sys
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from . import _caller_times, _pandas, _text
from ._errors import ConfigError

#: The column names that make a frame a long (multi-symbol) table, as the loader reads them.
_SYMBOL_HEADERS = ("symbol", "ticker", "instrument", "asset")


def _symbol_column(frame: Any) -> Optional[Any]:
    return next((k for k in frame.columns if str(k).strip().lower() in _SYMBOL_HEADERS), None)


def is_frame_dict(data: Any) -> bool:
    """Whether ``data`` is a dict of frames (``{symbol: DataFrame or Series}``), not a dict of columns."""
    if not isinstance(data, Mapping) or not data:
        return False
    pd = _pandas()
    frames = [isinstance(v, (pd.DataFrame, pd.Series)) for v in data.values()]
    if any(frames) and not all(frames):
        raise ConfigError("data: a dict of frames ({symbol: DataFrame}) or of columns ({name: array}), not both")
    return all(frames)


def long_frame(data: Mapping[Any, Any]) -> Any:
    """``{symbol: frame}`` as one long frame with a ``symbol`` column: every frame with the same columns
    (any case) and the same kind of time (a ``DatetimeIndex`` in one timezone, or a time column)."""
    pd = _pandas()
    frames = []
    first: Optional[tuple[str, list[str], str]] = None
    for key, frame in data.items():
        symbol = _text("data's keys (the symbols)", key)
        if isinstance(frame, pd.Series):
            close = pd.to_numeric(frame)
            frame = pd.DataFrame({"open": close, "high": close, "low": close, "close": close}, index=frame.index)
        if frame.empty:
            raise ConfigError(f"data[{symbol!r}]: an empty frame (no bars)")
        if _symbol_column(frame) is not None:
            raise ConfigError(f"data[{symbol!r}]: has a symbol column; a dict's keys are its symbols")
        columns = sorted(str(c).strip().lower() for c in frame.columns)
        index = frame.index
        kind = f"a DatetimeIndex ({index.tz or 'naive'})" if isinstance(index, pd.DatetimeIndex) else "a time column"
        if first is None:
            first = (symbol, columns, kind)
        elif kind != first[2]:
            raise ConfigError(
                f"data[{symbol!r}]: times in {kind} where data[{first[0]!r}]'s are in {first[2]} (give every "
                "frame one kind of time)"
            )
        elif columns != first[1]:
            raise ConfigError(
                f"data[{symbol!r}]: columns {columns} differ from data[{first[0]!r}]'s {first[1]} (every symbol's "
                "frame has the same columns)"
            )
        frame = frame.copy()
        frame.columns = [str(c).strip().lower() for c in frame.columns]
        frame.insert(0, "symbol", symbol)
        frames.append(frame)
    by_index = first is not None and first[2].startswith("a DatetimeIndex")
    return pd.concat(frames) if by_index else pd.concat(frames, ignore_index=True)


def has_symbol_column(data: Any) -> bool:
    """False for a pandas frame without a symbol column or a Series (one series); True otherwise (a path or
    ``Bars`` name their symbols themselves)."""
    pd = sys.modules.get("pandas")
    if pd is None:
        return True
    if isinstance(data, pd.Series):
        return False
    return not isinstance(data, pd.DataFrame) or _symbol_column(data) is not None


@dataclasses.dataclass(frozen=True)
class History:
    """A :class:`tradesim.TradingEnv`'s walk over a universe since its last reset: ``account`` indexed by
    ``time`` (``equity`` marked at that time's closes, the ``reward`` and ``costs`` of the step that ended
    there; the first row is the start, its reward NaN) and ``positions`` indexed by ``(time, symbol)``
    (``units``, ``side``, ``weight`` held after that step)."""

    account: Any
    positions: Any


def symbol_names(data: Any, symbols: Any) -> list[str]:
    """``symbols=`` as a list of names, refused (before the data is read) when it is not one, is empty, or
    the data is a frame without a symbol column."""
    if isinstance(symbols, str) or not hasattr(symbols, "__iter__"):
        raise TypeError(f"symbols={symbols!r}: expected a list of symbol names")
    names = [_text("symbols", s) for s in symbols]
    if not names:
        raise ConfigError("symbols=[]: name at least one symbol")
    if not has_symbol_column(data):
        raise ConfigError(
            f"symbols={names!r}: the data has no symbol column (a universe is a long DataFrame with a `symbol` "
            "column, or a dict {symbol: frame})"
        )
    return names


def chosen_symbols(held: Sequence[str], names: Sequence[str]) -> list[str]:
    """``names`` (any case) as the data spells them, refused when one is unknown or repeated."""
    by_upper = {h.upper(): h for h in held}
    out = []
    for name in names:
        if name.upper() not in by_upper:
            shown = ", ".join(held[:10]) + (", ..." if len(held) > 10 else "")
            raise ConfigError(f"symbols: {name!r} is not in the data (it holds {shown})")
        if by_upper[name.upper()] in out:
            raise ConfigError(f"symbols: {name!r} is listed twice")
        out.append(by_upper[name.upper()])
    return out


def calendar(nanoseconds: Sequence[int], origin: Any) -> Any:
    """The universe's calendar as a ``DatetimeIndex`` in the caller's timezone (UTC without one)."""
    pd = _pandas()
    return _caller_times(pd.to_datetime(np.asarray(nanoseconds, dtype=np.int64), utc=True), origin)


def symbol_frame(level: str, labels: Any, symbols: Sequence[str], units: np.ndarray, weights: np.ndarray,
                 times: Any = None) -> Any:
    """Positions as a DataFrame indexed by ``(level, symbol)``: ``labels`` (one per row of ``units`` and
    ``weights``, which are ``rows x symbols``) name the first level (``time`` or ``env``); ``times``, one per
    row, become a ``time`` column."""
    pd = _pandas()
    rows, n = units.shape
    index = pd.MultiIndex.from_arrays(
        [labels.repeat(n), np.tile(np.asarray(symbols, dtype=object), rows)], names=[level, "symbol"]
    )
    frame = pd.DataFrame(
        {"units": units.reshape(-1), "side": np.sign(units).astype(np.int8).reshape(-1),
         "weight": weights.reshape(-1).astype(np.float64)},
        index=index,
    )
    if times is not None:
        frame.insert(0, "time", times.repeat(n))
    return frame
