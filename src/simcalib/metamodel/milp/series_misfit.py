r"""The exact curve misfit as linear rows (issue 42 item 2), for any MILP builder.

A series is emulated by its basis weights w (:mod:`simcalib.metamodel.basis`): the
curve at point t is ``B_t w + mu_t``.  Against an observed curve z with per-point
divisors s_t (the observation's sd where given, else the series' scale) and weights
c_t >= 0, the misfit over *every observed point* is::

    sum_t c_t |B_t w + mu_t - z_t| / s_t  =  sum_t c_t |G_t w + h_t|,
    G = B / s (rows),  h = (mu - z) / s

made linear exactly with one auxiliary column e_t >= 0 per point and two rows::

    e_t - G_t w >=  h_t          (e_t >= +(G_t w + h_t))
    e_t + G_t w >= -h_t          (e_t >= -(G_t w + h_t))

and the cost c_t on e_t: at an optimum e_t = |G_t w + h_t|, so the MILP's objective
*is* the misfit, not an approximation of it (no truncation of the points: the basis
is the only approximation, and its error is recorded with it).

Representation: :class:`SeriesMisfit` holds G, h, c; :meth:`SeriesMisfit.rows` gives the
2m rows over the columns ``[w (k), e (m)]`` as dense ``(A, lower, upper)``, the form
:class:`~simcalib.metamodel.milp.formulation.MILPModel` and both backends take;
:func:`append_to_model` adds them to a built ``MILPModel`` whose columns ``w_cols``
hold the weights.  Where the network outputs *standardised* weights y
(``w = w_mean + w_std * y``, the metamodel's output scaler), :meth:`SeriesMisfit.fold`
moves the affine map into G and h, so the rows act on the output columns directly.

Size against the scalar case: P scalar outputs cost P columns and 2P rows (the
formulation's t_j); a series observed at m points costs m columns and 2m rows, on
top of the network's k outputs (k basis weights instead of m outputs): no binary
and no big-M, so the branch-and-bound tree is the network's alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from simcalib.errors import DataError
from simcalib.metamodel.basis import SeriesBasis
from simcalib.metamodel.milp.formulation import INF, MILPModel
from simcalib.study.series import Curve


@dataclass(frozen=True)
class SeriesMisfit:
    """sum_t cost_t |G_t w + h_t| over one target's observed points of one series."""

    name: str
    G: np.ndarray       # (m, k)  # noqa: N815 (the module docstring's names)
    h: np.ndarray       # (m,)
    cost: np.ndarray    # (m,)
    points: np.ndarray  # (m,)

    @property
    def n_points(self) -> int:
        return len(self.h)

    @property
    def n_weights(self) -> int:
        return int(self.G.shape[1])

    def residual(self, w: np.ndarray) -> np.ndarray:
        """(n, m) signed residuals (B w + mu - z) / s for (n, k) weights."""
        return np.atleast_2d(np.asarray(w, dtype=float)) @ self.G.T + self.h

    def value(self, w: np.ndarray) -> np.ndarray:
        """(n,) misfits: what the MILP's objective equals at those weights."""
        return np.abs(self.residual(w)) @ self.cost

    def rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(A, lower, upper)``: 2m rows over the columns [w (k), e (m)]."""
        m = self.n_points
        eye = np.eye(m)
        a = np.block([[-self.G, eye], [self.G, eye]])
        lower = np.concatenate([self.h, -self.h])
        return a, lower, np.full(2 * m, INF)

    def aux_upper(self, w_lo: np.ndarray, w_hi: np.ndarray) -> np.ndarray:
        """A valid upper bound of every e_t when ``w_lo <= w <= w_hi`` (interval
        arithmetic); a finite column bound helps the solver's presolve."""
        gp, gn = np.maximum(self.G, 0.0), np.minimum(self.G, 0.0)
        lo = gp @ w_lo + gn @ w_hi + self.h
        hi = gp @ w_hi + gn @ w_lo + self.h
        return np.maximum(np.abs(lo), np.abs(hi))

    def fold(self, offset: np.ndarray, scale: np.ndarray) -> SeriesMisfit:
        """The same misfit as a function of y where ``w = offset + scale * y``."""
        off = np.asarray(offset, dtype=float)
        sc = np.asarray(scale, dtype=float)
        return replace(self, G=self.G * sc[None, :], h=self.h + self.G @ off)


