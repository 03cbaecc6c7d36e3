r"""A per-series basis learned from the runs (issue 42 item 2): the metamodel predicts a
handful of weights instead of every point of a curve.

Given the runs' curves Y (n runs x T points), with per-point mean mu_t and one scale
sigma per series (the root mean of the per-point variances)::

    Y = mu + sigma * W V^T + E,       V (T x k) the top-k right singular vectors of
                                      (Y - mu) / sigma,  W = ((Y - mu) / sigma) V

so a curve is ``decode(w) = mu + B w`` with ``B = sigma V`` and ``encode`` is the
orthogonal projection.  k is the smallest number of components whose explained variance
reaches ``variance`` (default 0.999), capped by ``max_components`` and by the rank
(at most n - 1).

Why one scale per series, not one per point: the misfit the MILP minimises is an
absolute deviation per point (divided by the observation's sd, or by this same series
scale where no sd is given), so the basis should be the best rank-k fit in those units;
per-point standardisation would blow up the flat tails of an epidemic curve (days on
which every run has ~0 cases) to unit variance and spend components on their noise.
This is how Higdon et al. (2008) and SEPIA standardise functional outputs.

Recorded with the basis (the trust flags and the posterior read them): the explained
variance of every component, the in-sample residual sd per point (what truncation
loses on the runs it was fitted to; exactly the discarded singular values: sum of
squares = sigma^2 sum_{i>k} s_i^2) and the same residual out of sample, by K-fold
cross-validation (the basis refitted without each fold): with fewer runs than points
the in-sample error is optimistic, the cross-validated one is not.

Fewer runs than points (the 64-run / 100-point case of issue 42's benchmark) is
allowed, not an error: a rank-k basis needs k + 1 runs, not T, and the
cross-validated error shows when the runs are too few.  Fewer than ``min_runs``
(default 8) runs, a curve that is the same in every run, a NaN point or curves of
different lengths are :class:`DataError` s naming the series.

Serialised as JSON beside the metamodel (``<metamodel>.basis.json``: one entry per
series) by :meth:`SeriesBasis.to_json` / :func:`load_bases`; floats round-trip exactly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from simcalib.errors import DataError
from simcalib.io import read_json, write_json

FORMAT = "simcalib-series-basis-1"
DEFAULT_VARIANCE = 0.999
DEFAULT_MIN_RUNS = 8
DEFAULT_FOLDS = 5


@dataclass
class SeriesBasis:
    """One series' basis: ``decode(w) = mean + w @ B.T`` with ``B = scale *
    components``.  ``error`` holds the reconstruction errors (see the module
    docstring)."""

    name: str
    points: np.ndarray          # (T,) the index values the basis is defined on
    mean: np.ndarray            # (T,)
    scale: float                # sigma: one standardisation scale for the series
    components: np.ndarray      # (T, k) orthonormal columns
    explained: np.ndarray       # (r,) explained-variance ratio of every component found
    variance: float             # the threshold k was chosen by
    n_runs: int
    weight_sd: np.ndarray       # (k,) sd of each weight over the runs
    error: dict[str, Any] = field(default_factory=dict)

    @property
    def k(self) -> int:
        return int(self.components.shape[1])

    @property
    def B(self) -> np.ndarray:  # noqa: N802 (the paper's name)
        """(T, k): curve = mean + B @ w."""
        return self.scale * self.components

    def encode(self, curves: np.ndarray) -> np.ndarray:
        """(n, T) curves -> (n, k) weights (the orthogonal projection)."""
        y = self._check(curves)
        return ((y - self.mean) / self.scale) @ self.components

    def decode(self, weights: np.ndarray) -> np.ndarray:
        """(n, k) weights -> (n, T) curves."""
        w = np.atleast_2d(np.asarray(weights, dtype=float))
        if w.shape[1] != self.k:
            raise DataError(f"series {self.name!r}", f"{w.shape[1]} weights given, the basis "
                            f"has {self.k} components")
        return self.mean + w @ self.B.T

    def point_index(self, points: Sequence[float] | np.ndarray) -> np.ndarray:
        """Positions of ``points`` among the basis's points (a target observing a
        subset); a DataError naming the missing ones."""
        pts = np.asarray(points, dtype=float)
        pos = np.searchsorted(self.points, pts)
        ok = (pos < len(self.points)) & (self.points[np.minimum(pos, len(self.points) - 1)]
                                         == pts)
        if not ok.all():
            raise DataError(f"series {self.name!r}", f"point(s) {pts[~ok].tolist()[:8]} are "
                            "not among the basis's points")
        return pos

    def error_at(self, points: Sequence[float] | np.ndarray | None = None,
                 cv: bool = True) -> float:
        """RMS reconstruction error over ``points`` (default all) in curve units:
        cross-validated (``cv``) or in sample."""
        sd = np.asarray(self.error["cv_point_rms" if cv else "point_rms"], dtype=float)
        idx = slice(None) if points is None else self.point_index(points)
        return float(np.sqrt(np.mean(sd[idx] ** 2)))

    def _check(self, curves: np.ndarray) -> np.ndarray:
        y = np.atleast_2d(np.asarray(curves, dtype=float))
        if y.shape[1] != len(self.points):
            raise DataError(f"series {self.name!r}", f"curves of {y.shape[1]} points, the "
                            f"basis has {len(self.points)}")
        return y

    # ---- JSON --------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "points": self.points.tolist(), "mean": self.mean.tolist(),
                "scale": float(self.scale), "components": self.components.tolist(),
                "explained": self.explained.tolist(), "variance": float(self.variance),
                "n_runs": int(self.n_runs), "weight_sd": self.weight_sd.tolist(),
                "error": {k: (np.asarray(v).tolist() if isinstance(v, np.ndarray) else v)
                          for k, v in self.error.items()}}

    @classmethod
    def from_json(cls, d: Mapping[str, Any], source: str = "basis") -> SeriesBasis:
        try:
            pts = np.asarray(d["points"], dtype=float)
            comp = np.asarray(d["components"], dtype=float).reshape(len(pts), -1)
            b = cls(name=str(d["name"]), points=pts, mean=np.asarray(d["mean"], dtype=float),
                    scale=float(d["scale"]), components=comp,
                    explained=np.asarray(d["explained"], dtype=float),
                    variance=float(d["variance"]), n_runs=int(d["n_runs"]),
                    weight_sd=np.asarray(d["weight_sd"], dtype=float),
                    error=dict(d.get("error") or {}))
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(source, f"not a series basis ({type(exc).__name__}: {exc})") from None
        if b.mean.shape != pts.shape or b.weight_sd.shape != (b.k,) or not b.scale > 0:
            raise DataError(source, f"series {b.name!r}: inconsistent shapes or scale")
        return b


def save_bases(bases: Mapping[str, SeriesBasis], path: str | Path) -> None:
    """Write every series' basis to one JSON file (atomically)."""
    write_json({"format": FORMAT, "series": {k: b.to_json() for k, b in bases.items()}}, path)


