"""Observed data and the likelihood pieces the sampler needs for one (setting, method).

Kept apart from the sampler so that data handling (masks, the log scale of positive
settings, validation of a data set against its model) can change without touching the
MCMC algorithm.
"""

from __future__ import annotations

import logging

import numpy as np

from simcalib.bayes.data import ObsData, check_scale
from simcalib.bayes.kernels import ObsLayout
from simcalib.bayes.models import Setting
from simcalib.errors import ConfigError, DataError

log = logging.getLogger(__name__)


def _check_values(y: np.ndarray, mask: np.ndarray, outputs: list[str], setting: Setting,
                  source: str) -> None:
    """Observations the modelled scale can take: > 0 for a ``positive`` setting (log
    scale), and of a magnitude whose squares stay finite (1e300 counts are refused on
    the linear scale, fine on the log scale)."""
    if setting.positive:
        bad = mask & (y <= 0)
        if bad.any():
            cols = sorted({outputs[j] for j in np.nonzero(bad)[1]})
            raise DataError(source, f"{int(bad.sum())} observation(s) <= 0 in {cols}, but "
                            f"setting {setting.name!r} is 'positive' (log scale): leave "
                            "them empty (missing) or turn 'positive' off")
        return
    check_scale(y, outputs, source, f"rescale the column (other units) or model it on the "
                f"log scale (bayes.setting_options.{setting.name}.positive: true)")


class Likelihood:
    """A setting, its data and a method (``koh`` or ``mos``): likelihood pieces."""

    def __init__(self, setting: Setting, data: ObsData, method: str, source: str = "data") -> None:
        if method not in ("koh", "mos"):
            raise ConfigError("method", f"{method!r} is not one of ['koh', 'mos']")
        if not setting.priors_given:
            # a Setting built by hand keeps the paper's unit-scale priors (as before);
            # a data setting should have had them scaled to its data first
            if setting.data is not None:
                log.warning("%s: hyperpriors not given and not derived from the data: using "
                            "the unit-scale defaults (see simcalib.bayes.hyperpriors)",
                            setting.name)
            setting = setting.with_unit_priors()
        self.setting, self.data, self.method = setting, data, method
        t = np.asarray(data.t, dtype=np.float64)
        if t.ndim != 1 or np.any(np.diff(t) <= 0):
            raise DataError(source, "times must be strictly increasing")
        if t[0] < setting.model.t0:
            raise DataError(source, f"first time {t[0]:g} is before the model's initial time "
                            f"t0 = {setting.model.t0:g}; set t0 (setting option or ODEModel) "
                            "at or before the first observation")
        unknown = [o for o in data.outputs if o not in setting.model.state_names]
        if unknown:
            raise DataError(source, f"outputs {unknown} are not states of {setting.name}: "
                            f"{setting.model.state_names}")
        y = np.asarray(data.y, dtype=np.float64)
        if y.shape != (len(t), len(data.outputs)):
            raise DataError(source,
                            f"y has shape {y.shape}, expected {(len(t), len(data.outputs))}")
        mask = np.isfinite(y)
        self.positive = bool(setting.positive)
        _check_values(y, mask, data.outputs, setting, source)
        if mask.sum() < 3:
            raise DataError(source, "fewer than 3 finite observations")
        # output-major stacking of the observed entries (missing ones masked out)
        oi, ti = np.nonzero(mask.T)
        self.t = t
        self.mask = mask
        self.ti, self.oi = ti, oi
        self.si = np.array([setting.model.state_names.index(data.outputs[o]) for o in oi])
        # the modelled scale: log y for positive settings (multiplicative error)
        self.y = np.log(y[ti, oi]) if self.positive else y[ti, oi]
        self.m = self.y.size
        self.layout = ObsLayout.build(t[ti], oi)
        self.lower, self.upper = setting.lower, setting.upper
        self.p = setting.model.n_param

    def forward(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Observed model output ``f`` (m,) and sensitivities ``J`` (m, p) on the modelled
        scale (``log z`` and ``S / z`` for positive settings), or None."""
        sol = self.setting.model.solve(theta, self.t)
        if sol is None:
            return None
        f, jac, ok = self.modelled(sol.z[None, self.ti, self.si], sol.s[None, self.ti, self.si, :],
                                   np.ones(1, dtype=bool))
        return (f[0], jac[0]) if ok[0] else None

    def modelled(self, f: np.ndarray, jac: np.ndarray | None, ok: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        """Observed states ``f`` (lanes, m) and sensitivities ``jac`` (lanes, m, p) on the
        modelled scale: for a ``positive`` setting ``log z`` and ``S / z`` (a lane with a
        non-positive output is not ok), otherwise unchanged.  The one place the data's
        scale meets the model's, for the sequential and the vectorized engine alike."""
        if not self.positive:
            return f, jac, ok
        ok = ok & np.all(f > 0, axis=1)
        safe = np.where(ok[:, None], f, 1.0)
        if jac is not None:
            jac = jac / safe[:, :, None]
        return np.log(safe), jac, ok

    def in_bounds(self, theta: np.ndarray) -> bool:
        return bool(np.all(theta >= self.lower) and np.all(theta <= self.upper))

    def observed_matrix(self, values: np.ndarray) -> np.ndarray:
        """Stacked entries (m,) back to a (time, output) matrix with NaN where missing."""
        out = np.full(self.mask.shape, np.nan)
        out[self.ti, self.oi] = values
        return out

    def log_prior_hyper(self, lg: float, ll: float) -> float:
        (mg, sg), (ml, sl) = self.setting.gamma_prior, self.setting.ell_prior
        return -0.5 * ((lg - mg) / sg) ** 2 - 0.5 * ((ll - ml) / sl) ** 2
