"""Benchmark: simcalib's Optimally-Predict MILP against OMLT, the open-source peer.

A user who wants "the inputs at which a trained ReLU net predicts this target" would
otherwise reach for OMLT (Pyomo + HiGHS).  This script builds the *same* MILP both ways
and solves both with HiGHS under the same settings, target by target in one process:

* ``simcalib``  :func:`simcalib.metamodel.milp.optimize` (interval + OBBT bounds, big-M
  from the tightened bounds, warm start, local-search floor), the whole call timed;
* ``omlt``      OMLT 1.2.2's ``ReluBigMFormulation`` built from simcalib's folded layers
  (:class:`~simcalib.metamodel.milp.problem.OPProblem`: raw tunables in, standardised
  outputs out, contexts folded into the first bias), the OP box as the input bounds,
  integer tunables ``Integers``, the linear domain constraints, and the same objective
  ``min Σ w_j |y_j - ẑ_j|``; solved with Pyomo's appsi HiGHS interface; model building
  (OMLT formulation + Pyomo-to-HiGHS translation) and solve timed together.

Both get 1 thread, absolute gap 1e-4, relative gap 0, simcalib's feasibility
tolerances and the same time limit (simcalib's covers its whole call; OMLT's covers
HiGHS only).  simcalib's option set also turns off HiGHS's RINS/RENS sub-MIPs
(``sub_mip: false``, its default); OMLT keeps HiGHS's defaults unless
``--omlt-options`` says otherwise.  Nets: the same trained nets as
benchmarks/op_milp.py (epidemic study, results/epidemic/dataset.csv, cached in
results/benchmarks/op_milp_models), 2x16, 2x32 and 3x64, plain and solvable;
``--rosenbrock`` adds paper 1's 3x256 Rosenbrock net (config/paper.yaml; needs
results/rosenbrock/dataset.csv from that config:
``snakemake --cores 2 results/rosenbrock/dataset.csv --configfile config/paper.yaml``).

Checks: every target both proved agrees (|Δobjective| <= 1e-3), and each side's
objective equals the torch forward pass at its returned point (integers rounded) to
1e-5.  Writes results/benchmarks/op_peers.csv (one row per net x training x target)
and prints a summary: median CPU per solve (time.process_time) and the OMLT/simcalib
ratio (above 1 = simcalib faster), proven counts, nodes, binaries (simcalib's after
bound tightening, OMLT's as built), and on targets not both proved, whose incumbent
is better.

    python benchmarks/op_peers.py --quick   # 2x16, 2x32 x plain, solvable x 3 targets, 10 s
    python benchmarks/op_peers.py           # + 3x64, 5 targets, 60 s
    python benchmarks/op_peers.py --rosenbrock --nets   # only the 3x256 Rosenbrock net
                                            # (--nets with no names: no epidemic net)
    python benchmarks/op_peers.py --quick --omlt-options \
        '{"mip_heuristic_run_rins": false, "mip_heuristic_run_rens": false}'
                                            # OMLT's HiGHS without the sub-MIPs too

Needs the ``peers`` extra (``pip install -e ".[peers]"``: omlt, pyomo); without it the
script says so and exits 0.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

NETS = {"2x16": [16, 16], "2x32": [32, 32], "3x64": [64, 64, 64]}
QUICK_NETS = ("2x16", "2x32")
ROSENBROCK = ("3x256", [256, 256, 256])
AGREE_TOL = 1e-3  # |Δobjective| between two proven optima (both within 1e-4 of optimal)
FORWARD_TOL = 1e-5  # solver objective vs torch at the returned point, scaled units
HIGHS_OPTIONS = {"mip_abs_gap": 1e-4, "mip_rel_gap": 0.0, "threads": 1,
                 "mip_feasibility_tolerance": 1e-8, "primal_feasibility_tolerance": 1e-8}


def peers_available() -> str | None:
    """None when omlt and pyomo (with a usable appsi HiGHS) import, else why not."""
    for mod in ("omlt", "pyomo"):
        if importlib.util.find_spec(mod) is None:
            return f"{mod} is not installed"
    from pyomo.contrib.appsi.solvers import Highs

    if not Highs().available():
        return "pyomo's appsi HiGHS interface is not available (highspy missing?)"
    return None


# --------------------------------------------------------------------------- OMLT side
def omlt_model(problem: Any) -> Any:
    """The OP MILP as OMLT + Pyomo would build it from the folded layers."""
    import pyomo.environ as pyo
    from omlt import OmltBlock
    from omlt.neuralnet import NetworkDefinition, ReluBigMFormulation
    from omlt.neuralnet.layer import DenseLayer, InputLayer

    n_in, n_out = problem.n_in, problem.n_out
    net = NetworkDefinition(scaled_input_bounds={
        i: (float(problem.lo[i]), float(problem.hi[i])) for i in range(n_in)})
    prev = InputLayer([n_in])
    net.add_layer(prev)
    last = len(problem.layers) - 1
    for k, (W, b) in enumerate(problem.layers):
        layer = DenseLayer(prev.output_size, [W.shape[0]], np.asarray(W, dtype=float).T,
                           np.asarray(b, dtype=float),
                           activation="relu" if k < last else "linear")
        net.add_layer(layer)
        net.add_edge(prev, layer)
        prev = layer
    m = pyo.ConcreteModel()
    m.nn = OmltBlock()
    m.nn.build_formulation(ReluBigMFormulation(net))
    for i in range(n_in):
        if problem.integer[i]:
            m.nn.inputs[i].domain = pyo.Integers
    m.cons = pyo.ConstraintList()
    for a, r, eq in zip(problem.A, problem.rhs, problem.equality, strict=True):
        expr = sum(float(a[i]) * m.nn.inputs[i] for i in range(n_in) if a[i] != 0)
        m.cons.add(expr == float(r) if eq else expr <= float(r))
    y_lo = getattr(problem, "y_lo", None)  # constraint outputs (a run-success guard)
    for j in range(n_out):
        if y_lo is not None and np.isfinite(y_lo[j]):
            m.cons.add(m.nn.outputs[j] >= float(y_lo[j]))
    m.t = pyo.Var(range(n_out), within=pyo.NonNegativeReals)
    m.dev = pyo.ConstraintList()
    for j in range(n_out):
        z = float(problem.target_scaled[j])
        m.dev.add(m.t[j] >= m.nn.outputs[j] - z)
        m.dev.add(m.t[j] >= z - m.nn.outputs[j])
    m.obj = pyo.Objective(expr=sum(float(problem.weights[j]) * m.t[j] for j in range(n_out)),
                          sense=pyo.minimize)
    return m


def n_binaries(m: Any) -> int:
    import pyomo.environ as pyo

    return sum(1 for v in m.component_data_objects(pyo.Var, active=True) if v.is_binary())


def solve_omlt(problem: Any, time_limit: float, seed: int,
               extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Build and solve with appsi HiGHS; CPU and wall cover both."""
    from pyomo.contrib.appsi.base import TerminationCondition
    from pyomo.contrib.appsi.solvers import Highs

    c0, w0 = time.process_time(), time.perf_counter()
    # OMLT initialises its scaled inputs to 0, outside the box: pyomo warns (W1002) per
    # input and model; harmless (HiGHS gets the bounds), so kept out of the output
    quiet = logging.getLogger("pyomo.core")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        m = omlt_model(problem)
    finally:
        quiet.setLevel(level)
    build_cpu = time.process_time() - c0
    opt = Highs()
    opt.config.time_limit = float(time_limit)
    opt.config.load_solution = False
    opt.highs_options = {**HIGHS_OPTIONS, "random_seed": int(seed) % 2_147_483_647,
                         **(extra or {})}
    res = opt.solve(m)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    tc = res.termination_condition
    status = {TerminationCondition.optimal: "optimal",
              TerminationCondition.maxTimeLimit: "time_limit"}.get(tc, str(tc).split(".")[-1])
    x = None
    if res.best_feasible_objective is not None:
        res.solution_loader.load_vars()
        x = np.array([m.nn.inputs[i].value for i in range(problem.n_in)], dtype=float)
    nodes = np.nan
    hm = getattr(opt, "_solver_model", None)
    if hm is not None:
        nodes = int(hm.getInfo().mip_node_count)
    bound = res.best_objective_bound
    return {"status": status, "x": x,
            "objective": np.inf if x is None else float(res.best_feasible_objective),
            "bound": np.nan if bound is None else float(bound), "cpu": cpu, "wall": wall,
            "build_cpu": build_cpu, "nodes": nodes, "binaries": n_binaries(m)}


