"""``type: tension_fe``: paper 2's tension specimen (a bar with an elliptical hole,
:mod:`simcalib.simulators.fe`) behind the simulator protocol, so its runs are
designed, chunked, journaled, cached and cluster-submitted like any other study's.

One run is one specimen pulled through ``n_steps`` reference displacements up to
``u_max``.  Its inputs (the study's parameters and contexts) are the hole's
semi-axes ``a`` (across the load) and ``b`` (along it) and any material constants of
the chosen hardening law (``E``, ``nu``, ``sigma0`` and ``K``, ``n`` or ``R0``,
``Rinf1``, ``b1``, ...); every constant that is not an input comes from
``options.material`` (for ``law: holloman`` the paper's Table 2 values by default).
Outputs, per load step ``kk`` (01 .. n_steps): ``F_skk`` (reaction force, N) and
``uxPP_skk``, ``uyPP_skk``, ``uzPP_skk`` (mm) for the 12 surface points ``PP``
(01 .. 12) of :meth:`~simcalib.simulators.fe.specimen.Specimen.points`; a study may
declare a subset in ``outputs``.  A hole that does not fit the bar (or swallows an
output point) is an ``invalid_input`` row; a Newton iteration that does not converge
after the step cuts is an ``error`` row.  Deterministic: the seed is not used.

Units: mm, MPa, N.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from simcalib.errors import ConfigError
from simcalib.simulators.base import (
    STATUS_ERROR,
    STATUS_INVALID,
    STATUS_OK,
    check_options,
    finalize,
    register,
)
from simcalib.simulators.fe.material import ELASTIC, LAWS, Material
from simcalib.simulators.fe.mesh import MeshSize

if TYPE_CHECKING:
    from simcalib.simulators.fe.specimen import Specimen

# Table 2 of paper 2: the high-fidelity source's fixed Holloman constants (MPa).
HOLLOMAN = {"E": 206000.0, "nu": 0.26, "sigma0": 650.0, "K": 1500.0, "n": 0.36}
N_POINTS = 12
DEFAULTS: dict[str, Any] = {"law": "holloman", "material": {}, "u_max": 0.8, "n_steps": 10,
                            "specimen": {}, "mesh": {}, "a": None, "b": None, "tol": 1e-9}
SPECIMEN_KEYS = ("width", "thickness", "length")
MESH_KEYS = ("n_arc", "n_rad", "n_top", "ratio", "top_ratio")


def output_names(n_steps: int) -> list[str]:
    """Every output of a run, step by step: F, then ux, uy, uz of points 01..12."""
    names = []
    for k in range(1, n_steps + 1):
        names.append(f"F_s{k:02d}")
        for g in ("ux", "uy", "uz"):
            names += [f"{g}{p:02d}_s{k:02d}" for p in range(1, N_POINTS + 1)]
    return names


def u_steps(u_max: float, n_steps: int) -> np.ndarray:
    """The reference displacements of the steps: equal increments up to ``u_max``."""
    return np.linspace(u_max / n_steps, u_max, n_steps)


class TensionFE:
    """One FE run per input row (see the module docstring)."""

    def __init__(self, law: str, material: Mapping[str, float], u_max: float, n_steps: int,
                 spec: Specimen, hole: Mapping[str, float], tol: float = 1e-9) -> None:
        self.law, self.material, self.spec, self.hole = law, dict(material), spec, dict(hole)
        self.u = u_steps(u_max, n_steps)
        self.tol = tol
        self.outputs = output_names(n_steps)

    def one(self, row: Mapping[str, float]) -> tuple[dict[str, float], str, str]:
        """Outputs, status and message of one specimen."""
        # the FE stack (scikit-fem, scipy.sparse) is imported by the runs, not by the
        # registry: every job that builds any simulator imports this module
        from simcalib.simulators.fe.solver import FEError
        from simcalib.simulators.fe.specimen import simulate

        vals = {**self.material, **self.hole,
                **{k: float(v) for k, v in row.items()}}
        if not all(np.isfinite(v) for v in vals.values()):
            return {}, STATUS_INVALID, "non-finite input"
        try:
            mat = Material(self.law, vals["E"], vals["nu"],
                           {k: vals[k] for k in LAWS[self.law]})
            r = simulate(mat, vals["a"], vals["b"], self.u, self.spec, tol=self.tol)
        except ConfigError as err:
            return {}, STATUS_INVALID, str(err)
        except (FEError, np.linalg.LinAlgError, FloatingPointError) as err:
            return {}, STATUS_ERROR, f"{type(err).__name__}: {err}"
        out: dict[str, float] = {}
        for k in range(len(self.u)):
            out[f"F_s{k + 1:02d}"] = float(r.F[k])
            for g, arr in (("ux", r.ux), ("uy", r.uy), ("uz", r.uz)):
                for p in range(N_POINTS):
                    out[f"{g}{p + 1:02d}_s{k + 1:02d}"] = float(arr[k, p])
        msg = f"warning: {r.cuts} step cut(s)" if r.cuts else ""
        return out, STATUS_OK, msg

    def run(self, inputs: pd.DataFrame, seeds: np.ndarray, threads: int = 1) -> pd.DataFrame:
        recs, status, message = [], [], []
        for _, row in inputs.iterrows():
            out, st, msg = self.one(row.to_dict())
            recs.append(out)
            status.append(st)
            message.append(msg)
        res = pd.DataFrame(recs, index=inputs.index, columns=self.outputs)
        res["status"], res["message"] = status, message
        return finalize(res, self.outputs, inputs.index)


def _numbers(options: Mapping[str, Any], name: str, keys: tuple[str, ...], key: str
             ) -> dict[str, float]:
    sub = options.get(name) or {}
    if not isinstance(sub, Mapping):
        raise ConfigError(f"{key}.{name}", f"must be a mapping of {list(keys)} to numbers")
    check_options(sub, dict.fromkeys(keys), f"{key}.{name}")
    out = {}
    for k, v in sub.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
            raise ConfigError(f"{key}.{name}.{k}", f"must be a finite number, got {v!r}")
        out[k] = float(v)
    return out


@register("tension_fe")
def build(options: Mapping[str, Any], study: Mapping[str, Any], key: str) -> TensionFE:
    check_options(options, DEFAULTS, key)
    opts = {**DEFAULTS, **options}
    law = opts["law"]
    if law not in LAWS:
        raise ConfigError(f"{key}.law", f"unknown hardening law {law!r}; one of {list(LAWS)}")
    constants = (*ELASTIC, *LAWS[law])
    material = _numbers(opts, "material", constants, key)
    if law == "holloman":
        material = {**HOLLOMAN, **material}
    names = [*(study.get("parameters") or {}), *(study.get("contexts") or {})]
    known = {*constants, "a", "b"}
    unknown = [n for n in names if n not in known]
    study_key = key.rsplit(".", 2)[0]
    if unknown:
        raise ConfigError(f"{study_key}.parameters",
                          f"the tension_fe simulator ({law}) has no input(s) {unknown}; its "
                          f"inputs are a, b and {list(constants)}")
    hole = {}
    for h in ("a", "b"):
        if h in names:
            continue
        if opts[h] is None:
            raise ConfigError(f"{key}.{h}", f"the hole semi-axis {h} is neither an input of "
                              "the study nor set here")
        hole[h] = float(opts[h])
    missing = [c for c in constants if c not in names and c not in material]
    if missing:
        raise ConfigError(f"{key}.material", f"{law}: constant(s) {missing} are neither "
                          "inputs of the study nor set here")
    for k in ("u_max", "tol"):
        if isinstance(opts[k], bool) or not isinstance(opts[k], (int, float)) or opts[k] <= 0:
            raise ConfigError(f"{key}.{k}", f"must be a positive number, got {opts[k]!r}")
    n_steps = opts["n_steps"]
    if isinstance(n_steps, bool) or not isinstance(n_steps, int) or not 1 <= n_steps <= 100:
        raise ConfigError(f"{key}.n_steps", f"must be an integer from 1 to 100, got {n_steps!r}")
    dims = _numbers(opts, "specimen", SPECIMEN_KEYS, key)
    mesh = _numbers(opts, "mesh", MESH_KEYS, key)
    for k in ("n_arc", "n_rad", "n_top"):
        if k in mesh:
            if mesh[k] != int(mesh[k]) or mesh[k] < 1:
                raise ConfigError(f"{key}.mesh.{k}", f"must be a positive integer, "
                                  f"got {mesh[k]!r}")
            mesh[k] = int(mesh[k])
    from simcalib.simulators.fe.specimen import Specimen

    spec = Specimen(**dims, mesh=MeshSize(**mesh))
    return TensionFE(law, material, float(opts["u_max"]), n_steps, spec, hole,
                     float(opts["tol"]))
