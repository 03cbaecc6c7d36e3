"""Verbs of the metamodel stage: ``train`` (dataset -> metamodel) and ``optimize``
(Optimally-Predict for every target of a targets file)."""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simcalib import io, timing
from simcalib.commands._common import add_study_args, load_params, seed_from_args
from simcalib.errors import ConfigError, DataError

if TYPE_CHECKING:
    from simcalib.metamodel.milp.settings import OptimizeSettings

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
    p.add_argument("--noise-probe", dest="noise_probe",
                   help="sim-noise's probe CSV: the replicate noise the trust flag is judged "
                   "against (noise ceiling); with replicates the dataset's <output>_sd "
                   "columns give it without a probe")
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


def _train_params(args: argparse.Namespace
                  ) -> tuple[dict[str, Any], list[str], list[str], dict[str, Any]]:
    """(metamodel section, inputs, outputs, noise facts {stochastic, replicates})."""
    if args.config:
        from simcalib.config import load_config
        from simcalib.study.model import build_study
        from simcalib.study.noise import noise_facts

        study = build_study(load_config(args.config), args.study)
        return (dict(study.cfg.get("metamodel") or {}), study.input_names, study.outputs,
                noise_facts(study.cfg))
    p = load_params(args.params)
    for key in ("inputs", "outputs"):
        if not p.get(key):
            raise ConfigError(f"--params.{key}", "missing or empty")
    # params without noise facts (a command run by hand): unknown noise, no replicates
    facts = {"stochastic": None, "replicates": 1, **(p.get("noise") or {})}
    return dict(p.get("metamodel") or {}), list(p["inputs"]), list(p["outputs"]), facts


def _noise(args: argparse.Namespace, facts: dict[str, Any], df: Any,
           outputs: list[str]) -> dict[str, Any] | None:
    """The replicate-noise estimate for training: the probe's, else the dataset's
    replicate spreads; None when neither exists."""
    from simcalib.study.noise import is_stochastic, noise_from_probe, noise_from_replicates

    est = None
    if args.noise_probe:
        est = noise_from_probe(io.read_csv(args.noise_probe, ["pair"]), outputs)
    else:
        est = noise_from_replicates(df, outputs, int(facts["replicates"]))
    if est is None:
        return None
    est["stochastic"] = is_stochastic(facts["stochastic"], est)
    return est


def _fit_failure(df: Any, inputs: list[str], cfg: dict[str, Any], seed: int, study: str
                 ) -> Any:
    """The run-success classifier on every design run (None when none failed): OP
    then avoids where the simulator failed (:mod:`simcalib.metamodel.failure`)."""
    from simcalib.metamodel.failure import fit_failure

    ok = (df["status"] == "ok").to_numpy() if "status" in df else None
    if ok is None or ok.all():
        return None
    fm = fit_failure(df[inputs].to_numpy(dtype=float), ok, inputs, cfg.get("failure"), seed,
                     tag=study)
    if fm is not None:
        i = fm.info
        log.info("%s: %d of %d design runs failed; run-success classifier trained "
                 "(held-out accuracy %.3f, balanced %.3f): OP solves are constrained to "
                 "predicted success >= %g", study, i["failed"], i["runs"], i["accuracy"],
                 i["balanced_accuracy"], fm.threshold)
    return fm


def cmd_train(args: argparse.Namespace) -> int:
    from simcalib.metamodel.failure import save_failure
    from simcalib.metamodel.training import train_metamodel

    cfg, inputs, outputs, facts = _train_params(args)
    if args.threads:
        cfg["threads"] = args.threads
    df = io.read_csv(args.dataset, required=[*inputs, *outputs])
    mm, metrics = train_metamodel(df, inputs, outputs, cfg, seed_from_args(args), args.study,
                                  noise=_noise(args, facts, df, outputs))
    mm.save(args.outdir)
    fm = _fit_failure(df, inputs, cfg, seed_from_args(args), args.study)
    save_failure(fm, args.outdir)
    shown = dict(metrics["test_r2"])
    for name, rec in (metrics.get("series") or {}).items():  # a curve: one R², not per point
        shown = {k: v for k, v in shown.items() if not k.startswith(f"{name}@")}
        shown[f"{name} (curve, {rec['components']} components)"] = rec["test_r2"]
    r2 = ", ".join(f"{k} {v:.4f}" for k, v in shown.items())
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
    if metrics.get("noise"):
        ceil = metrics["noise"]["ceiling"]
        line += ("; noise ceiling (max R2 the simulator's noise allows): "
                 + ", ".join(f"{k} {v:.3f}" for k, v in ceil.items()))
    if metrics.get("low_r2_outputs"):
        what = ("explainable share (R2 / noise ceiling)" if metrics.get("noise")
                else "test R2")
        line += f"; WARNING: {what} below min_r2 for {metrics['low_r2_outputs']}"
    log.info(line)
    print(line)
    return 0


def _optimize_params(args: argparse.Namespace) -> tuple[Any, OptimizeSettings]:
    """The study's space and its optimize settings, built once (the named solver
    option set resolved and checked: a misspelled option is a ConfigError here)."""
    from simcalib.metamodel.milp.settings import OptimizeSettings
    from simcalib.study.space import build_space

    key = f"studies.{args.study}"
    over = {"threads": args.threads} if args.threads else {}
    if args.config:
        from simcalib.config import load_config
        from simcalib.study.model import build_study

        config = load_config(args.config)
        study = build_study(config, args.study)
        opt = OptimizeSettings.build(study.cfg["optimize"], config["solvers"],
                                     f"{key}.optimize")
        return study.space, _with_threads(opt, over)
    p = load_params(args.params)
    if "space" not in p:
        raise ConfigError("--params.space", "missing (parameters, contexts, constraints)")
    opt = OptimizeSettings.build(p.get("optimize"), None, f"{key}.optimize",
                                 solver=p.get("solver") or {})
    return build_space(p["space"], key), _with_threads(opt, over)


def _with_threads(opt: OptimizeSettings, over: dict[str, Any]) -> OptimizeSettings:
    """``--threads`` replaces the option set's solver threads."""
    if not over:
        return opt
    import dataclasses

    return dataclasses.replace(opt, solver=opt.solver.replace(threads=int(over["threads"])))


def cmd_optimize(args: argparse.Namespace) -> int:
    from simcalib.metamodel.failure import load_metamodel

    space, opt = _optimize_params(args)
    mm = load_metamodel(args.metamodel)
    mm.check_compatible(args.study, space.input_names,
                        source=str(Path(args.metamodel) / "metamodel.json"))
    targets = io.read_csv(args.targets, required=[*space.context_names, *mm.output_names])
    targets = io.ok_rows(targets)
    if targets.empty:
        raise DataError(args.targets, "no target with status ok")
    t0 = time.perf_counter()
    from simcalib.metamodel.milp.targets import solve_targets

    df = solve_targets(args.study, space, mm, targets, opt, seed_from_args(args))
    timing.write_csv(df, args.output)  # seconds -> op_timing.csv
    n_opt = int((df["status"] == "optimal").sum())
    line = (f"{args.study}: OP for {len(targets)} targets in {time.perf_counter() - t0:.1f} s; "
            f"{n_opt}/{len(df)} proven optimal; median solve {df['seconds'].median():.2f} s")
    if bool(df["low_r2"].any()):
        line += "; metamodel test R2 below min_r2 (flag low_r2)"
    log.info(line)
    print(line)
    return 0
