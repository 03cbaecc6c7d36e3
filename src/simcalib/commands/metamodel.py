"""Verbs of the metamodel stage: ``train`` (dataset -> metamodel) and ``optimize``
(Optimally-Predict for every target of a targets file)."""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import Any

import pandas as pd

from simcalib import io
from simcalib.commands._common import add_study_args, load_params, seed_from_args
from simcalib.errors import ConfigError, DataError

log = logging.getLogger("simcalib.metamodel")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("mm-train", help="train a study's metamodel on its dataset",
                       description="Train the ReLU metamodel (inputs and outputs standardised on "
                       "the training split, Adam, early stopping) and write model.pt + "
                       "metamodel.json (architecture, scalers, names, test R2/MAE).")
    add_study_args(p, "JSON {metamodel: {...}, inputs: [...], outputs: [...]} (what the "
                   "workflow passes) or @FILE", "study name (recorded in metamodel.json)")
    p.add_argument("--dataset", required=True, help="dataset CSV (inputs, outputs, status)")
    p.add_argument("--output-dir", dest="outdir", required=True,
                   help="directory to write model.pt and metamodel.json into")
    p.add_argument("--threads", type=int, help="torch threads (default: metamodel.threads)")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("mm-optimize", help="Optimally-Predict every target of a targets file",
                       description="For each target (status ok), minimise the weighted sum of "
                       "|metamodel output - target| on standardised outputs over the tunable "
                       "inputs, contexts fixed at the target's, with the MILP backend of the "
                       "named solver option set.  Writes one row per target (and per "
                       "alternative optimum when optimize.alternatives.k > 1).")
    add_study_args(p, "JSON {space: {parameters, contexts, constraints}, optimize: {...}, "
                   "solver: {...}} or @FILE")
    p.add_argument("--metamodel", required=True, help="directory with model.pt, metamodel.json")
    p.add_argument("--targets", required=True, help="targets CSV (inputs, outputs, status)")
    p.add_argument("--output", required=True, help="op.csv to write")
    p.add_argument("--threads", type=int, help="solver threads (default: the option set's)")
    p.set_defaults(func=cmd_optimize)


def _train_params(args: argparse.Namespace) -> tuple[dict[str, Any], list[str], list[str]]:
    if args.config:
        from simcalib.config import load_config
        from simcalib.study import get_study

        study = get_study(load_config(args.config), args.study)
        return dict(study.cfg.get("metamodel") or {}), study.input_names, study.outputs
    p = load_params(args.params)
    for key in ("inputs", "outputs"):
        if not p.get(key):
            raise ConfigError(f"--params.{key}", "missing or empty")
    return dict(p.get("metamodel") or {}), list(p["inputs"]), list(p["outputs"])


def cmd_train(args: argparse.Namespace) -> int:
    from simcalib.metamodel.network import train_metamodel

    cfg, inputs, outputs = _train_params(args)
    if args.threads:
        cfg["threads"] = args.threads
    df = io.read_csv(args.dataset, required=[*inputs, *outputs])
    mm, metrics = train_metamodel(df, inputs, outputs, cfg, seed_from_args(args), args.study)
    mm.save(args.outdir)
    r2 = ", ".join(f"{k} {v:.4f}" for k, v in metrics["test_r2"].items())
    line = (f"{args.study}: metamodel {cfg.get('hidden', mm.hidden)} trained in "
            f"{metrics['train_seconds']:.1f} s ({metrics['epochs_run']} epochs); test R2: {r2}")
    st = metrics.get("stability") or {}
    if st:
        line += (f"; {st['binaries']} of {st['neurons']} neurons unstable over the input box "
                 "(MILP binaries)")
    if metrics.get("solvable"):
        sv = metrics["solvable"]
        line += (f"; solvable training {'applied' if sv['applied'] else 'NOT applied'} "
                 f"(max test R2 drop vs plain {sv['test_r2_max_drop']:.4f})")
    if metrics.get("low_r2_outputs"):
        line += f"; WARNING: test R2 below min_r2 for {metrics['low_r2_outputs']}"
    log.info(line)
    print(line)
    return 0


def _optimize_params(args: argparse.Namespace) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    from simcalib.space import space_from_config

    key = f"studies.{args.study}"
    if args.config:
        from simcalib.config import load_config
        from simcalib.study import get_study

        config = load_config(args.config)
        study = get_study(config, args.study)
        opt = dict(study.cfg.get("optimize") or {})
        name = opt.get("solver", "highs-default")
        solvers = config.get("solvers") or {}
        if name not in solvers:
            raise ConfigError(f"{key}.optimize.solver", f"unknown solver option set {name!r}")
        return study.space, opt, dict(solvers[name])
    p = load_params(args.params)
    if "space" not in p:
        raise ConfigError("--params.space", "missing (parameters, contexts, constraints)")
    return space_from_config(p["space"], key), dict(p.get("optimize") or {}), \
        dict(p.get("solver") or {})


