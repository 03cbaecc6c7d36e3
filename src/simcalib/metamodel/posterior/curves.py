r"""The likelihood's error model on a study with series outputs (issue 42 item 3).

A curve of m points is not m independent scalars: on the stochastic epidemic the day
an outbreak takes off shifts the whole curve, so the emulator's error and the
run-to-run noise at day 40 and day 44 are nearly the same number.  Treating the
points as independent counts that one number m times and makes the posterior m times
too sure of itself along the inputs that move the curve.  The error model here is the
one the metamodel is built on (docs/strategies.md, "Posterior on curves"): a curve is
``mu + B w`` plus what the basis truncates, so its error is

    Sigma = A C_r(x) A^T + D

* ``A`` (P x R) maps the reduced outputs (the scalars, then every series' k basis
  weights) to the study's outputs (the scalars, then every point): identity on the
  scalars, the basis ``B = scale V`` on a series' points.
* ``C_r(x)`` (R x R): the emulator's error in the reduced space, with its
  correlations: for the design route the metamodel's held-out residual covariance
  projected on the basis (``Pi R Pi^T``, ``Pi`` the encoder), for ``sequential``'s
  posterior the refitted ensemble's spread plus its cross-fitted residual covariance,
  both on the basis weights.  On a stochastic simulator those residuals are single
  runs, so ``C_r`` holds the in-basis run-to-run noise as well.
* ``D`` (diagonal): the basis's held-out (cross-validated) reconstruction error per
  point squared: what the k components miss, on runs the basis never saw (on a
  stochastic simulator that includes the out-of-basis noise).  It is what keeps
  ``Sigma`` full rank: a P x P residual covariance from a few dozen held-out rows is
  rank-deficient (measured on the epidemic's 30-point case curve with 19 held-out
  rows: the truth's density was below every draw's at every kappa).
* The targets' observation sds (``sd_cases@7``) are added per point by the density
  (:mod:`.density`), independent between points, as measurement error is.

``independent`` keeps only the diagonal of the same ``Sigma`` (every error term per
point, no correlation between points): the baseline whose coverage
``benchmarks/coverage.py --curve`` measures against ``basis`` (the default).

``scaled`` is ``basis`` with an error that grows with the curve's level:
``Sigma(x) = G(x)^(1/2) Sigma_0 G(x)^(1/2)``, ``G`` each point's variance factor at the
predicted curve and ``Sigma_0`` the same terms from the held-out residuals divided by
theirs (:mod:`simcalib.metamodel.levelnoise`: why, and how the slope is fitted).  A
count's noise grows with the count; a constant ``Sigma`` is too wide for a small
outbreak and too narrow for a large one.

The 1/m per-point weights that make a curve count as one output in Delta are a device
of the misfit, not of the likelihood: here a point observed is in (weight 1 unless a
``weight_<series>@<t>`` column says otherwise), a point not observed is out (weight 0),
and the correlations decide how much m points are worth.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simcalib.errors import ConfigError, DataError
from simcalib.metamodel.basis import SeriesBasis
from simcalib.metamodel.curves import WEIGHT_SEP, series_groups
from simcalib.study.series import parse_column

#: the error models on a curve (module docstring); the first is the default
CURVE_ERRORS = ("basis", "independent", "scaled")


@dataclass(frozen=True)
class CurveLayout:
    """How the study's outputs (scalars, then points) relate to the reduced outputs
    (scalars, then each series' basis weights): ``full = offset + A @ reduced``,
    ``reduced = Pi @ (full - offset)`` (exact on the basis's span), the per-point
    truncation variance ``trunc_var`` (0 on scalars) and each output's scale."""

    outputs: tuple[str, ...]
    reduced: tuple[str, ...]
    A: np.ndarray           # (P, R)
    Pi: np.ndarray          # (R, P)
    offset: np.ndarray      # (P,)
    trunc_var: np.ndarray   # (P,)
    components: dict[str, int]

    @property
    def Q(self) -> np.ndarray:  # noqa: N802 (a projector)
        """(P, P): identity on the scalars, the orthogonal projector on each basis."""
        return self.A @ self.Pi


def layout(outputs: Sequence[str], bases: Mapping[str, SeriesBasis]) -> CurveLayout:
    """The layout of ``outputs`` under ``bases`` (one per series among the outputs); a
    DataError naming a series without a basis or a point its basis lacks."""
    outputs = list(outputs)
    scalars, groups = series_groups(outputs)
    missing = sorted(set(groups) - set(bases))
    if missing:
        raise DataError("series basis", f"no basis for series {missing}: the posterior on a "
                        "curve needs the basis the emulator was trained on")
    red = [outputs[j] for j in scalars]
    for name in groups:
        red += [f"{name}{WEIGHT_SEP}{i}" for i in range(bases[name].k)]
    P, R = len(outputs), len(red)
    A, Pi = np.zeros((P, R)), np.zeros((R, P))
    offset, trunc = np.zeros(P), np.zeros(P)
    for r, j in enumerate(scalars):
        A[j, r] = Pi[r, j] = 1.0
    col = len(scalars)
    for name, idx in groups.items():
        b = bases[name]
        pos = b.point_index([parse_column(outputs[j])[1] for j in idx])  # type: ignore[index]
        k = b.k
        A[np.ix_(idx, range(col, col + k))] = b.B[pos]
        Pi[np.ix_(range(col, col + k), idx)] = b.components[pos].T / b.scale
        offset[idx] = b.mean[pos]
        trunc[idx] = np.asarray(b.error["cv_point_rms"], dtype=float)[pos] ** 2
        col += k
    return CurveLayout(tuple(outputs), tuple(red), A, Pi, offset, trunc,
                       {n: bases[n].k for n in groups})


def check_mode(mode: str) -> str:
    if mode not in CURVE_ERRORS:
        raise ConfigError("curve_errors", f"must be one of {list(CURVE_ERRORS)}, got {mode!r}")
    return mode


class CurveError:
    """An :class:`~simcalib.metamodel.posterior.noise.ErrorModel` over the study's
    outputs (scalars and points) from an error model over the reduced outputs
    (``inner``: ``mean`` and ``cov`` of the scalars and basis weights).  ``full_mean``
    (optional) predicts the curves directly (the design metamodel, whose last layer
    already decodes); otherwise the inner mean is decoded."""

    def __init__(self, inner: Any, lay: CurveLayout, mode: str, source: str,
                 full_mean: Any = None, y_std: np.ndarray | None = None,
                 input_names: Sequence[str] | None = None,
                 level: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self.inner = inner
        self.layout = lay
        self.mode = check_mode(mode)
        if self.mode == "scaled" and level is None:
            raise DataError("metamodel", "curve_errors 'scaled' needs the level record of "
                            "the held-out residuals (level_noise in metamodel.json): "
                            "retrain the metamodel, or use curve_errors 'basis'")
        #: per series: the level slope (scaled mode; simcalib.metamodel.levelnoise)
        self.level = dict(level) if self.mode == "scaled" else None  # type: ignore[arg-type]
        self.output_names = list(lay.outputs)
        names = input_names if input_names is not None else getattr(inner, "input_names",
                                                                    None)
        if names is not None:
            self.input_names = list(names)
        self.info = dict(getattr(inner, "info", {}) or {})
        self.source = f"{source}; curves: {mode} error model (docs/strategies.md)"
        self._full_mean = full_mean
        self._last: tuple[np.ndarray, np.ndarray] | None = None
        self.y_std = (np.asarray(y_std, dtype=float) if y_std is not None
                      else self._scale_from_inner())

    def _scale_from_inner(self) -> np.ndarray:
        """Each output's scale: the scalars' from the inner model, a point's the
        series' basis scale (the column norm of A over its weights is not it)."""
        lay = self.layout
        out = np.ones(len(lay.outputs))
        inner_std = np.asarray(getattr(self.inner, "y_std", np.ones(len(lay.reduced))),
                               dtype=float)
        scalars, groups = series_groups(lay.outputs)
        for r, j in enumerate(scalars):
            out[j] = inner_std[r]
        for _name, idx in groups.items():
            # B = scale V with V orthonormal: the largest singular value of A's block
            block = lay.A[idx][:, np.abs(lay.A[idx]).sum(axis=0) > 0]
            out[idx] = np.linalg.norm(block, 2) if block.size else 1.0
        return out

    def mean(self, X: np.ndarray) -> np.ndarray:
        # the likelihood asks for the mean and (scaled: through the level) the
        # covariance of the same rows: the last call is kept, as EnsembleError does
        if self._last is not None and self._last[0] is X:
            return self._last[1]
        if self._full_mean is not None:
            out = np.atleast_2d(np.asarray(self._full_mean(X), dtype=float))
        else:
            out = self.layout.offset + self.inner.mean(X) @ self.layout.A.T
        self._last = (X, out)
        return out

    def predict(self, X: np.ndarray) -> np.ndarray:
        return self.mean(X)

    def _expand(self, C: np.ndarray) -> np.ndarray:
        A = self.layout.A
        S = A @ C @ A.T if C.ndim == 2 else np.einsum("pr,nrs,qs->npq", A, C, A)
        d = np.arange(len(A))
        S[..., d, d] += self.layout.trunc_var
        if self.mode == "independent":
            S = np.diagonal(S, axis1=-2, axis2=-1)[..., :, None] * np.eye(len(A))
        return S

    def cov(self, X: np.ndarray) -> np.ndarray:
        S = self._expand(np.asarray(self.inner.cov(X), dtype=float))
        if self.level is None:
            return S
        from simcalib.metamodel.levelnoise import factors

        g = np.sqrt(factors(self.mean(X), self.output_names, self.level))  # (n, P)
        return g[:, :, None] * S * g[:, None, :]

    @property
    def covariance_dim(self) -> int:
        """The dimension of the covariance estimated from residuals: the scalars and
        the basis weights (the truncation term is not re-estimated)."""
        return len(self.layout.reduced)

    @property
    def refittable(self) -> bool:
        """Whether :meth:`with_residuals` applies: the design model's constant reduced
        covariance, not an ensemble's spread."""
        return isinstance(self.inner, ConstantCov)

    def with_residuals(self, resid: np.ndarray, pred: np.ndarray) -> CurveError:
        """The design model (a constant reduced covariance) with its residual covariance
        from ``resid`` (n, P) at predictions ``pred``, as training records it (level-free
        for ``scaled``): kappa's calibration cross-fits it (:mod:`.scale`).  An
        ensemble's model (``sequential``) has no such covariance: a DataError."""
        if not self.refittable:
            raise DataError("curve error model", "only the design metamodel's constant "
                            "residual covariance can be re-estimated from residuals")
        r = np.asarray(resid, dtype=float)
        if self.level is not None:
            from simcalib.metamodel.levelnoise import level_free

            R = level_free(r, pred, self.output_names, self.level)
        else:
            R = r.T @ r / max(1, len(r))
        lay = self.layout
        return CurveError(ConstantCov(lay.Pi @ R @ lay.Pi.T), lay, self.mode,
                          "cross-fitted held-out residuals", full_mean=self._full_mean,
                          y_std=self.y_std, input_names=getattr(self, "input_names", None),
                          level=self.level)

    def spread_cov(self, X: np.ndarray) -> np.ndarray:
        """The inner ensemble's spread mapped to the outputs (no truncation term)."""
        C = np.asarray(self.inner.spread_cov(X), dtype=float)
        return np.einsum("pr,nrs,qs->npq", self.layout.A, C, self.layout.A)


class ConstantCov:
    """A constant reduced covariance (the design metamodel's projected residuals)."""

    def __init__(self, cov: np.ndarray) -> None:
        self._cov = np.asarray(cov, dtype=float)

    def cov(self, X: np.ndarray) -> np.ndarray:  # noqa: ARG002 - constant in x
        return self._cov


def design_curve_error(mm: Any, residual_cov: np.ndarray, source: str,
                       bases: Mapping[str, SeriesBasis], mode: str) -> CurveError:
    """The design metamodel's error model on curves: its held-out residual covariance
    R (P x P) projected on the bases, ``Pi R Pi^T``, plus the bases' held-out
    truncation error per point (module docstring); the mean is the metamodel's."""
    lay = layout(mm.output_names, bases)
    level = None
    if check_mode(mode) == "scaled":
        info = getattr(mm, "info", {}) or {}
        level = info.get("level_noise")
        free = info.get("test_residual_cov_level_free")
        if level is None or free is None:
            raise DataError("metamodel", "curve_errors 'scaled' needs level_noise and "
                            "test_residual_cov_level_free in metamodel.json (a metamodel "
                            "trained before they existed): retrain it, or use 'basis'")
        residual_cov = free
        source = f"{source} without its level (level_noise)"
    R = np.asarray(residual_cov, dtype=float)
    if R.shape != (len(lay.outputs),) * 2:
        raise DataError("metamodel", f"residual covariance of shape {R.shape} for "
                        f"{len(lay.outputs)} outputs")
    inner = ConstantCov(lay.Pi @ R @ lay.Pi.T)
    return CurveError(inner, lay, mode, source, full_mean=mm.predict,
                      y_std=np.asarray(mm.y_std, dtype=float), input_names=mm.input_names,
                      level=level)


def observed_points(z: np.ndarray, outputs: Sequence[str]) -> np.ndarray:
    """(P,) bool: the outputs a target observes: every scalar, a series point where its
    value is finite (a long observations file leaves the others empty)."""
    is_point = np.array([parse_column(o) is not None for o in outputs], dtype=bool)
    return ~is_point | np.isfinite(np.asarray(z, dtype=float))


def curve_terms(model: CurveError) -> dict[str, Any]:
    """What posterior.json says of a curve's error model: the model, each series'
    components and its truncation sd (RMS over its points)."""
    lay = model.layout
    _, groups = series_groups(lay.outputs)
    out: dict[str, Any] = {
        "error_model": model.mode,
        "series": {n: {"points": len(idx), "components": lay.components[n],
                       "truncation_sd_rms": float(np.sqrt(np.mean(lay.trunc_var[idx])))}
                   for n, idx in groups.items()}}
    if model.level is not None:   # the scaled model: each series' level slope
        for n, rec in model.level.items():
            if n in out["series"]:
                out["series"][n]["level_noise"] = dict(rec)
    return out
