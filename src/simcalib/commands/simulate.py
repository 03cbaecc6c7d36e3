"""Verbs of the simulation stage: ``design``, ``simulate``, ``merge``, ``targets``."""

from __future__ import annotations

import argparse
import logging
import time

from simcalib import io, timing
from simcalib.commands._common import add_study_args, seed_from_args, study_from_args

log = logging.getLogger("simcalib.simulation")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sim-design", help="write a study's design (run_id + input columns)",
                       description="Draw the study's design (Sobol, LHS or uniform, seeded from "
                       "the top-level seed and the study name) and write it as CSV.")
    add_study_args(p)
    p.add_argument("--output", required=True, help="design CSV to write")
    p.set_defaults(func=cmd_design)

    p = sub.add_parser("sim-run", help="simulate one chunk of a design",
                       description="Run the study's simulator on rows "
                       "[chunk*chunk_size, (chunk+1)*chunk_size) of the design. Failed runs "
                       "become rows with a status, never a crash.")
    add_study_args(p)
    p.add_argument("--design", required=True, help="design CSV")
    p.add_argument("--chunk", type=int, required=True, help="chunk index (0-based)")
    p.add_argument("--chunk-size", type=int, help="rows per chunk (default: design.chunk_size)")
    p.add_argument("--threads", type=int, default=1, help="parallel runs inside the chunk")
    p.add_argument("--output", required=True, help="chunk CSV to write")
    p.add_argument("--meta", help="JSON sidecar with runs, failures and seconds")
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("sim-merge", help="merge simulated chunks into the dataset",
                       description="Concatenate chunk CSVs (sorted by run_id) into "
                       "dataset.csv and write the simulation summary JSON.")
    p.add_argument("--chunks", nargs="+", required=True, help="chunk CSVs")
    p.add_argument("--metas", nargs="*", default=[], help="chunk JSON sidecars (for timing)")
    p.add_argument("--output", required=True, help="dataset CSV to write")
    p.add_argument("--summary", required=True, help="simulation_summary.json to write")
    p.set_defaults(func=cmd_merge)

    p = sub.add_parser("sim-targets", help="draw and simulate held-out calibration targets",
                       description="Draw target inputs (a stream independent of the design), "
                       "simulate them, and write target_id + inputs + outputs + status.")
    add_study_args(p)
    p.add_argument("--which", default="targets",
                   help="'targets' or the name of an entry of extra_targets")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--output", required=True, help="targets CSV to write")
    p.set_defaults(func=cmd_targets)


def cmd_design(args: argparse.Namespace) -> int:
    from simcalib.simulation import make_design

    study = study_from_args(args)
    df = make_design(study, seed_from_args(args))
    io.write_csv(df, args.output)
    log.info("%s: design of %d rows -> %s", study.name, len(df), args.output)
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    from simcalib.simulation import chunk_rows, simulate_rows, summarize

    study = study_from_args(args)
    design = io.read_csv(args.design, required=["run_id", *study.input_names])
    size = args.chunk_size or int(study.cfg["design"]["chunk_size"])
    rows = chunk_rows(design, args.chunk, size)
    t0 = time.perf_counter()
    out = simulate_rows(study, rows, seed_from_args(args), threads=args.threads)
    seconds = time.perf_counter() - t0
    io.write_csv(out, args.output)
    if args.meta:
        timing.write_json({"chunk": args.chunk, **summarize(out, seconds)}, args.meta)
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from simcalib.simulation import merge_chunks, summarize

    df = merge_chunks(args.chunks)
    seconds = sum(float(timing.read_json(m).get("seconds", 0.0)) for m in args.metas) \
        if args.metas else None
    summary = summarize(df, seconds)
    summary["chunks"] = len(args.chunks)
    io.write_csv(df, args.output)
    timing.write_json(summary, args.summary)
    line = (f"simulation: {summary['runs']} runs, {summary['failures']} failed"
            + (f", {seconds:.1f} s simulator time" if seconds is not None else ""))
    log.info(line)
    print(line)
    return 0


def cmd_targets(args: argparse.Namespace) -> int:
    from simcalib.simulation import make_targets, simulate_rows

    study = study_from_args(args)
    seed = seed_from_args(args)
    targets = make_targets(study, seed, args.which)
    out = simulate_rows(study, targets, seed, stream=f"targets:{args.which}",
                        id_column="target_id", threads=args.threads)
    io.write_csv(out, args.output)
    bad = int((out["status"] != "ok").sum())
    log.info("%s: %d targets (%d failed) -> %s", study.name, len(out), bad, args.output)
    return 0
