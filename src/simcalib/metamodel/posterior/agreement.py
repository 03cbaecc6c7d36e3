"""Does the answer lie inside its posterior?  One check and one wording for every
place an answer stands beside posterior intervals (``sequential``'s own posterior,
the design posterior ``calibration.posterior`` beside the recommended strategy).

The check: the answer's value of each input inside that input's central 90 % interval
(q5..q95), and the answer inside the joint 90 % region.  The joint region is the
highest-density region when the answer's posterior density is known (the 90 % of draws
of highest density: the answer is inside when its log density is at least the draws'
10 % quantile), else the ellipsoid holding 90 % of the draws (Mahalanobis distance on
the inputs' unit scale), which is what a reader of the files alone can compute.

Where the answer is outside, the reason in plain words, the first that applies:

* a **ridge of equal fits**: the input outside is strongly correlated with another
  in the draws (|r| >= 0.7): the two trade off along a curve of equal fit, and the
  answer sits on it away from the posterior's bulk (and, where the input's posterior is
  also close to its prior, that it is weakly identified alone);
* a **weakly identified input**: outside on an input whose posterior is close to its
  prior (``prior_sd_ratio`` >= 0.5): the data barely constrain it, so any value in
  its range fits about as well and the interval's edges mean little;
* **a different criterion**: otherwise the answer was chosen by another rule (the
  smallest misfit of single runs, or of a metamodel's prediction) than the posterior's
  weighing of every run with the emulator's error and the noise; the reader should
  prefer the posterior's central point when the simulator is noisy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

#: prior_sd_ratio from which an input counts as weakly identified in the wording
WEAK = 0.5
#: |correlation| of two inputs' draws that reads as a ridge
RIDGE = 0.7
LEVEL = 0.9


@dataclass(frozen=True)
class Agreement:
    """The answer against its posterior: inside every 90 % interval (and which inputs
    are not), inside the joint 90 % region (None: not checked), and why not."""

    inside_intervals: bool
    outside: tuple[str, ...]
    inside_joint: bool | None
    joint_kind: str
    why: str

    @property
    def agrees(self) -> bool:
        return self.inside_intervals and self.inside_joint is not False

    def columns(self) -> dict[str, object]:
        """The result row's columns."""
        return {"inside_90": self.inside_intervals,
                "inside_joint_90": self.inside_joint,
                "outside_inputs": " ".join(self.outside), "why_outside": self.why}


def inside_ellipsoid(x_unit: np.ndarray, draws_unit: np.ndarray, level: float = LEVEL
                     ) -> bool | None:
    """The answer (unit scale) inside the ellipsoid holding ``level`` of the draws
    (their Mahalanobis distance); None with too few draws."""
    D = np.asarray(draws_unit, dtype=float)
    if len(D) < 10 * max(1, D.shape[1]):
        return None
    mu = D.mean(axis=0)
    C = np.atleast_2d(np.cov(D, rowvar=False)) + 1e-12 * np.eye(D.shape[1])
    Ci = np.linalg.pinv(C)
    m2 = np.einsum("ni,ij,nj->n", D - mu, Ci, D - mu)
    a = np.asarray(x_unit, dtype=float) - mu
    return bool(a @ Ci @ a <= np.quantile(m2, level))


def inside_hpd(lp_answer: float, lp_draws: np.ndarray, level: float = LEVEL) -> bool:
    """The answer inside the highest-density region of ``level`` (log densities)."""
    return bool(np.isfinite(lp_answer)
                and lp_answer >= np.quantile(np.asarray(lp_draws, float), 1.0 - level))


def check(x: Mapping[str, float], intervals: Mapping[str, tuple[float, float]],
          prior_ratio: Mapping[str, float] | None = None,
          draws: np.ndarray | None = None, names: Sequence[str] = (),
          inside_joint: bool | None = None, joint_kind: str = "",
          criterion: str = "") -> Agreement:
    """The answer ``x`` (input -> value) against per-input 90 % ``intervals``
    (input -> (q5, q95)); ``draws`` (n, d) in ``names`` order serve the wording (ridge)
    and, when ``inside_joint`` is not given, nothing else; ``criterion`` replaces the
    default wording of the third reason (how the answer was chosen)."""
    tol = 1e-9
    outside = tuple(n for n, (lo, hi) in intervals.items()
                    if n in x and np.isfinite(x[n])
                    and not (lo - tol * (1 + abs(lo)) <= x[n] <= hi + tol * (1 + abs(hi))))
    ok = not outside
    why = "" if ok and inside_joint is not False else explain(
        outside, prior_ratio or {}, draws, list(names), criterion)
    return Agreement(ok, outside, inside_joint, joint_kind, why)


def explain(outside: Sequence[str], prior_ratio: Mapping[str, float],
            draws: np.ndarray | None, names: Sequence[str], criterion: str = "") -> str:
    """Plain words for an answer outside its posterior (module doc)."""
    weak = [n for n in outside if float(prior_ratio.get(n, 0.0) or 0.0) >= WEAK]
    ridge = _ridge(outside, draws, names)
    if ridge:
        # a ridge says more than "weakly identified": it is why the input is weak alone
        a, b, r = ridge
        text = (f"a ridge of equal fits: {a} and {b} trade off (correlation {r:+.2f} in the "
                "posterior), so points along the ridge fit about as well, and the answer "
                "lies on it beyond the posterior's bulk")
        if weak:
            text += (f"; alone, {', '.join(weak)} {'is' if len(weak) == 1 else 'are'} weakly "
                     "identified")
        return text
    if weak:
        return (f"weakly identified input{'s' if len(weak) > 1 else ''} {', '.join(weak)}: "
                "the data barely constrain it, so any value in its range fits about as well")
    where = (f" ({', '.join(outside)} outside the 90 % interval)" if outside
             else " (outside the joint 90 % region, inside each interval)")
    if criterion:
        return f"{criterion}{where}"
    return ("the point was chosen by a different criterion: the smallest misfit of single "
            "runs or of a metamodel's prediction, where the posterior weighs every run with "
            f"the emulator's error and the noise{where}; on a noisy simulator prefer the "
            "posterior's central point")


def _ridge(outside: Sequence[str], draws: np.ndarray | None, names: Sequence[str]
           ) -> tuple[str, str, float] | None:
    if draws is None or len(names) < 2 or len(draws) < 20:
        return None
    D = np.asarray(draws, dtype=float)
    sd = D.std(axis=0)
    keep = sd > 0
    if keep.sum() < 2:
        return None
    R = np.full((D.shape[1], D.shape[1]), 0.0)
    idx = np.flatnonzero(keep)
    R[np.ix_(idx, idx)] = np.corrcoef(D[:, keep], rowvar=False)
    # the pair involving an outside input (or, joint only, any pair) with the largest |r|
    rows = [names.index(n) for n in outside if n in names] or list(range(len(names)))
    best = None
    for i in rows:
        for j in range(len(names)):
            if j != i and abs(R[i, j]) >= RIDGE and (best is None or abs(R[i, j]) > best[2]):
                best = (i, j, abs(R[i, j]))
    if best is None:
        return None
    i, j, _ = best
    return names[i], names[j], float(R[i, j])
