"""Verbs of the simulation stage: ``design``, ``simulate``, ``merge``, ``targets``."""

from __future__ import annotations

import argparse
import logging

from simcalib import io, timing
from simcalib.commands._common import add_study_args, seed_from_args, study_from_args

log = logging.getLogger("simcalib.study.simulation")


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
    p.add_argument("--design", required=True, help="design CSV (from sim-design)")
    p.add_argument("--chunk", type=int, required=True, help="chunk index (0-based)")
    p.add_argument("--chunk-size", type=int, help="rows per chunk (default: design.chunk_size)")
    p.add_argument("--threads", type=int, default=1, help="parallel runs inside the chunk")
    p.add_argument("--output", required=True, help="chunk CSV to write")
    p.add_argument("--output-meta", dest="meta",
                   help="JSON summary to write: runs, status counts, warnings, seconds, "
                   "CPU seconds (with child processes), sha256 of the chunk file")
    p.add_argument("--journal", help="per-run journal, read to resume and appended to "
                   "while running (default: "
                   "<output dir>/.journal/<output stem>.jsonl)")
    p.add_argument("--no-journal", action="store_true",
                   help="keep no journal: an interrupted chunk restarts from its first run")
    p.add_argument("--progress-every", type=float, default=10.0, metavar="SECONDS",
                   help="log 'k/N runs, ok/failed, ETA' at most this often (and at each "
                   "tenth of the chunk)")
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("sim-merge", help="check and merge simulated chunks into the dataset",
                       description="Check every chunk against the design (run ids, rows, "
                       "inputs, columns, statuses) and its own summary (rows, status counts, "
                       "sha256), then concatenate them into dataset.csv and write the "
                       "simulation summary JSON.  A bad chunk is an error naming the file.")
    p.add_argument("--design", required=True, help="design CSV the chunks were run from")
    p.add_argument("--chunk-size", type=int, required=True, help="rows per chunk")
    p.add_argument("--chunks", nargs="+", required=True, help="chunk CSVs, chunk 0 first")
    p.add_argument("--metas", nargs="*", default=[], help="the chunks' JSON summaries, "
                   "same order")
    p.add_argument("--output", required=True, help="dataset CSV to write")
    p.add_argument("--output-summary", dest="summary", required=True,
                   help="simulation_summary.json to write")
    p.set_defaults(func=cmd_merge)

    p = sub.add_parser("sim-targets", help="draw and simulate held-out calibration targets, "
                       "or read observed ones",
                       description="Draw target inputs (a stream independent of the design), "
                       "simulate them, and write target_id + inputs + outputs + status; or, "
                       "for a target set with 'file', read and check the observations file "
                       "and write it in the same layout (no true inputs).")
    add_study_args(p)
    p.add_argument("--which", default="targets",
                   help="'targets' or the name of an entry of extra_targets")
    p.add_argument("--threads", type=int, default=1, help="parallel simulator runs")
    p.add_argument("--output", required=True, help="targets CSV to write")
    p.set_defaults(func=cmd_targets)

    p = sub.add_parser("sim-noise", help="measure the simulator's replicate noise (a probe)",
                       description="Re-run noise.probe design rows of the dataset once with "
                       "fresh seeds and write one row per pair (design run and re-run): the "
                       "metamodel's noise ceiling and the trust flag are judged from it.")
    add_study_args(p)
    p.add_argument("--dataset", required=True, help="dataset CSV (from sim-merge)")
    p.add_argument("--pairs", type=int, help="design rows to re-run (default: noise.probe)")
    p.add_argument("--threads", type=int, default=1, help="parallel simulator runs")
    p.add_argument("--output", required=True, help="probe CSV to write")
    p.set_defaults(func=cmd_noise_probe)


