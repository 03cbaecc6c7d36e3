"""The emulator of ``sequential``'s posterior: an ensemble refitted on the strategy's
runs, and its error.

Why an ensemble's error has two parts:

* **spread**: the members' covariance at x (bootstrap nets disagree where the runs are
  thin), so the posterior widens away from the runs instead of trusting one net there;
* **held-out residual**: near the runs the members agree with each other more than
  with the simulator (they saw the same rows), so the spread alone is too small there.
  A 2-fold cross-fit (an ensemble on each half of the runs, each predicting the other
  half) measures the error on runs a net never saw: its second moment (P x P) is the
  constant part.  On a stochastic simulator those residuals are single runs minus a
  mean prediction, so they hold the run-to-run noise too -- the right total for a
  target that is one run (as the design posterior's held-out residuals do,
  docs/posterior.md).  Where the runs repeat points, the pooled replicate variance is
  measured as well and the residual term's diagonal never drops below it.

The ensemble is fitted with :func:`simcalib.metamodel.ensemble.fit_ensemble` (the
strategy's own fitting function and settings); prediction runs on numpy copies of the
members' weights (the sampler evaluates it on every lane of every iteration).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from simcalib.errors import DataError
from simcalib.metamodel.posterior.noise import _psd


class EnsembleError:
    """An :class:`~simcalib.metamodel.posterior.noise.ErrorModel` from an ensemble:
    ``mean(X)`` the members' mean, ``cov(X)`` their covariance at each row plus the
    constant held-out ``residual`` covariance.  Also what
    :func:`~simcalib.metamodel.posterior.scale.calibrate_kappa` needs of a metamodel
    (``output_names``, ``y_std``)."""

    def __init__(self, ens: Any, residual: np.ndarray, source: str) -> None:
        from torch import nn

        self.output_names = list(ens.output_names)
        self.input_names = list(ens.input_names)
        self.y_std = np.asarray(ens.y_std, dtype=float)
        self.info = dict(getattr(ens, "info", {}) or {})
        self.residual = _psd(np.atleast_2d(np.asarray(residual, dtype=float)))
        self.source = source
        self._xm, self._xs = np.asarray(ens.x_mean, float), np.asarray(ens.x_std, float)
        self._ym = np.asarray(ens.y_mean, float)
        layers = [[m for m in net if isinstance(m, nn.Linear)] for net in ens.nets]
        # (members, in, out) weights and (members, 1, out) biases per layer
        self._W = [np.stack([ls[k].weight.detach().numpy().T.astype(float) for ls in layers])
                   for k in range(len(layers[0]))]
        self._b = [np.stack([ls[k].bias.detach().numpy()[None, :].astype(float)
                             for ls in layers]) for k in range(len(layers[0]))]
        self._last: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def members(self) -> int:
        return len(self._W[0])

    def predict_members(self, X: np.ndarray) -> np.ndarray:
        """Every member's raw outputs, (M, n, P); the last call is cached (the
        likelihood asks for the mean and the covariance of the same rows)."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        if self._last is not None and self._last[0] is X:
            return self._last[1]
        h = np.broadcast_to((X - self._xm) / self._xs, (self.members, *X.shape))
        for k, (W, b) in enumerate(zip(self._W, self._b, strict=True)):
            h = h @ W + b
            if k < len(self._W) - 1:
                h = np.maximum(h, 0.0)
        out = h * self.y_std + self._ym
        self._last = (X, out)
        return out

    def mean(self, X: np.ndarray) -> np.ndarray:
        return self.predict_members(X).mean(axis=0)

    def predict(self, X: np.ndarray) -> np.ndarray:
        return self.mean(X)

    def spread_cov(self, X: np.ndarray) -> np.ndarray:
        """The members' covariance at each row, (n, P, P) (zeros for one member)."""
        P = self.predict_members(X)
        M = len(P)
        if M < 2:
            return np.zeros((P.shape[1], P.shape[2], P.shape[2]))
        D = P - P.mean(axis=0)
        return np.einsum("mnp,mnq->npq", D, D) / (M - 1)

    def cov(self, X: np.ndarray) -> np.ndarray:
        return self.spread_cov(X) + self.residual[None]


