"""Config checks of paper 1's sections that a schema cannot express, and the
schema's strategy enum filled from the strategy registry.  Registered on import
(``simcalib.config.CHECK_MODULES``); importing this module must stay light (no torch),
since every Snakemake start validates the config."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simcalib.config import schema_defaults, schema_patch, semantic_check
from simcalib.errors import ConfigError
from simcalib.metamodel.strategies.settings import check_settings, merged_settings
from simcalib.study.model import Study


@schema_patch("calibration.schema.yaml")
def strategy_enum(schema: dict[str, Any]) -> None:
    """The allowed strategy names and the default list come from the registry."""
    from simcalib.metamodel.strategies.registry import registry

    reg = registry()
    props = schema["properties"]
    for key in ("strategies", "extra_strategies"):
        props[key]["items"] = {"enum": list(reg)}
    props["strategies"]["default"] = [n for n, s in reg.items() if s.default]


@semantic_check
def check_metamodel_config(config: Mapping[str, Any]) -> None:
    """A metamodel's split sums to 1; ``optimize.weights`` name outputs of the study."""
    split_default = schema_defaults("metamodel.schema.yaml")["split"]
    for name, cfg in (config.get("studies") or {}).items():
        mcfg = cfg.get("metamodel") or {}
        if not mcfg.get("enabled", False):
            continue
        key = f"studies.{name}"
        if "design" not in cfg:
            raise ConfigError(f"{key}.design", "the metamodel trains on the study's simulated "
                              "design: add a 'design' section (e.g. {n: 256}), or remove "
                              "the 'metamodel' section (sequential needs neither)")
        split = mcfg.get("split") or split_default
        total = sum(float(split.get(k, split_default[k])) for k in ("train", "val", "test"))
        if abs(total - 1.0) > 1e-6:
            raise ConfigError(f"{key}.metamodel.split", f"train + val + test must be 1, got "
                              f"{total:g}")
        weights = (cfg.get("optimize") or {}).get("weights") or {}
        if weights:
            outputs = Study(name, cfg).outputs
            unknown = sorted(set(weights) - set(outputs))
            if unknown:
                raise ConfigError(f"{key}.optimize.weights", f"{unknown} are not outputs of the "
                                  f"study ({outputs})")


@semantic_check
def check_calibration(config: Mapping[str, Any]) -> None:
    """Budgets large enough for every listed strategy, a metamodel where a strategy
    reads one, extra target sets and noise studies that exist, noise studies with the
    same inputs and outputs."""
    studies = config.get("studies") or {}
    for name, cfg in studies.items():
        cal = cfg.get("calibration") or {}
        if not cal.get("enabled", False):
            continue
        key = f"studies.{name}.calibration"
        settings = merged_settings(cal)
        _check_budgets(settings, key)
        _check_metamodel_need(cfg, settings, key)
        dropout = float((cfg.get("metamodel") or {}).get("dropout", 0.0) or 0.0)
        if int(settings.get("mc_samples", 0) or 0) > 0 and dropout <= 0.0:
            raise ConfigError(f"{key}.mc_samples", "MC-dropout samples need a metamodel "
                              "trained with dropout (set metamodel.dropout > 0, or "
                              "mc_samples: 0)")
        _check_extra_targets(cfg, settings, key)
        _check_noise_studies(studies, name, cfg, settings, key)


def _check_budgets(settings: Mapping[str, Any], key: str) -> None:
    for s in {*settings["strategies"], *(settings.get("extra_strategies") or [])}:
        check_settings(s, int(settings["budget"]), float(settings["proximity"]), settings, key)
    for r in settings.get("sweep") or []:
        check_settings("pts", int(settings["budget"]), float(r), settings, f"{key}.sweep")


