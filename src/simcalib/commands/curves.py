"""Verb ``cal-curves``: what a user of a curve study looks at (issue 42, item 4).

For one strategy's records of a study with ``series``: per target and series, the
observed curve, the answer's curve, the simulator re-run at the answer on fresh seeds
(the re-scoring replicates: a band on a stochastic simulator, one run on a
deterministic one) and the weighted L1 misfit per point, as a long CSV and a figure
(:mod:`simcalib.report.curves`, :mod:`simcalib.report.curve_plots`), with a posterior
predictive band where a posterior gives one: the design posterior's predictive-check
runs (``--posterior-runs``), or, for ``sequential``'s answers, its own posterior's
draws run here (``--seq-posterior``, ``--ppc-draws``).  The read-me-first page shows
the figure and the misfit per series.

Until ``simcalib.commands.curves`` is listed in ``simcalib.cli.VERB_MODULES``, the
verb also runs as ``python -m simcalib.commands.curves cal-curves ...`` (the same
arguments), which is how the workflow's rule calls it.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

from simcalib.commands._common import add_study_args, seed_from_args, study_from_args

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "cal-curves", help="per target of a curve study: observed curve, the answer's "
        "re-simulated curve and band, misfit per point (CSV + figure)",
        description="Read one strategy's records of a study with series outputs, re-run "
        "the simulator at each target's answer on the re-scoring seeds (--replicates "
        "runs on a stochastic simulator, one on a deterministic one) and write the long "
        "table (target, series, point: observed, sd, answer, band, misfit per point) and "
        "one figure panel per target and series.")
    add_study_args(p, params_help="the study's settings as JSON (or @FILE): simulator, "
                   "parameters, contexts, constraints, outputs, series (points resolved), "
                   "noise")
    p.add_argument("--records", required=True, help="the strategy's records "
                   "(results/<study>/calibration/<strategy>.csv)")
    p.add_argument("--targets", required=True, help="the study's targets table "
                   "(results/<study>/targets.csv)")
    p.add_argument("--metamodel-info", dest="meta", default=None, metavar="FILE",
                   help="metamodel.json: Δ's scale (training sd) and whether the simulator "
                   "was found stochastic; without it the scale is the start runs' sd "
                   "(--runs) and the noise is probed")
    p.add_argument("--runs", default=None, metavar="FILE", help="the strategy's run log "
                   "(Δ's scale of a study without a metamodel: its start runs' sd)")
    p.add_argument("--posterior-runs", dest="ppc", default=None, metavar="FILE",
                   help="the posterior's predictive-check runs (cal-posterior's "
                   "ppc_runs.csv): their spread per point is drawn as the posterior "
                   "predictive band (no run is made for it)")
    p.add_argument("--seq-posterior", dest="seq_posterior", default=None, metavar="DIR",
                   help="sequential's own posterior (cal-seq-posterior's directory, its "
                   "targets/target_<id>.nc): for sequential's answers the posterior "
                   "predictive band is drawn from it instead, running the simulator at "
                   "--ppc-draws of its draws per target")
    p.add_argument("--ppc-draws", dest="ppc_draws", type=int, default=0, metavar="K",
                   help="draws per target of --seq-posterior to run "
                   "(calibration.posterior.ppc_draws; 0: no band from it)")
    p.add_argument("--replicates", type=int, required=True, metavar="N",
                   help="fresh runs at each answer on a stochastic simulator (one on a "
                   "deterministic one)")
    p.add_argument("--band", type=float, nargs=2, required=True, metavar=("LOW", "HIGH"),
                   help="percentiles of the replicates drawn as the band (e.g. 5 95)")
    p.add_argument("--max-panels", type=int, required=True, metavar="N",
                   help="panels drawn at most (the rest: 'n more in the CSV')")
    p.add_argument("--strategy", default="", help="the strategy's name, for the title")
    p.add_argument("--target-set", dest="target_set", default="targets", help="the target "
                   "set calibrated (targets, or targets_<name> of an extra set), for the "
                   "title")
    p.add_argument("--threads", type=int, default=1, help="parallel simulator runs (a "
                   "command simulator)")
    p.add_argument("--output", required=True, help="the long CSV to write")
    p.add_argument("--output-figure", dest="figure", required=True, metavar="FILE",
                   help="the PNG to write")
    p.set_defaults(func=cmd_curves)


def _read_json(path: str | None) -> dict[str, Any] | None:
    if not path:
        return None
    from simcalib.errors import DataError

    try:
        obj = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise DataError(path, f"cannot read: {exc}") from None
    return obj if isinstance(obj, dict) else None


def stochastic_of(cfg: Any, meta: dict[str, Any] | None) -> bool | None:
    """Declared or known from the config, else what training measured; None: unknown
    (the replicates then find out)."""
    from simcalib.study.noise import known_stochastic

    known = known_stochastic(cfg or {})
    if known is not None:
        return known
    got = ((meta or {}).get("noise") or {}).get("stochastic")
    return got if isinstance(got, bool) else None


def cmd_curves(args: argparse.Namespace) -> int:
    import pandas as pd

    from simcalib import io, timing
    from simcalib.errors import ConfigError
    from simcalib.report.curve_plots import fig_curves
    from simcalib.report.curves import (
        DESIGN_POSTERIOR,
        SEQUENTIAL_POSTERIOR,
        Band,
        curve_table,
        delta_scale,
        posterior_predictive_runs,
        series_misfit,
    )

    if args.seq_posterior and args.strategy not in ("", "sequential"):
        raise ConfigError("--seq-posterior", "sequential's own posterior is the band of "
                          f"sequential's answers only, not of --strategy {args.strategy}")
    if args.ppc_draws < 0:
        raise ConfigError("--ppc-draws", f"must be >= 0, got {args.ppc_draws}")
    study = study_from_args(args)
    seed = seed_from_args(args)
    band = Band(int(args.replicates), float(args.band[0]), float(args.band[1]))
    records = timing.read_csv(args.records)
    targets = timing.read_csv(args.targets)
    meta = _read_json(args.meta)
    runs = pd.read_csv(args.runs) if args.runs and Path(args.runs).is_file() else None
    scale, source = delta_scale(study.outputs, meta, runs)
    ppc = timing.read_csv(args.ppc) if args.ppc and Path(args.ppc).is_file() else None
    post_from, post_made = DESIGN_POSTERIOR, 0
    if args.seq_posterior:
        # sequential's posterior wrote draws, no predictive runs: they are made here
        answered = records.dropna(subset=[f"x_{n}" for n in study.space.tunable_names])
        ppc = posterior_predictive_runs(study, Path(args.seq_posterior) / "targets",
                                        targets, answered["target_id"], int(args.ppc_draws),
                                        seed, int(args.threads))
        post_from, post_made = SEQUENTIAL_POSTERIOR, len(ppc)
    table, noisy = curve_table(study, records, targets, scale, band, seed,
                               stochastic_of(study.cfg, meta), int(args.threads), ppc,
                               post_from)
    io.write_csv(table, args.output)
    index = next(iter(study.series.values())).index if study.series else "point"
    observed = not any(c.startswith("true_") for c in records.columns)
    name = args.strategy or Path(args.records).stem
    where = study.name + ("" if args.target_set == "targets" else
                          f" (target set {args.target_set.removeprefix('targets_')})")
    left = fig_curves(table, args.figure, f"{where}: "
                      f"{'your data' if observed else 'targets (simulated)'} vs {name}'s "
                      "answer", index=index,
                      observed_label="your data" if observed else "target",
                      max_panels=int(args.max_panels), csv_name=Path(args.output).name)
    mis = series_misfit(table)
    log.info("%s %s: %d target(s), %d curve(s) (%d drawn), scale: %s, simulator %s, "
             "posterior predictive band: %s; median misfit per series: %s", where,
             name, table["target_id"].nunique(), len(mis), len(mis) - left, source,
             "stochastic" if noisy else "deterministic" if noisy is False else "not run",
             f"{int(table['post_runs'].max())} runs a target of {post_from}"
             + (f" ({post_made} simulator runs made here)" if post_made else "")
             if len(table) and table["post_runs"].max() > 0 else "none",
             ", ".join(f"{s} {v:.4g}" for s, v in
                       mis.groupby("series")["misfit_answer"].median().items()) or "n/a")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m simcalib.commands.curves cal-curves ...``: the verb alone (module
    docstring), with the CLI's logging and error handling."""
    from simcalib.cli import LOG_FORMAT
    from simcalib.errors import SimcalibError

    parser = argparse.ArgumentParser(prog="simcalib", allow_abbrev=False)
    register(parser.add_subparsers(dest="verb", required=True))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT, stream=sys.stderr)
    try:
        return int(args.func(args) or 0)
    except SimcalibError as exc:
        print(f"simcalib {args.verb}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
