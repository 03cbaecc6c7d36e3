"""Config checks for the ``bayes`` section that a JSON schema cannot express.

Cheap on purpose (they run when the workflow starts): settings must be built in or
name a model factory, burn-in must be shorter than the chain, bounds ordered, priors
proper.  Building the ODE models (sympy) is left to :func:`check_data_settings`, which
the workflow calls once when it starts (it knows where the config files are): user
models are imported and built, data files read and checked against them, so a wrong
module, an rhs of the wrong length, an unknown observed state or a ``t0`` after the
first data time fail before any job runs, naming the setting and the problem.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

from simcalib.config import semantic_check
from simcalib.errors import ConfigError


@semantic_check
def check_bayes(config: dict[str, Any]) -> None:
    # here, not at the top: every config check imports this module, and the ODE models
    # (scipy.integrate) cost a calibration job's start-up 0.1 CPU s it does not need
    from simcalib.bayes.models import BUILTIN

    b = config.get("bayes") or {}
    s = b.get("sampler") or {}
    if "iterations" in s and s.get("burn_in", 0) >= s["iterations"]:
        raise ConfigError("bayes.sampler.burn_in", f"must be < iterations ({s['iterations']})")
    if s.get("theta_kernel", "mwg") != "mwg" and s.get("engine") == "sequential":
        raise ConfigError("bayes.sampler.theta_kernel",
                          "mala and hmc need engine vectorized (the sequential engine has "
                          "the random-walk kernel only)")
    opts = b.get("setting_options") or {}
    for name in b.get("settings") or []:
        if name not in BUILTIN and "model" not in opts.get(name, {}):
            raise ConfigError("bayes.settings",
                              f"unknown setting {name!r}; built-in: {sorted(BUILTIN)}, or "
                              f"define it in bayes.setting_options.{name}.model")
    for name, o in opts.items():
        for p, (lo, hi) in (o.get("bounds") or {}).items():
            if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise ConfigError(f"bayes.setting_options.{name}.bounds.{p}",
                                  f"need finite lower < upper, got [{lo}, {hi}]")
        if o.get("bounds") and (name in BUILTIN or "model" in o):
            # bounds must name parameters of the setting: build it (sympy, about a
            # second, so only where bounds are overridden) and let it check the names
            from simcalib.bayes.models import build_setting

            build_setting(name, o, "bayes.setting_options")
        for k in ("gamma_prior", "ell_prior", "sigma2_prior"):
            if k in o and o[k][1] <= 0:
                raise ConfigError(f"bayes.setting_options.{name}.{k}", "second value must be > 0")
        if "sigma2_prior" in o and o["sigma2_prior"][0] <= 0:
            raise ConfigError(f"bayes.setting_options.{name}.sigma2_prior", "alpha must be > 0")
        so = o.get("sampler") or {}
        if (so.get("theta_kernel", s.get("theta_kernel", "mwg")) != "mwg"
                and s.get("engine") == "sequential"):
            raise ConfigError(f"bayes.setting_options.{name}.sampler.theta_kernel",
                              "mala and hmc need bayes.sampler.engine vectorized")
        it = so.get("iterations", s.get("iterations"))
        if it is not None and so.get("burn_in", s.get("burn_in", 0)) >= it:
            raise ConfigError(f"bayes.setting_options.{name}.sampler.burn_in",
                              f"must be < iterations ({it})")
    conv = b.get("convergence") or {}
    if "r_hat" in conv and conv["r_hat"] < 1.0:
        raise ConfigError("bayes.convergence.r_hat", "R-hat is >= 1 by construction; "
                          f"a threshold of {conv['r_hat']} can never be met")


def check_data_settings(config: dict[str, Any], dirs: Sequence[str] = ()) -> dict[str, str]:
    """Build every selected setting with a user model or a data file (imports the model,
    traces its rhs, reads the data): errors name the setting.  Returns the data file
    of each real-data setting, relative to the working directory when inside it."""
    from simcalib.bayes.models import build_setting
    from simcalib.bayes.sampler import SamplerConfig

    b = config.get("bayes") or {}
    opts = b.get("setting_options") or {}
    out: dict[str, str] = {}
    for name in b.get("settings") or []:
        o = dict(opts.get(name) or {})
        if "model" not in o and "data" not in o:
            continue
        override = o.pop("sampler", None) or {}
        SamplerConfig.from_dict({**(b.get("sampler") or {}), **override},
                                key=f"bayes.setting_options.{name}.sampler")
        setting = build_setting(name, o, dirs=dirs)
        if setting.data is not None:
            rel = os.path.relpath(setting.data)
            out[name] = setting.data if rel.startswith("..") else rel
    return out
