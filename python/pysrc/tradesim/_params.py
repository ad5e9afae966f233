"""The checks of the Python parameters before a native call (types and ranges, named as Python spells
them), and the TOML of a configuration given as a dict with the dict key of each line for its errors."""

from __future__ import annotations

import decimal
import re
from typing import Any, Iterable, Mapping, Union

import numpy as np

from ._errors import ConfigError

Number = Union[str, int, float, decimal.Decimal]


def _names(name: str, values: Iterable[str]) -> list[str]:
    """``drop``/``repair``: finding class names (an iterable of strings; one string is one name)."""
    if isinstance(values, str):
        return [values]
    if isinstance(values, bytes) or not hasattr(values, "__iter__"):
        raise TypeError(f"{name}={values!r}: expected finding class names (a list of str)")
    out = list(values)
    for v in out:
        if not isinstance(v, str):
            raise TypeError(f"{name}: {v!r} is not a finding class name (str)")
    return out


def _whole(name: str, value: Any, *, minimum: int) -> int:
    """``value`` as an int, refused (naming ``name``) when it is not a whole number or below ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name}={value!r}: expected a whole number (int), got {type(value).__name__}")
    if value < minimum:
        raise ConfigError(f"{name}={value!r}: at least {minimum}")
    return int(value)


def _flag(name: str, value: Any) -> bool:
    """A yes/no parameter: ``True``/``False`` (or numpy's bool), never a string or a number read as truthy."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}={value!r}: expected True or False (bool), got {type(value).__name__}")
    return bool(value)


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


_COLUMNS_WORDS = re.compile(r"^(best|all|top:([0-9]+))$")


def _grid_columns(value: Any, fast: list[int], slow: list[int]) -> str:
    """``columns`` as the native selection text, checked whether or not it is used: ``"best"``, ``"all"``,
    ``"top:N"``, ``"FAST/SLOW,..."``, or a list of ``(fast, slow)`` pairs (the metrics' index) of the grid."""
    if isinstance(value, str):
        text = value.strip()
        words = _COLUMNS_WORDS.match(text)
        if words:
            if words.group(2) is not None and int(words.group(2)) < 1:
                raise ConfigError(f"columns={value!r}: top:N needs N >= 1")
            return text
        pairs: list[tuple[int, int]] = []
        for part in text.split(","):
            m = re.fullmatch(r"\s*([0-9]+)\s*/\s*([0-9]+)\s*", part)
            if not m:
                raise ConfigError(
                    f"columns={value!r}: 'best', 'all', 'top:N', 'FAST/SLOW,...' or a list of (fast, slow) pairs"
                )
            pairs.append((int(m.group(1)), int(m.group(2))))
    elif isinstance(value, (bytes, Mapping)) or not hasattr(value, "__iter__"):
        raise TypeError(f"columns={value!r}: expected a str or a list of (fast, slow) pairs")
    else:
        pairs = []
        for item in value:
            if isinstance(item, (str, bytes)) or not hasattr(item, "__len__") or len(item) != 2:
                raise TypeError(f"columns: {item!r} is not a (fast, slow) pair")
            pairs.append((_whole("columns fast", item[0], minimum=1), _whole("columns slow", item[1], minimum=1)))
        if not pairs:
            raise ConfigError("columns: no (fast, slow) pairs")
    for f, w in pairs:
        if f not in fast or w not in slow or w <= f:
            raise ConfigError(f"columns: ({f}, {w}) is not a column of the grid (fast in {fast}, slow in {slow}, slow > fast)")
    return ",".join(f"{f}/{w}" for f, w in pairs)


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


def _to_toml(config: Mapping[str, Any]) -> tuple[str, dict[int, tuple[Any, ...]]]:
    """The dict's TOML, and the dict key each line (numbered from 1) came from, for the errors."""
    lines = []
    keys: dict[int, tuple[Any, ...]] = {}
    for table, body in config.items():
        if not isinstance(body, Mapping):
            raise TypeError(f"config[{table!r}]: a table (a dict), got {type(body).__name__}")
        lines.append(f"[{table}]")
        keys[len(lines)] = (table,)
        for key, value in body.items():
            lines.append(f"{key} = {_toml_value(value)}")
            keys[len(lines)] = (table, key)
    return "\n".join(lines) + "\n", keys


_TOML_LINE = re.compile(r"TOML parse error at line ([0-9]+), column [0-9]+")


def _dict_key_error(err: ConfigError, keys: dict[int, tuple[Any, ...]]) -> None:
    """A configuration error about the TOML written from a dict, said of the dict's key instead."""
    message = str(err)
    found = _TOML_LINE.search(message)
    if found is None or int(found.group(1)) not in keys:
        return
    detail = [line for line in message[found.end():].splitlines() if line.strip() and "|" not in line]
    path = "".join(f"[{k!r}]" for k in keys[int(found.group(1))])
    err.args = (f"config{path}: {detail[-1].strip() if detail else message}", *err.args[1:])