@dataclass
class Emulator:
    """The refitted ensemble's error model, the two fold models the error scale is
    calibrated and checked on, and what the error terms were measured from."""

    model: EnsembleError
    folds: tuple[EnsembleError, EnsembleError]
    rows: pd.DataFrame            # the usable runs, inputs (tunables + contexts) and outputs
    fold_of: np.ndarray           # 0 / 1 per row: which half it belongs to
    residual_cov: np.ndarray
    replicate_var: np.ndarray | None
    replicate_points: int
    stochastic_evidence: bool


def replicate_variance(rows: pd.DataFrame, inputs: Sequence[str], outputs: Sequence[str]
                       ) -> tuple[np.ndarray | None, int]:
    """Pooled within-point variance of the outputs over points run more than once
    (``None`` when no point repeats), and how many such points."""
    # points by their rounded coordinates (numpy, not DataFrame.agg(axis=1), whose
    # result type changes with pandas 3 on an empty frame)
    X = np.round(rows[list(inputs)].to_numpy(dtype=float), 12)
    key = (np.unique(X, axis=0, return_inverse=True)[1].reshape(-1) if len(X)
           else np.zeros(0, dtype=int))
    Y = rows[list(outputs)].to_numpy(dtype=float)
    ss, dof, pts = np.zeros(Y.shape[1]), 0, 0
    for k in np.unique(key):
        y = Y[key == k]
        if len(y) > 1:
            ss += ((y - y.mean(axis=0)) ** 2).sum(axis=0)
            dof += len(y) - 1
            pts += 1
    return (ss / dof if dof else None), pts


