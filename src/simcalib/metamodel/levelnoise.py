"""How a curve's error grows with its level (issue 42: the posterior on curves).

Why: on the stochastic epidemic a curve's run-to-run noise and the emulator's error
grow with the outbreak (counts: a variance roughly proportional to the level).  One
constant error covariance, estimated on held-out runs of every size, is then too wide
for a small outbreak and too narrow for a large one: the posterior's joint coverage of
held-out true inputs came out 5-12 points low on the epidemic's case curve.

The model: the error of series s at inputs x is ``g_s(x)^(1/2)`` times a
level-free error, with

    g_s(x) = ((L_s(x) + f_s) / r_s) ** gamma_s

``L_s(x)`` the predicted curve's mean over its points (clipped at 0), ``f_s`` a floor
(1 % of the held-out rows' median level, so that a curve predicted flat at 0 keeps an
error), ``gamma_s`` the slope of log(mean squared held-out residual) on log level
(least squares, clipped to [0, 2]: 0 is today's constant error, 1 a count's
variance), ``r_s`` chosen so that ``g_s`` averages 1 over the held-out rows (the
level-free covariance is then on the scale of the constant one).  Scalars keep
``g = 1``.  The covariance of all outputs at x is ``G^(1/2) Sigma_0 G^(1/2)`` with
``G = diag(g)``: correlations between points unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from simcalib.metamodel.curves import series_groups

#: the floor of a series' level, as a share of its held-out median level
FLOOR_SHARE = 0.01
#: gamma's range (0: constant error; 1: a count's variance; 2: a constant CV)
GAMMA_RANGE = (0.0, 2.0)
#: fewer held-out rows than this: no slope is fitted (gamma 0)
MIN_ROWS = 8


def _levels(pred: np.ndarray, idx: Sequence[int], floor: float) -> np.ndarray:
    return np.clip(np.asarray(pred, dtype=float)[:, list(idx)], 0.0, None).mean(axis=1) + floor


def fit(resid: np.ndarray, pred: np.ndarray, outputs: Sequence[str]) -> dict[str, Any]:
    """Per series: ``gamma``, ``ref``, ``floor``, the rows used and the correlation of
    log level with log mean squared residual, from held-out residuals ``resid`` (n, P)
    and the predictions ``pred`` (n, P) at the same rows (module docstring)."""
    resid, pred = np.asarray(resid, dtype=float), np.asarray(pred, dtype=float)
    _, groups = series_groups(list(outputs))
    out: dict[str, Any] = {}
    for name, idx in groups.items():
        raw = _levels(pred, idx, 0.0)
        floor = FLOOR_SHARE * float(np.median(raw)) if len(raw) else 0.0
        floor = floor if floor > 0 else 1e-12
        lev = raw + floor
        ms = np.mean(resid[:, idx] ** 2, axis=1)
        ok = np.isfinite(lev) & np.isfinite(ms) & (ms > 0)
        gamma, corr = 0.0, float("nan")
        if ok.sum() >= MIN_ROWS and np.ptp(np.log(lev[ok])) > 0:
            a, b = np.log(lev[ok]), np.log(ms[ok])
            gamma = float(np.clip(np.polyfit(a, b, 1)[0], *GAMMA_RANGE))
            corr = float(np.corrcoef(a, b)[0, 1])
        ref = float(np.mean(lev[ok] ** gamma)) ** (1.0 / gamma) if gamma > 0 else 1.0
        out[name] = {"gamma": gamma, "ref": ref, "floor": floor, "rows": int(ok.sum()),
                     "log_corr": corr}
    return out


def factors(pred: np.ndarray, outputs: Sequence[str],
            record: Mapping[str, Mapping[str, Any]]) -> np.ndarray:
    """(n, P): each output's variance factor g at the rows of ``pred`` (1 on scalars and
    on a series without a record)."""
    pred = np.atleast_2d(np.asarray(pred, dtype=float))
    G = np.ones_like(pred)
    _, groups = series_groups(list(outputs))
    for name, idx in groups.items():
        r = record.get(name)
        if not r or float(r["gamma"]) == 0.0:
            continue
        g = (_levels(pred, idx, float(r["floor"])) / float(r["ref"])) ** float(r["gamma"])
        G[:, idx] = g[:, None]
    return G


def level_free(resid: np.ndarray, pred: np.ndarray, outputs: Sequence[str],
               record: Mapping[str, Mapping[str, Any]]) -> np.ndarray:
    """The level-free second moment ``Sigma_0`` of held-out residuals: each row divided
    by ``g^(1/2)`` of its prediction, then ``r^T r / n``."""
    r = np.asarray(resid, dtype=float) / np.sqrt(factors(pred, outputs, record))
    return r.T @ r / max(1, len(r))
