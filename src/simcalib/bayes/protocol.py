"""Sampling protocols: what the chains may know about the truth.

* ``honest`` (default): chains start from a multi-start least-squares fit and the
  discrepancy hyperparameters get the setting's log-normal priors, the same
  distributions that generated the data.  Nothing about the true values is used.
* ``reference``: what the paper's public code does, to test whether its smaller RMSE
  comes from oracle information: chains start at the true theta*, gamma*, ell* (and
  sigma^2 at the true noise variance), and gamma, ell get **flat** priors on the box
  ``[(1 - f) v*, (1 + f) v*]`` around their true values ``v*`` (``f`` =
  ``reference_box``, 0.5 for the public code's +-50%).  It needs the data set's truth
  (``truth.json``) and is only meaningful on simulated data.

Every table built from a run names its protocol.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from simcalib.errors import ConfigError

PROTOCOLS = ("honest", "reference")


@dataclass
class HyperPrior:
    """Prior of ``(log gamma, log ell)``: independent normals (honest) or flat on the raw
    scale inside a box (reference; on the log scale the density is ``gamma * ell``)."""

    gamma_prior: tuple[float, float]
    ell_prior: tuple[float, float]
    box: tuple[tuple[float, float], tuple[float, float]] | None = None  # log-scale bounds

    def log_density(self, lg: Any, ll: Any) -> Any:
        lg, ll = np.asarray(lg, dtype=np.float64), np.asarray(ll, dtype=np.float64)
        if self.box is None:
            (mg, sg), (ml, sl) = self.gamma_prior, self.ell_prior
            return -0.5 * ((lg - mg) / sg) ** 2 - 0.5 * ((ll - ml) / sl) ** 2
        (g0, g1), (l0, l1) = self.box
        inside = (lg >= g0) & (lg <= g1) & (ll >= l0) & (ll <= l1)
        return np.where(inside, lg + ll, -np.inf)

    def grad(self, lg: Any, ll: Any) -> np.ndarray:
        """Gradient of :meth:`log_density` in ``(log gamma, log ell)``, shape (..., 2)
        (inside the box for the reference protocol: both 1)."""
        lg, ll = np.asarray(lg, dtype=np.float64), np.asarray(ll, dtype=np.float64)
        if self.box is None:
            (mg, sg), (ml, sl) = self.gamma_prior, self.ell_prior
            return np.stack([-(lg - mg) / np.square(sg), -(ll - ml) / np.square(sl)], axis=-1)
        return np.ones((*np.broadcast(lg, ll).shape, 2))

    @classmethod
    def for_lanes(cls, hypers: list[HyperPrior], group: np.ndarray) -> HyperPrior:
        """The priors of several runs as one prior with per-lane arrays (lane l belongs
        to run ``group[l]``): :meth:`log_density` then evaluates every lane at once
        with its own run's values.  The runs must all be boxed or all not (they share
        a protocol)."""
        boxed = {h.box is not None for h in hypers}
        if len(boxed) != 1:
            raise ValueError("runs sharing a batch must share the protocol")

        def col(values: list[Any]) -> np.ndarray:
            return np.asarray(values, dtype=np.float64)[group]

        gp = np.array([h.gamma_prior for h in hypers], dtype=np.float64)
        ep = np.array([h.ell_prior for h in hypers], dtype=np.float64)
        box = None
        if boxed == {True}:
            b = np.array([h.box for h in hypers], dtype=np.float64)       # (runs, 2, 2)
            box = ((col(b[:, 0, 0]), col(b[:, 0, 1])), (col(b[:, 1, 0]), col(b[:, 1, 1])))
        return cls((col(gp[:, 0]), col(gp[:, 1])), (col(ep[:, 0]), col(ep[:, 1])), box)

    def start(self) -> np.ndarray:
        """Where chains start the hyperparameters: prior medians (honest)."""
        return np.array([self.gamma_prior[0], self.ell_prior[0]], dtype=np.float64)


def hyper_prior(setting: Any, protocol: str, truth: Mapping[str, Any] | None,
                box: float = 0.5) -> HyperPrior:
    if protocol not in PROTOCOLS:
        raise ConfigError("bayes.sampler.protocol", f"{protocol!r} is not one of {PROTOCOLS}")
    hp = HyperPrior(tuple(setting.gamma_prior), tuple(setting.ell_prior))
    if protocol == "honest":
        return hp
    g, ell = _truth_hyper(truth)
    if not 0 < box < 1:
        raise ConfigError("bayes.sampler.reference_box", f"must be in (0, 1), got {box}")
    hp.box = ((math.log((1 - box) * g), math.log((1 + box) * g)),
              (math.log((1 - box) * ell), math.log((1 + box) * ell)))
    return hp


def _truth_hyper(truth: Mapping[str, Any] | None) -> tuple[float, float]:
    if truth is None:
        raise ConfigError("bayes.sampler.protocol",
                          "'reference' starts at the truth and needs the data's truth "
                          "(truth.json: theta, gamma, ell); real data has none, use 'honest'")
    try:
        g, ell = float(truth["gamma"]), float(truth["ell"])
    except (KeyError, TypeError, ValueError):
        raise ConfigError("bayes.sampler.protocol",
                          "the truth needs numeric 'gamma' and 'ell' for 'reference'") from None
    if not (g > 0 and ell > 0):
        raise ConfigError("bayes.sampler.protocol", "true gamma and ell must be positive")
    return g, ell


def reference_start(setting: Any, truth: Mapping[str, Any] | None) -> dict[str, Any]:
    """The start of every chain under ``reference``: theta*, log gamma*, log ell* and the
    true noise variance (an ``init`` dict like the least-squares start's)."""
    g, ell = _truth_hyper(truth)
    assert truth is not None
    th = truth.get("theta")
    if not isinstance(th, Mapping) or any(p not in th for p in setting.params):
        raise ConfigError("bayes.sampler.protocol",
                          f"the truth needs theta values for {setting.params}")
    theta = np.array([float(th[p]) for p in setting.params])
    span = setting.upper - setting.lower
    theta = np.clip(theta, setting.lower + 1e-6 * span, setting.upper - 1e-6 * span)
    s2 = float(truth.get("noise_variance", setting.noise_variance))
    return {"theta": theta, "hyper": np.array([math.log(g), math.log(ell)]),
            "sigma2": s2, "cost": float("nan"), "costs": [], "protocol": "reference"}