def load_bases(path: str | Path) -> dict[str, SeriesBasis]:
    d = read_json(path)
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise DataError(str(path), f"not a series-basis file (format {FORMAT!r} expected)")
    return {k: SeriesBasis.from_json(v, f"{path}: series {k!r}") for k, v in d["series"].items()}


# ----------------------------------------------------------------------------- fitting
def _svd(y: np.ndarray) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
    """mean, scale, singular values, right singular vectors (T x r) of the runs."""
    mean = y.mean(axis=0)
    scale = float(np.sqrt(np.mean(y.var(axis=0, ddof=1))))
    if not scale > 0:
        return mean, 0.0, np.zeros(0), np.zeros((y.shape[1], 0))
    _, s, vt = np.linalg.svd((y - mean) / scale, full_matrices=False)
    r = int(np.sum(s > s[0] * 1e-12)) if len(s) else 0
    v = vt[:r].T.copy()
    # a deterministic sign: each component's largest-magnitude entry positive
    flip = np.sign(v[np.argmax(np.abs(v), axis=0), np.arange(r)])
    return mean, scale, s[:r], v * flip


def choose_k(explained: np.ndarray, variance: float, max_components: int | None) -> int:
    """The fewest components whose cumulative explained variance reaches ``variance``."""
    k = int(np.searchsorted(np.cumsum(explained), variance - 1e-12) + 1)
    k = min(k, len(explained))
    return min(k, max_components) if max_components else k


