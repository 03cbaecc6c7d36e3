"""The hardening-law study (paper 2, §4.2) on the finite-element specimen.

Three sources, each a study of the workflow whose simulator is ``type: tension_fe``
(:mod:`simcalib.simulators.tension_fe`): ``s0`` the Holloman law with Table 2's fixed
constants (high fidelity), ``s1`` / ``s2`` the Voce law with one / two saturation
terms, their constants drawn over Table 2's ranges by the study's design.  Their runs
are designed, chunked, journaled and cached by the simulation stage like any study's;
this module turns the three ``dataset.csv`` files into iPro-NC's long table (one row
per specimen and load step: inputs ``a, b, u``, outputs ``F`` and the 12 points'
``ux, uy, uz``), computes the theta^MSE reference and runs the direct least-squares
baseline with the FE model itself.

Splits follow the design order (a Sobol or random design's prefix is as spread as the
whole): the last ``n_test`` successful runs of a source are its test specimens, of the
rest a ``val_fraction / (1 + val_fraction)`` share (at least one) validates and the
remainder trains, so ``design.n = n_train (1 + val_fraction) + n_test``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from simcalib.errors import ConfigError, DataError
from simcalib.multisource.problem import ProblemSpec, SourceSpec

log = logging.getLogger("simcalib.multisource")

# Table 2 of the paper (E in MPa here).
HOLLOMAN = {"E": 206000.0, "nu": 0.26, "sigma0": 650.0, "K": 1500.0, "n": 0.36}
VOCE_RANGES = {"E": (100000.0, 300000.0), "nu": (0.2, 0.4), "sigma0": (400.0, 900.0),
               "R0": (1000.0, 5000.0), "Rinf1": (0.0, 800.0), "b1": (5.0, 500.0),
               "Rinf2": (0.0, 800.0), "b2": (5.0, 500.0)}
THETA = {"s1": ["E", "nu", "sigma0", "R0", "Rinf1", "b1"],
         "s2": ["E", "nu", "sigma0", "R0", "Rinf1", "b1", "Rinf2", "b2"]}
ELASTIC = ["E", "nu", "sigma0"]
SOURCES = ("s0", "s1", "s2")
LAW = {"s0": "holloman", "s1": "voce1", "s2": "voce2"}
OUT_GROUPS = {"ux": [f"ux{i:02d}" for i in range(1, 13)],
              "uy": [f"uy{i:02d}" for i in range(1, 13)],
              "uz": [f"uz{i:02d}" for i in range(1, 13)],
              "F": ["F"]}
Y_COLS = [c for g in OUT_GROUPS.values() for c in g]
#: each output group's column indices in Y_COLS (the least-squares fits' groups)
GROUP_INDEX = [[Y_COLS.index(c) for c in g] for g in OUT_GROUPS.values()]


def problem() -> ProblemSpec:
    return ProblemSpec(sources=[SourceSpec("s0", [], True), SourceSpec("s1", THETA["s1"]),
                                SourceSpec("s2", THETA["s2"])],
                       x=["a", "b", "u"], outputs={k: list(v) for k, v in OUT_GROUPS.items()})


def check_studies(config: Mapping[str, Any], key: str = "multisource.hardening"
                  ) -> tuple[float, int]:
    """The FE case's three studies exist, run ``tension_fe`` with the source's law, have
    the inputs the source needs and share the load steps and the specimen.  Returns
    their shared ``(u_max, n_steps)``."""
    names = config["multisource"]["hardening"]["studies"]
    studies = config.get("studies") or {}
    steps = {}
    for src in SOURCES:
        name = names.get(src)
        if name not in studies:
            raise ConfigError(f"{key}.studies.{src}", f"no study {name!r} in `studies` "
                              f"(have: {sorted(studies)})")
        steps[src] = _check_source_study(config, src, name, studies[name])
    if len(set(map(repr, steps.values()))) > 1:
        raise ConfigError(f"{key}.studies", "the three studies must share u_max, n_steps and "
                          f"specimen (loads and points must match); got {steps}")
    u_max, n_steps, _ = steps["s0"]
    return float(u_max), int(n_steps)


def _check_source_study(config: Mapping[str, Any], src: str, name: str,
                        st: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """One source's FE study: its simulator, inputs, size and outputs; returns its
    ``(u_max, n_steps, specimen)`` (which the three studies must share)."""
    from simcalib.simulators.tension_fe import DEFAULTS

    sim = st.get("simulator") or {}
    opts = sim.get("options") or {}
    skey = f"studies.{name}.simulator"
    if sim.get("type") != "tension_fe":
        raise ConfigError(f"{skey}.type", f"source {src} of the hardening case needs a "
                          f"tension_fe simulator, not {sim.get('type')!r}")
    if opts.get("law", "holloman") != LAW[src]:
        raise ConfigError(f"{skey}.options.law", f"source {src} is the {LAW[src]} law, "
                          f"not {opts.get('law', 'holloman')!r}")
    if (sim.get("replicates") or 1) > 1 or sim.get("derived_outputs") or sim.get("fail_region"):
        raise ConfigError(skey, "the hardening case reads the FE outputs as they are: "
                          "no replicates, derived_outputs or fail_region")
    inputs = set(st.get("parameters") or {}) | set(st.get("contexts") or {})
    need = {"a", "b", *THETA.get(src, [])}
    if inputs != need:
        raise ConfigError(f"studies.{name}.parameters", f"source {src} needs exactly the "
                          f"inputs {sorted(need)}, has {sorted(inputs)}")
    n = (st.get("design") or {}).get("n")
    least = int(config["multisource"]["hardening"]["data"]["n_test"]) + 3
    if isinstance(n, int) and n < least:
        raise ConfigError(f"studies.{name}.design.n", f"{n} runs leave no 2 training and 1 "
                          f"validation specimens after n_test; at least {least}")
    if st.get("outputs"):
        raise ConfigError(f"studies.{name}.outputs", "leave out: the hardening case "
                          "needs every FE output")
    return (opts.get("u_max", DEFAULTS["u_max"]), opts.get("n_steps", DEFAULTS["n_steps"]),
            opts.get("specimen") or {})


def _steps(columns: list[str]) -> list[str]:
    return sorted({c.rsplit("_s", 1)[1] for c in columns if c.startswith("F_s")})


def to_long(wide: pd.DataFrame, u_steps: np.ndarray) -> pd.DataFrame:
    """One FE dataset (a row per run, ``<output>_sKK`` columns) -> a row per step."""
    ks = _steps(list(wide.columns))
    if len(ks) != len(u_steps):
        raise DataError("dataset", f"{len(ks)} load steps in the outputs, expected "
                        f"{len(u_steps)}")
    parts = []
    for i, k in enumerate(ks):
        cols = {c: wide[f"{c}_s{k}"].to_numpy(float) for c in Y_COLS}
        parts.append(pd.DataFrame({"run_id": wide["run_id"].to_numpy(), "a": wide["a"],
                                   "b": wide["b"], "u": u_steps[i], **cols,
                                   "_step": i}))
    return (pd.concat(parts, ignore_index=True).sort_values(["run_id", "_step"])
            .drop(columns="_step").reset_index(drop=True))


def split_sizes(n: int, n_test: int, val_fraction: float) -> tuple[int, int, int]:
    """(train, val, test) specimens of a source with ``n`` successful runs."""
    rest = n - n_test
    n_val = max(1, round(rest * val_fraction / (1.0 + val_fraction)))
    if rest - n_val < 2:
        raise DataError("dataset", f"{n} successful runs leave fewer than 2 training "
                        f"specimens after {n_test} test and {n_val} validation specimens")
    return rest - n_val, n_val, n_test


def from_runs(datasets: Mapping[str, pd.DataFrame], params: Mapping[str, Any],
              rng: np.random.Generator, files: Mapping[str, str] | None = None
              ) -> pd.DataFrame:
    """iPro-NC's long table from the three sources' FE datasets (see module doc).
    ``noise_rel`` adds Gaussian noise with sd = noise_rel * sd(output group) to the
    HF rows (noise-free copies kept as ``true_<output>``)."""
    u_steps = np.linspace(params["u_max"] / params["n_steps"], params["u_max"],
                          int(params["n_steps"]))
    frames, spec_id = [], 0
    for src in SOURCES:
        df = datasets[src]
        name = (files or {}).get(src, src)
        if "run_id" not in df or "status" not in df:
            raise DataError(name, "not a simulation dataset (no run_id / status column)")
        ok = df[df["status"] == "ok"].sort_values("run_id").reset_index(drop=True)
        failed = len(df) - len(ok)
        if failed:
            kinds = df.loc[df["status"] != "ok", "status"].value_counts().to_dict()
            log.warning("hardening: source %s: %d of %d FE runs failed (%s); left out of "
                        "the data", src, failed, len(df), kinds)
        sizes = split_sizes(len(ok), int(params["n_test"]), float(params["val_fraction"]))
        split = np.repeat(["train", "val", "test"], sizes)
        missing = [t for t in THETA.get(src, []) if t not in ok]
        if missing:
            raise DataError(name, f"source {src}: missing input column(s) {missing}")
        long = to_long(ok, u_steps)
        per_run = len(u_steps)
        long.insert(0, "specimen", np.repeat(np.arange(len(ok)) + spec_id, per_run))
        spec_id += len(ok)
        long.insert(0, "split", np.repeat(split, per_run))
        long.insert(0, "source", src)
        for t in THETA["s2"]:
            long[t] = (np.repeat(ok[t].to_numpy(float), per_run) if t in THETA.get(src, [])
                       else np.nan)
        frames.append(long.drop(columns="run_id"))
        log.info("hardening: source %s: %d train, %d val, %d test specimens x %d steps", src,
                 *sizes, per_run)
    return with_noise(pd.concat(frames, ignore_index=True), float(params["noise_rel"]),
                      rng)


def with_noise(df: pd.DataFrame, noise_rel: float, rng: np.random.Generator) -> pd.DataFrame:
    """Keep each output's noise-free copy as ``true_<output>``, then add Gaussian noise
    with sd = ``noise_rel`` * sd(output group) to the HF rows (both models' tables)."""
    for c in Y_COLS:
        df[f"true_{c}"] = df[c]
    if noise_rel > 0:
        hf = df["source"] == "s0"
        for cols in OUT_GROUPS.values():
            sd = float(np.std(df.loc[hf, cols].to_numpy()))
            df.loc[hf, cols] += rng.normal(size=(int(hf.sum()), len(cols))) * noise_rel * sd
    return df


def theta_mse(eps_max: float, n_points: int = 400) -> pd.DataFrame:
    """theta^MSE of s1 and s2: the Voce law closest (least squares in stress) to
    Holloman's hardening curve over the plastic strains the HF runs reach,
    ``[0, eps_max]``, with Holloman's E and nu (the elastic constants are shared
    physics; ``theta_ref`` holds Holloman's E, nu, sigma0, the paper's reference).

    Why a curve fit, not least squares of the FE outputs: two materials with the same
    elastic constants and yield curve over the strains reached give the same FE
    responses, so this is the best any calibration of a Voce source can do, and it
    costs no FE runs.  Voce's sigma0 lands above Holloman's 650 MPa because Holloman's
    slope is infinite at eps_p = 0."""
    from scipy.optimize import least_squares

    from simcalib.simulators.fe.material import hardening

    eps = np.linspace(0.0, eps_max, n_points)
    target = hardening("holloman", HOLLOMAN, eps)[0]
    rows = []
    for src in ("s1", "s2"):
        names = [t for t in THETA[src] if t not in ("E", "nu")]
        lo = np.array([VOCE_RANGES[t][0] for t in names])
        hi = np.array([VOCE_RANGES[t][1] for t in names])

        def resid(z: np.ndarray, names: list[str] = names, lo: np.ndarray = lo,
                  hi: np.ndarray = hi, law: str = LAW[src]) -> np.ndarray:
            p = dict(zip(names, lo + z * (hi - lo), strict=True))
            return (hardening(law, p, eps)[0] - target) / HOLLOMAN["sigma0"]

        best = None
        for z0 in np.linspace(0.1, 0.9, 5):
            res = least_squares(resid, np.full(len(names), z0), bounds=(0.0, 1.0),
                                xtol=1e-12, ftol=1e-12)
            if best is None or res.cost < best.cost:
                best = res
        fit = dict(zip(names, lo + best.x * (hi - lo), strict=True))
        fit.update(E=HOLLOMAN["E"], nu=HOLLOMAN["nu"])
        rmse = float(np.sqrt(2 * best.cost / n_points) * HOLLOMAN["sigma0"])
        for t in THETA[src]:
            rows.append({"source": src, "parameter": t, "theta_mse": fit[t],
                         "theta_ref": HOLLOMAN[t] if t in ELASTIC else np.nan,
                         "objective": rmse})
    return pd.DataFrame(rows)


def fe_model(simulator: Any, src: str, a: np.ndarray, b: np.ndarray
             ) -> Callable[[list[dict[str, float]]], list[np.ndarray]]:
    """thetas -> each one's outputs [specimens * steps, 37] from the source's FE
    simulator (rows ordered specimen-major, steps inside, as :func:`to_long`)."""
    def run(thetas: list[dict[str, float]]) -> list[np.ndarray]:
        out = []
        for th in thetas:
            rows = pd.DataFrame({"a": a, "b": b, **{t: th[t] for t in THETA[src]}})
            res = simulator.run(rows, np.zeros(len(rows), dtype=np.int64))
            long = to_long(res.assign(run_id=np.arange(len(rows)), a=a, b=b), simulator.u)
            y = long[Y_COLS].to_numpy(float, copy=True)
            y[np.repeat((res["status"] != "ok").to_numpy(), len(simulator.u))] = np.nan
            out.append(y)
        return out
    return run


def lsq_fit(simulators: Mapping[str, Any], hf: pd.DataFrame, n_starts: int,
            rng: np.random.Generator, max_nfev: int) -> dict[str, dict[str, dict[str, float]]]:
    """Direct least squares of each Voce FE model against the HF specimens ``hf``
    (long rows), every parameter free: the baseline that needs no emulator but pays
    (parameters + 1) x specimens FE runs per iteration."""
    from simcalib.multisource.baselines import least_squares_fit, start_points

    hf = hf.sort_values(["specimen", "u"])
    first = hf.drop_duplicates("specimen")
    a, b = first["a"].to_numpy(float), first["b"].to_numpy(float)
    y = hf[Y_COLS].to_numpy(float)
    fits = {}
    for src in ("s1", "s2"):
        batch = fe_model(simulators[src], src, a, b)
        fits[src] = least_squares_fit(lambda th, f=batch: f([th])[0], y, GROUP_INDEX,
                                      {t: VOCE_RANGES[t] for t in THETA[src]},
                                      start_points(len(THETA[src]), n_starts, rng),
                                      max_nfev=max_nfev, batch_model=batch)
    return fits
