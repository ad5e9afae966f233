"""Type hints of the native module (PyO3). Use the functions of :mod:`tradesim`, which wrap these."""

from typing import Any, Optional, Sequence

import numpy as np
import numpy.typing as npt

__version__: str
DEFAULT_SPREAD: str
DEFAULT_COMMISSION: str

class Bars:
    """Validated bars (one series per symbol)."""

    @property
    def source(self) -> str: ...
    @property
    def synthetic(self) -> bool: ...
    @property
    def symbols(self) -> list[str]: ...
    @property
    def n_bars(self) -> int: ...
    @property
    def findings(self) -> list[dict[str, Any]]: ...
    @property
    def notes(self) -> list[str]: ...
    def __len__(self) -> int: ...
    def _select(self, symbol: str) -> Bars: ...
    def __reduce__(self) -> tuple[Any, tuple[str]]: ...

def bars_from_state(state: str) -> Bars: ...

def load_columns(
    name: str,
    headers: Sequence[str],
    columns: Sequence[tuple[str, Any]],
    default_symbol: str,
    drop: Sequence[str],
    repair: Sequence[str],
    time_unit: Optional[str] = None,
) -> Bars: ...
def market_feature_names() -> list[str]: ...
def universe_feature_names() -> list[str]: ...
def load_file(
    path: str, drop: Sequence[str], repair: Sequence[str], time_unit: Optional[str] = None, symbol: Optional[str] = None
) -> Bars: ...
def embedded() -> Bars: ...
def synthetic(bars: int, symbols: int = 1, seed: Optional[int] = None) -> Bars: ...
def device_info(device: str) -> dict[str, Any]: ...
def hyperparameters() -> list[dict[str, Any]]: ...
def backtest(
    bars: Bars,
    symbol: Optional[str],
    fast: Sequence[int],
    slow: Sequence[int],
    signal: str,
    allow_short: bool,
    spread: Any,
    commission: Any,
    capital: Any,
    whole_units: bool,
    bars_per_year: Optional[float],
    columns: str,
    trades: bool,
    equity: bool,
    device: str,
) -> dict[str, Any]: ...
def hyperopt(
    bars: Bars,
    symbol: Optional[str],
    config_toml: Optional[str],
    overrides: dict[str, Any],
    study: Optional[str],
    storage: Optional[str],
    study_name: str,
    resume: bool,
    load_if_exists: bool,
    report: Optional[str],
    device: str,
    config_name: str = "config",
    artifacts: Optional[str] = None,
    symbols: Optional[list[str]] = None,
) -> dict[str, Any]: ...

class VectorEnv:
    """K trials x E envs (use :class:`tradesim.VectorEnv`, the Gymnasium wrapper)."""

    def __init__(
        self,
        bars: Bars,
        symbol: Optional[str],
        trials: int,
        envs: int,
        episode_len: int,
        seed: int,
        capital: Sequence[Any],
        spread: Sequence[Any],
        commission: Sequence[Any],
        allow_short: bool,
        whole_units: bool,
        device: str,
        host_copies: bool = True,
        split: Optional[str] = None,
        w_cost: float = 0.0,
    ) -> None:
        """Money parameters: one value for every trial or one per trial. ``split``: the envs walk that part
        of ``tradesim train``'s time split (features normalized on its train part); ``w_cost``: the reward's
        cost weight."""
    @property
    def num_envs(self) -> int: ...
    @property
    def host_copies(self) -> bool:
        """Whether each step refreshes the host buffers of :meth:`buffers` (always on the CPU)."""
    @property
    def obs_dim(self) -> int: ...
    @property
    def device(self) -> str: ...
    def buffers(self) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32], npt.NDArray[np.bool_], npt.NDArray[np.bool_], npt.NDArray[np.float32], npt.NDArray[np.bool_], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Read-only views of the env's own buffers: observations, rewards, terminated, truncated, final
        observations, final mask, equity, final equity (the equity each episode that ended in the last step
        ended with, where the final mask). Overwritten in place by every step and reset."""
    def dlpack_buffers(self) -> tuple[DLPackArray, DLPackArray, DLPackArray, DLPackArray, DLPackArray, DLPackArray, DLPackArray, DLPackArray]:
        """The same eight buffers exported through DLPack without copies (device memory on CUDA, where
        the equity buffer holds an ended episode's equity where the final mask, so that the last two are
        the same buffer)."""
    def reset(self, seed: Optional[int] = None) -> None: ...
    def step(self, actions: Any) -> None:
        """``actions``: integer codes as a numpy array or sequence, or (CUDA) a DLPack array on the env's
        device (e.g. a ``torch.Tensor``), read there without a copy."""

class PortfolioEnv:
    """K trials x E portfolio envs over a universe, an action per symbol (use :class:`tradesim.VectorEnv`)."""

    def __init__(
        self,
        bars: Bars,
        symbols: Optional[Sequence[str]],
        trials: int,
        envs: int,
        episode_len: int,
        seed: int,
        capital: Sequence[Any],
        spread: Sequence[Any],
        commission: Sequence[Any],
        allow_short: bool,
        whole_units: bool,
        device: str,
        w_cost: float = 0.0,
    ) -> None:
        """``symbols``: the universe's symbols in order (None: every symbol of ``bars``); money parameters:
        one value for every trial or one per trial; ``w_cost``: the reward's cost weight."""
    @property
    def num_envs(self) -> int: ...
    @property
    def obs_per_symbol(self) -> int: ...
    @property
    def symbols(self) -> list[str]: ...
    @property
    def times(self) -> list[int]:
        """The calendar, nanoseconds since 1970 UTC."""
    @property
    def device(self) -> str: ...
    def buffers(self) -> dict[str, npt.NDArray[Any]]:
        """Read-only views of the env's own buffers by name: ``obs``, ``final_obs`` (envs x symbols x
        floats), ``rewards``, ``terminated``, ``truncated``, ``final_mask``, ``equity``, ``final_equity``,
        ``costs``, ``time``, ``final_time`` (envs), ``units``, ``final_units`` (envs x symbols). Overwritten
        in place by every step and reset."""
    def reset(self, seed: Optional[int] = None) -> None: ...
    def step(self, actions: npt.NDArray[np.uint8]) -> None:
        """``actions``: envs x symbols uint8 codes (0 flat, 1 long, 2 short), env-major."""

class SplitWalk:
    """One env walking a part of ``tradesim train``'s time split (use :func:`tradesim.greedy_walk`)."""

    def __init__(
        self,
        bars: Bars,
        symbol: Optional[str],
        split: str,
        capital: Any,
        spread: Any,
        commission: Any,
        allow_short: bool,
        whole_units: bool,
    ) -> None: ...
    @property
    def steps(self) -> int: ...
    @property
    def taken(self) -> int: ...
    @property
    def bars_per_year(self) -> float: ...
    @property
    def obs_dim(self) -> int: ...
    def observation(self) -> npt.NDArray[np.float32]: ...
    def step(self, action: int) -> None: ...
    def finish(self) -> tuple[dict[str, float], npt.NDArray[np.uint8]]: ...

class DLPackArray:
    """A buffer of the vector env exported through DLPack (``torch.from_dlpack``, ``numpy.from_dlpack``,
    ``cupy.from_dlpack``): the env's own memory, overwritten in place by every step."""

    def __dlpack__(
        self,
        *,
        stream: Optional[int] = None,
        max_version: Optional[tuple[int, int]] = None,
        dl_device: Optional[tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any: ...
    def __dlpack_device__(self) -> tuple[int, int]: ...
    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def dtype(self) -> str: ...
    @property
    def address(self) -> int: ...

