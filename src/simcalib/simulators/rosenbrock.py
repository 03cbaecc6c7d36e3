r"""Rosenbrock with contexts, as in paper 1.

.. math::  f(x, y; a, b) = (a - x)^2 + b\,(y - x^2)^2

``x, y`` are tunable, ``a, b`` contexts; paper 1 samples x ~ U(a-1, a+1) and
y ~ U(a^2-5, a^2+5).  The stochastic variant (paper 1, Appendix F) adds Gaussian
noise with standard deviation ``noise_sd`` (absolute) plus ``noise_rel`` times |f|,
drawn from the row's own seed, so replicates differ and reruns agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from simcalib.errors import ConfigError
from simcalib.simulators.base import STATUS_INVALID, STATUS_OK, check_options, finalize, register

DEFAULTS: dict[str, Any] = {"noise_sd": 0.0, "noise_rel": 0.0, "a": 1.0, "b": 100.0,
                            "output": "f"}


class Rosenbrock:
    """Vectorised Rosenbrock; ``a``/``b`` come from the input columns when present
    (contexts), else from the options."""

    def __init__(self, noise_sd: float = 0.0, noise_rel: float = 0.0, a: float = 1.0,
                 b: float = 100.0, output: str = "f") -> None:
        self.noise_sd, self.noise_rel, self.a, self.b = noise_sd, noise_rel, a, b
        self.outputs = [output]

    def run(self, inputs: pd.DataFrame, seeds: np.ndarray, threads: int = 1) -> pd.DataFrame:
        x = inputs["x"].to_numpy(dtype=float)
        y = inputs["y"].to_numpy(dtype=float)
        a = inputs["a"].to_numpy(dtype=float) if "a" in inputs else np.full_like(x, self.a)
        b = inputs["b"].to_numpy(dtype=float) if "b" in inputs else np.full_like(x, self.b)
        f = rosenbrock(x, y, a, b)
        if self.noise_sd > 0 or self.noise_rel > 0:
            eps = np.array([np.random.default_rng(int(s)).standard_normal() for s in seeds])
            f = f + (self.noise_sd + self.noise_rel * np.abs(f)) * eps
        res = pd.DataFrame({self.outputs[0]: f}, index=inputs.index)
        finite_in = np.isfinite(x) & np.isfinite(y) & np.isfinite(a) & np.isfinite(b)
        res["status"] = np.where(finite_in, STATUS_OK, STATUS_INVALID)
        res["message"] = np.where(finite_in, "", "non-finite input")
        return finalize(res, self.outputs, inputs.index)


def rosenbrock(x: np.ndarray, y: np.ndarray, a: np.ndarray | float = 1.0,
               b: np.ndarray | float = 100.0) -> np.ndarray:
    return (a - x) ** 2 + b * (y - x**2) ** 2


@register("rosenbrock")
def build(options: Mapping[str, Any], study: Mapping[str, Any], key: str) -> Rosenbrock:
    check_options(options, DEFAULTS, key)
    opts = {**DEFAULTS, **options}
    for k in ("noise_sd", "noise_rel"):
        if float(opts[k]) < 0:
            raise ConfigError(f"{key}.{k}", "must be >= 0")
    names = set(study.get("parameters", {})) | set(study.get("contexts", {}) or {})
    missing = {"x", "y"} - names
    if missing:
        raise ConfigError(key.rsplit(".", 2)[0] + ".parameters",
                          "the rosenbrock simulator needs inputs named x and y; "
                          f"missing {sorted(missing)}")
    return Rosenbrock(float(opts["noise_sd"]), float(opts["noise_rel"]), float(opts["a"]),
                      float(opts["b"]), str(opts["output"]))
