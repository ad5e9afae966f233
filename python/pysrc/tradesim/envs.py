"""tradesim's trading env in Gymnasium's APIs: :class:`VectorEnv` (``gymnasium.vector.VectorEnv``, the fast
path) and :class:`TradingEnv` (one env as a ``gymnasium.Env``). Needs ``gymnasium``."""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

import gymnasium as gym
import numpy as np

from . import Number, _decimal, _native, embedded, load

__all__ = ["VectorEnv", "TradingEnv"]

_ARRAYS = ("numpy", "dlpack", "torch")


def _per_trial(name: str, value: Union[Number, Sequence[Number]], trials: int) -> list[Any]:
    """One money value for every trial, or one per trial (a sequence of ``trials`` values)."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        return [_decimal(name, value)]  # type: ignore[arg-type]
    values = list(value)  # type: ignore[arg-type]
    if len(values) != trials:
        raise ValueError(f"{name}: {len(values)} values for {trials} trials (give one, or one per trial)")
    return [_decimal(f"{name}[{i}]", v) for i, v in enumerate(values)]


def _on_device(actions: Any) -> bool:
    """Whether ``actions`` is a DLPack array outside host memory (a CUDA tensor)."""
    device = getattr(actions, "__dlpack_device__", None)
    return device is not None and not isinstance(actions, np.ndarray) and device()[0] != 1


def _actions(actions: Any, n: int) -> np.ndarray:
    a = np.asarray(actions)
    if a.shape != (n,):
        raise ValueError(f"actions: shape {a.shape} for {n} envs")
    if a.dtype != np.uint8:
        if not np.issubdtype(a.dtype, np.integer):
            raise TypeError(f"actions: integer codes 0 (flat), 1 (long), 2 (short), got dtype {a.dtype}")
        if a.size and (a.min() < 0 or a.max() > 2):
            raise ValueError("actions: codes are 0 (flat), 1 (long) or 2 (short)")
        a = a.astype(np.uint8)
    return np.ascontiguousarray(a)


class VectorEnv(gym.vector.VectorEnv):
    """``trials`` x ``envs`` trading envs stepped together, in Gymnasium's vector API
    (``gymnasium.vector.VectorEnv``; autoreset in the same step).

    Observations are the bar's features and the portfolio's three floats (``obs_dim``), actions 0 (flat),
    1 (long), 2 (short). An episode is ``episode_len`` bars from a seeded start bar; it is truncated at its
    end and terminated by the circuit breaker. ``step`` returns numpy arrays that are views of the env's own
    buffers, overwritten in place by the next ``step``/``reset`` (copy what you keep); the ended episodes'
    last observations are in ``infos["final_obs"]`` where ``infos["_final_obs"]``. ``infos["equity"]`` is each
    env's equity. Money parameters are exact decimals, as in :func:`backtest`.
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
        capital: Number = "100000",
        spread: Number = "0.0002",
        commission: Number = "0.0001",
        allow_short: bool = True,
        whole_units: bool = False,
        device: str = "auto",
        arrays: str = "numpy",
    ) -> None:
        if arrays not in _ARRAYS:
            raise ValueError(f"arrays: one of {', '.join(_ARRAYS)}, got {arrays!r}")
        bars = embedded() if data is None else load(data)
        trials = int(trials)
        self._env = _native.VectorEnv(
            bars, symbol, trials, int(envs), int(episode_len), int(seed),
            _per_trial("capital", capital, trials), _per_trial("spread", spread, trials),
            _per_trial("commission", commission, trials),
            bool(allow_short), bool(whole_units), device, arrays == "numpy",
        )
        self.arrays = arrays
        self.num_envs = self._env.num_envs
        self.device = self._env.device
        self.metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}
        self.render_mode = None
        d = self._env.obs_dim
        self.single_observation_space = gym.spaces.Box(-np.inf, np.inf, (d,), np.float32)
        self.single_action_space = gym.spaces.Discrete(3)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, self.num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, self.num_envs)
        if arrays == "numpy":
            buffers = self._env.buffers()
        else:
            buffers = self._env.dlpack_buffers()
            if arrays == "torch":
                import torch

                buffers = tuple(torch.from_dlpack(b) for b in buffers)
        (self._obs, self._rewards, self._terminated, self._truncated, self._final_obs, self._final_mask,
         self._equity) = buffers

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        if seed is not None and not isinstance(seed, (int, np.integer)):
            raise TypeError("reset: seed is one integer for all envs")
        super().reset(seed=seed)
        self._env.reset(None if seed is None else int(seed))
        return self._obs, {"equity": self._equity}

    def step(self, actions: Any):
        self._env.step(actions if _on_device(actions) else _actions(actions, self.num_envs))
        infos: dict[str, Any] = {"equity": self._equity}
        if self.arrays != "numpy" or self._final_mask.any():
            infos["final_obs"] = self._final_obs
            infos["_final_obs"] = self._final_mask
        return self._obs, self._rewards, self._terminated, self._truncated, infos

    def close(self, **kwargs: Any) -> None:
        pass


class TradingEnv(gym.Env):
    """One trading env as a ``gymnasium.Env`` (a :class:`VectorEnv` of one env whose arrays are copied per
    step): for single-env tools and ``gymnasium.utils.env_checker.check_env``."""

    def __init__(self, data: Any = None, **kwargs: Any) -> None:
        kwargs.update(trials=1, envs=1)
        self._vec = VectorEnv(data, **kwargs)
        self.observation_space = self._vec.single_observation_space
        self.action_space = self._vec.single_action_space
        self.metadata: dict[str, Any] = {}
        self.render_mode = None

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        obs, info = self._vec.reset(seed=seed)
        return obs[0].copy(), {"equity": float(info["equity"][0])}

    def step(self, action: Any):
        obs, rewards, terminated, truncated, infos = self._vec.step(np.array([action]))
        # One env does not autoreset: an ended episode returns its last observation (call reset next).
        last = infos["final_obs"][0] if "final_obs" in infos else obs[0]
        info = {"equity": float(infos["equity"][0])}
        return last.copy(), float(rewards[0]), bool(terminated[0]), bool(truncated[0]), info
