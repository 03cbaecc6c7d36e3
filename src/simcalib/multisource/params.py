"""The ``params`` each multi-source verb gets, built from a validated config.

One function per verb, used both by the Snakemake rules (``multisource.smk`` passes
the result as ``--params`` JSON, so reruns track exactly what changed) and by the CLI's
``--config FILE`` route (a step run by hand gets the same settings as in the workflow).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simcalib.errors import ConfigError

STEPS = ("step1", "step2")


def _case(config: Mapping[str, Any], case: str) -> Mapping[str, Any]:
    ms = config.get("multisource") or {}
    if case not in ms or not isinstance(ms[case], Mapping):
        raise ConfigError(f"multisource.{case}", "no such multi-source case in the config")
    return ms[case]


def split_case(label: str) -> tuple[str, str | None]:
    """``"hardening/step1"`` -> ``("hardening", "step1")``; ``"analytic"`` -> ``(.., None)``."""
    case, _, step = label.partition("/")
    if step and step not in STEPS:
        raise ConfigError("--case", f"unknown step {step!r} (one of {', '.join(STEPS)})")
    return case, step or None


# what the hardening case reads of each FE study: its simulator and input space
FE_STUDY_KEYS = ("simulator", "parameters", "contexts")


def data_params(config: Mapping[str, Any], case: str) -> dict[str, Any]:
    """params of ``ms-data`` and ``ms-lsq``: the case's data settings; for the hardening
    case on the FE model (``model: fe``) also its model, the three studies' names and
    the parts of their configs that decide the runs (so a change there reruns both)."""
    c = _case(config, case)
    d = dict(c["data"])
    if case == "hardening":
        d["model"] = c["model"]
        if d["model"] == "fe":
            studies = config.get("studies") or {}
            d["studies"] = {src: {"name": name, **{k: studies[name][k] for k in FE_STUDY_KEYS
                                                   if k in studies.get(name, {})}}
                            for src, name in (c.get("studies") or {}).items()}
    return d


def fe_datasets(config: Mapping[str, Any]) -> dict[str, str]:
    """Source -> the ``dataset.csv`` of its FE study (the hardening case's inputs)."""
    c = _case(config, "hardening")
    if c["model"] != "fe":
        return {}
    return {src: f"results/{name}/dataset.csv" for src, name in c["studies"].items()}


def fit_params(config: Mapping[str, Any], case: str, scenario: str,
               step: str | None = None) -> dict[str, Any]:
    """params of ``ms-fit``: the merged fit settings (``multisource.fit``, then the
    case's and the step's overrides), the scenario's sources and the step's options
    (step 1: the calibrated parameters and the input cap; step 2: the fixed ones)."""
    c = _case(config, case)
    scenarios = c.get("scenarios") or {}
    if scenario not in scenarios:
        raise ConfigError(f"multisource.{case}.scenarios",
                          f"no scenario {scenario!r} (have: {', '.join(scenarios)})")
    if step is not None and step not in c:
        raise ConfigError(f"multisource.{case}.{step}", "no such step in this case")
    fit = {**config["multisource"]["fit"], **c["fit"], **(c[step]["fit"] if step else {})}
    d: dict[str, Any] = {"fit": fit, "sources": scenarios[scenario]}
    if step == "step1":
        d["theta"] = {s: list(c["step1"]["theta"]) for s in ("s1", "s2")}
        d["max_input"] = {"u": c["step1"]["u_max"]}
    elif step == "step2":
        d["fix"] = list(c["step2"]["fix"])
    return d
