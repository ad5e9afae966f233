"""tradesim's exceptions, defined in Python so that they pickle (multiprocessing, joblib) and are
``tradesim.X`` wherever they come from: the native module raises these classes.

``TradesimError`` is the base of every tradesim exception; ``DataError`` (refused market data) and
``ConfigError`` (a parameter or a search configuration tradesim refuses) are also ``ValueError``\\ s.
Messages name Python parameters (``fast=``), never the CLI's flags.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any, Iterator

__all__ = ["TradesimError", "DataError", "ConfigError", "python_names"]


class TradesimError(Exception):
    """A tradesim failure: the base of every exception tradesim raises. Raised as itself for what is
    not about the input: the study's database, a file that cannot be written, the driver."""

    __module__ = "tradesim"


class ConfigError(TradesimError, ValueError):
    """A parameter or a search configuration tradesim refuses; the message names the parameter (or the
    TOML key)."""

    __module__ = "tradesim"


class DataError(TradesimError, ValueError):
    """Market data tradesim refuses. ``findings``: one dict per finding with ``file``, ``row`` (the
    DataFrame position, 0-based; the line number for a CSV file; None for a finding about the whole
    table, such as a missing column), ``index`` (the DataFrame's index label), ``column``, ``symbol`` (the
    row's symbol in a table with a symbol column, else None), ``class``
    (``non-finite``, ``high-below-low``, ...), ``severity`` and ``message``."""

    __module__ = "tradesim"

    def __init__(self, message: str = "", findings: Any = None) -> None:
        super().__init__(message)
        self.findings: list[dict[str, Any]] = [] if findings is None else list(findings)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.findings), self.__dict__)


_FLAG = re.compile(r"(?<![\w-])--([a-z][a-z0-9-]*)")
# A flag with its number (``--placebo 19``) is the keyword with its value (``placebo=19``).
_FLAG_VALUE = re.compile(r"(?<![\w-])--([a-z][a-z0-9-]*) ([0-9]+|N)\b")


def python_names(message: str) -> str:
    """``message`` with the CLI's flag names written as Python's parameters (``--walk-forward`` ->
    ``walk_forward=``), and the doubled name of ``spread: spread=: ...`` said once."""
    text = _FLAG_VALUE.sub(lambda m: m.group(1).replace("-", "_") + "=" + m.group(2), message)
    text = _FLAG.sub(lambda m: m.group(1).replace("-", "_") + "=", text)
    return re.sub(r"\b(\w+): \1=: ", r"\1: ", text)


@contextlib.contextmanager
def pythonic() -> Iterator[None]:
    """Re-raises a tradesim exception from the native module with its message in Python's names."""
    try:
        yield
    except TradesimError as err:
        message = str(err)
        fixed = python_names(message)
        if fixed != message:
            err.args = (fixed, *err.args[1:])
        raise
