"""The ``params`` of the bayes rules, built from a validated config.

Used both by the Snakemake rules (``bayes.smk`` passes the result as ``--params``
JSON, so reruns track exactly what changed) and by the CLI's ``--config FILE`` route,
so a step run by hand samples with exactly the settings of the workflow.

Params carry what a job reads, never where the config happens to lie: a user model
and data file are named by the files they resolve to (relative to the working
directory when inside it; with the model file's sha256, so editing the model reruns
its fits), and the directory searched for a ``module:function`` model is the one it
was found in.  So the same config copied to another folder (or loaded and dumped
again, which sorts its keys: every mapping here is key-sorted) replans no job.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from typing import Any

from simcalib.bayes.loading import module_dir, resolve_path, search_dirs


def _rel(path: str) -> str:
    """``path`` relative to the working directory when inside it (moving the whole
    project reruns nothing), else absolute."""
    rel = os.path.relpath(os.path.abspath(path))
    return os.path.abspath(path) if rel.startswith("..") else rel


def _sorted(value: Any) -> Any:
    """Mappings with their keys sorted, recursively (lists keep their order)."""
    if isinstance(value, Mapping):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def _sha256(path: str) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def options(config: Mapping[str, Any], setting: str) -> dict[str, Any]:
    """``bayes.setting_options[setting]`` (empty when the setting has none)."""
    return dict(config["bayes"]["setting_options"].get(setting) or {})


def located(config: Mapping[str, Any], setting: str,
            dirs: Sequence[str] = ()) -> dict[str, Any]:
    """The setting's options with its user files resolved: ``data`` (and a
    ``path/file.py:function`` model) as the files found under ``dirs`` then the
    working directory; a ``module:function`` model with ``search_dirs``, the one
    directory it was found in (none when installed); ``model_sha256`` of the model
    file.  Files found nowhere stay as written (the job's reader names them)."""
    opts = options(config, setting)
    where = search_dirs(dirs)
    out: dict[str, Any] = {"options": opts, "search_dirs": []}
    if "data" in opts:
        found = resolve_path(str(opts["data"]), where)
        opts["data"] = _rel(found) if os.path.exists(found) else str(opts["data"])
    if "model" in opts:
        spec = str(opts["model"])
        mod, _, fn = spec.rpartition(":")
        home = module_dir(spec, where)
        if home is not None:
            out["search_dirs"] = [_rel(home)]
            file = os.path.join(home, mod.replace(".", os.sep) + ".py")
            if not os.path.exists(file):
                file = os.path.join(home, mod.replace(".", os.sep), "__init__.py")
            out["model_sha256"] = _sha256(file)
        elif mod.endswith(".py") or "/" in mod or os.sep in mod:
            file = resolve_path(mod, where)
            if os.path.exists(file):
                opts["model"] = f"{_rel(file)}:{fn}"
                out["model_sha256"] = _sha256(file)
    return out


def data_params(config: Mapping[str, Any], setting: str,
                dirs: Sequence[str] = ()) -> dict[str, Any]:
    """params of ``bayes-data``: the setting's options and the dense-grid refinement."""
    return _sorted({**located(config, setting, dirs), "refine": config["bayes"]["refine"]})


def run_params(config: Mapping[str, Any], setting: str,
               dirs: Sequence[str] = ()) -> dict[str, Any]:
    """params of ``bayes-run``: sampler, setting options, convergence thresholds,
    refinement and the number of predictive draws."""
    b = config["bayes"]
    return _sorted({**located(config, setting, dirs), "sampler": b["sampler"],
                    "convergence": b["convergence"], "refine": b["refine"],
                    "predict_draws": b["predict_draws"]})


def replication_params(config: Mapping[str, Any]) -> dict[str, Any]:
    """params of ``bayes-run-batch`` and ``bayes-replication-tables``: the replication
    study's sampler (``bayes.sampler``), convergence rule, refinement, predictive draws
    and whether the output metrics are computed."""
    b = config["bayes"]
    rs = b["replication_study"]
    return _sorted({"sampler": b["sampler"], "convergence": b["convergence"],
                    "refine": b["refine"], "predict_draws": b["predict_draws"],
                    "output_metrics": rs["output_metrics"]})