def build_misfit(B: np.ndarray, mu: np.ndarray, z: np.ndarray, s: np.ndarray,  # noqa: N803
                 cost: np.ndarray | None = None, points: np.ndarray | None = None,
                 name: str = "series") -> SeriesMisfit:
    """The misfit of curve ``mu + B w`` against ``z`` with divisors ``s`` (all at the
    same m points); a DataError naming the series on shapes or values that make it
    meaningless (a non-positive divisor, a non-finite observation)."""
    where = f"series {name!r}"
    B = np.atleast_2d(np.asarray(B, dtype=float))  # noqa: N806
    mu, z = np.asarray(mu, dtype=float).ravel(), np.asarray(z, dtype=float).ravel()
    s = np.asarray(s, dtype=float).ravel()
    c = np.ones(len(z)) if cost is None else np.asarray(cost, dtype=float).ravel()
    if not (B.shape[0] == len(mu) == len(z) == len(s) == len(c)):
        raise DataError(where, f"basis rows {B.shape[0]}, mean {len(mu)}, observed points "
                        f"{len(z)}, divisors {len(s)} and point weights {len(c)} differ")
    if not np.isfinite(z).all():
        raise DataError(where, "the observed curve has a non-finite value")
    if not (np.isfinite(s).all() and (s > 0).all()):
        raise DataError(where, "every point's divisor s_t must be finite and > 0")
    if not (np.isfinite(c).all() and (c >= 0).all()):
        raise DataError(where, "point weights must be finite and >= 0")
    pts = np.arange(len(z), dtype=float) if points is None else np.asarray(points, float)
    return SeriesMisfit(name, B / s[:, None], (mu - z) / s, c, pts)


def misfit_from_basis(basis: SeriesBasis, points: Sequence[float] | np.ndarray,
                      z: np.ndarray, sd: np.ndarray | None = None,
                      cost: np.ndarray | None = None) -> SeriesMisfit:
    """One target's misfit: its observed ``points`` (a subset of the basis's) and
    values ``z``; divisors ``sd`` where the observations give them, else the series'
    scale (so an unobserved-sd curve counts absolute deviations in units of the runs'
    typical spread, and a flat tail does not dominate)."""
    idx = basis.point_index(points)
    s = np.full(len(idx), basis.scale) if sd is None else np.asarray(sd, dtype=float)
    return build_misfit(basis.B[idx], basis.mean[idx], z, s, cost,
                        np.asarray(points, dtype=float), basis.name)


def append_to_model(m: MILPModel, w_cols: np.ndarray, misfit: SeriesMisfit) -> np.ndarray:
    """Add the misfit's m auxiliary columns (cost c_t, bounds [0, aux_upper]) and 2m
    rows to ``m``, acting on the existing columns ``w_cols``; returns the new columns."""
    w_cols = np.asarray(w_cols, dtype=np.int64)
    if len(w_cols) != misfit.n_weights:
        raise DataError(f"series {misfit.name!r}", f"{len(w_cols)} weight columns for a "
                        f"misfit over {misfit.n_weights} weights")
    lo = np.asarray(m.col_lo, dtype=float)[w_cols]
    hi = np.asarray(m.col_hi, dtype=float)[w_cols]
    top = misfit.aux_upper(lo, hi) if np.isfinite(lo).all() and np.isfinite(hi).all() \
        else np.full(misfit.n_points, INF)
    e = m.add_cols(misfit.n_points, 0.0, top * (1 + 1e-9) + 1e-9, misfit.cost)
    for t in range(misfit.n_points):
        idx = np.concatenate([[e[t]], w_cols])
        m.add_row(idx, np.concatenate([[1.0], -misfit.G[t]]), misfit.h[t], INF)
        m.add_row(idx, np.concatenate([[1.0], misfit.G[t]]), -misfit.h[t], INF)
    return e


def target_misfits(curves: Mapping[str, Curve], bases: Mapping[str, SeriesBasis],
                   source: str = "targets") -> list[SeriesMisfit]:
    """One target's misfits, one per observed series (``SeriesObservations.curves[id]``):
    its own points, values and sds against each series' basis; a DataError naming
    ``source`` for a series without a basis."""
    out = []
    for name, curve in curves.items():
        if name not in bases:
            raise DataError(source, f"series {name!r} is observed but the metamodel has no "
                            f"basis for it (bases: {sorted(bases)})")
        out.append(misfit_from_basis(bases[name], curve.points, curve.values, curve.sd))
    return out
