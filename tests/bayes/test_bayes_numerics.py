"""Numerical warnings of a Bayes job: prevented at their source, or one worded line.

The default run's "what to trust" block used to list raw numpy lines
(``batched.py:88: RuntimeWarning: overflow encountered in multiply``) from proposals
far in the tails; a fit now runs clean under ``warnings.simplefilter("error")`` and
any floating-point event left is one INFO line naming the chain set.
"""

from __future__ import annotations

import logging
import warnings

import numpy as np

from simcalib.bayes.batched import koh_batch
from simcalib.bayes.kernels import ObsLayout
from simcalib.bayes.models import build_setting
from simcalib.bayes.numerics import numeric_events
from simcalib.bayes.sampler import Likelihood, SamplerConfig, run
from simcalib.bayes.synthetic import simulate
from simcalib.seeds import rng


def test_a_fit_that_used_to_warn_runs_under_warnings_as_errors():
    """This two-mass MOS HMC run proposed log ell beyond 354 (before the fix:
    ``RuntimeWarning: overflow encountered in multiply`` at batched.py:88)."""
    setting = build_setting("two_mass", None)
    sim = simulate(setting, rng(5, "golden", 0))
    pb = Likelihood(setting, sim.obs, "mos")
    cfg = SamplerConfig.from_dict({
        "iterations": 60, "burn_in": 30, "chains": 2, "adapt_every": 20, "ls_starts": 2,
        "log_every": 0, "progress": False, "theta_kernel": "hmc", "leapfrog_steps": 3,
        "theta_boundary": "reflect",
        "until_converged": {"max_iterations": 150, "block": 30, "r_hat": 1.05,
                            "ess_bulk": 50}})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = run(pb, cfg, 3, ("golden", "b"))
    assert res.record["iterations_run"] == 150
    assert all(np.isfinite(c.lp).all() for c in res.chains)


def test_far_out_length_scale_gives_the_limit_without_a_warning():
    """ell beyond 1e154 overflows ell^2: the covariance is gamma everywhere (within an
    output), the exact limit, as for any ell that large."""
    layout = ObsLayout.build(np.linspace(0.0, 1.0, 5), np.zeros(5, dtype=np.int64))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = koh_batch(layout, np.array([2.0, 2.0]), np.array([1e200, 1e150]))
    np.testing.assert_array_equal(c[0], np.full((5, 5), 2.0))
    np.testing.assert_array_equal(c[1], c[0])


def test_floating_point_events_become_one_line_naming_the_run(caplog):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with caplog.at_level(logging.INFO, logger="simcalib.bayes.numerics"), \
                numeric_events("chain set bayes/two_mass/mos/0") as ev:
            big = np.array([1e308]) * 10.0
            inf = np.array([1.0]) / 0.0
            warnings.warn("overflow encountered in exp", RuntimeWarning, stacklevel=1)
    assert big[0] == np.inf and inf[0] == np.inf          # numbers unchanged
    assert ev.counts == {"overflow": 2, "divide by zero": 1}
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and lines[0].startswith("chain set bayes/two_mass/mos/0: 3 ")
    assert "test_bayes_numerics.py" in lines[0] and "rejected" in lines[0]
    # nothing to report: no line
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="simcalib.bayes.numerics"), \
            numeric_events("quiet"):
        np.array([1.0]) * 2.0
    assert not caplog.records
