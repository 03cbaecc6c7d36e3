"""The iPro-NC stage's steps as library functions (what the ``ms-*`` verbs call):
generate a case's data, fit a scenario over several seeds and read out its tables,
the direct least-squares baseline.  Commands only parse arguments and write files.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from simcalib.errors import ConfigError, DataError
from simcalib.multisource.problem import ProblemSpec
from simcalib.seeds import int_seed, rng

if TYPE_CHECKING:
    from simcalib.multisource.training import FitSettings

log = logging.getLogger("simcalib.multisource")

CASES = ("analytic", "hardening")


def fe_simulators(params: Mapping[str, Any], sources: tuple[str, ...] = ("s0", "s1", "s2")
                  ) -> dict[str, Any]:
    """Source -> its FE study's simulator, built from the study config in ``params``."""
    from simcalib.simulators.factory import build_simulator

    return {src: build_simulator(st, f"studies.{st['name']}")
            for src, st in params["studies"].items() if src in sources}


def _model(params: Mapping[str, Any]) -> str:
    """The hardening case's model (``fe`` or ``bar``): data_params puts the validated
    ``multisource.hardening.model`` there; a hand-written params file must name it."""
    if "model" not in params:
        raise ConfigError("--params.model", "missing: the hardening case's model, fe "
                          "(the FE studies' runs) or bar (the built-in bar fixture)")
    return str(params["model"])


def generate(case: str, params: Mapping[str, Any], seed: int,
             datasets: Mapping[str, str] | None = None
             ) -> tuple[pd.DataFrame, ProblemSpec, pd.DataFrame]:
    """A case's data table, its problem declaration and the theta^MSE reference.
    The hardening case on the FE model (``params['model'] == 'fe'``) reads its
    sources' runs from ``datasets`` (source -> the FE study's dataset.csv)."""
    g = rng(seed, "multisource", case, "data")
    if case == "analytic":
        from simcalib.multisource import analytic as A

        df = A.generate(params["n_train"], params["val_fraction"], params["n_test"],
                        params["noise_var"], g)
        spec = A.problem()
        rows = []
        for src in ("s1", "s2"):
            t = A.theta_mse(src)
            rows += [{"source": src, "parameter": k, "theta_mse": t[k],
                      "theta_ref": np.nan, "objective": t["objective"]} for k in A.THETA[src]]
        mse = pd.DataFrame(rows)
    elif _model(params) == "fe":
        from simcalib import io
        from simcalib.multisource import hardening as H
        from simcalib.simulators.fe.material import Material
        from simcalib.simulators.fe.specimen import simulate

        missing = [s for s in H.SOURCES if s not in (datasets or {})]
        if missing:
            raise ConfigError("--datasets", f"the FE hardening case needs the FE datasets of "
                              f"sources {missing} (source=path)")
        hf = fe_simulators(params, ("s0",))["s0"]   # its loads, specimen and constants
        frames = {src: io.read_csv(datasets[src], required=["run_id", "status", "a", "b"])
                  for src in H.SOURCES}
        df = H.from_runs(frames, {**params, "u_max": float(hf.u[-1]), "n_steps": len(hf.u)},
                         g, datasets)
        spec = H.problem()
        # theta^MSE over the plastic strains an HF specimen of mid-range hole reaches
        mid = df.loc[df.source == "s0", ["a", "b"]].mean()
        m = hf.material
        run = simulate(Material("holloman", m["E"], m["nu"],
                                {k: m[k] for k in ("sigma0", "K", "n")}),
                       float(mid["a"]), float(mid["b"]), hf.u, hf.spec)
        eps_max = float(np.max(run.alpha_max))
        log.info("theta^MSE: Voce fitted to Holloman's curve over eps_p in [0, %.3f]",
                 eps_max)
        mse = H.theta_mse(eps_max)
    else:
        from simcalib.multisource import bar_fixture as BAR

        t0 = time.perf_counter()
        df = BAR.generate(params, g)
        log.info("hardening data (1-D bar test fixture): %d rows in %.1f s", len(df),
                 time.perf_counter() - t0)
        spec = BAR.problem()
        mse = BAR.theta_mse(params, rng(seed, "multisource", case, "theta_mse"))
    return df, spec, mse


def scenario_spec(spec_d: dict, params: Mapping[str, Any]) -> ProblemSpec:
    """The case's problem restricted to the scenario's sources and parameters."""
    spec = ProblemSpec.from_dict(spec_d)
    for src, names in (params.get("theta") or {}).items():
        try:
            spec.source(src).theta = list(names)
        except KeyError:
            raise ConfigError(f"theta.{src}", f"no source '{src}' in the problem "
                                              f"({[s.name for s in spec.sources]})") from None
    sources = params.get("sources")
    if not sources:
        raise ConfigError("sources", "list the sources of the scenario")
    unknown = [s for s in sources if s not in [x.name for x in spec.sources]]
    if unknown:
        raise ConfigError("sources", f"unknown source(s) {unknown}; "
                                     f"the problem has {[s.name for s in spec.sources]}")
    sub = spec.subset(list(sources))
    sub.check("scenario")
    return sub


