"""Build the simulator a study's config names: the registry's entry for its ``type``,
wrapped in the shared replicate/derived-output layer when the config asks for one.

It sits above :mod:`.base` (the protocol and the registry) and every built-in
simulator module, importing them so they register: the one place that knows them all,
so none of them needs to import the package (which would close a cycle).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simcalib.errors import ConfigError
from simcalib.simulators import (  # noqa: F401  (importing them registers the built-ins)
    command_build,
    epidemic_adapter,
    pyfunc,
    rosenbrock,
    tension_fe,
)
from simcalib.simulators.base import REGISTRY, Simulator
from simcalib.simulators.failregion import FailRegion, read_fail_region
from simcalib.simulators.layer import SharedLayer, check_layer, inner_outputs, read_layer_spec


def build_simulator(study: Mapping[str, Any], key: str = "study") -> Simulator:
    """Build the simulator a study names (``study['simulator']['type']``)."""
    spec = study["simulator"]
    kind = spec["type"]
    if kind not in REGISTRY:
        raise ConfigError(f"{key}.simulator.type",
                          f"unknown simulator {kind!r}; known: {sorted(REGISTRY)}")
    replicates, derived = read_layer_spec(spec, f"{key}.simulator")
    inner_study = dict(study)
    need = inner_outputs(study.get("outputs"), derived)
    if need is None:
        inner_study.pop("outputs", None)
    else:
        inner_study["outputs"] = need
    sim = REGISTRY[kind](spec.get("options") or {}, inner_study, f"{key}.simulator.options")
    if replicates > 1 or derived:
        check_layer(sim, replicates, derived, f"{key}.simulator")
        sim = SharedLayer(sim, replicates, derived, f"{key}.simulator")
    names = [*(study.get("parameters") or {}), *(study.get("contexts") or {})]
    boxes = read_fail_region(spec.get("fail_region"), names, f"{key}.simulator.fail_region")
    if boxes:  # a failure region on purpose (tests, benchmarks): docs/strategies.md
        sim = FailRegion(sim, boxes)
    declared = study.get("outputs")
    if declared:
        missing = [o for o in declared if o not in sim.outputs]
        if missing:
            raise ConfigError(f"{key}.outputs", f"{missing} not produced by simulator {kind!r}, "
                              f"which gives {sim.outputs}")
    return sim


