"""What goes into the likelihood's covariance Sigma, per target and output.

p(z | x) = N(z; M(x), Sigma) with

    Sigma = Sigma_obs + Sigma_mm(x)  (+ tau^2 diag(s^2) when the observation sd is inferred)

* ``Sigma_obs``: the observation sds of an observed target (its ``sd_<output>``
  columns) on the diagonal; zero for a simulated target (the target *is* a simulator
  output, so it carries no measurement error).
* ``Sigma_mm``: the metamodel's error, i.e. the second moment of its held-out
  residuals S(x) - M(x) on the test split it never trained on (``test_residual_cov``
  in metamodel.json; a metamodel trained before that key existed falls back to a
  diagonal from ``test_mae``, sd = MAE sqrt(pi/2), exact for Gaussian residuals).  For
  a stochastic simulator those residuals are differences between *single runs* (rows
  made exactly as a target is made) and the metamodel, so they hold the replicate
  noise too: Sigma_mm = metamodel error + replicate noise, which is the right total
  for a target that is one run.  :func:`replicate_noise` reports the split when the
  design kept replicate spreads (``<output>_sd`` columns).
* The inferred scale: an observed target without ``sd_`` columns has unknown
  measurement noise; it gets tau * s_j (s_j the output's training sd) with a
  half-normal prior on tau of scale ``posterior.noise_scale``, sampled with x.

An :class:`ErrorModel` is the one interface the posterior reads, so an ensemble of
metamodels (whose spread at x is its own error estimate) plugs in by implementing
``mean`` and ``cov``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

log = logging.getLogger(__name__)


class ErrorModel(Protocol):
    """A metamodel prediction with its error: ``mean(X)`` (n, P) raw outputs and
    ``cov(X)`` either one (P, P) matrix for every x or (n, P, P)."""

    output_names: list[str]

    def mean(self, X: np.ndarray) -> np.ndarray: ...

    def cov(self, X: np.ndarray) -> np.ndarray: ...


class ResidualError:
    """A single metamodel with a constant error covariance from held-out residuals."""

    def __init__(self, mm: Any, cov: np.ndarray, source: str) -> None:
        self.mm = mm
        self.output_names = list(mm.output_names)
        self.input_names = list(mm.input_names)
        # the metamodel's output scale travels with its error model, which stands in
        # for it wherever a posterior is built (kappa's calibration included)
        self.y_std = np.asarray(mm.y_std, dtype=float)
        self._cov = np.asarray(cov, dtype=float)
        self.source = source

    @classmethod
    def from_metamodel(cls, mm: Any) -> ResidualError:
        """Held-out residual covariance from metamodel.json (or an ensemble's ``cov``)."""
        info: Mapping[str, Any] = getattr(mm, "info", {}) or {}
        P = len(mm.output_names)
        raw = info.get("test_residual_cov")
        if raw is not None and np.asarray(raw).shape == (P, P):
            cov = np.asarray(raw, dtype=float)
            source = "held-out residual covariance"
        else:
            mae = info.get("test_mae") or {}
            sd = np.array([float(mae.get(o, np.nan)) for o in mm.output_names]) * np.sqrt(
                np.pi / 2)
            if not np.isfinite(sd).all():
                # nothing recorded: 5 % of the output's training sd, said loudly
                sd = 0.05 * np.asarray(mm.y_std, dtype=float)
                source = "no held-out residuals recorded: 5% of the training sd (assumed)"
                log.warning("metamodel of %s records no held-out residuals; the posterior "
                            "assumes an error sd of 5%% of each output's training sd",
                            getattr(mm, "study", "?"))
            else:
                source = "held-out MAE (diagonal, Gaussian)"
            cov = np.diag(sd ** 2)
        return cls(mm, _psd(cov), source)

    def mean(self, X: np.ndarray) -> np.ndarray:
        return np.atleast_2d(np.asarray(self.mm.predict(X), dtype=float))

    def cov(self, X: np.ndarray) -> np.ndarray:  # noqa: ARG002 - constant in x
        return self._cov

    #: :meth:`with_residuals` applies (kappa's calibration cross-fits, :mod:`.scale`)
    refittable = True

    def with_residuals(self, resid: np.ndarray, pred: np.ndarray) -> ResidualError:  # noqa: ARG002
        """The same model with the covariance of ``resid`` (n, P), as training records
        it (``r^T r / n``): kappa's calibration cross-fits it (:mod:`.scale`)."""
        r = np.asarray(resid, dtype=float)
        return ResidualError(self.mm, _psd(r.T @ r / max(1, len(r))),
                             f"{self.source} (cross-fitted)")


def error_model(mm: Any, curve_errors: str | None = None) -> ErrorModel:
    """The error model of ``mm``: its own when it has one (an ensemble: ``mean`` and
    ``cov``), else :class:`ResidualError` from its held-out residuals; on a metamodel
    of curves (series bases in its info) those residuals projected on the bases plus
    the bases' truncation error (:mod:`.curves`; ``curve_errors``: its error model,
    default the first of :data:`~.curves.CURVE_ERRORS`)."""
    if hasattr(mm, "cov") and hasattr(mm, "mean") and hasattr(mm, "output_names"):
        return mm  # type: ignore[no-any-return]
    res = ResidualError.from_metamodel(mm)
    from simcalib.metamodel.curves import bases_of

    bases = bases_of(mm)
    if not bases:
        return res
    from simcalib.metamodel.posterior.curves import CURVE_ERRORS, design_curve_error

    return design_curve_error(mm, res._cov, res.source, bases,
                              curve_errors or CURVE_ERRORS[0])


def _psd(cov: np.ndarray, floor: float = 1e-12) -> np.ndarray:
    """Symmetric, positive definite: eigenvalues floored at ``floor`` x the largest."""
    c = 0.5 * (cov + cov.T)
    w, V = np.linalg.eigh(c)
    w = np.maximum(w, floor * max(float(w.max()), 1e-300))
    return (V * w) @ V.T


def replicate_noise(dataset: Any, outputs: list[str], replicates: int) -> np.ndarray | None:
    """Replicate noise variance of one design row per output (mean ``<output>_sd``^2 /
    replicates over the ok rows), or None when the design kept no spreads."""
    cols = [f"{o}_sd" for o in outputs]
    if dataset is None or not all(c in dataset.columns for c in cols) or replicates < 2:
        return None
    ok = dataset["status"] == "ok" if "status" in dataset else np.ones(len(dataset), bool)
    sd = dataset.loc[ok, cols].to_numpy(dtype=float)
    return np.nanmean(sd ** 2, axis=0) / replicates


def target_noise(sd: np.ndarray | None, weight: np.ndarray | None, P: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Per-target observation variance (P,) and output mask (P,) (a zero weight drops
    the output; a weight w scales its precision by w^2, as Delta's term w |.| / d)."""
    var = np.zeros(P) if sd is None else np.asarray(sd, dtype=float) ** 2
    w = np.ones(P) if weight is None else np.asarray(weight, dtype=float)
    return var, w
