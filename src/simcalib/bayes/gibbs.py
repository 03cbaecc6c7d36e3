"""The exact Gibbs draws of a lock-step iteration: delta, then sigma^2.

After the move of the block, delta is drawn from its Gaussian conditional by
Matheron's rule (exact although the MOS ``C_delta`` is singular), and, for the
random-walk kernel, sigma^2 from its inverse-gamma conditional with all ``m``
observed entries (the gradient kernels move ``log sigma^2`` in the block instead).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from simcalib.bayes.streams import Streams

if TYPE_CHECKING:
    from simcalib.bayes.state import LaneState
    from simcalib.bayes.target import LockstepSampler


def draw_delta(sampler: LockstepSampler, st: LaneState, sigma2: np.ndarray,
               streams: Streams, chol_c: np.ndarray) -> np.ndarray:
    """Exact delta draws for every lane by Matheron's rule (as the sequential sampler);
    on a KOH full grid with the T x T blocks (the same draws up to round-off)."""
    m, cov = st.f.shape[1], sampler.cov
    d0 = cov.matvec(chol_c, streams.normal((m,)))
    if st.mos is not None:
        d0 = st.mos.project(d0)
    e0 = np.sqrt(sigma2)[:, None] * streams.normal((m,))
    rhs = sampler.y - st.f - d0 - e0
    return d0 + cov.gain(st.c_delta, st.chol, rhs)


def draw_sigma2(sampler: LockstepSampler, st: LaneState, delta: np.ndarray,
                streams: Streams) -> np.ndarray:
    """sigma^2 | rest from ``IG(alpha + m/2, beta + |y - f - delta|^2 / 2)``, per lane."""
    shape = sampler.a0_group + 0.5 * sampler.pb.m
    resid = sampler.y - st.f - delta
    return (sampler.b0 + 0.5 * np.einsum("cm,cm->c", resid, resid)) / streams.gamma(shape)
