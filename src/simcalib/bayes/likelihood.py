"""Observed data and the likelihood pieces the sampler needs for one (setting, method).

Kept apart from the sampler so that data handling (masks, the log scale of positive
settings, validation of a data set against its model) can change without touching the
MCMC algorithm.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simcalib.bayes.kernels import ObsLayout
from simcalib.bayes.models import Setting
from simcalib.errors import ConfigError, DataError


@dataclass
class ObsData:
    """Observations ``y[time, output]`` (NaN = missing) at times ``t``."""

    t: np.ndarray
    y: np.ndarray
    outputs: list[str]


class Likelihood:
    """A setting, its data and a method (``koh`` or ``mos``): likelihood pieces."""

    def __init__(self, setting: Setting, data: ObsData, method: str, source: str = "data") -> None:
        if method not in ("koh", "mos"):
            raise ConfigError("method", f"{method!r} is not one of ['koh', 'mos']")
        self.setting, self.data, self.method = setting, data, method
        t = np.asarray(data.t, dtype=np.float64)
        if t.ndim != 1 or np.any(np.diff(t) <= 0) or t[0] < setting.model.t0:
            raise DataError(source, f"times must be strictly increasing and >= {setting.model.t0}")
        unknown = [o for o in data.outputs if o not in setting.model.state_names]
        if unknown:
            raise DataError(source, f"outputs {unknown} are not states of {setting.name}: "
                            f"{setting.model.state_names}")
        y = np.asarray(data.y, dtype=np.float64)
        if y.shape != (len(t), len(data.outputs)):
            raise DataError(source,
                            f"y has shape {y.shape}, expected {(len(t), len(data.outputs))}")
        mask = np.isfinite(y)
        if mask.sum() < 3:
            raise DataError(source, "fewer than 3 finite observations")
        # output-major stacking of the observed entries (missing ones masked out)
        oi, ti = np.nonzero(mask.T)
        self.t = t
        self.mask = mask
        self.ti, self.oi = ti, oi
        self.si = np.array([setting.model.state_names.index(data.outputs[o]) for o in oi])
        self.y = y[ti, oi]
        self.m = self.y.size
        self.layout = ObsLayout.build(t[ti], oi)
        self.lower, self.upper = setting.lower, setting.upper
        self.p = setting.model.n_param

    def forward(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Observed model output ``f`` (m,) and sensitivities ``J`` (m, p), or None."""
        sol = self.setting.model.solve(theta, self.t)
        if sol is None:
            return None
        return sol.z[self.ti, self.si], sol.s[self.ti, self.si, :]

    def in_bounds(self, theta: np.ndarray) -> bool:
        return bool(np.all(theta >= self.lower) and np.all(theta <= self.upper))

    def log_prior_hyper(self, lg: float, ll: float) -> float:
        (mg, sg), (ml, sl) = self.setting.gamma_prior, self.setting.ell_prior
        return -0.5 * ((lg - mg) / sg) ** 2 - 0.5 * ((ll - ml) / sl) ** 2
