"""Settings of the ``calibration`` section: defaults (read from the schema, the one
source of truth) and the checks a strategy's settings must pass before any run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from simcalib.config import check_section, schema_defaults
from simcalib.errors import ConfigError
from simcalib.metamodel.strategies.registry import get

#: nested sections merged one level deep (a user's partial section keeps the defaults)
_NESTED = ("adaptive", "blackbox", "gpbo", "posterior", "select", "sequential")
#: sections nested one level further, merged the same way
_NESTED2 = {"sequential": ("ensemble", "solver")}


def defaults() -> dict[str, Any]:
    """The ``calibration`` section's defaults, from calibration.schema.yaml."""
    return schema_defaults("calibration.schema.yaml")


#: a study's metamodel section may travel with the settings (adaptive fine-tuning)
_CARRIED = ("metamodel",)


def merged_settings(cfg: Mapping[str, Any] | None) -> dict[str, Any]:
    """``cfg`` over the schema defaults (one level deep for the nested sections); an
    unknown or mistyped key is an error (also from Python)."""
    cfg = dict(cfg or {})
    check_section({k: v for k, v in cfg.items() if k not in _CARRIED},
                  "calibration.schema.yaml", "calibration")
    base = defaults()
    out = {**base, **cfg}
    for sec in _NESTED:
        if sec in base:
            out[sec] = {**base[sec], **(cfg.get(sec) or {})}
            for sub in _NESTED2.get(sec, ()):
                out[sec][sub] = {**(base[sec].get(sub) or {}),
                                 **((cfg.get(sec) or {}).get(sub) or {})}
    return out


def check_settings(strategy: str, budget: int, proximity: float, settings: Mapping[str, Any],
                   key: str = "calibration") -> None:
    """Bad input fails here, before any simulator run, with the key path."""
    spec = get(strategy, f"{key}.strategies")
    if not isinstance(budget, int | np.integer) or budget < spec.min_budget:
        raise ConfigError(f"{key}.budget", f"strategy {strategy!r} needs a budget of at least "
                          f"{spec.min_budget} simulation run(s), got {budget}")
    if not (isinstance(proximity, int | float) and 0.0 < float(proximity) <= 1.0):
        raise ConfigError(f"{key}.proximity", f"must lie in (0, 1], got {proximity}")
    if spec.check is not None:
        spec.check(settings, key)


def solver_set_name(study_cfg: Mapping[str, Any]) -> str | None:
    """The solver option set calibration's OP solves use: ``calibration.solver``, else
    the study's ``optimize.solver`` (the one place this choice is made)."""
    return ((study_cfg.get("calibration") or {}).get("solver")
            or (study_cfg.get("optimize") or {}).get("solver"))


def solver_options(config: Mapping[str, Any], study: str) -> dict[str, Any]:
    """The option set named by :func:`solver_set_name` (``{}``: the backend defaults)."""
    name = solver_set_name(config["studies"][study])
    return dict((config.get("solvers") or {}).get(name, {})) if name else {}