def theta_ref(mse: pd.DataFrame) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for r in mse.itertuples():
        out.setdefault(r.source, {})[r.parameter] = float(r.theta_mse)
    return out


def fixed_values(prev: pd.DataFrame | None, spec: ProblemSpec, fix: list[str],
                 source: str = "--fixed") -> dict[str, dict[str, float]]:
    """Parameters a later step fixes at an earlier step's posterior means."""
    fixed: dict[str, dict[str, float]] = {}
    if not fix:
        return fixed
    if prev is None:
        raise ConfigError("fix", "parameters to fix need --fixed THETA_CSV")
    for s in spec.lf:
        for t in fix:
            if t not in s.theta:
                continue
            v = prev[(prev.source == s.name) & (prev.parameter == t)]["mean"]
            if v.empty:
                raise DataError(source, f"no mean for {s.name}.{t} to fix")
            fixed.setdefault(s.name, {})[t] = float(v.iloc[0])
    return fixed


@dataclass
class ScenarioFit:
    """One scenario's fits over seeds and the tables read out of them."""

    results: list[Any]
    settings: Any
    fixed: dict[str, dict[str, float]]
    n_train: int
    n_val: int
    tables: dict[str, pd.DataFrame]


def fit_scenario(df: pd.DataFrame, spec: ProblemSpec, st: FitSettings,
                 params: Mapping[str, Any], mse: pd.DataFrame,
                 fixed: dict[str, dict[str, float]], seed: int, case: str,
                 scenario: str) -> ScenarioFit:
    """Fit iPro-NC on the scenario over ``st.n_seeds`` seeds (``st`` built once, where
    the command receives the params); theta summaries, posterior draws, RRMSE,
    predictions, latents and training history.  ``params``: the step's options
    (``max_input``)."""
    import torch

    from simcalib.multisource import readout as R
    from simcalib.multisource.training import fit_one

    for col, vmax in (params.get("max_input") or {}).items():
        if col not in spec.x:
            raise ConfigError(f"max_input.{col}", f"not an input column ({spec.x})")
        df = df[df[col] <= vmax + 1e-12].reset_index(drop=True)
    train, val = df[df.split == "train"], df[df.split == "val"]
    test = df[df.split == "test"]
    results = []
    for k in range(st.n_seeds):
        s = int_seed(seed, "multisource", case, scenario, "fit", k)
        label = f"{case}/{scenario} seed {k + 1}/{st.n_seeds}"
        res = fit_one(train, val, spec, st, s, fixed=fixed, label=label)
        log.info("%s: %.1f s", label, res.seconds)
        results.append(res)
    g = torch.Generator().manual_seed(int_seed(seed, "multisource", case,
                                               scenario, "readout") % 2**62)
    per_seed = max(1, st.n_posterior // st.n_seeds)
    samples = pd.concat([R.theta_samples(r, per_seed, g) for r in results], ignore_index=True)
    dparams = pd.concat([R.distribution_params(r) for r in results], ignore_index=True)
    theta = R.theta_summary(samples, dparams, [r.seconds for r in results], theta_ref(mse))
    if "theta_ref" in mse.columns:
        theta = theta.merge(mse[["source", "parameter", "theta_ref"]],
                            on=["source", "parameter"], how="left")
    theta["fit_cpu_seconds"] = float(np.mean([r.cpu_seconds for r in results]))
    theta.insert(0, "scenario", scenario)
    preds = [x.name for x in spec.sources]
    theta_for = {x.name: "calibrated" for x in spec.lf}
    rr = R.rrmse_table(results, test, spec, preds, theta_for)
    rr.insert(0, "scenario", scenario)
    pred = _predictions(results, test, spec, preds, theta_for)
    lat = pd.concat([R.latent_maps(r, train, 300, g) for r in results], ignore_index=True)
    hist = pd.concat([pd.DataFrame(r.history).assign(seed=r.seed) for r in results],
                     ignore_index=True)
    tables = {"theta.csv": theta, "theta_seeds.csv": dparams, "posterior.csv": samples,
              "rrmse.csv": rr, "predictions.csv": pred, "latent.csv": lat,
              "history.csv": hist}
    return ScenarioFit(results, st, fixed, len(train), len(val), tables)


def _predictions(results: list[Any], test: pd.DataFrame, spec: ProblemSpec, preds: list[str],
                 theta_for: dict[str, str]) -> pd.DataFrame:
    """Each source's mean and sd on the high-fidelity test rows, pooled over seeds (the
    sd adds the seeds' spread of the means)."""
    from simcalib.multisource import readout as R

    hf = test[test.source == spec.hf.name].reset_index(drop=True)
    pcols: dict[str, np.ndarray] = {}
    for p in preds:
        ms = [R.predict(r, hf, p, theta_for.get(p, "data")) for r in results]
        mean = np.mean([m for m, _ in ms], axis=0)
        sd = np.sqrt(np.mean([s**2 for _, s in ms], axis=0) + np.var([m for m, _ in ms], axis=0))
        for i, c in enumerate(spec.y_cols):
            pcols[f"{p}_mean_{c}"], pcols[f"{p}_sd_{c}"] = mean[:, i], sd[:, i]
    keep = [*spec.x, *spec.y_cols] + [c for c in hf.columns if c.startswith("true_")]
    return pd.concat([hf[keep].reset_index(drop=True), pd.DataFrame(pcols)], axis=1)


def models_payload(spec: ProblemSpec, fit: ScenarioFit) -> dict[str, Any]:
    """What ``models.pt`` holds: the declaration, settings and every seed's network."""
    return {"spec": spec.to_dict(), "settings": vars(fit.settings),
            "models": [{"seed": r.seed, "state": r.model.state_dict(),
                        "scaling": r.scaling.to_dict()} for r in fit.results]}


def fit_info(case: str, scenario: str, spec: ProblemSpec, fit: ScenarioFit,
             threads: int) -> dict[str, Any]:
    """``fit.json``: what was fitted, on how many rows, in how long."""
    return {"case": case, "scenario": scenario, "sources": [x.name for x in spec.sources],
            "fixed": fit.fixed, "n_train_rows": fit.n_train, "n_val_rows": fit.n_val,
            "fit_seconds": [r.seconds for r in fit.results],
            "fit_cpu_seconds": [r.cpu_seconds for r in fit.results],
            "best_epoch": [r.best_epoch for r in fit.results],
            "threads": threads, "settings": vars(fit.settings)}


def least_squares(case: str, params: Mapping[str, Any], df: pd.DataFrame, seed: int
                  ) -> pd.DataFrame:
    """Baseline: direct least squares of each LF model against the HF training data."""
    from simcalib.multisource import baselines as B

    hf = df[(df.source == "s0") & (df.split == "train")].reset_index(drop=True)
    g = rng(seed, "multisource", case, "lsq")
    frames = []
    if case == "analytic":
        from simcalib.multisource import analytic as A

        y = hf[list(A.OUTPUTS)].to_numpy(float)
        x = hf["x"].to_numpy(float)
        for src in ("s1", "s2"):
            names = A.THETA[src]
            fit = B.least_squares_fit(
                lambda th, s=src: A.f_source(s, x, th), y, [[0], [1], [2]],
                {t: A.THETA_RANGE for t in names}, B.start_points(len(names), 5, g))
            frames.append(B.to_frame(src, fit, "lsq_direct"))
    elif _model(params) == "fe":
        from simcalib.multisource import hardening as H

        specimens = hf.drop_duplicates("specimen")["specimen"].iloc[:int(params["lsq_specimens"])]
        rows = hf[hf["specimen"].isin(specimens)]
        log.info("least squares of each Voce FE model against %d HF training specimens",
                 len(specimens))
        fits = H.lsq_fit(fe_simulators(params, ("s1", "s2")), rows, int(params["lsq_starts"]), g,
                         int(params["lsq_max_nfev"]))
        frames = [B.to_frame(src, fit, "lsq_direct") for src, fit in fits.items()]
    else:
        from simcalib.multisource import bar_fixture as H

        geom = H.Geometry(n_el=int(params["n_el"]))
        u_steps = np.linspace(params["u_max"] / params["n_steps"], params["u_max"],
                              int(params["n_steps"]))
        hf = hf.sort_values(["specimen", "u"]).reset_index(drop=True)
        spec_rows = hf.drop_duplicates("specimen")
        a, b = spec_rows["a"].to_numpy(float), spec_rows["b"].to_numpy(float)
        cols = [c for grp in H.OUT_GROUPS.values() for c in grp]
        y = hf.sort_values(["specimen", "u"])[cols].to_numpy(float)
        for src in ("s1", "s2"):
            fit = H.lsq_fit(src, a, b, u_steps, geom, y,
                            B.start_points(len(H.THETA[src]), int(params["lsq_starts"]), g),
                            int(params["lsq_max_nfev"]))
            frames.append(B.to_frame(src, fit, "lsq_direct"))
    return pd.concat(frames, ignore_index=True)
