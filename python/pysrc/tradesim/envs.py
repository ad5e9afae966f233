"""tradesim's trading env in Gymnasium's APIs: :class:`VectorEnv` (``gymnasium.vector.VectorEnv``, the fast
path) and :class:`TradingEnv` (one env as a ``gymnasium.Env``). Needs ``gymnasium``."""

from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence, Union

import gymnasium as gym
import numpy as np

from . import Number, _decimal, _flag, _load, _native, _pandas, _select, _text, _whole, embedded
from . import _universe
from ._errors import ConfigError, TradesimError, pythonic

__all__ = ["VectorEnv", "TradingEnv"]

_ARRAYS = ("numpy", "dlpack", "torch")

# The three portfolio floats that end each observation (gpu_kernels::env::portfolio_floats): the position
# (-1, 0, 1), the open position's return (close / entry - 1, signed by the side; 0 when flat) and
# equity / capital - 1.
_PORTFOLIO_NAMES = ("position", "open_return", "equity_return")


def _per_trial(name: str, value: Union[Number, Sequence[Number]], trials: int) -> list[Any]:
    """One money value for every trial, or one per trial (a sequence of ``trials`` values)."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        return [_decimal(name, value, positive=name == "capital")]  # type: ignore[arg-type]
    values = list(value)  # type: ignore[arg-type]
    if len(values) != trials:
        raise ConfigError(f"{name}: {len(values)} values for {trials} trials (give one, or one per trial)")
    return [_decimal(f"{name}[{i}]", v, positive=name == "capital") for i, v in enumerate(values)]


def _on_device(actions: Any) -> bool:
    """Whether ``actions`` is a DLPack array outside host memory (a CUDA tensor)."""
    device = getattr(actions, "__dlpack_device__", None)
    return device is not None and not isinstance(actions, np.ndarray) and device()[0] != 1


# Why a universe's env refuses actions on a device (both autoreset modes).
_UNIVERSE_ON_HOST = "actions: on a device; a universe's env takes host arrays (numpy, lists)"


def _host_actions(actions: Any) -> np.ndarray:
    """A host copy of action codes held on a device (a CUDA tensor): through DLPack where the producer can
    copy to the host, else its ``cpu()``; an array offering neither is refused, saying what to pass."""
    try:
        return np.from_dlpack(actions, device="cpu", copy=True)
    except (AttributeError, BufferError, NotImplementedError, RuntimeError, TypeError, ValueError):
        pass
    cpu = getattr(actions, "cpu", None)
    if callable(cpu):
        return np.asarray(cpu())
    raise ConfigError(
        "actions: on a device that cannot copy them to the host; autoreset_mode='next_step' reads the codes "
        "on the host (it sets the restarting envs' codes to flat): pass a host array, or use "
        "autoreset_mode='same_step', which reads device actions in place"
    )


def _actions(actions: Any, n: int, symbols: Optional[Sequence[str]] = None) -> np.ndarray:
    """Checked action codes as uint8: ``n`` of them, or ``n x len(symbols)`` for a universe's envs."""
    a = np.asarray(actions)
    if symbols is not None:
        return _symbol_actions(a, n, symbols)
    if a.shape != (n,):
        raise ConfigError(f"actions: shape {a.shape} for {n} envs")
    if a.dtype != np.uint8:
        if not np.issubdtype(a.dtype, np.integer):
            raise TypeError(f"actions: integer codes 0 (flat), 1 (long), 2 (short), got dtype {a.dtype}")
        if a.size and (a.min() < 0 or a.max() > 2):
            raise ConfigError("actions: codes are 0 (flat), 1 (long) or 2 (short)")
        a = a.astype(np.uint8)
    return np.ascontiguousarray(a)


def _symbol_actions(a: np.ndarray, n: int, symbols: Sequence[str]) -> np.ndarray:
    """A universe's actions: shape ``(n, len(symbols))``, integer codes 0, 1 or 2, the first bad one named
    by its env and symbol."""
    if a.shape != (n, len(symbols)):
        raise ConfigError(f"actions: shape {a.shape}, expected ({n}, {len(symbols)}): {n} envs x {len(symbols)} symbols")
    if a.dtype != np.uint8 and not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"actions: integer codes 0 (flat), 1 (long), 2 (short), got dtype {a.dtype}")
    bad = np.argwhere((a < 0) | (a > 2))
    if len(bad):
        env, s = (int(x) for x in bad[0])
        raise ConfigError(
            f"actions[{env}, {s}] = {a[env, s]} (env {env}, symbol {symbols[s]!r}): codes are 0 (flat), 1 (long) or 2 (short)"
        )
    return np.ascontiguousarray(a, dtype=np.uint8)