def _check_extra_targets(cfg: Mapping[str, Any], settings: Mapping[str, Any],
                         key: str) -> None:
    for which in settings.get("extra_targets") or []:
        if which not in (cfg.get("extra_targets") or {}):
            raise ConfigError(f"{key}.extra_targets", f"{which!r} is not one of the "
                              f"study's extra_targets {sorted(cfg.get('extra_targets') or {})}")
        if "file" in cfg["extra_targets"][which] or "file" in (cfg.get("targets") or {}):
            raise ConfigError(f"{key}.extra_targets", f"the in- vs out-of-sample "
                              f"comparison of {which!r} plots calibrated against true "
                              "inputs, which observed targets (targets 'file') do not have; "
                              "calibrate an observed set by making it the study's targets")


def _check_noise_studies(studies: Mapping[str, Any], name: str, cfg: Mapping[str, Any],
                         settings: Mapping[str, Any], key: str) -> None:
    for other in settings.get("noise_studies") or []:
        if other not in studies or other == name:
            raise ConfigError(f"{key}.noise_studies", f"{other!r} is not another "
                              f"study; have {sorted(studies)}")
        ocfg = studies[other]
        if not (ocfg.get("calibration") or {}).get("enabled", False) or \
                "pts" not in merged_settings(ocfg["calibration"])["strategies"]:
            raise ConfigError(f"{key}.noise_studies", f"study {other!r} must enable "
                              "calibration with the pts strategy")
        if (list(ocfg.get("parameters", {})) != list(cfg.get("parameters", {}))
                or list(ocfg.get("contexts", {}) or {})
                != list(cfg.get("contexts", {}) or {})):
            raise ConfigError(f"{key}.noise_studies", f"study {other!r} must have the "
                              f"same parameters and contexts as {name!r}")


def _check_metamodel_need(cfg: Mapping[str, Any], settings: Mapping[str, Any],
                          key: str) -> None:
    """A metamodel where a strategy reads it; a design where sequential starts from it."""
    from simcalib.metamodel.strategies.registry import get, needs_metamodel, run_strategies

    has_mm = bool((cfg.get("metamodel") or {}).get("enabled", False))
    if needs_metamodel(settings) and not has_mm:
        need = sorted(s for s in run_strategies(settings)
                      if get(s).needs_metamodel) or ["pts (the sweep)"]
        raise ConfigError(key, f"strategies {need} need the study's metamodel (add "
                          "'design' and 'metamodel' sections); only sequential runs "
                          "without one")
    if settings["sequential"]["use_design"] and "design" not in cfg and \
            "sequential" in run_strategies(settings):
        raise ConfigError(f"{key}.sequential.use_design", "is true, but the study has no "
                          "'design' section to start from: add one or set use_design false")


@semantic_check
def check_highs_options(config: Mapping[str, Any]) -> None:
    """Raw ``options`` of a HiGHS option set are offered to HiGHS itself at validation,
    so a misspelled name or a wrong value fails now, not in the optimize job.
    (Gurobi parameters are passed through unchecked: a licence may be absent here.)"""
    sets = {name: s for name, s in (config.get("solvers") or {}).items()
            if s.get("backend") == "highs" and s.get("options")}
    if not sets:
        return
    import os

    import highspy

    # HiGHS prints its banner on stdout when an instance is made: keep the start quiet
    with open(os.devnull, "w") as null:
        saved = os.dup(1)
        try:
            os.dup2(null.fileno(), 1)
            h = highspy.Highs()
            h.setOptionValue("output_flag", False)
        finally:
            os.dup2(saved, 1)
            os.close(saved)
    for name, sset in sets.items():
        for opt, value in sset["options"].items():
            key = f"solvers.{name}.options.{opt}"
            if h.getOptionType(str(opt))[0] != highspy.HighsStatus.kOk:
                raise ConfigError(key, "HiGHS has no such option (see the HiGHS option list, "
                                  "e.g. presolve, mip_heuristic_effort, simplex_strategy)")
            if h.setOptionValue(str(opt), value) != highspy.HighsStatus.kOk:
                raise ConfigError(key, f"HiGHS rejected the value {value!r} (wrong type or "
                                  "out of range)")

