"""What a sampler run returns: per-chain draws and counters, and the run's record.

Both engines (the sequential :class:`~simcalib.bayes.sampler.Sampler` and the
lock-step :func:`~simcalib.bayes.lockstep.run_lockstep`) return these, so the
posterior, summaries and tables never depend on the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Counters:
    ode_failures: int = 0
    out_of_bounds: int = 0
    regularised: int = 0
    cholesky_failures: int = 0


@dataclass
class ChainResult:
    theta: np.ndarray          # (draws, p)
    log_gamma: np.ndarray
    log_ell: np.ndarray
    sigma2: np.ndarray
    delta: np.ndarray          # (draws, m)
    lp: np.ndarray
    accepted: np.ndarray
    acceptance: float
    counters: Counters
    seconds: float
    start: np.ndarray
    cpu_seconds: float = float("nan")  # process CPU time: the one-core cost under contention


@dataclass
class RunResult:
    chains: list[ChainResult]
    init: dict[str, Any] = field(default_factory=dict)
    # how the run went: engine, protocol, iterations_run, r_hat_max, ess_bulk_min,
    # converged (bayes.convergence's thresholds unless until_converged sets others)
    # and stop_reason (fixed_length | converged | max_iterations)
    record: dict[str, Any] = field(default_factory=dict)
