"""Floating-point events of a Bayes job as one worded log line instead of raw warnings.

A sampler explores the tails: an HMC trajectory or a random-walk step can propose
``log gamma`` or ``log ell`` of several hundred, a lane already rejected keeps
drifting to the end of its trajectory, and the forward model may be solved at the
edge of its bounds.  Evaluating such a point overflows or divides by zero in numpy,
which by default prints a ``RuntimeWarning`` line per site (``batched.py:88:
overflow encountered in multiply``) into the job's log, and from there into the
report's "what to trust" block, although nothing is wrong: the point's density is
``-inf`` (rejected, counted) or the limit it tends to, and the chain stays exact.

:func:`numeric_events` counts these events for a block of work (numpy's ``errstate``
"call" mode, plus any ``RuntimeWarning`` a library raises) and logs one INFO line
naming the run and what the events mean; nothing is printed per event.  The numbers
computed are unchanged (``errstate`` only decides how an event is reported).
"""

from __future__ import annotations

import inspect
import logging
import os
import warnings
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

log = logging.getLogger(__name__)


@dataclass
class NumericEvents:
    """What :func:`numeric_events` saw: counts per kind and the first site."""

    label: str
    counts: Counter[str] = field(default_factory=Counter)
    first: str = ""

    def _seen(self, kind: str, where: str) -> None:
        self.counts[kind] += 1
        if not self.first:
            self.first = where

    def on_fp_error(self, kind: str, flag: int) -> None:
        """numpy's errstate callback (``kind``: "overflow", "divide by zero", ...)."""
        frame = inspect.currentframe()
        caller = frame.f_back if frame is not None else None
        where = (f"{os.path.basename(caller.f_code.co_filename)}:{caller.f_lineno}"
                 if caller is not None else "?")
        self._seen(kind, where)

    def line(self) -> str:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(self.counts.items()))
        return (f"{self.label}: {sum(self.counts.values())} floating-point events ({kinds}; "
                f"first at {self.first}) while evaluating points far in the tails (huge or "
                "tiny gamma, ell or sigma^2, or a rejected trajectory drifting on): such a "
                "point gets log density -inf and is rejected (the counters in run.json "
                "count them) or the limit it tends to; the chains stay exact, nothing to do")


@contextmanager
def numeric_events(label: str) -> Iterator[NumericEvents]:
    """Count floating-point events (and ``RuntimeWarning``s) in the block; log one
    line naming ``label`` at the end if there were any."""
    ev = NumericEvents(label)
    others = []
    try:
        with warnings.catch_warnings(record=True) as caught, \
                np.errstate(call=ev.on_fp_error, over="call", divide="call", invalid="call"):
            warnings.simplefilter("always", RuntimeWarning)
            try:
                yield ev
            finally:
                for w in caught:
                    if issubclass(w.category, RuntimeWarning):
                        ev._seen(str(w.message).split(" encountered")[0],
                                 f"{os.path.basename(w.filename)}:{w.lineno}")
                    else:
                        others.append(w)
    finally:
        for w in others:        # not ours to judge: passed on as they came
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        if ev.counts:
            log.info("%s", ev.line())