def _autoreset_mode(value: Any) -> gym.vector.AutoresetMode:
    """``same_step``/``next_step`` (any case) or gymnasium's ``AutoresetMode`` member."""
    if isinstance(value, gym.vector.AutoresetMode):
        mode = value
    else:
        text = _text("autoreset_mode", value).lower().replace("_", "")
        by_name = {m.value.lower(): m for m in gym.vector.AutoresetMode}
        if text not in by_name:
            raise ConfigError(f"autoreset_mode={value!r}: 'same_step' or 'next_step'")
        mode = by_name[text]
    if mode == gym.vector.AutoresetMode.DISABLED:
        raise ConfigError("autoreset_mode=DISABLED: tradesim's envs always autoreset ('same_step' or 'next_step')")
    return mode


class VectorEnv(gym.vector.VectorEnv):
    """``trials`` x ``envs`` trading envs stepped together, in Gymnasium's vector API
    (``gymnasium.vector.VectorEnv``).

    **Episodes.** Observations are the bar's features and the portfolio's three floats (``obs_dim``),
    actions 0 (flat), 1 (long), 2 (short), rewards the log return of the env's equity over the step. An
    episode is ``episode_len`` bars from a seeded start bar; it is truncated at its end and terminated by
    the circuit breaker. Orders fill at the next bar's open with ``spread`` and ``commission`` as fractions
    of the traded value; money parameters are exact decimals, as in :func:`tradesim.backtest`.

    **Autoreset** (``autoreset_mode``, Gymnasium's ``AutoresetMode``):

    The default (``autoreset_mode=None``) is Gymnasium 1.x's, ``"next_step"``, with numpy arrays, so every
    wrapper of ``gymnasium.wrappers.vector`` runs on a default ``VectorEnv``; with device arrays
    (``arrays="dlpack"``/``"torch"``) it is ``"same_step"``, the only mode they have.

    - ``"same_step"`` (the zero-copy path): an env whose episode ended returns the first
      observation of its next episode; the ended episodes' last observations are in
      ``infos["final_obs"]`` (an object array, one observation per ended env, None elsewhere) where
      ``infos["_final_obs"]``, and ``infos["final_info"]`` (with ``infos["_final_info"]``) holds their
      ``terminated``/``truncated`` flags.
    - ``"next_step"`` (what Gymnasium's vector wrappers such as ``NormalizeObservation``,
      ``TransformObservation``, ``FlattenObservation`` need): the ending step returns the episode's last
      observation; the next step ignores that env's action and returns the next episode's start with
      reward 0 and both flags False. tradesim's envs restart within the step, so that start is the
      observation after one flat bar of the new episode (which is one bar shorter). Arrays are copies.
      Actions on a device (a CUDA tensor) are copied to the host each step, since the restarting envs'
      codes are set there; ``"same_step"`` reads them in place.

    **Arrays.** Under ``next_step`` (the default) every array is a fresh writable copy. Under ``same_step``,
    ``copy=False`` (the zero-copy path, its default) returns read-only numpy arrays that are views of the
    env's own buffers, overwritten in place by the next ``step``/``reset`` (copy what you keep);
    ``copy=True`` returns fresh writable arrays (what wrappers that modify them in place, such as
    ``ClipReward``, need).

    **Equity.** ``infos["equity"]`` is each env's equity after the step. Under ``same_step`` an ended
    env's is its next episode's capital, and the equity the ended episode ended with is in
    ``infos["final_info"]["equity"]`` (where ``infos["final_info"]["_equity"]``); under ``next_step``
    the ending step's ``infos["equity"]`` is the equity the episode ended with. With device arrays
    (``arrays`` other than ``"numpy"``) ``infos["final_info"]["equity"]`` holds it where
    ``infos["_final_obs"]``, and ``infos["equity"]`` there is unspecified (the equity buffer on CUDA
    serves both).

    **The trainer's envs.** ``split="train"`` (``"valid"``, ``"test"``) places the episodes on that part of
    ``tradesim train``'s time split (70/15/15% of the bars after the features' warm-up) with the features
    normalized on the train part, as the trainer's own envs are; ``w_cost`` is the reward's cost weight
    (``reward = log equity change - w_cost * costs / equity``; ``tradesim train`` uses 1). Without
    ``split`` the episodes cover all the bars, features normalized over all of them.
    :func:`tradesim.greedy_walk` scores a policy on a split as the trainer does.

    **Universes.** Data of several symbols (a long frame with a ``symbol`` column, a path or ``Bars``)
    without ``symbol=``, a dict ``{symbol: frame}``, or ``symbols=[...]`` (which chooses and orders them)
    make each env one cash account over the universe's N symbols (the portfolio env): actions are one code
    per symbol (``single_action_space`` is ``MultiDiscrete([3] * N)``, ``step`` takes ``(num_envs, N)``
    integers), observations ``N`` rows of ``feature_names`` (the universe features, then ``position``,
    ``weight``, ``equity_return``), ``symbols`` and ``times`` (the calendar) name them, and
    :meth:`positions` gives every env's positions as a DataFrame indexed by ``(env, symbol)``. Numpy arrays
    only; ``split`` is for one series. docs/PYTHON.md, "Universes", has the rules.

    ``num_envs`` (what ``gymnasium.make_vec`` passes) sets ``envs`` to ``num_envs // trials``. ``data`` is
    anything :func:`tradesim.load` takes, with ``time_unit``, ``symbol``, ``drop`` and ``repair`` as there;
    ``allow_short``, ``whole_units`` and ``copy`` are ``bool``.
    ``feature_names`` names each observation column.
    """

    def __init__(
        self,
        data: Any = None,
        *,
        trials: int = 1,
        envs: int = 64,
        episode_len: int = 256,
        seed: int = 0,
        symbol: Optional[str] = None,
        symbols: Optional[Sequence[str]] = None,
        capital: Number = "100000",
        spread: Number = "0.0002",
        commission: Number = "0.0001",
        allow_short: bool = True,
        whole_units: bool = False,
        device: str = "auto",
        arrays: str = "numpy",
        autoreset_mode: Any = None,
        copy: bool = False,
        num_envs: Optional[int] = None,
        time_unit: Optional[str] = None,
        split: Optional[str] = None,
        w_cost: float = 0.0,
        drop: Iterable[str] = (),
        repair: Iterable[str] = (),
    ) -> None:
        if arrays not in _ARRAYS:
            raise ConfigError(f"arrays={arrays!r}: one of {', '.join(_ARRAYS)}")
        trials = _whole("trials", trials, minimum=1)
        if num_envs is not None:
            num_envs = _whole("num_envs", num_envs, minimum=1)
            if num_envs % trials:
                raise ConfigError(f"num_envs={num_envs}: a multiple of trials={trials}")
            envs = num_envs // trials
        envs = _whole("envs", envs, minimum=1)
        episode_len = _whole("episode_len", episode_len, minimum=1)
        seed = _whole("seed", seed, minimum=0)
        if autoreset_mode is None:
            autoreset_mode = "next_step" if arrays == "numpy" else "same_step"
        mode = _autoreset_mode(autoreset_mode)
        allow_short, whole_units = _flag("allow_short", allow_short), _flag("whole_units", whole_units)
        copy = _flag("copy", copy)
        next_step = mode == gym.vector.AutoresetMode.NEXT_STEP
        if next_step and arrays != "numpy":
            raise ConfigError(f"autoreset_mode='next_step': numpy arrays only (arrays={arrays!r})")
        if next_step and episode_len < 2:
            raise ConfigError("episode_len=1: at least 2 with autoreset_mode='next_step' (one bar restarts)")
        if copy and arrays != "numpy":
            raise ConfigError(f"copy=True: numpy arrays only (arrays={arrays!r})")
        money = (_per_trial("capital", capital, trials), _per_trial("spread", spread, trials),
                 _per_trial("commission", commission, trials))
        if symbols is not None and symbol is not None:
            raise ConfigError("symbol and symbols: give one (symbol= runs one series, symbols= a universe)")
        universe = symbols is not None
        names = None if symbols is None else _universe.symbol_names(data, symbols)
        origin = None
        if data is None:
            bars = _select(embedded(), symbol)
        else:
            if _universe.is_frame_dict(data):
                if symbol is not None:
                    raise ConfigError("symbol: a dict of frames is a universe; choose its symbols with symbols=")
                data, universe = _universe.long_frame(data), True
            bars, origin = _load(data, time_unit=time_unit, symbol=symbol, drop=drop, repair=repair)
        # A universe: symbols= chosen, a dict of frames, or data of several symbols without symbol=.
        universe = universe or (symbol is None and len(bars.symbols) > 1)
        #: The universe's symbols, in the order of the observations' rows and the actions' columns (None for
        #: one series).
        self.symbols: Optional[tuple[str, ...]] = None
        if universe:
            if arrays != "numpy":
                raise ConfigError(f"arrays={arrays!r}: a universe's env has numpy arrays only")
            if split is not None:
                raise ConfigError(f"split={split!r}: one series only (a universe's episodes cover all its times)")
            if names is not None:
                names = _universe.chosen_symbols(bars.symbols, names)
            with pythonic():
                self._env = _native.PortfolioEnv(
                    bars, names, trials, envs, episode_len, seed, *money, allow_short, whole_units,
                    _text("device", device), float(w_cost),
                )
        else:
            with pythonic():
                self._env = _native.VectorEnv(
                    bars, None if symbol is None else _text("symbol", symbol), trials, envs, episode_len, seed,
                    *money, allow_short, whole_units, _text("device", device), arrays == "numpy",
                    None if split is None else _text("split", split), float(w_cost),
                )
        self.arrays = arrays
        self.copy = bool(copy) or next_step
        self.num_envs = self._env.num_envs
        self.device = self._env.device
        self.autoreset_mode = mode
        self.metadata = {"autoreset_mode": mode}
        self.render_mode = None
        if universe:
            self._universe_spaces(origin)
        else:
            self._series_spaces(arrays)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, self.num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, self.num_envs)
        # NEXT_STEP: the envs whose episode ended in the last step (their next step is the restart).
        self._restarting = np.zeros(self.num_envs, dtype=bool)

    def _series_spaces(self, arrays: str) -> None:
        d = self._env.obs_dim
        #: The name of each observation column: the market features (docs/FEATURES.md), then the portfolio's.
        self.feature_names: tuple[str, ...] = (*_native.market_feature_names(), *_PORTFOLIO_NAMES)
        if len(self.feature_names) != d:
            raise TradesimError(f"{len(self.feature_names)} feature names for observations of {d} floats")
        self.single_observation_space = gym.spaces.Box(-np.inf, np.inf, (d,), np.float32)
        self.single_action_space = gym.spaces.Discrete(3)
        if arrays == "numpy":
            buffers = self._env.buffers()
        else:
            buffers = self._env.dlpack_buffers()
            if arrays == "torch":
                import torch

                buffers = tuple(torch.from_dlpack(b) for b in buffers)
        (self._obs, self._rewards, self._terminated, self._truncated, self._final_obs, self._final_mask,
         self._equity, self._final_equity) = buffers

    def _universe_spaces(self, origin: Any) -> None:
        self.symbols = tuple(self._env.symbols)
        #: The universe's calendar (a ``DatetimeIndex`` in the data's timezone, UTC without one).
        self.times = _universe.calendar(self._env.times, origin)
        n, d = len(self.symbols), self._env.obs_per_symbol
        self.feature_names = tuple(_native.universe_feature_names())
        if len(self.feature_names) != d:
            raise TradesimError(f"{len(self.feature_names)} feature names for rows of {d} floats")
        self.single_observation_space = gym.spaces.Box(-np.inf, np.inf, (n, d), np.float32)
        self.single_action_space = gym.spaces.MultiDiscrete([3] * n)
        b = self._env.buffers()
        (self._obs, self._rewards, self._terminated, self._truncated, self._final_obs, self._final_mask,
         self._equity, self._final_equity) = (b["obs"], b["rewards"], b["terminated"], b["truncated"],
                                              b["final_obs"], b["final_mask"], b["equity"], b["final_equity"])
        (self._units, self._final_units, self._time, self._final_time, self._costs) = (
            b["units"], b["final_units"], b["time"], b["final_time"], b["costs"])

    def positions(self) -> Any:
        """A universe's positions now: a DataFrame indexed by ``(env, symbol)`` with each env's ``time`` (its
        observation's), ``units`` (negative short), ``side`` (-1, 0, 1) and ``weight`` (``units x close /
        equity``). An env whose episode just ended shows its next episode's start (flat)."""
        if self.symbols is None:
            raise ConfigError("positions(): an env over a universe only (data of several symbols, or symbols=)")
        return _universe.symbol_frame("env", np.arange(self.num_envs), self.symbols, self._units.copy(),
                                      self._obs[:, :, -2], times=self.times[self._time])

    def _codes(self, actions: Any) -> Any:
        if self.symbols is None:
            return actions if _on_device(actions) else _actions(actions, self.num_envs)
        if _on_device(actions):
            raise ConfigError(_UNIVERSE_ON_HOST)
        return _actions(actions, self.num_envs, self.symbols)

    def _out(self, array: Any) -> Any:
        return array.copy() if self.copy else array

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        """New episodes for every env; ``seed`` (one integer for all envs) restarts the start-bar draws.
        Returns the first observations and ``{"equity": ...}``."""
        if seed is not None:
            seed = _whole("seed", seed, minimum=0)
        super().reset(seed=seed)
        with pythonic():
            self._env.reset(seed)
        self._restarting[:] = False
        return self._out(self._obs), {"equity": self._out(self._equity)}

    def step(self, actions: Any):
        """One step of every env with ``actions`` (0 flat, 1 long, 2 short; any integer dtype, or a CUDA
        array on the env's device): (observations, rewards, terminated, truncated, infos), autoreset as
        the class docstring describes for ``autoreset_mode``."""
        if self.autoreset_mode == gym.vector.AutoresetMode.NEXT_STEP:
            return self._step_next(actions)
        with pythonic():
            self._env.step(self._codes(actions))
        infos: dict[str, Any] = {"equity": self._out(self._equity)}
        if self.arrays != "numpy":
            infos["final_obs"] = self._final_obs
            infos["_final_obs"] = self._final_mask
            infos["final_info"] = {"equity": self._final_equity, "_equity": self._final_mask}
            infos["_final_info"] = self._final_mask
        elif self._final_mask.any():
            mask = self._final_mask.copy()
            final_obs = np.full(self.num_envs, None, dtype=object)
            final_info: dict[str, Any] = {
                "terminated": self._terminated & mask,
                "truncated": self._truncated & mask,
                "equity": np.where(mask, self._final_equity, 0.0),
                "_terminated": mask,
                "_truncated": mask,
                "_equity": mask,
            }
            for i in np.flatnonzero(mask):
                final_obs[i] = self._final_obs[i].copy()
            infos.update(final_obs=final_obs, _final_obs=mask, final_info=final_info, _final_info=mask.copy())
        return self._out(self._obs), self._out(self._rewards), self._out(self._terminated), \
            self._out(self._truncated), infos

    def _step_next(self, actions: Any):
        if _on_device(actions):
            if self.symbols is not None:
                raise ConfigError(_UNIVERSE_ON_HOST)
            # The restarting envs' codes are set to flat below, on the host: a device array is copied there.
            actions = _host_actions(actions)
        codes = _actions(actions, self.num_envs, self.symbols)
        restarting = self._restarting
        if restarting.any():
            codes = codes.copy()
            codes[restarting] = 0
        with pythonic():
            self._env.step(codes)
        obs, rewards = self._obs.copy(), self._rewards.copy()
        terminated, truncated = self._terminated.copy(), self._truncated.copy()
        ended = self._final_mask.copy()
        obs[ended] = self._final_obs[ended]
        rewards[restarting] = 0.0
        terminated[restarting] = False
        truncated[restarting] = False
        self._restarting = ended
        # The ending step returns the ended episode's last observation, so its equity is the one it ended with.
        infos = {"equity": np.where(ended, self._final_equity, self._equity)}
        return obs, rewards, terminated, truncated, infos

    def close(self, **kwargs: Any) -> None:
        pass


