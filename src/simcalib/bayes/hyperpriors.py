"""Default hyperpriors scaled to the data, for settings that give none.

The paper's priors are unit-scale (its data are O(1)).  On a population series in
the hundreds they put the discrepancy variance gamma and the noise variance sigma^2
a thousand times too small: the sampler then fights the prior (R-hat 1.8, ESS 3 on
such data).  A setting with data and without explicit priors gets, on the modelled
scale (log y for ``positive`` settings):

* ``sigma^2 ~ IG(3, r2)``: prior mean r2 / 2, where ``r2`` is the mean squared residual
  of the least-squares fit of the model (the whole misfit, noise plus discrepancy;
  half of it is the prior guess for the noise);
* ``log gamma ~ N(log r2', 1)`` with ``r2' = min(r2, v)`` and ``v`` the mean per-state
  variance of the data: the discrepancy is a priori about as large as the misfit (a
  factor 7 either way at 95 %), never larger than the data's own spread;
* ``log ell ~ N(log max(span / 4, 2 h), 0.5^2)`` with ``span`` the time span of the
  data and ``h`` the median spacing: smooth on a quarter of the window, never
  shorter than two sampling intervals (a shorter one would be white noise, which
  sigma^2 already describes).

The values, and where they came from, go into run.json and the posterior's attributes.
"""

from __future__ import annotations

import logging
import math
from dataclasses import replace
from typing import Any

import numpy as np

from simcalib.bayes.data import ObsData
from simcalib.bayes.likelihood import Likelihood
from simcalib.bayes.models import UNIT_PRIORS, Setting

log = logging.getLogger(__name__)


def data_scaled_priors(setting: Setting, obs: ObsData, rng: np.random.Generator,
                       ls_starts: int = 8, source: str = "data") -> tuple[Setting, dict[str, Any]]:
    """``setting`` with every missing hyperprior derived from ``obs``; and a record
    of what was derived (empty when the setting gave all three)."""
    if setting.priors_given:
        return setting, {}
    from simcalib.bayes.sampler import Sampler, SamplerConfig

    placeholder = replace(setting, **{k: v for k, v in UNIT_PRIORS.items()
                                      if getattr(setting, k) is None})
    pb = Likelihood(placeholder, obs, "koh", source=source)
    fit = Sampler(pb, SamplerConfig(ls_starts=ls_starts, progress=False)).least_squares_start(rng)
    f = pb.forward(fit["theta"])
    assert f is not None
    resid = pb.y - f[0]
    r2 = float(np.mean(resid**2))
    y = pb.observed_matrix(pb.y)
    v = float(np.nanmean(np.nanvar(y, axis=0, ddof=1)))
    floor = 1e-8 * max(v, 1e-300)
    r2 = max(r2, floor)
    t = np.asarray(obs.t, dtype=np.float64)
    span, h = float(t[-1] - t[0]), float(np.median(np.diff(t)))
    derived = {"gamma_prior": (math.log(min(r2, v) if v > 0 else r2), 1.0),
               "ell_prior": (math.log(max(span / 4.0, 2.0 * h)), 0.5),
               "sigma2_prior": (3.0, r2)}
    changes = {k: v_ for k, v_ in derived.items() if getattr(setting, k) is None}
    record = {"source": "data (least-squares residual, data variance, time span)",
              "ls_residual_variance": r2, "data_variance": v, "time_span": span,
              "median_spacing": h, "ls_theta": dict(zip(setting.params,
                                                        map(float, fit["theta"]), strict=True)),
              **{k: list(v_) for k, v_ in changes.items()}}
    log.info("data-scaled hyperpriors for %s: %s", setting.name,
             {k: tuple(round(x, 4) for x in v_) for k, v_ in changes.items()})
    return replace(setting, **changes), record
