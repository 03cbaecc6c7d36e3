"""The ``params`` of ``bayes-data`` and ``bayes-run``, built from a validated config.

Used both by the Snakemake rules (``bayes.smk`` passes the result as ``--params``
JSON, so reruns track exactly what changed) and by the CLI's ``--config FILE`` route,
so a step run by hand samples with exactly the settings of the workflow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def options(config: Mapping[str, Any], setting: str) -> dict[str, Any]:
    """``bayes.setting_options[setting]`` (empty when the setting has none)."""
    return dict(((config.get("bayes") or {}).get("setting_options") or {}).get(setting) or {})


def data_params(config: Mapping[str, Any], setting: str,
                search_dirs: Sequence[str] = ()) -> dict[str, Any]:
    """params of ``bayes-data``: the setting's options and the dense-grid refinement."""
    return {"options": options(config, setting), "refine": config["bayes"]["refine"],
            "search_dirs": list(search_dirs)}


def run_params(config: Mapping[str, Any], setting: str,
               search_dirs: Sequence[str] = ()) -> dict[str, Any]:
    """params of ``bayes-run``: sampler, setting options, convergence thresholds,
    refinement and the number of predictive draws."""
    b = config["bayes"]
    return {"sampler": b["sampler"], "options": options(config, setting),
            "convergence": b["convergence"], "refine": b["refine"],
            "predict_draws": b["predict_draws"], "search_dirs": list(search_dirs)}


def replication_params(config: Mapping[str, Any]) -> dict[str, Any]:
    """params of ``bayes-run-batch`` and ``bayes-replication-tables``: the replication
    study's sampler (``bayes.sampler``), convergence rule, refinement, predictive draws
    and whether the output metrics are computed."""
    b = config["bayes"]
    rs = b["replication_study"]
    return {"sampler": b["sampler"], "convergence": b["convergence"], "refine": b["refine"],
            "predict_draws": b["predict_draws"], "output_metrics": rs["output_metrics"]}
