"""Delta's per-output divisor where a study has no metamodel.

Why: Delta (``sum_j |S_j(x) - z_j| / s_j``) needs one scale per output, and with a
metamodel it is the metamodel's training sd.  A study calibrated only by
``sequential`` trains no metamodel (a design of one-hour runs spent before the first
proposal is what it exists to avoid), so its scale comes from the observations'
``sd_<output>`` where the targets give them, else from the search's own start runs
(the sd of their successful outputs, every target's start pooled; a series gets one
scale, the root mean of its points' variances, as its basis and the design
metamodel's ``y_std`` have it: per-point sds would give the flat tails of an epidemic
curve, ~0 in every run, a huge weight in Delta).  A
:class:`RunScale` stands in for the metamodel in the ledger: it has the names and
``y_std`` the ledger reads, predicts nothing (NaN) and carries no failure model.
Its ``source`` says where the scale came from; the records' ``delta_scale`` column and
the job's log repeat it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: ``source`` of a metamodel's scale (a study with a metamodel keeps it for every strategy)
TRAINING_SD = "metamodel training sd"
#: ``source`` until the start runs are in
PENDING = "pending: the start runs' sd"


@dataclass
class RunScale:
    """The metamodel's place in a ledger when there is none (module doc)."""

    input_names: list[str]
    output_names: list[str]
    y_std: np.ndarray = field(default_factory=lambda: np.zeros(0))
    source: str = PENDING
    study: str = ""
    failure: Any = None
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.y_std) == 0:
            self.y_std = np.ones(len(self.output_names))

    @property
    def pending(self) -> bool:
        return self.source == PENDING

    def predict(self, X: np.ndarray) -> np.ndarray:
        """No prediction without a metamodel: NaN (records show ``predicted_error`` NaN)."""
        return np.full((len(np.atleast_2d(X)), len(self.output_names)), np.nan)

    def settle(self, Y: np.ndarray) -> None:
        """Fix the scale from the start runs' outputs ``Y`` (successful rows): each
        output's sd over them (1 where it is zero or undefined)."""
        Y = np.atleast_2d(np.asarray(Y, dtype=float))
        Y = Y[np.isfinite(Y).all(axis=1)] if len(Y) else Y
        if len(Y) < 2:
            self.y_std = np.ones(len(self.output_names))
            self.source = (f"1 (only {len(Y)} successful start run(s): give the targets "
                           "sd_<output> columns for a meaningful scale)")
            return
        from simcalib.metamodel.curves import series_groups

        sd = Y.std(axis=0)
        _, groups = series_groups(self.output_names)
        for idx in groups.values():
            # one scale per series: the root mean of its points' variances, the unit its
            # basis is fitted in (metamodel.basis), as the design metamodel's y_std
            sd[idx] = np.sqrt(np.mean(sd[idx] ** 2))
        self.y_std = np.where(np.isfinite(sd) & (sd > 0), sd, 1.0)
        self.source = f"sd of the {len(Y)} successful start runs" + (
            " (one per series: the root mean of its points' variances)" if groups else "")


def scale_source(mm: Any, sd_given: np.ndarray | None) -> str:
    """In words, what each output's term of one target's Delta is divided by."""
    base = getattr(mm, "source", TRAINING_SD)
    if sd_given is None or not np.any(sd_given):
        return base
    if np.all(sd_given):
        return "observed sd (the targets' sd_ columns)"
    return f"observed sd where the targets give sd_ columns, else {base}"