# --------------------------------------------------------------------------- checks
def torch_objective(mm: Any, problem: Any, x: np.ndarray) -> tuple[np.ndarray, float]:
    """The point as a solver would hand it over (clipped, integers rounded) and the
    metamodel's own (torch) objective there."""
    from simcalib.metamodel.milp.problem import full_inputs

    x = np.clip(np.asarray(x, dtype=float), problem.lo, problem.hi)
    x[problem.integer] = np.round(x[problem.integer])
    y = mm.predict_scaled(full_inputs(mm, problem, x)[None, :])[0]
    return x, float(np.abs(y - problem.target_scaled) @ problem.weights)


def compare_one(mm: Any, space: Any, target: dict, context: dict, solver: dict,
                time_limit: float, seed: int, omlt_first: bool,
                omlt_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Solve one target both ways (order alternates across targets) and check both."""
    from simcalib.metamodel.milp import build_problem, optimize

    problem = build_problem(mm, space, target, context)

    def ours() -> dict[str, Any]:
        c0, w0 = time.process_time(), time.perf_counter()
        r = optimize(mm, space, target, context, solver, seed=seed)
        return {"r": r, "cpu": time.process_time() - c0, "wall": time.perf_counter() - w0}

    if omlt_first:
        o = solve_omlt(problem, time_limit, seed, omlt_options)
        s = ours()
    else:
        s = ours()
        o = solve_omlt(problem, time_limit, seed, omlt_options)
    r = s["r"]
    row: dict[str, Any] = {
        "simcalib_status": r.status, "simcalib_objective": r.objective,
        "simcalib_bound": r.bound, "simcalib_cpu_s": s["cpu"], "simcalib_wall_s": s["wall"],
        "simcalib_nodes": r.nodes,
        "simcalib_binaries": r.info["bounds"]["unstable"],
        "simcalib_bounds_s": r.info["bounds"]["seconds"],
        "simcalib_source": (r.info.get("floor") or {}).get("source", "solver"),
        "omlt_status": o["status"], "omlt_objective": o["objective"], "omlt_bound": o["bound"],
        "omlt_cpu_s": o["cpu"], "omlt_wall_s": o["wall"], "omlt_build_cpu_s": o["build_cpu"],
        "omlt_nodes": o["nodes"], "omlt_binaries": o["binaries"], "omlt_first": omlt_first}
    sx = r.x if np.all(np.isfinite(r.x)) else None
    # NaN where a side returned no point (nothing to check), else whether its
    # objective equals torch's at its point
    row["simcalib_forward_ok"] = np.nan if sx is None else bool(abs(
        torch_objective(mm, problem, sx)[1] - r.objective) <= FORWARD_TOL)
    if o["x"] is not None:
        _, f = torch_objective(mm, problem, o["x"])
        row["omlt_torch_objective"] = f
        row["omlt_forward_ok"] = bool(abs(f - o["objective"]) <= FORWARD_TOL)
    else:
        row["omlt_torch_objective"] = np.nan
        row["omlt_forward_ok"] = np.nan
    both = r.status == "optimal" and o["status"] == "optimal"
    row["both_proven"] = both
    row["abs_diff"] = abs(r.objective - o["objective"]) if both else np.nan
    row["agree"] = bool(both and row["abs_diff"] <= AGREE_TOL) if both else np.nan
    return row


# --------------------------------------------------------------------------- summary
def summarise(out: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (net, tr), g in out.groupby(["net", "training"], sort=False):
        notboth = g[~g["both_proven"].astype(bool)]
        sc, om = notboth["simcalib_objective"], notboth["omlt_objective"]
        ms, mo = g["simcalib_cpu_s"].median(), g["omlt_cpu_s"].median()
        bp = g[g["both_proven"].astype(bool)]
        ps, po = bp["simcalib_cpu_s"].median(), bp["omlt_cpu_s"].median()
        rows.append({
            "net": net, "training": tr, "targets": len(g),
            "limits_s": (f"{g['simcalib_time_limit'].iloc[0]:g}/{g['time_limit'].iloc[0]:g}"
                         if "simcalib_time_limit" in g else f"{g['time_limit'].iloc[0]:g}"),
            "simcalib_proven": int((g["simcalib_status"] == "optimal").sum()),
            "omlt_proven": int((g["omlt_status"] == "optimal").sum()),
            "agree": f"{int(g['agree'].eq(True).sum())}"
                     f"/{int(g['both_proven'].astype(bool).sum())}",
            "max_abs_diff": g["abs_diff"].max(),
            "forward_fail": int(g["simcalib_forward_ok"].eq(False).sum()
                                + g["omlt_forward_ok"].eq(False).sum()),
            "omlt_no_point": int((~np.isfinite(g["omlt_objective"].astype(float))).sum()),
            "simcalib_cpu_s": round(ms, 2), "omlt_cpu_s": round(mo, 2),
            "omlt/simcalib_cpu": round(mo / ms, 2) if ms > 0 else np.nan,
            "ratio_proven": round(po / ps, 2) if len(bp) and ps > 0 else np.nan,
            "omlt/simcalib_wall": round(g["omlt_wall_s"].median()
                                        / g["simcalib_wall_s"].median(), 2),
            "simcalib_nodes": g["simcalib_nodes"].median(),
            "omlt_nodes": g["omlt_nodes"].median(),
            "simcalib_binaries": f"{int(g['simcalib_binaries'].min())}-"
                                 f"{int(g['simcalib_binaries'].max())}",
            "omlt_binaries": int(g["omlt_binaries"].max()),
            "unproven": len(notboth),
            "simcalib_better": int((sc < om - 1e-6).sum()),
            "omlt_better": int((om < sc - 1e-6).sum()),
        })
    return pd.DataFrame(rows)


def print_summary(out: pd.DataFrame) -> None:
    t = summarise(out)
    with pd.option_context("display.width", 250, "display.max_columns", 40):
        print("\n" + t.to_string(index=False))
    print("\nomlt/simcalib_cpu: median OMLT CPU per solve / median simcalib CPU per solve "
          "(above 1 = simcalib faster; ratio_proven: the same over the targets both proved, "
          "the speed comparison proper; on time-limited solves CPU mostly measures the "
          "limit); limits_s: simcalib's / OMLT's time limit per solve; unproven = targets "
          "not proved by both, compared by incumbent "
          "(simcalib_better / omlt_better); binaries: simcalib's unstable neurons after "
          "bound tightening, OMLT's binaries as built (HiGHS presolve fixes the stable ones)")
    bad = out[out["agree"].eq(False)]
    if len(bad):
        print(f"\nDISAGREE on {len(bad)} proven pair(s): "
              + ", ".join(f"{r.net} {r.training} target {r.target} "
                          f"(Δ {r.abs_diff:.2e})" for r in bad.itertuples()))
    nf = int(summarise(out)["forward_fail"].sum())
    if nf:
        print(f"\nFORWARD-PASS CHECK FAILED on {nf} solve(s) (see *_forward_ok columns)")


# --------------------------------------------------------------------------- main
def _jobs(args: argparse.Namespace, nets: list[str]) -> list[tuple[str, str, list[int], str]]:
    """(net, study, hidden, config) per net."""
    jobs = [(n, args.study, NETS[n], args.config) for n in nets]
    if args.rosenbrock:
        jobs.append((ROSENBROCK[0], "rosenbrock", ROSENBROCK[1], args.rosenbrock_config))
    return jobs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="nets 2x16 and 2x32, 3 targets, 10 s limit")
    ap.add_argument("--config", default="config/config.yaml")
    ap.add_argument("--study", default="epidemic")
    ap.add_argument("--nets", nargs="*", help=f"subset of {list(NETS)} (empty: none)")
    ap.add_argument("--rosenbrock", action="store_true",
                    help="add paper 1's 3x256 Rosenbrock net (needs "
                         "results/rosenbrock/dataset.csv from --rosenbrock-config)")
    ap.add_argument("--rosenbrock-config", default="config/paper.yaml")
    ap.add_argument("--targets", type=int, help="targets per net (default 5, quick 3)")
    ap.add_argument("--time-limit", type=float, help="seconds per solve (default 60, quick 10)")
    ap.add_argument("--simcalib-time-limit", type=float,
                    help="simcalib's limit when it differs from OMLT's --time-limit: on nets "
                         "neither side proves, simcalib at a third of OMLT's limit with the "
                         "better incumbent on every target is >= 3x faster to an answer at "
                         "least as good (both limits are HiGHS wall-clock)")
    ap.add_argument("--training", nargs="*", default=["plain", "solvable"],
                    choices=["plain", "solvable"])
    ap.add_argument("--solver", default="{}",
                    help="JSON overrides of simcalib's option set (e.g. '{\"sub_mip\": true}')")
    ap.add_argument("--omlt-options", default="{}",
                    help="JSON of extra HiGHS options for the OMLT side (e.g. simcalib's "
                         "'{\"mip_heuristic_run_rins\": false, "
                         "\"mip_heuristic_run_rens\": false}')")
    ap.add_argument("--output", default="results/benchmarks/op_peers.csv")
    args = ap.parse_args(argv)
    omlt_options = json.loads(args.omlt_options)
    why = peers_available()
    if why:
        print(f"op_peers: skipped, {why} (pip install -e '.[peers]')")
        return 0

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from op_milp import get_metamodel, get_targets

    from simcalib import io
    from simcalib.config import load_config
    from simcalib.study import build_study

    nets = list(QUICK_NETS) if args.quick and args.nets is None else (
        list(NETS) if args.nets is None else args.nets)
    unknown = [n for n in nets if n not in NETS]
    if unknown:
        ap.error(f"--nets: unknown {unknown}; choose from {list(NETS)}")
    n_targets = args.targets or (3 if args.quick else 5)
    tl = args.time_limit or (10.0 if args.quick else 60.0)
    stl = args.simcalib_time_limit or tl
    solver = {"backend": "highs", "time_limit": stl, "mip_gap_abs": 1e-4, "threads": 1,
              **json.loads(args.solver)}
    cache = Path("results/benchmarks/op_milp_models")
    rows: list[dict[str, Any]] = []
    warmed = False
    for name, study_name, hidden, cfg_path in _jobs(args, nets):
        config = load_config(cfg_path)
        seed = int(config["seed"])
        study = build_study(config, study_name)
        data = Path(f"results/{study.name}/dataset.csv")
        if not data.exists():
            print(f"[{name}] skipped: {data} is missing (make it with snakemake --cores 2 "
                  f"{data} --configfile {cfg_path})", flush=True)
            continue
        df = io.read_csv(data, required=[*study.input_names, *study.outputs])
        targets = get_targets(study, seed, n_targets)
        for training in args.training:
            t0 = time.perf_counter()
            tag = name if study_name == args.study else f"{study_name}-{name}"
            mm, info = get_metamodel(study, tag, hidden, df, seed, cache, training)
            print(f"[{name} {training}] {study.name}: min test R2 "
                  f"{min(info['test_r2'].values()):.4f}, "
                  f"{int(info['stability']['binaries'])} binaries over the box "
                  f"(trained/loaded in {time.perf_counter() - t0:.1f} s)", flush=True)
            for k, (_, trow) in enumerate(targets.iterrows()):
                tid = int(trow["target_id"])
                target = {o: float(trow[o]) for o in study.outputs}
                context = {c: float(trow[c]) for c in study.space.context_names}
                if not warmed:  # imports and first-call costs of both sides, not timed
                    compare_one(mm, study.space, target, context,
                                {**solver, "time_limit": 1.0}, 1.0, seed, False)
                    warmed = True
                row = compare_one(mm, study.space, target, context, solver, tl, seed + tid,
                                  omlt_first=bool(k % 2), omlt_options=omlt_options)
                rows.append({"net": name, "study": study.name, "training": training,
                             "target": tid, "time_limit": tl, "simcalib_time_limit": stl,
                             **row})
                print(f"  {name} {training} target {tid:2d}: simcalib {row['simcalib_status']:10s}"
                      f" {row['simcalib_objective']:.5f} {row['simcalib_cpu_s']:6.2f} CPU-s"
                      f" {row['simcalib_nodes']:6d} nodes {row['simcalib_binaries']:3d} bin | "
                      f"omlt {row['omlt_status']:10s} {row['omlt_objective']:.5f} "
                      f"{row['omlt_cpu_s']:6.2f} CPU-s {row['omlt_nodes']:6.0f} nodes",
                      flush=True)
                Path(args.output).parent.mkdir(parents=True, exist_ok=True)
                pd.DataFrame(rows).to_csv(args.output + ".partial", index=False)
    if not rows:
        print("op_peers: nothing run")
        return 0
    out = pd.DataFrame(rows)
    io.write_csv(out, args.output)
    Path(args.output + ".partial").unlink(missing_ok=True)
    print_summary(out)
    print(f"\nwrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
