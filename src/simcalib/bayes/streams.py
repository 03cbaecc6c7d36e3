"""One random stream per run of a lock-step batch.

Runs batched as lanes (:func:`simcalib.bayes.lockstep.run_lockstep_many`) must draw
exactly what they draw alone: every draw is made run by run from that run's own
generator, with the shapes the run would use alone, so batching never changes a
run's random numbers.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


class Streams:
    """The generators of the runs of a batch; run g owns the lanes ``slices[g]``."""

    def __init__(self, rngs: list[np.random.Generator], slices: list[slice]) -> None:
        self.rngs, self.slices = rngs, slices
        self.chains = slices[0].stop - slices[0].start

    def normal(self, tail: tuple[int, ...], groups: Iterable[int] | None = None) -> np.ndarray:
        """Standard normals of shape (lanes, *tail); ``groups`` (default all) draw,
        the other runs' rows are zero and their streams untouched."""
        out = np.zeros((len(self.rngs) * self.chains, *tail))
        for g in range(len(self.rngs)) if groups is None else groups:
            out[self.slices[g]] = self.rngs[g].standard_normal((self.chains, *tail))
        return out

    def uniform(self) -> np.ndarray:
        return np.concatenate([r.uniform(size=self.chains) for r in self.rngs])

    def gamma(self, shape: np.ndarray) -> np.ndarray:
        """Gamma(shape[g], 1) draws, ``shape`` one value per run."""
        return np.concatenate([r.gamma(shape[g], size=self.chains)
                               for g, r in enumerate(self.rngs)])
