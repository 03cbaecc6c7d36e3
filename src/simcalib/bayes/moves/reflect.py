"""The leapfrog drift that bounces off theta's bounds (``theta_boundary: reflect``).

Why it is exact: in the proposal's coordinates ``x = L w`` (unit mass in w) the
bound ``x_j = b`` is the hyperplane ``L_j . w = b`` (``L_j`` row j of L).  The drift
runs in straight lines to the *first* bound it meets, where the momentum is mirrored
in that hyperplane, ``mom -= 2 (mom . L_j) / |L_j|^2 L_j`` (x_j's velocity flips,
the rest of the motion along the wall continues), and goes on for the remaining
time.  Each piece is a translation or a reflection, so the map is volume-preserving
and |mom| is kept; run backwards (negated momentum) it retraces the same bounces,
so it is reversible: the uniform prior's infinite wall taken exactly (Pakman &
Paninski 2014 for truncated Gaussians; Afshar & Domke 2015).  The Metropolis test
is unchanged.
"""

from __future__ import annotations

import numpy as np

#: bounces allowed in one drift before the lane's proposal is given up (rejected):
#: a drift crosses the unit box at most a few times when the step is tuned
MAX_BOUNCES = 50


def reflect_drift(x: np.ndarray, mom: np.ndarray, lc: np.ndarray, eps: np.ndarray,
                  p: int) -> tuple[np.ndarray, np.ndarray]:
    """One leapfrog drift ``x += eps L mom`` that bounces off the box ``0 <= x_i <= 1``
    of the first ``p`` coordinates (theta on its linear scale) instead of leaving it.
    A lane still bouncing after ``MAX_BOUNCES`` is returned outside the box (its
    proposal is rejected by the prior)."""
    x, mom = x.copy(), mom.copy()
    n_lane = x.shape[0]
    rows = np.arange(n_lane)
    left = np.ones(n_lane)                               # drift time still to run
    for _ in range(MAX_BOUNCES):
        v = eps[:, None] * np.einsum("cij,cj->ci", lc, mom)
        vp, xp = v[:, :p], x[:, :p]
        with np.errstate(divide="ignore", invalid="ignore"):
            hit_t = np.where(vp > 0, (1.0 - xp) / vp, np.where(vp < 0, -xp / vp, np.inf))
        hit_t = np.maximum(hit_t, 0.0)              # round-off: a coordinate just past
        j = np.argmin(hit_t, axis=1)
        t = hit_t[rows, j]
        hit = t < left
        move = np.where(hit, t, left)
        x = x + move[:, None] * v
        left = left - move
        if not hit.any():
            return x, mom
        lanes = rows[hit]
        x[lanes, j[hit]] = np.where(vp[lanes, j[hit]] > 0, 1.0, 0.0)   # on the wall
        normal = lc[lanes, j[hit], :]
        coef = np.einsum("ci,ci->c", mom[lanes], normal) / np.einsum("ci,ci->c", normal,
                                                                       normal)
        mom[lanes] -= 2.0 * coef[:, None] * normal
    out = left > 0
    x[out, 0] = -1.0                                     # gave up: outside, rejected
    return x, mom
