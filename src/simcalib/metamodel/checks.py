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
from simcalib.study import Study


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
    """Budgets large enough for every listed strategy, extra target sets and noise
    studies that exist, noise studies with the same inputs and outputs."""
    studies = config.get("studies") or {}
    for name, cfg in studies.items():
        cal = cfg.get("calibration") or {}
        if not cal.get("enabled", False):
            continue
        key = f"studies.{name}.calibration"
        settings = merged_settings(cal)
        for s in {*settings["strategies"],
                  *(settings.get("extra_strategies") or [])}:
            check_settings(s, int(settings["budget"]), float(settings["proximity"]),
                           settings, key)
        for r in settings.get("sweep") or []:
            check_settings("pts", int(settings["budget"]), float(r), settings,
                           f"{key}.sweep")
        if not (cfg.get("metamodel") or {}).get("enabled", False):
            raise ConfigError(key, "calibration needs the study's metamodel (add a "
                              "'metamodel' section with enabled: true)")
        for which in settings.get("extra_targets") or []:
            if which not in (cfg.get("extra_targets") or {}):
                raise ConfigError(f"{key}.extra_targets", f"{which!r} is not one of the "
                                  f"study's extra_targets "
                                  f"{sorted(cfg.get('extra_targets') or {})}")
            if "file" in cfg["extra_targets"][which] or "file" in (cfg.get("targets") or {}):
                raise ConfigError(f"{key}.extra_targets", f"the in- vs out-of-sample "
                                  f"comparison of {which!r} plots calibrated against true "
                                  "inputs, which observed targets (targets 'file') do not have; "
                                  "calibrate an observed set by making it the study's targets")
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
