"""A calibration-ready noisy Rosenbrock study in a folder (design simulated, a small
metamodel trained, targets drawn, the job's params written): what the tests of
``cal-run`` blocks and of ``simcalib batch`` start from."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pandas as pd

from simcalib import io
from simcalib.metamodel.strategies.runner import calibrate
from simcalib.metamodel.strategies.scale import RunScale
from simcalib.metamodel.training import train_metamodel
from simcalib.study import Study
from simcalib.study.simulation import make_design, make_targets, simulate_rows

SOLVER = {"time_limit": 10, "obbt": {"enabled": False}, "warm_start": {"samples": 200}}


def rosen_calibration(d: Path, cfg: dict[str, Any], seed: int, budget: int) -> list[str]:
    """Write ``mm/``, ``targets.csv`` and ``params.json`` (stochastic, ``budget`` runs,
    rescore 2, a two-round adaptive) into ``d``; return the arguments every
    calibration verb of the study shares (study, params, seed, solver, metamodel,
    targets)."""
    study = Study("rosen", cfg)
    ds = simulate_rows(study, make_design(study, seed), seed)
    mm, _ = train_metamodel(ds, study.input_names, study.outputs,
                            {"hidden": [8], "epochs": 20, "patience": 20, "threads": 1},
                            seed, "rosen")
    mm.save(d / "mm")
    t = simulate_rows(study, make_targets(study, seed, "targets"), seed,
                      stream="targets:targets", id_column="target_id")
    io.write_csv(t, d / "targets.csv")
    params = {**{k: cfg[k] for k in ("simulator", "parameters", "contexts", "constraints")},
              "noise": {"stochastic": True},
              "calibration": {"budget": budget, "proximity": 0.05, "rescore": 2,
                              "adaptive": {"rounds": 2, "update": "both", "epochs": 2}},
              "metamodel": {"threads": 1}}
    (d / "params.json").write_text(json.dumps(params))
    return ["--study", "rosen", "--params", f"@{d / 'params.json'}", "--seed", str(seed),
            "--solver", json.dumps(SOLVER), "--metamodel", str(d / "mm"),
            "--targets", str(d / "targets.csv")]


#: a tiny ensemble and node-limited proposals: sequential's tests run in seconds
SEQ_SMALL = {"sequential": {"ensemble": {"members": 3, "hidden": [8, 8], "epochs": 300,
                                         "warm_epochs": 100, "patience": 50},
                            "solver": {"options": {"mip_max_nodes": 200}}}}


def warped_plane_study(fail: dict | None = None, noisy_sd: float | None = None) -> Study:
    """The warped plane (tests/sim_fixtures.py) as a Python-function study on [0, 1]^2,
    optionally failing in the box ``fail`` or with Gaussian noise of sd ``noisy_sd``."""
    from tests.conftest import REPO

    fn = "warped_plane" if noisy_sd is None else "noisy_warped_plane"
    opts: dict[str, Any] = {"function": f"tests.sim_fixtures:{fn}", "path": str(REPO),
                            "outputs": ["a", "b"]}
    if noisy_sd is not None:
        opts["options"] = {"sd": noisy_sd}
    sim: dict[str, Any] = {"type": "python", "options": opts}
    if fail is not None:
        sim["fail_region"] = fail
    return Study("wp", {"simulator": sim, "outputs": ["a", "b"],
                        "parameters": {"x": {"lower": 0.0, "upper": 1.0},
                                       "y": {"lower": 0.0, "upper": 1.0}},
                        "constraints": []})


def plane_target() -> pd.DataFrame:
    """One target of :func:`warped_plane_study` with its true inputs (x 0.62, y 0.27)."""
    x, y = 0.62, 0.27
    return pd.DataFrame({"target_id": [0], "x": [x], "y": [y], "a": [x + 0.5 * y * y],
                         "b": [y + 0.5 * x * x]})


def run_plane_sequential(study: Study, cal: dict[str, Any], seed: int,
                         caplog: Any) -> tuple[pd.Series, pd.DataFrame]:
    """``sequential`` on :func:`plane_target` with no metamodel (Δ's scale from its
    start), its INFO log captured: (the record, the run log)."""
    with caplog.at_level(logging.INFO, logger="simcalib.metamodel.strategies.sequential"):
        rec, runs = calibrate(study, RunScale(["x", "y"], ["a", "b"]), plane_target(),
                              "sequential", cal, {"backend": "highs"}, seed)
    return rec.iloc[0], runs