def op_rows(study: str, space: Any, mm: Any, targets: pd.DataFrame, opt: dict[str, Any],
            solver: dict[str, Any], seed: int) -> pd.DataFrame:
    """One row per target (per alternative), in the op.csv layout."""
    from simcalib.metamodel.milp import alternative_optima, optimize

    alt = opt.get("alternatives") or {}
    k = int(alt.get("k", 1))
    low = low_r2_outputs(mm)
    if low:
        log.warning("%s: the metamodel's test R2 is below min_r2 = %g for %s; every OP "
                    "result below is flagged low_r2", study, float(mm.info.get("min_r2", 0.9)),
                    low)
    rows = []
    for _, row in targets.iterrows():
        tid = int(row["target_id"]) if "target_id" in row else int(_)
        target = {o: float(row[o]) for o in mm.output_names}
        context = {c: float(row[c]) for c in space.context_names}
        s = int(seed) + tid
        if k > 1:
            results = alternative_optima(mm, space, target, context, solver, k,
                                         float(alt.get("epsilon", 0.01)),
                                         float(alt.get("distance", 0.1)),
                                         weights=opt.get("weights") or None, seed=s)
        else:
            results = [optimize(mm, space, target, context, solver,
                                weights=opt.get("weights") or None, seed=s)]
        for rank, r in enumerate(results):
            out: dict[str, Any] = {"target_id": tid, "rank": rank}
            out.update({n: v for n, v in zip(space.tunable_names, r.x, strict=True)})
            out.update(context)
            out.update({f"pred_{o}": v for o, v in zip(mm.output_names, r.predicted,
                                                        strict=True)})
            out.update({"objective": r.objective, "bound": r.bound, "gap": r.gap,
                        "status": r.status, "time_limited": r.time_limited,
                        "seconds": round(r.seconds, 4), "nodes": r.nodes, "backend": r.backend,
                        "low_r2": bool(low), "flag": trust_flag(r, low)})
            if r.status != "optimal":
                log.warning("%s target %d rank %d: not proven optimal (%s, gap %.3g): the "
                            "point may not be the metamodel's best", study, tid, rank,
                            r.status, r.gap)
            rows.append(out)
            log.info("%s target %d rank %d: %s objective %.6g gap %.2g in %.2f s", study, tid,
                     rank, r.status, r.objective, r.gap, r.seconds)
    df = pd.DataFrame(rows)
    # inputs in the metamodel's (the config's) order, whatever order the space has
    first = ["target_id", "rank", *mm.input_names]
    return df[first + [c for c in df.columns if c not in first]]


def low_r2_outputs(mm: Any) -> list[str]:
    """Outputs whose test R² is below the metamodel's ``min_r2`` (recomputed from
    ``test_r2`` for metamodels trained before the flag existed)."""
    if "low_r2_outputs" in mm.info:
        return list(mm.info["low_r2_outputs"])
    thr = float(mm.info.get("min_r2", 0.9))
    return [o for o, v in (mm.info.get("test_r2") or {}).items() if not float(v) >= thr]


def trust_flag(r: Any, low: list[str]) -> str:
    """op.csv's ``flag``: empty when the result can be trusted as the metamodel's
    proven optimum; otherwise ``low_r2`` and/or ``unproven(<status>, gap <g>)``."""
    parts = []
    if low:
        parts.append("low_r2")
    if r.status != "optimal":
        parts.append(f"unproven({r.status}, gap {r.gap:.3g})")
    return "; ".join(parts)


def cmd_optimize(args: argparse.Namespace) -> int:
    from simcalib.metamodel.network import Metamodel

    space, opt, solver = _optimize_params(args)
    if args.threads:
        solver["threads"] = args.threads
    mm = Metamodel.load(args.metamodel)
    mm.check_compatible(args.study, space.input_names,
                        source=str(Path(args.metamodel) / "metamodel.json"))
    targets = io.read_csv(args.targets, required=[*space.context_names, *mm.output_names])
    targets = io.ok_rows(targets)
    if targets.empty:
        raise DataError(args.targets, "no target with status ok")
    t0 = time.perf_counter()
    df = op_rows(args.study, space, mm, targets, opt, solver, seed_from_args(args))
    io.write_csv(df, args.output)
    n_opt = int((df["status"] == "optimal").sum())
    line = (f"{args.study}: OP for {len(targets)} targets in {time.perf_counter() - t0:.1f} s; "
            f"{n_opt}/{len(df)} proven optimal; median solve {df['seconds'].median():.2f} s")
    if bool(df["low_r2"].any()):
        line += "; metamodel test R2 below min_r2 (flag low_r2)"
    log.info(line)
    print(line)
    return 0
