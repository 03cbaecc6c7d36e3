"""What a bayes job reads of its ``--params``, as frozen settings built once.

The rules pass the params :mod:`simcalib.bayes.params` builds from the validated
config; a command run by hand may pass fewer keys (then the schema's defaults fill
them: :func:`simcalib.config.schema_defaults`, the one source of defaults).  The
library below the commands takes these objects, never the raw params.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from simcalib.bayes.convergence import Convergence
from simcalib.bayes.sampler_config import SamplerConfig
from simcalib.config import schema_defaults
from simcalib.errors import ConfigError

#: the ``bayes`` section's defaults (bayes.schema.yaml)
_D: dict[str, Any] = schema_defaults("bayes.schema.yaml")


def _mapping(params: Mapping[str, Any], key: str, where: str) -> dict[str, Any]:
    value = params[key] if key in params else {}
    if not isinstance(value, Mapping):
        raise ConfigError(where, f"must be a mapping, got {type(value).__name__}")
    return dict(value)


@dataclass(frozen=True)
class JobSettings:
    """``bayes-data`` / ``bayes-run``: the setting's options (its ``sampler``
    overrides merged into ``sampler``), the convergence rule, the dense grid's
    refinement, the predictive draws and where its user model was found."""

    options: Mapping[str, Any]
    sampler: SamplerConfig
    convergence: Convergence
    refine: int
    predict_draws: int
    search_dirs: tuple[str, ...] = ()

    @classmethod
    def from_params(cls, params: Mapping[str, Any], setting: str) -> JobSettings:
        opts = _mapping(params, "options", "bayes.setting_options")
        overrides = opts.pop("sampler", None) or {}
        base = _mapping(params, "sampler", "bayes.sampler")
        sampler = SamplerConfig.from_dict(
            {**base, **overrides},
            key=f"bayes.setting_options.{setting}.sampler" if overrides else "bayes.sampler")
        merged = {k: params[k] if k in params else _D[k] for k in ("refine", "predict_draws")}
        dirs = params["search_dirs"] if "search_dirs" in params else []
        return cls(opts, sampler, Convergence.from_dict(_mapping(params, "convergence",
                                                                 "bayes.convergence")),
                   int(merged["refine"]), int(merged["predict_draws"]),
                   tuple(str(d) for d in dirs))


@dataclass(frozen=True)
class ReplicationSettings:
    """``bayes-run-batch`` / ``bayes-replication-tables``: the study's sampler (as
    given: each block sets its protocol), convergence rule, refinement, predictive
    draws and whether output metrics are computed."""

    sampler: Mapping[str, Any]
    convergence: Convergence
    refine: int
    predict_draws: int
    output_metrics: bool

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> ReplicationSettings:
        sampler = _mapping(params, "sampler", "bayes.sampler")
        SamplerConfig.from_dict(sampler)           # errors now, naming the key
        rs = {k: params[k] if k in params else _D[k] for k in ("refine", "predict_draws")}
        out = (params["output_metrics"] if "output_metrics" in params
               else _D["replication_study"]["output_metrics"])
        return cls(sampler, Convergence.from_dict(_mapping(params, "convergence",
                                                           "bayes.convergence")),
                   int(rs["refine"]), int(rs["predict_draws"]), bool(out))