def _cv_residuals(y: np.ndarray, k: int, folds: int) -> np.ndarray:
    """Held-out reconstruction residuals (n x T): each fold projected on a basis
    (mean, scale, k components) fitted to the other folds' runs."""
    n = len(y)
    res = np.zeros_like(y)
    for f in range(folds):
        test = np.arange(n) % folds == f
        mean, scale, _, v = _svd(y[~test])
        if scale == 0:
            res[test] = y[test] - mean
            continue
        vk = v[:, :k]
        z = (y[test] - mean) / scale
        res[test] = scale * (z - (z @ vk) @ vk.T)
    return res


def fit_basis(curves: np.ndarray, points: Sequence[float] | np.ndarray, name: str,
              variance: float = DEFAULT_VARIANCE, max_components: int | None = None,
              min_runs: int = DEFAULT_MIN_RUNS, folds: int = DEFAULT_FOLDS) -> SeriesBasis:
    """Learn series ``name``'s basis from the runs' ``curves`` (n x T, ok runs only)."""
    where = f"series {name!r}"
    try:
        y = np.asarray(curves, dtype=float)
    except ValueError:  # a ragged list of curves
        lens = sorted({len(c) for c in curves})
        raise DataError(where, f"curves of lengths {lens}: series of different lengths "
                        "between runs") from None
    pts = np.asarray(points, dtype=float)
    if y.ndim != 2 or y.shape[1] != len(pts):
        raise DataError(where, f"curves of shape {y.shape} for {len(pts)} points: series of "
                        "different lengths between runs")
    if not 0 < variance <= 1:
        raise DataError(where, f"variance threshold must be in (0, 1], got {variance}")
    if not np.isfinite(y).all():
        bad = np.argwhere(~np.isfinite(y))[0]
        raise DataError(where, f"run {bad[0]} has a non-finite value at point "
                        f"{pts[bad[1]]:g} (only ok runs go into a basis)")
    if len(y) < max(min_runs, 3):
        raise DataError(where, f"{len(y)} runs; a basis needs at least {max(min_runs, 3)} "
                        f"(it has {len(pts)} points; fewer runs than points is fine, too "
                        "few runs to estimate the curves' spread is not)")
    # tiny SVDs: one BLAS thread is 20x faster than many on a busy machine (measured)
    with threadpool_limits(limits=1, user_api="blas"):
        return _fit(y, pts, name, variance, max_components, folds)


def _fit(y: np.ndarray, pts: np.ndarray, name: str, variance: float,
         max_components: int | None, folds: int) -> SeriesBasis:
    where = f"series {name!r}"
    mean, scale, s, v = _svd(y)
    if scale == 0:
        raise DataError(where, "the curve is the same in every run: it cannot tell the "
                        "inputs apart (drop the series)")
    explained = s**2 / np.sum(s**2)
    k = choose_k(explained, variance, max_components)
    vk = v[:, :k]
    z = (y - mean) / scale
    w = z @ vk
    resid = scale * (z - w @ vk.T)
    cv = _cv_residuals(y, k, min(folds, len(y)))
    error = {"point_rms": np.sqrt(np.mean(resid**2, axis=0)),
             "cv_point_rms": np.sqrt(np.mean(cv**2, axis=0)),
             "rms": float(np.sqrt(np.mean(resid**2))), "cv_rms": float(np.sqrt(np.mean(cv**2))),
             "max_abs": float(np.max(np.abs(resid))),
             "unexplained": float(1.0 - np.sum(explained[:k])), "folds": min(folds, len(y))}
    return SeriesBasis(name=name, points=pts, mean=mean, scale=scale, components=vk,
                       explained=explained, variance=float(variance), n_runs=len(y),
                       weight_sd=w.std(axis=0, ddof=1), error=error)
