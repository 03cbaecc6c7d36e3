"""CLI verbs of the calibration stage (paper 1's strategies and experiments).

``cal-anchors``   full-space OP point of every target (solved once, shared)
``cal-run``       one strategy on every target (or one block of them) -> per-target
                  records (+ run log)
``cal-merge``     the blocks of one strategy -> its records and run log, as one job's
``cal-summary``   per-strategy table (summary.csv) and Figs. 2 and 4/6
``cal-sweep``     PtS over proximity values -> sweep.csv and Fig. 5
``cal-contexts``  in-sample vs out-of-sample contexts -> table and Fig. 7
``cal-noise``     PtS across noise levels (Appendix F) -> table and figure

``--params`` is the study's config restricted to what the step reads (simulator,
parameters, contexts, constraints, outputs, and the ``calibration`` settings of this
job); ``--solver`` is the solver option set (``config['solvers'][name]``).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import pickle
import time
from pathlib import Path

import pandas as pd

from simcalib import io, timing
from simcalib.commands._common import (
    add_study_args,
    load_params,
    one_torch_thread,
    seed_from_args,
    study_from_args,
)
from simcalib.errors import ConfigError

log = logging.getLogger(__name__)


def _pairs(items: list[str], what: str) -> list[tuple[str, str]]:
    out = []
    for it in items:
        if "=" not in it:
            raise ConfigError(what, f"expected NAME=PATH, got {it!r}")
        k, v = it.split("=", 1)
        out.append((k, v))
    return out


def _add_common(p: argparse.ArgumentParser) -> None:
    add_study_args(p)
    p.add_argument("--solver", default="{}",
                   help="solver option set as JSON (or @FILE); with --config the "
                   "calibration.solver / optimize.solver set is used when this is omitted")
    p.add_argument("--metamodel",
                   help="metamodel directory (model.pt + metamodel.json); cal-run of a "
                   "strategy that reads no metamodel (sequential) may omit it: Delta's "
                   "scale then comes from the targets' sd_ columns or the start runs")
    p.add_argument("--targets", required=True, help="targets CSV (targets.csv)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cal-anchors", help="full-space OP point of every target",
                       description="Solve Optimally-Predict over the whole input space for "
                       "every target once (or reuse mm-optimize's op.csv) and write the "
                       "anchors CSV that the OP-based strategies (op, stp, pts) start from, so "
                       "the same MILPs are not solved once per strategy.")
    _add_common(p)
    p.add_argument("--solved", help="mm-optimize's op.csv for these targets and solver set: "
                   "its points are reused instead of solving the same MILPs again")
    p.add_argument("--output", required=True, help="anchors CSV to write")
    p.set_defaults(func=cmd_anchors)

    from simcalib.metamodel.strategies.registry import names

    strategies = names()   # the registry: a new strategy appears here by itself
    p = sub.add_parser("cal-run", help="run one calibration strategy on every target",
                       description=f"Run one strategy ({', '.join(strategies)}) "
                       "with the simulation budget of calibration.budget on every target of "
                       "the targets CSV, using the metamodel (and the anchors, when given); "
                       "write one record per target (predicted and actual error) and "
                       "optionally the log of every simulator run.")
    _add_common(p)
    p.add_argument("--strategy", required=True, choices=strategies, metavar="STRATEGY",
                   help=f"one of {', '.join(strategies)} (docs/strategies.md)")
    p.add_argument("--proximity", type=float,
                   help="proximity R (default: calibration.proximity)")
    p.add_argument("--anchors", help="anchors CSV from cal-anchors (else OP is solved)")
    p.add_argument("--design",
                   help="the study's simulated design (dataset.csv): its runs are the start "
                   "of a strategy told to use them (calibration.sequential.use_design), "
                   "counted against its budget; ignored by the others")
    p.add_argument("--threads", type=int, default=1,
                   help="parallel simulator runs within a batch (command simulators; the "
                   "results do not depend on it)")
    p.add_argument("--posterior-meta", dest="posterior_meta",
                   help="posterior.json of cal-posterior: the strategy posterior takes its "
                   "calibrated error scale kappa from it")
    p.add_argument("--block", help="I/N: run only block I (0-based) of N contiguous blocks "
                   "of the targets, for --output-block (cal-merge joins the blocks into the "
                   "records a run over every target has)")
    p.add_argument("--round-state", dest="round_state",
                   help="sequential run as round jobs: the last cal-step's state; the "
                   "search ends here (its last runs from --round-sims) and the records "
                   "are made as one job makes them")
    p.add_argument("--round-sims", dest="round_sims", nargs="*", default=[],
                   help="with --round-state: the last step's cal-sim results")
    p.add_argument("--output", help="per-target records CSV to write")
    p.add_argument("--output-runs", dest="runs",
                   help="run log CSV to write (every simulator run, failed or not)")
    p.add_argument("--output-block", dest="output_block",
                   help="with --block: the block's records and run log (a pickle for "
                   "cal-merge) to write")
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("cal-step", help="one step of sequential run as round jobs",
                       description="Step 0 draws sequential's start; step S >= 1 enters "
                       "step S-1's runs (--sims), fits the ensemble and solves the round's "
                       "proposal MILPs.  Writes the search's state and the step's "
                       "proposals, which cal-sim jobs run (docs/your_simulator.md).")
    _add_common(p)
    p.add_argument("--design", help="the study's simulated design (dataset.csv), as for "
                   "cal-run")
    p.add_argument("--step", type=int, required=True, help="the step (0: the start)")
    p.add_argument("--state", help="step S-1's state (none for step 0)")
    p.add_argument("--sims", nargs="*", default=[], help="step S-1's cal-sim results")
    p.add_argument("--output-state", dest="output_state", required=True,
                   help="the search's state after this step (a pickle) to write")
    p.add_argument("--output-proposals", dest="output_proposals", required=True,
                   help="the step's proposals (a pickle of rows for cal-sim) to write")
    p.set_defaults(func=cmd_seq_step)

    p = sub.add_parser("cal-sim", help="run one chunk of a sequential step's proposals",
                       description="Simulate rows [C x N, (C+1) x N) of a cal-step's "
                       "proposals, journaled run by run, with the seeds the one-job "
                       "search uses.")
    add_study_args(p)
    p.add_argument("--proposals", required=True, help="cal-step's proposals file")
    p.add_argument("--chunk", type=int, required=True, help="the chunk C (0-based)")
    p.add_argument("--chunk-size", dest="chunk_size", type=int, required=True,
                   help="runs per chunk N (calibration.sequential.chunk_size)")
    p.add_argument("--threads", type=int, default=1,
                   help="parallel simulator runs (command simulators; results do not "
                   "depend on it)")
    p.add_argument("--output", required=True,
                   help="the chunk's runs (a pickle for the next cal-step) to write")
    p.set_defaults(func=cmd_seq_sim)

    p = sub.add_parser("cal-merge", help="join the target blocks of one strategy",
                       description="Join the blocks written by cal-run --block (in block "
                       "order) into the strategy's records CSV and run log: the same bytes a "
                       "cal-run over every target writes.")
    p.add_argument("--blocks", nargs="+", required=True, help="block files, in block order")
    p.add_argument("--study", default="", help="study name (for the log line)")
    p.add_argument("--output", required=True, help="per-target records CSV to write")
    p.add_argument("--output-runs", dest="runs", help="run log CSV to write")
    p.set_defaults(func=cmd_merge)

    p = sub.add_parser("cal-score", help="re-simulate and score inputs chosen elsewhere "
                       "(another tool's answer), as the strategies are scored",
                       description="Re-simulate a CSV of inputs (one row per target: "
                       "target_id and one column per tunable input, NAME or x_NAME) and score "
                       "it against the targets with the strategies' Δ (training sd or the "
                       "targets' sd_ columns) and the same re-scoring seeds "
                       "(calibration.rescore); write records that cal-summary reads beside "
                       "the strategies' (--records NAME=FILE). See docs/strategies.md.")
    _add_common(p)
    p.add_argument("--inputs", required=True,
                   help="CSV of inputs to score: target_id and one column per tunable input")
    p.add_argument("--name", default="given",
                   help="the name the records carry in their strategy column (default given)")
    p.add_argument("--output", required=True, help="per-target records CSV to write")
    p.set_defaults(func=cmd_score)

    p = sub.add_parser("cal-summary",
                       help="per-strategy summary table and box plots (Figs. 2, 4, 6)",
                       description="Read each strategy's per-target records and write the "
                       "per-strategy summary table (mean/median error, wins, budget used, "
                       "metamodel trust columns) and the box plots of paper 1's Figs. 2, 4 "
                       "and 6.")
    p.add_argument("--records", nargs="+", required=True, help="STRATEGY=CSV pairs")
    p.add_argument("--output", required=True, help="summary CSV to write")
    p.add_argument("--output-figure", dest="figure",
                   help="box plot of actual error per strategy (PNG) to write")
    p.add_argument("--output-figure-rs-op", dest="figure_rs_op",
                   help="RS vs OP predicted/actual error figure (PNG) to write")
    p.add_argument("--title", default="", help="figure title (e.g. the study name)")
    p.add_argument("--metamodel-info",
                   help="the study's metamodel.json: adds the trust columns "
                   "(metamodel_min_test_r2, metamodel_ok, op_unproven) and warnings")
    p.add_argument("--targets", help="the targets.csv the records calibrated: its sd_ "
                   "columns, if any, are what Δ is divided by (the figures' axis labels say "
                   "so); without it, the metamodel's training sd")
    p.set_defaults(func=cmd_summary)

    p = sub.add_parser("cal-sweep", help="PtS proximity sweep table and Fig. 5",
                       description="Read PtS records at several proximity values R and write "
                       "the error-vs-R table and paper 1's Fig. 5, to choose R.")
    p.add_argument("--records", nargs="+", required=True,
                   help="R=CSV pairs: PtS records per proximity value")
    p.add_argument("--output", required=True, help="sweep table CSV to write")
    p.add_argument("--output-figure", dest="figure", help="sweep figure (PNG) to write")
    p.add_argument("--title", default="", help="figure title")
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("cal-contexts",
                       help="in-sample vs out-of-sample contexts table and Fig. 7",
                       description="Compare a strategy's errors on targets whose contexts "
                       "the metamodel saw with targets on unseen contexts; write the table and "
                       "paper 1's Fig. 7.")
    p.add_argument("--insample", required=True, help="records CSV on the study's targets")
    p.add_argument("--outofsample", required=True, help="records CSV on unseen contexts")
    p.add_argument("--strategy", default="", help="strategy name for titles and the table")
    p.add_argument("--output", required=True, help="comparison table CSV to write")
    p.add_argument("--output-figure", dest="figure", help="comparison figure (PNG) to write")
    p.set_defaults(func=cmd_contexts)

    p = sub.add_parser("cal-noise", help="PtS across noise levels (Appendix F)",
                       description="Read PtS records of the same study at several simulator "
                       "noise levels and write the error-vs-noise table and figure (paper 1, "
                       "Appendix F).")
    p.add_argument("--records", nargs="+", required=True,
                   help="STUDY:NOISE=CSV triples (NOISE: the study's relative noise sd)")
    p.add_argument("--output", required=True, help="noise table CSV to write")
    p.add_argument("--output-figure", dest="figure", help="noise figure (PNG) to write")
    p.set_defaults(func=cmd_noise)


# ---- helpers -------------------------------------------------------------------------

def _solver(args: argparse.Namespace) -> dict:
    if args.solver and args.solver != "{}":
        return load_params(args.solver)
    if getattr(args, "config", None):
        from simcalib.config import load_config
        from simcalib.metamodel.strategies.settings import solver_options

        return solver_options(load_config(args.config), args.study)
    return {}


def _study(args: argparse.Namespace):
    """The study (``--params`` keeps the config's key order: the order of parameters and
    contexts is the metamodel's input order)."""
    from simcalib.study.model import Study

    if getattr(args, "config", None):
        return study_from_args(args)
    return Study(args.study, load_params(args.params), partial=True)


def _load(args: argparse.Namespace):
    from simcalib.metamodel.failure import load_metamodel
    from simcalib.metamodel.strategies.ledger import check_compatible

    study = _study(args)
    one_torch_thread()
    targets = io.read_csv(args.targets, ["target_id"])
    if args.metamodel is None:
        return study, _no_metamodel(args, study), targets
    mm = load_metamodel(args.metamodel)
    check_compatible(study, mm, str(Path(args.metamodel) / "metamodel.json"))
    return study, mm, targets


def _no_metamodel(args: argparse.Namespace, study):
    """A study without a metamodel: only a strategy that reads none may run, with
    Delta's scale from the targets' sd_ columns or its start runs (:class:`RunScale`)."""
    from simcalib.metamodel.strategies.registry import get
    from simcalib.metamodel.strategies.scale import RunScale

    strategy = getattr(args, "strategy", None)
    if strategy is None or get(strategy).needs_metamodel:
        what = f"strategy {strategy!r}" if strategy else "this verb"
        raise ConfigError("--metamodel", f"{what} needs the study's metamodel (only "
                          "sequential runs without one)")
    return RunScale(list(study.input_names), list(study.outputs), study=study.name)


def _records(path: str) -> pd.DataFrame:
    # no "distance": observed targets have no true inputs to measure it against
    return timing.read_csv(path, ["target_id", "strategy", "error", "predicted_error",
                                  "runs", "failed_runs", "seconds"])


def _warn_metamodel(mm) -> None:
    """A WARNING in the job's log when the metamodel is not trusted (the threshold is
    the one recorded in its metamodel.json)."""
    from simcalib.metamodel.strategies.scale import RunScale
    from simcalib.metamodel.trust import judge

    if isinstance(mm, RunScale):
        return

    line = judge(mm.info).warning(mm.study or "metamodel")
    if line:
        log.warning(line)


# ---- verbs ---------------------------------------------------------------------------

def cmd_anchors(args: argparse.Namespace) -> int:
    from simcalib.metamodel.strategies.runner import compute_anchors

    study, mm, targets = _load(args)
    t0 = time.perf_counter()
    solved = timing.read_csv(args.solved, ["target_id"]) if args.solved else None
    out = compute_anchors(study, mm, targets, _solver(args), seed_from_args(args),
                          source=args.targets, solved=solved)
    timing.write_csv(out, args.output)
    print(f"{study.name}: {len(out)} OP anchors in {time.perf_counter() - t0:.1f} s "
          f"({int(out['fallback'].sum())} fallbacks) -> {args.output}")
    return 0


def _block(arg: str | None) -> tuple[int, int]:
    if arg is None:
        return 0, 1
    try:
        i, n = (int(v) for v in arg.split("/"))
    except ValueError:
        raise ConfigError("--block", f"expected I/N (e.g. 0/3), got {arg!r}") from None
    return i, n


def build_settings(args: argparse.Namespace, study):
    """The job's :class:`CalibrationSettings`, built once from the study's
    ``calibration`` section (``--params``/``--config``; validated, defaults filled,
    when the study was built), its metamodel section (adaptive fine-tunes with it),
    the error scale kappa of ``--posterior-meta`` and the proximity of
    ``--proximity`` (a sweep's R)."""
    from simcalib.metamodel.strategies.settings import CalibrationSettings

    kappa = None
    if getattr(args, "posterior_meta", None):
        # the error scale kappa cal-posterior calibrated on the held-out rows
        kappa = float(io.read_json(args.posterior_meta)["kappa"])
    return CalibrationSettings.from_study(study.cfg, args.strategy, proximity=args.proximity,
                                          error_scale=kappa)


def cmd_calibrate(args: argparse.Namespace) -> int:
    from simcalib.metamodel.strategies.runner import calibrate_block, merge_blocks

    block = _block(args.block)
    out = args.output_block if args.block else args.output
    if not out or (args.block and (args.output or args.runs)):
        raise ConfigError("--output", "give --output (and --output-runs), or --block with "
                          "--output-block")
    study, mm, targets = _load(args)
    settings = build_settings(args, study)
    anchors = timing.read_csv(args.anchors, ["target_id"]) if args.anchors else None
    design = (io.read_csv(args.design, ["run_id", *study.input_names, *mm.output_names,
                                        "status"]) if getattr(args, "design", None) else None)
    _warn_metamodel(mm)
    t0 = time.perf_counter()
    # per-run journals beside the output: a killed job resumes mid-target; removed once
    # the records are written (a forced rerun then simulates afresh).  Journals are per
    # target, in the folder of the strategy's blocks (blocks/<strategy>/.journal) for a
    # block and for a whole-strategy job alike, so a rerun resumes whatever the blocking
    jdir = (Path(out).parent / ".journal" if args.block
            else Path(out).parent / "blocks" / Path(out).stem / ".journal")
    joint = None
    if getattr(args, "round_state", None):
        from simcalib.metamodel.strategies import rounds

        joint = rounds.finisher(*rounds.read_step(args.round_state, args.round_sims))
    part = calibrate_block(study, mm, targets, args.strategy, settings, _solver(args),
                           seed_from_args(args), anchors=anchors,
                           source=args.targets, threads=args.threads, journal_dir=jdir,
                           block=block, design=design, joint=joint)
    if args.block:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(f"{out}.part")
        with tmp.open("wb") as f:
            pickle.dump({"block": block, "records": part[0], "runs": part[1]}, f)
        tmp.replace(out)
    rec, runs = merge_blocks([part])
    if not args.block:
        _write_records(rec, runs, args.output, args.runs)
    for tid in rec["target_id"] if "target_id" in rec else []:
        with contextlib.suppress(OSError):
            (jdir / f"{args.strategy}_{int(tid)}.jsonl").unlink()
    for d in (jdir, jdir.parent, jdir.parent.parent):   # the folders, once empty
        with contextlib.suppress(OSError):
            d.rmdir()
    _report_records(study.name, args.strategy, rec, time.perf_counter() - t0, out,
                    f" (block {block[0]}/{block[1]})" if args.block else "")
    return 0


def _write_records(rec: pd.DataFrame, runs: pd.DataFrame, output: str,
                   output_runs: str | None) -> None:
    timing.write_csv(rec, output)
    if output_runs:
        timing.write_csv(runs, output_runs)


def _report_records(study: str, strategy: str, rec: pd.DataFrame, seconds: float, out: str,
                    what: str = "") -> None:
    if rec.empty:
        print(f"{study} {strategy}{what}: no targets -> {out}")
        return
    print(f"{study} {strategy}{what}: {len(rec)} targets, median error "
          f"{rec['error'].median():.4g}, mean {rec['error'].mean():.4g}, "
          f"{int(rec['runs'].sum())} runs ({int(rec['failed_runs'].sum())} failed), "
          f"{seconds:.1f} s -> {out}")
    if "distance" not in rec:
        print(f"{study}: observed targets (no true inputs): distance to the truth is "
              "unknown; the error is the re-simulated misfit to the observations")
    unproven = int(rec["op_unproven"].sum()) if "op_unproven" in rec else 0
    if unproven:
        what = ("proposal MILP(s) stopped unproven (node or time limit; the answer is a "
                "simulated run)" if strategy == "sequential" else
                "OP solve(s) not proven optimal (time limit, solver error or fallback)")
        log.warning("%s %s: %d %s", study, strategy, unproven, what)


def _settings(study) -> dict:
    """The study's ``calibration`` section (a copy) with its ``metamodel`` section."""
    settings = dict(study.cfg.get("calibration") or {})
    if "metamodel" in study.cfg:
        settings["metamodel"] = study.cfg["metamodel"]
    return settings


def cmd_seq_step(args: argparse.Namespace) -> int:
    from simcalib.metamodel.strategies import rounds

    args.strategy = rounds.STRATEGY
    study, mm, targets = _load(args)
    design = (io.read_csv(args.design, ["run_id", *study.input_names, *study.outputs,
                                        "status"]) if args.design else None)
    t0 = time.perf_counter()
    state, props = rounds.step_job(study, mm, targets, _settings(study), _solver(args),
                                   seed_from_args(args), args.step, args.state, args.sims,
                                   design, source=args.targets)
    rounds.write_step(state, props, args.output_state, args.output_proposals)
    print(f"{study.name} sequential step {args.step}: {len(props)} run(s) proposed in "
          f"{time.perf_counter() - t0:.1f} s -> {args.output_proposals}")
    return 0


def cmd_seq_sim(args: argparse.Namespace) -> int:
    from simcalib.metamodel.strategies import rounds

    study = _study(args)
    with open(args.proposals, "rb") as f:
        props = pickle.load(f)
    out = Path(args.output)
    res = rounds.simulate_chunk(study, props, args.chunk, args.chunk_size,
                                seed_from_args(args), args.threads,
                                journal_dir=out.parent / ".journal")
    rounds._dump(res, out)
    rows = res["rows"]
    for tid in set(rows["target_id"]) if len(rows) else ():   # journals, once written
        with contextlib.suppress(OSError):
            (out.parent / ".journal" / f"{rounds.STRATEGY}_{int(tid)}_{args.chunk}.jsonl").unlink()
    failed = int((rows["status"] != "ok").sum()) if len(rows) else 0
    print(f"{study.name} sequential chunk {args.chunk}: {len(rows)} run(s) ({failed} failed) "
          f"in {res['seconds']:.1f} s -> {out}")
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    """Join cal-run's blocks: checks they are blocks 0..N-1 of one N, in order."""
    from simcalib.metamodel.strategies.runner import merge_blocks

    t0 = time.perf_counter()
    parts = []
    for k, path in enumerate(args.blocks):
        with open(path, "rb") as f:
            blk = pickle.load(f)
        if tuple(blk["block"]) != (k, len(args.blocks)):
            raise ConfigError("--blocks", f"{path} is block {blk['block'][0]}/{blk['block'][1]}"
                              f"; expected {k}/{len(args.blocks)} (all blocks, in order)")
        parts.append((blk["records"], blk["runs"]))
    rec, runs = merge_blocks(parts)
    if rec.empty:
        raise ConfigError("--blocks", "no targets in any block")
    _write_records(rec, runs, args.output, args.runs)
    _report_records(args.study, str(rec["strategy"].iloc[0]), rec,
                    time.perf_counter() - t0, args.output, f" ({len(parts)} blocks merged)")
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    from simcalib.metamodel.strategies.score import score_inputs

    study, mm, targets = _load(args)
    inputs = io.read_csv(args.inputs, ["target_id"])
    _warn_metamodel(mm)
    rec = score_inputs(study, mm, targets, inputs, dict(study.cfg.get("calibration") or {}),
                       seed_from_args(args), name=args.name, source=args.inputs)
    timing.write_csv(rec, args.output)
    resc = (f", re-scored median {rec['rescored_error'].median():.4g}"
            if "rescored_error" in rec else "")
    failed = int(rec["error"].isna().sum())
    print(f"{study.name} {args.name}: {len(rec)} targets scored, median error "
          f"{rec['error'].median():.4g}, mean {rec['error'].mean():.4g}{resc}"
          f"{f', {failed} failed' if failed else ''} -> {args.output}")
    return 0


def _delta_unit(args: argparse.Namespace, recs: dict[str, pd.DataFrame]) -> str:
    """What Δ is divided by (the figures' axis labels): the targets' ``sd_`` columns
    when ``--targets`` gives them, else the training sd."""
    from simcalib.study.observations import delta_unit

    if not getattr(args, "targets", None):
        return delta_unit(None, [])
    first = next(iter(recs.values()))
    outputs = [c[len("target_"):] for c in first.columns if c.startswith("target_")
               and c != "target_id"]
    return delta_unit(io.read_csv(args.targets, ["target_id"]), outputs)


def cmd_summary(args: argparse.Namespace) -> int:
    from simcalib.metamodel.plots import fig_rs_vs_op, fig_strategies
    from simcalib.metamodel.strategies.summary import summarize, trust_warnings
    from simcalib.metamodel.trust import judge

    recs = {k: _records(v) for k, v in _pairs(args.records, "--records")}
    trust = None
    if args.metamodel_info:
        trust = judge(io.read_json(args.metamodel_info))
    summ = summarize(recs, trust=trust)
    timing.write_csv(summ, args.output)
    for line in trust_warnings(summ, trust):
        log.warning(line)
    unit = _delta_unit(args, recs)
    if args.figure:
        fig_strategies(recs, args.figure, args.title, unit=unit)
    if args.figure_rs_op:
        if "rs" not in recs or "op" not in recs:
            raise ConfigError("--figure-rs-op", "needs records of both rs and op")
        fig_rs_vs_op(recs["rs"], recs["op"], args.figure_rs_op, unit=unit)
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(summ[["strategy", "median_error", "mean_error", "reduction_vs_rs",
                    "median_reduction_vs_rs", "runs"]].to_string(index=False))
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from simcalib.metamodel.plots import fig_sweep
    from simcalib.metamodel.strategies.summary import sweep_summary

    recs = {}
    for k, v in _pairs(args.records, "--records"):
        try:
            recs[float(k)] = _records(v)
        except ValueError:
            raise ConfigError("--records", f"proximity {k!r} is not a number") from None
    out = sweep_summary(recs)
    timing.write_csv(out, args.output)
    if args.figure:
        fig_sweep(recs, args.figure, args.title)
    print(out.to_string(index=False))
    return 0


def cmd_contexts(args: argparse.Namespace) -> int:
    from simcalib.metamodel.plots import fig_contexts
    from simcalib.metamodel.strategies.summary import contexts_table

    ins, oos = _records(args.insample), _records(args.outofsample)
    out = contexts_table(ins, oos, args.strategy)
    timing.write_csv(out, args.output)
    names = [c[len("true_"):] for c in ins.columns if c.startswith("true_")]
    if args.figure:
        fig_contexts(ins, oos, names, args.figure,
                     f"true vs calibrated inputs ({args.strategy or ins['strategy'].iloc[0]})")
    print(out.to_string(index=False))
    return 0


def cmd_noise(args: argparse.Namespace) -> int:
    from simcalib.metamodel.plots import fig_noise
    from simcalib.metamodel.strategies.summary import noise_table

    recs = {}
    for key, path in _pairs(args.records, "--records"):
        if ":" not in key:
            raise ConfigError("--records", f"expected STUDY:NOISE=CSV, got {key!r}")
        study, noise = key.rsplit(":", 1)
        recs[study] = (float(noise), _records(path))
    out = noise_table(recs)
    timing.write_csv(out, args.output)
    if args.figure:
        fig_noise(out, {k: v[1] for k, v in recs.items()}, args.figure)
    print(out.to_string(index=False))
    return 0
