"""Config checks for the ``bayes`` section that a JSON schema cannot express.

Cheap on purpose (they run when the workflow starts): settings must be built in or
name a model factory, burn-in must be shorter than the chain, bounds ordered, priors
proper.  Building the ODE models (sympy) is left to the jobs.
"""

from __future__ import annotations

import math
from typing import Any

from simcalib.bayes.models import BUILTIN
from simcalib.config import semantic_check
from simcalib.errors import ConfigError


@semantic_check
def check_bayes(config: dict[str, Any]) -> None:
    b = config.get("bayes") or {}
    s = b.get("sampler") or {}
    if "iterations" in s and s.get("burn_in", 0) >= s["iterations"]:
        raise ConfigError("bayes.sampler.burn_in", f"must be < iterations ({s['iterations']})")
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
            from simcalib.bayes.models import make_setting

            make_setting(name, o, "bayes.setting_options")
        for k in ("gamma_prior", "ell_prior", "sigma2_prior"):
            if k in o and o[k][1] <= 0:
                raise ConfigError(f"bayes.setting_options.{name}.{k}", "second value must be > 0")
        if "sigma2_prior" in o and o["sigma2_prior"][0] <= 0:
            raise ConfigError(f"bayes.setting_options.{name}.sigma2_prior", "alpha must be > 0")