def cmd_design(args: argparse.Namespace) -> int:
    from simcalib.study.simulation import make_design

    study = study_from_args(args)
    df = make_design(study, seed_from_args(args))
    io.write_csv(df, args.output)
    log.info("%s: design of %d rows -> %s", study.name, len(df), args.output)
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    from simcalib.study.journal import journal_path
    from simcalib.study.merge import file_sha256
    from simcalib.study.simulation import chunk_rows, run_chunk

    study = study_from_args(args)
    design = io.read_csv(args.design, required=["run_id", *study.input_names])
    size = args.chunk_size or int(study.cfg["design"]["chunk_size"])
    rows = chunk_rows(design, args.chunk, size)
    journal = None if args.no_journal else (args.journal or journal_path(args.output))
    out, summary = run_chunk(study, rows, seed_from_args(args), threads=args.threads,
                             journal=journal, label=f"{study.name} chunk {args.chunk}",
                             progress_s=args.progress_every)
    io.write_csv(out, args.output)
    if args.meta:
        timing.write_json({"chunk": args.chunk, "chunk_size": size,
                           "columns": list(out.columns), "sha256": file_sha256(args.output),
                           **summary}, args.meta)
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from simcalib.errors import DataError
    from simcalib.study import journal
    from simcalib.study.merge import merge_chunks
    from simcalib.study.simulation import chunk_summary, failure_digest

    design = io.read_csv(args.design, required=["run_id"])
    metas = [timing.read_json(m) for m in args.metas] if args.metas else None
    if metas is not None and len(metas) != len(args.chunks):
        raise DataError("--metas", f"{len(metas)} summaries for {len(args.chunks)} chunks")
    df = merge_chunks(args.chunks, design, args.chunk_size, metas)
    totals = {k: (sum(float(m.get(k, 0.0)) for m in metas) if metas else None)
              for k in ("seconds", "cpu_seconds")}
    summary = chunk_summary(df, totals["seconds"], totals["cpu_seconds"])
    summary["chunks"] = len(args.chunks)
    if summary["ok"] == 0:
        raise DataError(args.chunks[0] if len(args.chunks) == 1 else "chunks",
                        f"no usable rows: {failure_digest(df)}")
    io.write_csv(df, args.output)
    timing.write_json(summary, args.summary)
    for path in args.chunks:  # merged: a later forced rerun of a chunk starts afresh
        journal.remove(path)
    line = f"simulation: {summary['runs']} runs, {summary['failures']} failed"
    if summary["warnings"]:
        line += f", {summary['warnings']} ok runs with warnings"
    if totals["seconds"] is not None:
        line += (f", {totals['seconds']:.1f} s simulator time, "
                 f"{totals['cpu_seconds']:.1f} CPU-s (with child processes)")
    if summary["failures"]:
        line += f"; {failure_digest(df)}"
    log.info(line)
    print(line)
    return 0


def cmd_targets(args: argparse.Namespace) -> int:
    from simcalib.study.observations import observed_file, read_observations, set_key
    from simcalib.study.simulation import make_targets, simulate_rows

    study = study_from_args(args)
    seed = seed_from_args(args)
    path = observed_file(study.cfg, args.which)
    if path is not None:
        out = read_observations(path, list(study.outputs), study.space.context_names,
                                study.space.tunable_names,
                                f"{set_key(study.key, args.which)}.file", series=study.series)
        io.write_csv(out, args.output)
        line = (f"{study.name}: {len(out)} observed targets from {path} (no true inputs: "
                f"distance to the truth is not measured) -> {args.output}")
        log.info(line)
        print(line)
        return 0
    targets = make_targets(study, seed, args.which)
    out = simulate_rows(study, targets, seed, stream=f"targets:{args.which}",
                        id_column="target_id", threads=args.threads)
    io.write_csv(out, args.output)
    bad = int((out["status"] != "ok").sum())
    log.info("%s: %d targets (%d failed) -> %s", study.name, len(out), bad, args.output)
    return 0


def cmd_noise_probe(args: argparse.Namespace) -> int:
    from simcalib.errors import ConfigError
    from simcalib.study.noise import noise_from_probe, probe_pairs, run_probe

    study = study_from_args(args)
    k = int(args.pairs if args.pairs is not None else probe_pairs(study.cfg))
    if k < 2:
        raise ConfigError(f"{study.key}.noise.probe", f"the probe needs >= 2 pairs, got {k}")
    dataset = io.read_csv(args.dataset, required=["run_id", *study.input_names,
                                                  *study.outputs])
    out = run_probe(study, dataset, k, seed_from_args(args), threads=args.threads)
    io.write_csv(out, args.output)
    est = noise_from_probe(out, study.outputs)
    sd = ", ".join(f"{o} {v ** 0.5:.3g}" for o, v in est["var"].items())
    line = (f"{study.name}: noise probe, {est['pairs']} pairs ({est['runs']} runs, "
            f"{est['failed_runs']} failed); replicate noise sd per output: {sd} -> "
            f"{args.output}")
    log.info(line)
    print(line)
    return 0