class TradingEnv(gym.Env):
    """One trading env as a ``gymnasium.Env`` (a :class:`VectorEnv` of one env whose arrays are copied per
    step): for single-env tools, ``gymnasium.make("tradesim/Trading-v0")`` and
    ``gymnasium.utils.env_checker.check_env``. It does not autoreset: after an episode ends, call
    ``reset``. ``info["equity"]`` is the equity after the step, the ending step's the equity the episode
    ended with; that step's info also says ``episode_end`` (``"terminated"`` or ``"truncated"``). Keyword
    arguments are :class:`VectorEnv`'s.

    Over a universe (data of several symbols, a dict of frames, or ``symbols=``) an action is one code per
    symbol (``MultiDiscrete([3] * N)``), an observation ``N`` rows of ``feature_names``, ``info`` also
    holds the step's ``costs`` and its ``time``, and :meth:`history` gives the walk since the last reset
    as pandas frames indexed by time and by ``(time, symbol)``."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, data: Any = None, **kwargs: Any) -> None:
        for fixed in ("trials", "envs", "num_envs", "autoreset_mode", "arrays"):
            if fixed in kwargs:
                raise ConfigError(f"{fixed}: TradingEnv is one env on numpy arrays (use VectorEnv)")
        # Its own step loop reads the ended episode from same_step's infos (it does not autoreset).
        kwargs.update(trials=1, envs=1, autoreset_mode="same_step")
        self._vec = VectorEnv(data, **kwargs)
        self.feature_names = self._vec.feature_names
        self.observation_space = self._vec.single_observation_space
        self.action_space = self._vec.single_action_space
        self.render_mode = None
        self.symbols = self._vec.symbols
        if self.symbols is not None:
            self.times = self._vec.times
        # A universe's walk since the last reset: (time index, equity, reward, costs, units, weights) per row.
        self._walk: list[tuple[int, float, float, float, np.ndarray, np.ndarray]] = []

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        obs, info = self._vec.reset(seed=seed)
        if self.symbols is not None:
            v = self._vec
            self._walk = [(int(v._time[0]), float(v._equity[0]), float("nan"), 0.0, v._units[0].copy(),
                           v._obs[0, :, -2].copy())]
            return obs[0].copy(), {"equity": float(info["equity"][0]), "time": self.times[int(v._time[0])]}
        return obs[0].copy(), {"equity": float(info["equity"][0])}

    def step(self, action: Any):
        if self.symbols is not None:
            a = np.asarray(action)
            if a.shape != (len(self.symbols),):
                raise ConfigError(f"action: shape {a.shape}, expected ({len(self.symbols)},): one code per symbol")
            action = a
        obs, rewards, terminated, truncated, infos = self._vec.step(np.array([action]))
        ended = "final_obs" in infos
        last = infos["final_obs"][0] if ended else obs[0]
        info: dict[str, Any] = (
            {"equity": float(infos["final_info"]["equity"][0]),
             "episode_end": "terminated" if terminated[0] else "truncated"} if ended
            else {"equity": float(infos["equity"][0])}
        )
        if self.symbols is not None:
            v = self._vec
            t = int(v._final_time[0] if ended else v._time[0])
            units = (v._final_units if ended else v._units)[0].copy()
            self._walk.append((t, info["equity"], float(rewards[0]), float(v._costs[0]), units,
                               np.array(last[:, -2])))
            info.update(costs=float(v._costs[0]), time=self.times[t])
        return np.array(last, dtype=np.float32), float(rewards[0]), bool(terminated[0]), bool(truncated[0]), info

    def history(self) -> _universe.History:
        """A universe's walk since the last reset (:class:`tradesim._universe.History`): ``account`` (a
        DataFrame indexed by ``time``: ``equity``, ``reward``, ``costs``) and ``positions`` (indexed by
        ``(time, symbol)``: ``units``, ``side``, ``weight``)."""
        if self.symbols is None:
            raise ConfigError("history(): an env over a universe only (data of several symbols, or symbols=)")
        if not self._walk:
            raise ConfigError("history(): call reset() first")
        pd = _pandas()
        times = self.times[[w[0] for w in self._walk]]
        account = pd.DataFrame({"equity": [w[1] for w in self._walk], "reward": [w[2] for w in self._walk],
                                "costs": [w[3] for w in self._walk]}, index=times.rename("time"))
        positions = _universe.symbol_frame("time", times, self.symbols, np.stack([w[4] for w in self._walk]),
                                           np.stack([w[5] for w in self._walk]))
        return _universe.History(account, positions)
