"""Convergence checks of a chain set: rank-normalised R-hat and bulk ESS (ArviZ).

Thresholds default to Vehtari et al. (2021), as ``bayes.convergence`` in the schema
sets them (R-hat and bulk ESS over all chains, for every physical parameter, gamma,
ell and sigma^2).  Used by
``sampler.until_converged`` to decide whether to extend the chains, and recorded
with every run (``converged``, ``r_hat_max``, ``ess_bulk_min``, ``stop_reason``) so
summaries and tables can show it.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from simcalib.config import schema_defaults
from simcalib.errors import ConfigError

#: Vehtari et al. (2021): the thresholds every run is judged by unless ``bayes.convergence``
#: or ``sampler.until_converged`` set others; read from bayes.schema.yaml, their one source
_DEFAULTS: dict[str, Any] = schema_defaults("bayes.schema.yaml")["convergence"]
R_HAT_MAX = float(_DEFAULTS["r_hat"])
ESS_BULK_MIN = float(_DEFAULTS["ess_bulk"])


@dataclass(frozen=True)
class Convergence:
    """``bayes.convergence``: the thresholds a chain set must meet to be called
    converged (rank-normalised R-hat and bulk ESS)."""

    r_hat: float = R_HAT_MAX
    ess_bulk: float = ESS_BULK_MIN

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> Convergence:
        """From the validated section (hand-written params may leave keys out: the
        schema's defaults)."""
        merged = {**_DEFAULTS, **(d or {})}
        return cls(float(merged["r_hat"]), float(merged["ess_bulk"]))


_UNTIL_KEYS = ("max_iterations", "block", "r_hat", "ess_bulk", "minor_modes")


@dataclass(frozen=True)
class UntilConverged:
    """``sampler.until_converged``: extend in blocks of ``block`` iterations (default:
    the configured ``iterations``) until converged or ``max_iterations`` in all."""

    max_iterations: int
    block: int | None = None
    r_hat: float = R_HAT_MAX
    ess_bulk: float = ESS_BULK_MIN
    #: also extend while a minor mode of theta or a hyperparameter is poorly explored
    #: (simcalib.bayes.modes; the same variables the posterior summary judges)
    minor_modes: bool = True

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None, iterations: int,
                  key: str = "bayes.sampler.until_converged") -> UntilConverged | None:
        if d is None or d is False:
            return None
        if not isinstance(d, Mapping):
            raise ConfigError(key, "must be a mapping with max_iterations (or null)")
        extra = sorted(set(d) - set(_UNTIL_KEYS))
        if extra:
            raise ConfigError(f"{key}.{extra[0]}", f"unknown key; allowed: {sorted(_UNTIL_KEYS)}")
        if "max_iterations" not in d:
            raise ConfigError(f"{key}.max_iterations", "required")
        uc = cls(**d)
        if uc.max_iterations < iterations:
            raise ConfigError(f"{key}.max_iterations",
                              f"must be >= sampler.iterations ({iterations})")
        if uc.block is not None and uc.block < 1:
            raise ConfigError(f"{key}.block", "must be >= 1")
        if uc.r_hat <= 1.0 or uc.ess_bulk <= 0:
            raise ConfigError(key, "need r_hat > 1 and ess_bulk > 0")
        return uc


def stable(x: float, digits: int = 8) -> float:
    """``x`` rounded to ``digits`` significant digits.  ArviZ's R-hat and ESS go through
    FFTs and SIMD reductions whose last bits depend on memory alignment, so the same
    draws gave ESS 2.935508509539191 in one run and ...192 in the next: rounded, the
    same posterior always writes the same bytes."""
    return float(f"{x:.{digits}g}") if np.isfinite(x) else float(x)


def diagnose(draws: Mapping[str, np.ndarray]) -> tuple[float, float]:
    """``(max R-hat, min bulk ESS)`` over every scalar of ``draws`` (each array
    (chains, draws) or (chains, draws, k)).  R-hat is NaN with one chain."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import arviz as az

        ds = az.convert_to_dataset({k: np.asarray(v) for k, v in draws.items()})
        rhat = az.rhat(ds)
        ess = az.ess(ds, method="bulk")
    r = max(float(np.nanmax(rhat[k].values)) if np.any(np.isfinite(rhat[k].values))
            else float("nan") for k in draws)
    e = min(float(np.nanmin(ess[k].values)) for k in draws)
    return stable(r), stable(e)


def is_converged(r_hat: float, ess: float, r_max: float = R_HAT_MAX,
                 ess_min: float = ESS_BULK_MIN) -> bool:
    return bool(np.isfinite(r_hat) and r_hat <= r_max and ess >= ess_min)