def fit_emulator(rows: pd.DataFrame, inputs: Sequence[str], outputs: Sequence[str],
                 settings: Any, seed: int, study: str = "") -> Emulator:
    """The ensemble on every usable run, two fold ensembles (halves drawn from
    ``seed``), their cross-fit residual covariance and the replicate noise."""
    from simcalib.metamodel.ensemble import fit_ensemble
    from simcalib.seeds import rng

    inputs, outputs = list(inputs), list(outputs)
    X = rows[inputs].to_numpy(dtype=float)
    Y = rows[outputs].to_numpy(dtype=float)
    n = len(X)
    if n < 8:
        raise DataError("runs", f"{n} usable runs: the sequential posterior needs at least 8 "
                        "(two halves of at least 4 for its held-out error)")
    perm = rng(seed, "seq-posterior-folds", study).permutation(n)
    fold = np.zeros(n, dtype=int)
    fold[perm[n // 2:]] = 1
    full = fit_ensemble(X, Y, inputs, outputs, settings, seed=seed, tag="posterior",
                        study=study)
    halves = [fit_ensemble(X[fold == f], Y[fold == f], inputs, outputs, settings, seed=seed,
                           tag=f"posterior-fold{f}", study=study) for f in (0, 1)]
    R = np.empty_like(Y)
    for f in (0, 1):
        other = fold == 1 - f
        R[other] = Y[other] - halves[f].predict(X[other])
    res = R.T @ R / n
    rep, pts = replicate_variance(rows, inputs, outputs)
    if rep is not None:
        res = _replicate_floor(res, rep)
    src = "ensemble spread + cross-fitted held-out residual covariance of the runs"
    model = EnsembleError(full, res, src)
    folds = (EnsembleError(halves[0], res, src + " (fold 0)"),
             EnsembleError(halves[1], res, src + " (fold 1)"))
    evidence = bool(rep is not None and (rep > 1e-12 * (1 + Y.var(axis=0))).any())
    return Emulator(model, folds, rows.reset_index(drop=True), fold, res, rep, pts, evidence)


def _replicate_floor(res: np.ndarray, rep: np.ndarray) -> np.ndarray:
    """``res`` with each variance raised to at least the run-to-run variance ``rep``
    (correlations kept): the noise is part of every held-out residual, never less."""
    d = np.sqrt(np.maximum(rep, np.diag(res)) / np.maximum(np.diag(res), 1e-300))
    return res * d[:, None] * d[None, :]


def fit_curve_emulator(rows: pd.DataFrame, inputs: Sequence[str], outputs: Sequence[str],
                       settings: Any, seed: int, study: str,
                       metamodel_cfg: Mapping[str, Any] | None, mode: str) -> Emulator:
    """:func:`fit_emulator` on a study with series outputs: each series' basis learned
    from every usable run (``metamodel.series``: variance threshold, cap), the
    ensemble and its two folds fitted on the scalars and basis weights, and every
    model wrapped in a :class:`~.curves.CurveError` (the weights' spread and
    cross-fitted residuals mapped to the points, plus the basis's held-out truncation
    error per point; ``mode``: :data:`~.curves.CURVE_ERRORS`).  The folds' weights come
    from the basis of all the runs (a basis is a few principal directions of the
    curves, not a fit of the inputs: the held-out check still holds the inputs out)."""
    from simcalib.metamodel.curves import fit_bases, reduced_frame
    from simcalib.metamodel.posterior.curves import CurveError, layout

    inputs, outputs = list(inputs), list(outputs)
    rows = rows.reset_index(drop=True)
    Y = rows[outputs].to_numpy(dtype=float)
    X = rows[inputs].to_numpy(dtype=float)
    bases = fit_bases(Y, outputs, np.arange(len(Y)), metamodel_cfg or {})
    red, names = reduced_frame(X, Y, inputs, outputs, bases)
    # the scalars are in both frames: once (twice, the ensemble saw more targets than it
    # has outputs and the fit failed on a study mixing scalars and series)
    both = pd.concat([rows.drop(columns=[n for n in names if n in rows]), red[names]],
                     axis=1)
    emu = fit_emulator(both, inputs, names, settings, seed, study)
    lay = layout(outputs, bases)
    level = None
    if mode == "scaled":
        emu, level = _level_free(emu, lay, X, Y, red[names].to_numpy(dtype=float), outputs)

    def wrap(m: EnsembleError) -> CurveError:
        return CurveError(m, lay, mode, m.source, level=level)

    return replace(emu, model=wrap(emu.model),  # type: ignore[arg-type]
                   folds=(wrap(emu.folds[0]), wrap(emu.folds[1])))


def _level_free(emu: Emulator, lay: Any, X: np.ndarray, Y: np.ndarray, Yr: np.ndarray,
                outputs: Sequence[str]) -> tuple[Emulator, dict[str, Any]]:
    """The ``scaled`` curve error model on ``sequential``'s runs: the level slope fitted
    on the cross-fitted point residuals (each half's ensemble at the other half's runs;
    :mod:`simcalib.metamodel.levelnoise`), and every model's residual covariance (in
    the reduced space) replaced by the level-free one: each cross-fitted reduced
    residual divided by its row's factor (1 on scalars, the series' factor on its
    weights), with the same replicate-noise floor as :func:`fit_emulator`."""
    import copy

    from simcalib.metamodel import levelnoise

    pred = np.empty_like(Y)
    red = np.empty_like(Yr)
    for f in (0, 1):
        other = emu.fold_of == 1 - f
        red[other] = emu.folds[f].mean(X[other])
        pred[other] = lay.offset + red[other] @ lay.A.T
    level = levelnoise.fit(Y - pred, pred, outputs)
    G = levelnoise.factors(pred, outputs, level)
    # each reduced output's factor is that of an output it maps to (A's first nonzero
    # in its column): a scalar's own (1), a basis weight's its series' points' (one g)
    g_red = G[:, np.argmax(lay.A != 0, axis=0)]
    R = (Yr - red) / np.sqrt(g_red)
    res = R.T @ R / max(1, len(R))
    if emu.replicate_var is not None:
        # run-to-run variance: a floor on the level-free residual at the mean factor
        res = _replicate_floor(res, emu.replicate_var
                               / np.maximum(g_red.mean(axis=0), 1e-300))
    res = _psd(np.atleast_2d(res))

    def free(m: EnsembleError) -> EnsembleError:
        out = copy.copy(m)
        out.residual = res
        out.source = f"{m.source}, without its level (level_noise)"
        return out

    return replace(emu, model=free(emu.model), folds=(free(emu.folds[0]),
                                                      free(emu.folds[1])),
                   residual_cov=res), level
