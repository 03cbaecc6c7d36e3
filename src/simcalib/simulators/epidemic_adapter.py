"""Registers the FluTE-style epidemic model (:mod:`simcalib.simulators.epidemic`)
as simulator type ``epidemic``; options map onto ``EpidemicOptions`` fields."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from simcalib.errors import ConfigError
from simcalib.simulators.base import check_options, finalize, register


class EpidemicSimulator:
    def __init__(self, options: Any) -> None:
        from simcalib.simulators import epidemic

        self._model = epidemic
        self.options = options
        self.outputs = list(epidemic.OUTPUTS)

    def run(self, inputs: pd.DataFrame, seeds: np.ndarray, threads: int = 1) -> pd.DataFrame:
        raw = self._model.simulate_batch(inputs, self.options, np.asarray(seeds))
        return finalize(raw, self.outputs, inputs.index)


@register("epidemic")
def build(options: Mapping[str, Any], study: Mapping[str, Any], key: str) -> EpidemicSimulator:
    from simcalib.simulators import epidemic

    fields = {f.name: f for f in dataclasses.fields(epidemic.EpidemicOptions)}
    check_options(options, fields, key)
    try:
        opts = epidemic.EpidemicOptions(**dict(options))
    except (TypeError, ValueError) as exc:
        raise ConfigError(key, str(exc)) from None
    names = set(study.get("parameters", {})) | set(study.get("contexts", {}) or {})
    missing = sorted(set(epidemic.INPUTS) - names)
    if missing:
        raise ConfigError(key.rsplit(".", 2)[0] + ".parameters",
                          f"the epidemic simulator needs inputs {missing} "
                          "(as parameters or contexts)")
    return EpidemicSimulator(opts)
