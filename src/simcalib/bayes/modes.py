"""Minor modes that the chains explored too little: a check R-hat cannot make.

Why: rank-normalised R-hat and bulk ESS judge the bulk of the posterior.  A small,
separate mode (a few per cent of the mass, e.g. two-mass's k1 near its upper bound)
that one chain visits a few times and the other never can leave R-hat at 1.004 and
ESS above 1,000, while the mode's mass, and with it the parameter's sd and upper
interval, rest on a handful of excursions (measured on a two-mass data set: 40,000
iterations, R-hat 1.004, a k1 mode visited 4 times by one chain and 0 by the other).

The check works on each scalar's pooled draws: a histogram over their range, groups
of occupied bins separated by at least ``GAP_BINS`` empty ones are modes, the largest
is the main one.  A minor mode holding at least ``MIN_MASS`` of the draws is
*poorly explored* when some chain entered it fewer than ``MIN_VISITS`` times (never,
in the example above).  A well-mixed two-mode posterior (many visits by
every chain) passes; a skewed posterior without a gap has one mode and passes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

#: histogram bins over a scalar's pooled range
BINS = 60
#: empty bins that separate two modes
GAP_BINS = 3
#: a bin holding at most this share of the draws counts as empty (stray draws)
EMPTY_SHARE = 1e-4
#: minor modes lighter than this are ignored: a unimodal posterior's tail, sampled by
#: correlated draws, comes in clumps that can look like modes of 0.1-0.4 % of the mass
#: (seen on 6 two-mass data sets), never of 1 %
MIN_MASS = 0.01
#: a chain that entered a minor mode fewer times than this leaves its mass (and the
#: parameter's sd and interval) resting on a handful of excursions: poorly explored
MIN_VISITS = 10


@dataclass(frozen=True)
class MinorMode:
    """A minor mode of one scalar: its range, pooled mass, entries and share per chain."""

    name: str
    lo: float
    hi: float
    mass: float
    visits: tuple[int, ...]
    share: tuple[float, ...]

    @property
    def poorly_explored(self) -> bool:
        return min(self.visits) < MIN_VISITS

    def describe(self) -> str:
        shares = "/".join(f"{100 * s:.1f}" for s in self.share)
        return (f"{self.name} in [{self.lo:.4g}, {self.hi:.4g}]: {100 * self.mass:.2f} % of "
                f"the draws, entered {'/'.join(map(str, self.visits))} times by the chains "
                f"({shares} % of each chain)")


def minor_modes(x: np.ndarray, name: str = "") -> list[MinorMode]:
    """The minor modes of one scalar's draws ``x`` (chains, draws)."""
    x = np.asarray(x, dtype=float)
    if x.ndim != 2 or x.shape[0] < 1 or x.size < 2:
        return []
    flat = x.ravel()
    lo, hi = float(np.min(flat)), float(np.max(flat))
    if not (np.isfinite(lo) and np.isfinite(hi)) or hi <= lo:
        return []
    edges = np.linspace(lo, hi, BINS + 1)
    idx = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, BINS - 1)
    counts = np.bincount(idx.ravel(), minlength=BINS)
    occupied = counts > EMPTY_SHARE * flat.size
    groups: list[tuple[int, int]] = []
    start = last = -1
    empty = 0
    for b in range(BINS):
        if not occupied[b]:
            empty += 1
            continue
        if start < 0:
            start = b
        elif empty >= GAP_BINS:
            groups.append((start, last))
            start = b
        last, empty = b, 0
    if start >= 0:
        groups.append((start, last))
    if len(groups) < 2:
        return []
    masses = [counts[a:b + 1].sum() / flat.size for a, b in groups]
    main = int(np.argmax(masses))
    out = []
    for k, (a, b) in enumerate(groups):
        if k == main or masses[k] < MIN_MASS:
            continue
        inside = (idx >= a) & (idx <= b)
        entries = np.diff(inside.astype(np.int8), axis=1, prepend=0) == 1
        out.append(MinorMode(name, float(edges[a]), float(edges[b + 1]), float(masses[k]),
                             tuple(int(v) for v in entries.sum(axis=1)),
                             tuple(float(v) for v in inside.mean(axis=1))))
    return out


def poorly_explored(draws: Mapping[str, np.ndarray]) -> list[MinorMode]:
    """Every poorly explored minor mode of ``draws`` (name -> (chains, draws) array, or
    (chains, draws, k) for k scalars named ``name[i]``)."""
    out: list[MinorMode] = []
    for name, v in draws.items():
        a = np.asarray(v, dtype=float)
        cols = [(name, a)] if a.ndim == 2 else \
            [(f"{name}[{i}]", a[..., i]) for i in range(a.shape[-1])]
        for n, x in cols:
            out += [m for m in minor_modes(x, n) if m.poorly_explored]
    return out
