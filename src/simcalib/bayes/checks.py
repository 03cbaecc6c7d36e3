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
from collections.abc import Mapping, Sequence
from typing import Any

from simcalib.config import semantic_check
from simcalib.errors import ConfigError


@semantic_check
def check_bayes(config: dict[str, Any]) -> None:
    """The ``bayes`` section of a validated (schema-defaulted) config."""
    b = config["bayes"]
    _check_sampler(b["sampler"], {}, "bayes.sampler")
    _check_settings_known(b["settings"], b["setting_options"])
    for name, o in b["setting_options"].items():
        _check_options(name, o, b["sampler"])
    if b["convergence"]["r_hat"] < 1.0:
        raise ConfigError("bayes.convergence.r_hat", "R-hat is >= 1 by construction; "
                          f"a threshold of {b['convergence']['r_hat']} can never be met")


def _check_sampler(base: Mapping[str, Any], override: Mapping[str, Any], key: str) -> None:
    """The sampler a run gets (the study's, a setting's overrides on top), as the job
    builds it (burn-in shorter than the chain, kernels the engine has, ...)."""
    from simcalib.bayes.sampler_config import SamplerConfig

    SamplerConfig.from_dict({**base, **override}, key=key)


def _check_settings_known(settings: Sequence[str], opts: Mapping[str, Any]) -> None:
    # here, not at the top: every config check imports this module, and the ODE models
    # (scipy.integrate) cost a calibration job's start-up 0.1 CPU s it does not need
    from simcalib.bayes.models import BUILTIN

    for name in settings:
        if name not in BUILTIN and "model" not in (opts[name] if name in opts else {}):
            raise ConfigError("bayes.settings",
                              f"unknown setting {name!r}; built-in: {sorted(BUILTIN)}, or "
                              f"define it in bayes.setting_options.{name}.model")


def _check_options(name: str, o: Mapping[str, Any], sampler: Mapping[str, Any]) -> None:
    """One ``setting_options`` entry: ordered finite bounds naming the setting's
    parameters, proper priors, and its sampler overrides."""
    from simcalib.bayes.models import BUILTIN

    where = f"bayes.setting_options.{name}"
    bounds = o["bounds"] if "bounds" in o else {}
    for p, (lo, hi) in bounds.items():
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ConfigError(f"{where}.bounds.{p}", f"need finite lower < upper, got [{lo}, {hi}]")
    if bounds and (name in BUILTIN or "model" in o):
        # bounds must name parameters of the setting: build it (sympy, about a
        # second, so only where bounds are overridden) and let it check the names
        from simcalib.bayes.models import build_setting

        build_setting(name, o, "bayes.setting_options")
    for k in ("gamma_prior", "ell_prior", "sigma2_prior"):
        if k in o and o[k][1] <= 0:
            raise ConfigError(f"{where}.{k}", "second value must be > 0")
    if "sigma2_prior" in o and o["sigma2_prior"][0] <= 0:
        raise ConfigError(f"{where}.sigma2_prior", "alpha must be > 0")
    if "sampler" in o:
        _check_sampler(sampler, o["sampler"], f"{where}.sampler")


def check_data_settings(config: dict[str, Any], dirs: Sequence[str] = ()) -> dict[str, str]:
    """Build every selected setting with a user model or a data file (imports the model,
    traces its rhs, reads the data): errors name the setting.  Returns the data file
    of each real-data setting, relative to the working directory when inside it."""
    from simcalib.bayes.models import build_setting

    b = config["bayes"]
    opts = b["setting_options"]
    out: dict[str, str] = {}
    for name in b["settings"]:
        o = dict(opts[name] if name in opts else {})
        if "model" not in o and "data" not in o:
            continue
        o.pop("sampler", None)      # checked by check_bayes
        setting = build_setting(name, o, dirs=dirs)
        if setting.data is not None:
            rel = os.path.relpath(setting.data)
            out[name] = setting.data if rel.startswith("..") else rel
    return out
