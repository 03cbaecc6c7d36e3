"""Is the metamodel worth its design?  Metamodel strategies against black-box search
(GP-BO, TPE) at equal *total* simulator runs (issue 18).

With K targets, a metamodel strategy spends n design runs (shared) plus r runs per
target: n + r K in all.  A black-box strategy gets the same total spread over the
targets: b(K) = r + n / K runs per target.  The metamodel pays for itself from the
break-even number of targets K* on: the smallest K at which its mean Delta is no worse
than the black box's at b(K).

How it is measured (one library run, no workflow): per study and seed, one Sobol
design of the largest size is simulated and the smaller designs are its prefixes
(per context level); a metamodel is trained on each (``train_metamodel``) and the
metamodel strategies run through the strategy runner at the study's r.  The black-box
strategies are *anytime*: neither GP-BO nor TPE looks at the total budget, so the best
run among the first b runs of one long run is exactly what a budget-b run returns.
Each black-box strategy therefore runs once per target to ``--bmax`` runs and is read
at every b.  Where b(K) > bmax only a bound is known, and the table says so ("<= K").

Delta uses one output scale for every method (the sd of the outputs over the seed's
first 256 design runs, a Sobol prefix), so design sizes are comparable and a process
that runs only the black boxes (``--methods`` with no names) needs only those runs.
For a stochastic study the chosen run's Delta is biased low (the best of b noisy
runs), so every chosen point is re-scored with ``--rescore`` fresh replicates (common
random numbers) and that is the score used.  CPU seconds are process CPU time.

    python benchmarks/breakeven.py --quick          # <= 15 min on 2 idle cores
    python benchmarks/breakeven.py                  # 3 seeds, 10 targets, bmax 100
    python benchmarks/breakeven.py --report-only    # table + figure from the CSVs

Writes ``results/benchmarks/breakeven_runs_<study>_<seed>_<part>.csv`` (per target;
rewritten after each black-box target, so a killed run keeps the targets it finished;
a ``--skip-targets k`` run writes ``..._<part>_from<k>.csv`` beside the earlier file),
``breakeven.csv`` (means with spread over seeds), ``breakeven_table.csv`` (K*) and
``breakeven.png``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from simcalib import io  # noqa: E402
from simcalib.config import load_config  # noqa: E402
from simcalib.metamodel.strategies import calibrate, compute_anchors, get  # noqa: E402
from simcalib.metamodel.strategies.ledger import TargetRun, read_targets  # noqa: E402
from simcalib.metamodel.strategies.runner import default_optimize, rescore  # noqa: E402
from simcalib.metamodel.strategies.settings import merged_settings, solver_options  # noqa: E402
from simcalib.metamodel.training import train_metamodel  # noqa: E402
from simcalib.seeds import rng  # noqa: E402
from simcalib.study import Study, build_study  # noqa: E402
from simcalib.study.simulation import make_targets, simulate_rows  # noqa: E402

OUT = ROOT / "results" / "benchmarks"
STUDIES = ("epidemic_mean", "epidemic", "rosenbrock")
SCALE_RUNS = 256
K_GRID = (1, 2, 3, 5, 10, 20, 50, 100, 200, 500, 1000)


class ScaleOnly:
    """What the ledger needs from a metamodel when there is none: names and the output
    scale of Delta.  Predictions are NaN (the black boxes never predict)."""

    def __init__(self, study: Study, scale: np.ndarray) -> None:
        self.input_names, self.output_names = list(study.input_names), list(study.outputs)
        self.y_std = np.asarray(scale, dtype=float)

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.full((len(np.atleast_2d(X)), len(self.output_names)), np.nan)


class TimedRun(TargetRun):
    """A TargetRun that notes the process CPU time after every run (anytime costs)."""

    def simulate(self, X: np.ndarray, phase: str) -> np.ndarray:
        if not hasattr(self, "cpu"):
            self.cpu, self._t0 = [], time.process_time()
        e = super().simulate(X, phase)
        self.cpu.extend([time.process_time() - self._t0] * len(e))
        return e


def delta(Y: np.ndarray, z: np.ndarray, scale: np.ndarray) -> np.ndarray:
    return (np.abs(np.atleast_2d(Y) - z) / scale).sum(axis=1)


def design_prefix(design: pd.DataFrame, study: Study, total: int) -> pd.DataFrame:
    """The first ``total`` runs of a Sobol design (spread over discrete context levels,
    each level's block a Sobol prefix of its own)."""
    ctx = [c.name for c in study.space.contexts if c.discrete]
    if not ctx:
        return design.head(total)
    levels = design.groupby(ctx).ngroups
    return design.groupby(ctx, sort=False).head(max(1, round(total / levels)))


def run_study(cfg: dict[str, Any], name: str, seeds: list[int], n_targets: int,
              sizes: list[int], bmax: int, long_targets: int, rescore_k: int,
              methods: tuple[str, ...], bb: tuple[str, ...], log: logging.Logger,
              own_size: bool = True, small_on_long: bool = True,
              skip_targets: int = 0) -> pd.DataFrame:
    """Per-target results of one study over seeds (long format)."""
    base = build_study(cfg, name)
    cal = merged_settings(base.cfg["calibration"])
    r = int(cal["budget"])
    stochastic = rescore_k > 0
    own = int(base.cfg["design"]["n"]) * max(1, int(np.prod(
        [len(c.values) for c in base.space.contexts if c.discrete] or [1])))
    sizes = sorted({*sizes, own} if own_size else set(sizes))
    solver = solver_options(cfg, name)
    rows: list[dict[str, Any]] = []
    for seed in seeds:
        scfg = {**base.cfg, "targets": {**base.cfg["targets"], "n": n_targets}}
        study = Study(name, scfg)
        # ---- design (largest size; smaller ones are prefixes) and targets ------------
        levels = max(1, len(study.space.context_levels()))
        t0 = time.process_time()
        design = study.space.design(int(np.ceil(max(sizes) / levels)),
                                    rng(seed, "design", name), "sobol")
        design.insert(0, "run_id", np.arange(len(design), dtype=np.int64))
        if not methods:  # black boxes only: the runs that fix the output scale suffice
            design = design_prefix(design, study, SCALE_RUNS)
        sim = simulate_rows(study, design, seed)
        sim_cpu_per_run = (time.process_time() - t0) / len(sim)
        tdf = simulate_rows(study, make_targets(study, seed), seed, stream="targets:targets",
                            id_column="target_id")
        ok = sim[sim["status"] == "ok"]
        # one scale for every method: the output sd over the first SCALE_RUNS design
        # runs (a Sobol prefix, so metamodel and black-box processes agree)
        head = design_prefix(sim, study, SCALE_RUNS)
        scale = head.loc[head["status"] == "ok", study.outputs].to_numpy(float).std(axis=0)
        scale = np.where(scale > 0, scale, 1.0)
        smm = ScaleOnly(study, scale)
        targets = {t.target_id: t for t in read_targets(tdf, study, smm)}
        log.info("%s seed %d: design %d runs (%.1f CPU-ms/run), %d targets", name, seed,
                 len(sim), 1000 * sim_cpu_per_run, len(targets))

        def score(tid: int, x: np.ndarray, e: float, study: Study = study,
                  smm: ScaleOnly = smm, targets: dict = targets, seed: int = seed,
                  scale: np.ndarray = scale) -> float:
            if not stochastic:
                return e
            return rescore(study, smm, targets[tid], x, rescore_k, seed, scale)

        # ---- metamodel strategies at each design size -------------------------------
        long_ids = list(targets)[:long_targets]
        for n in sizes if methods else []:
            sub = ok if n == max(sizes) else design_prefix(sim, study, n)
            sub = sub[sub["status"] == "ok"]
            # the smaller designs matter only for the break-even, which is read on the
            # targets with a long black-box run: save their MILP solves elsewhere
            tdf_n = tdf if n == own or not small_on_long else \
                tdf[tdf["target_id"].isin(long_ids)]
            t0 = time.process_time()
            mm, metrics = train_metamodel(sub, study.input_names, study.outputs,
                                          study.cfg["metamodel"], seed, name)
            train_cpu = time.process_time() - t0
            t0 = time.process_time()
            anchors = compute_anchors(study, mm, tdf_n, solver, seed)
            anchor_cpu = (time.process_time() - t0) / len(tdf_n)
            for m in methods:
                t0 = time.process_time()
                rec, _ = calibrate(study, mm, tdf_n, m, {**base.cfg["calibration"],
                                                       "rescore": 0}, solver, seed,
                                   anchors=anchors if get(m).uses_anchor else None)
                cpu = (time.process_time() - t0) / len(rec)
                for _, rr in rec.iterrows():
                    tid = int(rr["target_id"])
                    Y = np.array([rr[f"sim_{o}"] for o in study.outputs])
                    x = np.array([rr[f"x_{p}"] for p in study.space.tunable_names])
                    e = float(delta(Y, targets[tid].z, scale)[0])
                    rows.append({"study": name, "seed": seed, "target_id": tid, "method": m,
                                 "design_n": len(sub), "runs_per_target": r,
                                 "error": e, "score": score(tid, x, e),
                                 "cpu_s": cpu + (anchor_cpu if get(m).uses_anchor else 0),
                                 "train_cpu_s": train_cpu,
                                 "design_cpu_s": sim_cpu_per_run * len(sub),
                                 "min_test_r2": metrics["min_test_r2"]})
            log.info("%s seed %d n=%d: min test R2 %.4f, train %.0f CPU-s", name, seed,
                     len(sub), metrics["min_test_r2"], train_cpu)
        # ---- black boxes: one anytime run per target --------------------------------
        # one file per (study, seed, part), rewritten after every black-box target so a
        # killed run keeps what it measured; seeds can run as separate processes
        # (--seed-offset) and a --skip-targets run writes its own file (``_from<k>``)
        part = "all" if methods and bb else ("mm" if methods else "bb")
        part += f"_from{skip_targets}" if skip_targets and bb else ""

        def save(seed: int = seed, part: str = part) -> None:
            mine = [q for q in rows if q["seed"] == seed]
            if mine:
                io.write_csv(pd.DataFrame(mine), OUT / f"breakeven_runs_{name}_{seed}_{part}.csv")

        grid = sorted({*range(r, bmax + 1, 1 if not stochastic else 10), r, bmax})
        for m in bb:
            settings = merged_settings({**base.cfg["calibration"], "budget": bmax})
            for i, (tid, t) in enumerate(targets.items()):
                if i < skip_targets:  # measured by an earlier run (same targets)
                    continue
                B = bmax if i < long_targets else r
                p = TimedRun(study, smm, t, B, 0.05, settings, solver, seed, m,
                             default_optimize())
                get(m).fn(p)
                errs = np.array([q["error"] for q in p.runs])
                for b in (g for g in grid if g <= B):
                    j = int(np.nanargmin(np.where(np.isfinite(errs[:b]), errs[:b], np.nan)))
                    rows.append({"study": name, "seed": seed, "target_id": tid, "method": m,
                                 "design_n": 0, "runs_per_target": b,
                                 "error": float(errs[j]),
                                 "score": score(tid, p.runs[j]["x"], float(errs[j])),
                                 "cpu_s": p.cpu[b - 1], "train_cpu_s": 0.0,
                                 "design_cpu_s": 0.0, "min_test_r2": np.nan})
                log.info("%s seed %d %s target %d: %d runs, Delta %.4g at r, %.4g at %d, "
                         "%.1f CPU-s", name, seed, m, tid, B, errs[:r].min(),
                         errs.min(), B, p.cpu[-1])
                save()
        save()
    return pd.DataFrame(rows)


def breakeven(df: pd.DataFrame) -> pd.DataFrame:
    """K* per (study, design size, metamodel strategy, black box), on the targets that
    got the long black-box run (paired: the same targets and seeds on both sides)."""
    out = []
    for study, d in df.groupby("study"):
        bbm = d[d["design_n"] == 0]
        r = int(d.loc[d["design_n"] > 0, "runs_per_target"].iloc[0])
        bmax = int(bbm["runs_per_target"].max())
        longs = bbm[bbm["runs_per_target"] == bmax][["seed", "target_id"]].drop_duplicates()
        key = ["seed", "target_id"]
        for (m, n), md in d[d["design_n"] > 0].groupby(["method", "design_n"]):
            mm_mean = float(md.merge(longs, on=key)["score"].mean())
            for peer, pd_ in bbm.groupby("method"):
                curve = pd_.merge(longs, on=key).groupby("runs_per_target")["score"].mean()
                at_r = float(curve.loc[r])
                if at_r > mm_mean and bmax <= r:
                    k, note = np.nan, f"unknown: {peer} measured only to r = {r}"
                elif at_r <= mm_mean:
                    k, note = np.inf, f"never: {peer} is better even at {r} runs per target"
                else:
                    good = curve[curve <= mm_mean]
                    # smallest b from which the black box stays at or below the metamodel
                    bstar = next((b for b in curve.index if (curve.loc[b:] <= mm_mean).all()),
                                 None) if len(good) else None
                    if bstar is None:
                        k = int(n // (bmax - r)) + 1
                        note = (f"<= {k}: {peer} is still worse at {bmax} runs per target "
                                f"(the most measured)")
                    else:
                        k = int(n // (bstar - r)) + 1
                        note = f"{peer} needs {bstar} runs per target to match"
                rows = {"study": study, "design_n": int(n), "metamodel_strategy": m,
                        "peer": peer, "r": r, "metamodel_mean": mm_mean,
                        "peer_mean_at_r": at_r, "peer_mean_at_bmax": float(curve.loc[bmax]),
                        "bmax": bmax, "breakeven_targets": k, "note": note}
                out.append(rows)
    return pd.DataFrame(out)


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Means over targets per seed, then mean and sd over seeds."""
    per_seed = (df.groupby(["study", "method", "design_n", "runs_per_target", "seed"])
                .agg(mean_score=("score", "mean"), median_score=("score", "median"),
                     mean_error=("error", "mean"), cpu_s=("cpu_s", "mean"),
                     train_cpu_s=("train_cpu_s", "mean"), design_cpu_s=("design_cpu_s", "mean"),
                     min_test_r2=("min_test_r2", "mean"), targets=("score", "size"))
                .reset_index())
    g = per_seed.groupby(["study", "method", "design_n", "runs_per_target"])
    out = g.agg(mean_score=("mean_score", "mean"), sd_over_seeds=("mean_score", "std"),
                median_score=("median_score", "mean"), mean_error=("mean_error", "mean"),
                cpu_s_per_target=("cpu_s", "mean"), train_cpu_s=("train_cpu_s", "mean"),
                design_cpu_s=("design_cpu_s", "mean"), min_test_r2=("min_test_r2", "mean"),
                targets=("targets", "sum"), seeds=("seed", "nunique")).reset_index()
    return out


def figure(df: pd.DataFrame, path: Path) -> None:
    """Mean score at equal total runs against the number of targets K."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # the break-even needs both parts (a run of only the black boxes or only
    # `sequential` has no metamodel rows): no figure then, the table still prints
    studies = [s for s in dict.fromkeys(df["study"])
               if (df.loc[df["study"] == s, "design_n"] > 0).any()]
    if not studies:
        return
    fig, axes = plt.subplots(1, len(studies), figsize=(5.2 * len(studies), 4.2), squeeze=False)
    for ax, s in zip(axes[0], studies, strict=True):
        d = df[df["study"] == s]
        r = int(d.loc[d["design_n"] > 0, "runs_per_target"].iloc[0])
        bb = d[d["design_n"] == 0]
        bmax = int(bb["runs_per_target"].max())
        longs = bb[bb["runs_per_target"] == bmax][["seed", "target_id"]].drop_duplicates()
        d = d.merge(longs, on=["seed", "target_id"])
        for ci, n in enumerate(sorted(d.loc[d["design_n"] > 0, "design_n"].unique())):
            col = f"C{ci}"
            for m, ls in (("adaptive", "-"), ("pts", ":")):
                v = d[(d["method"] == m) & (d["design_n"] == n)]["score"].mean()
                if np.isfinite(v):
                    ax.axhline(v, color=col, ls=ls, lw=1.2,
                               label=f"{m}, n={n}")
            for peer, mk in (("gpbo", "o"), ("blackbox", "s")):
                c = d[d["method"] == peer].groupby("runs_per_target")["score"].mean()
                c = c[c.index > r]
                if len(c):  # b runs per target <-> K = n / (b - r) targets
                    K = n / (c.index.to_numpy(dtype=float) - r)
                    ax.plot(K, c.to_numpy(), mk + "--", color=col, ms=3,
                            label=f"{peer}, same total")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("targets K (equal total runs n + r K)")
        ax.set_ylabel("mean Delta" + (" (re-scored)" if s == "epidemic" else ""))
        ax.set_title(f"{s} (r = {r}; black box measured to {bmax} runs/target)", fontsize=9)
        ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    with io.atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=130, format="png")
    plt.close(fig)


def report() -> None:
    frames = [io.read_csv(p) for p in sorted(OUT.glob("breakeven_runs_*.csv"))]
    df = pd.concat(frames, ignore_index=True)
    # a study needs both sides (a seed's parts may still be running)
    both = df.groupby("study")["design_n"].agg(lambda v: (v > 0).any() and (v == 0).any())
    for st_ in both[~both].index:
        print(f"{st_}: only one side measured so far; left out of the tables")
    peers = df[df["design_n"] == 0]
    if len(peers):
        # the anytime strategies side by side at equal runs per target (median over
        # seeds x targets): e.g. sequential against gpbo, K = 1
        b = sorted({x for x in (32, 64, 128, 256, 512, 1024)
                    if x in set(peers["runs_per_target"])})
        at = peers[peers["runs_per_target"].isin(b)]
        print("\n== anytime strategies at equal runs per target (median score over "
              "seeds x targets; CPU-s per target)")
        print(at.groupby(["study", "runs_per_target", "method"])
              .agg(median_score=("score", "median"), cpu_s=("cpu_s", "median"),
                   targets=("score", "size")).reset_index()
              .to_string(index=False, float_format="%.4g"))
    df = df[df["study"].isin(both[both].index)]
    if df.empty:
        return
    summ = summary(df)
    table = breakeven(df)
    io.write_csv(summ, OUT / "breakeven.csv")
    io.write_csv(table, OUT / "breakeven_table.csv")
    figure(df, OUT / "breakeven.png")
    pd.set_option("display.width", 200)
    pd.set_option("display.max_columns", 20)
    for s, d in summ.groupby("study"):
        r = int(d.loc[d["design_n"] > 0, "runs_per_target"].iloc[0])
        print(f"\n== {s}: equal runs per target (r = {r}); score = mean Delta over targets"
              f"{' (re-scored)' if s == 'epidemic' else ''}, sd over seeds")
        eq = d[d["runs_per_target"] == r]
        print(eq[["method", "design_n", "mean_score", "sd_over_seeds", "median_score",
                  "cpu_s_per_target", "train_cpu_s", "design_cpu_s", "min_test_r2",
                  "targets", "seeds"]].to_string(index=False, float_format="%.4g"))
    print("\n== break-even number of targets K* (metamodel no worse from K* targets on)")
    print(table[["study", "design_n", "metamodel_strategy", "peer", "metamodel_mean",
                 "peer_mean_at_r", "peer_mean_at_bmax", "breakeven_targets", "note"]]
          .to_string(index=False, float_format="%.4g"))
    print(f"\nwrote {OUT / 'breakeven.csv'}, breakeven_table.csv, breakeven.png")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default=str(ROOT / "config" / "config.yaml"))
    ap.add_argument("--studies", nargs="+", default=list(STUDIES))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--seed-offset", type=int, default=0,
                    help="first seed = config seed + this (run seeds as separate processes)")
    ap.add_argument("--targets", type=int, default=10)
    ap.add_argument("--long-targets", type=int, default=None,
                    help="targets per seed whose black-box run goes to --bmax (the rest "
                         "stop at r); default all")
    ap.add_argument("--bmax", type=int, default=100, help="black-box runs per target")
    ap.add_argument("--sizes", type=int, nargs="*", default=[256, 1024],
                    help="design sizes besides the study's own")
    ap.add_argument("--methods", nargs="*", default=["adaptive", "pts"])
    ap.add_argument("--peers", nargs="*", default=["gpbo", "blackbox"])
    ap.add_argument("--rescore", type=int, default=5,
                    help="replicates re-scoring each chosen point (stochastic studies)")
    ap.add_argument("--all-targets", action="store_true",
                    help="run the smaller designs on every target, not only the long ones")
    ap.add_argument("--skip-targets", type=int, default=0,
                    help="black boxes: leave out each seed's first this many targets (to "
                         "add targets to an earlier run; the targets are a prefix series)")
    ap.add_argument("--quick", action="store_true",
                    help="1 seed, 3 targets (1 long), bmax r + 30 (r + 10 for r >= 100)")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--skip-own", action="store_true",
                    help="leave out the study's own design size (smoke tests)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("simcalib").setLevel(logging.WARNING)
    log = logging.getLogger("breakeven")
    if not args.report_only:
        cfg = load_config(args.config)
        for name in args.studies:
            r = int(merged_settings(cfg["studies"][name]["calibration"])["budget"])
            seeds, nt, lt, bmax = args.seeds, args.targets, args.long_targets, args.bmax
            if args.quick:
                seeds, nt, lt, bmax = 1, 3, 1, r + (30 if r < 100 else 10)
            stochastic = bool((cfg["studies"][name]["simulator"].get("options") or {})
                              .get("stochastic", cfg["studies"][name]["simulator"]["type"]
                                   == "epidemic"))
            first = cfg["seed"] + args.seed_offset
            run_study(cfg, name, list(range(first, first + seeds)), nt,
                      args.sizes, max(bmax, r), nt if lt is None else lt,
                      args.rescore if stochastic else 0, tuple(args.methods),
                      tuple(args.peers), log, own_size=not args.skip_own,
                      small_on_long=not args.all_targets, skip_targets=args.skip_targets)
    report()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
