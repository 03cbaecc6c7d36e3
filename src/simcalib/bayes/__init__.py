"""Bayesian calibration of ODE models under model discrepancy: KOH and MOS.

Modules, one job each:

* :mod:`~simcalib.bayes.ode` -- ODE models with forward sensitivities solved jointly,
  Jacobians derived automatically (sympy, or torch.func as a fallback);
* :mod:`~simcalib.bayes.models` -- the paper's settings and user settings;
* :mod:`~simcalib.bayes.loading`, :mod:`~simcalib.bayes.data` -- user model modules and
  data files (found beside the config, checked before sampling);
* :mod:`~simcalib.bayes.likelihood`, :mod:`~simcalib.bayes.hyperpriors` -- data and the
  likelihood pieces (log scale for positive settings), data-scaled default hyperpriors;
* :mod:`~simcalib.bayes.fit` -- one calibration end to end (what ``bayes-run`` calls);
* :mod:`~simcalib.bayes.kernels` -- SE kernel, KOH and MOS covariances, stable Cholesky;
* :mod:`~simcalib.bayes.sampler` -- adaptive Metropolis-within-Gibbs (paper Algorithm 1):
  the sequential engine, and the entry point of the lock-step one
  (:mod:`~simcalib.bayes.lockstep`), whose pieces are one module each:
  :mod:`~simcalib.bayes.target` (the lanes' log target and gradient),
  :mod:`~simcalib.bayes.moves` (random walk, MALA, HMC with reflection: one protocol),
  :mod:`~simcalib.bayes.chains` (the run's state and iteration),
  :mod:`~simcalib.bayes.gibbs`, :mod:`~simcalib.bayes.extend` (until converged),
  :mod:`~simcalib.bayes.state`, :mod:`~simcalib.bayes.streams`;
  :mod:`~simcalib.bayes.sampler_config`, :mod:`~simcalib.bayes.settings` -- the
  settings objects built once from the config; :mod:`~simcalib.bayes.numerics` --
  floating-point events as one worded log line;
* :mod:`~simcalib.bayes.synthetic` -- synthetic data as in the paper;
* :mod:`~simcalib.bayes.posterior` -- ArviZ netCDF and summaries (the only ArviZ caller);
* :mod:`~simcalib.bayes.predict`, :mod:`~simcalib.bayes.metrics`,
  :mod:`~simcalib.bayes.paper`, :mod:`~simcalib.bayes.plots` -- output UQ, replication
  metrics, the paper's tables, figures.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ODEModel", "Setting", "build_setting"]


def __getattr__(name: str) -> Any:
    """``ODEModel``, ``Setting`` and ``build_setting``, imported at first use: every
    config check imports :mod:`simcalib.bayes.checks` and with it this package, and the
    ODE stack (sympy, scipy.integrate) would cost every workflow job's start-up."""
    if name == "ODEModel":
        from simcalib.bayes.ode import ODEModel

        return ODEModel
    if name in ("Setting", "build_setting"):
        from simcalib.bayes import models

        return getattr(models, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
