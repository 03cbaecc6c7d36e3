"""One data set or a few, equal total runs: ``sequential`` against GP-BO, TPE and
a design + ``adaptive`` (issue 24's benchmark; the per-target anytime curves of
GP-BO and TPE against the metamodel route are in benchmarks/breakeven.py).

For each study, seed, total run budget N and number of targets K (the first K of
the seed's targets), every method gets N simulator runs in all:

* ``sequential``: one job over the K targets, budget N / K per target (its Sobol
  start, shared by the targets, included);
* ``gpbo`` / ``blackbox``: N / K runs per target (one anytime run per target to the
  largest N / K, read at each budget: neither looks at its budget);
* ``adaptive`` (the paper's route): a Sobol design of N - r K runs (a prefix of one
  design, the metamodel trained on it as the workflow does) + r runs per target, r
  the study's budget; no row where N - r K < 2 r;
* ``npe`` (sbi's neural posterior estimation, the optional ``sbi`` extra, as in
  benchmarks/coverage.py): trained on the same N - r K design runs, then r posterior
  draws per target simulated, the best kept;
* ``seq_posterior`` (on stochastic studies, ``--posterior-answer``): the answer the
  workflow reports for ``sequential`` there, its own posterior's median (or the run
  the posterior ranks best) from the same runs; beside it two other rules on the same
  posterior, ``seq_post_bestrun`` (the run of highest posterior density) and
  ``seq_post_map`` (the draw of highest density); no run is spent on them, and each
  is re-scored with the same fresh replicates as every method's answer;
* ``apt`` / ``tsnpe`` (sbi's multi-round NPE: APT / SNPE-C, truncated sequential NPE;
  benchmarks/sbi_rounds.py): K = 1 only, N runs per target in ``--sbi-rounds`` rounds,
  the best run kept.

Delta uses one output scale per seed (the sd over the first 256 runs of a Sobol
design, as breakeven.py).  A stochastic study's chosen points are re-scored with
``--rescore`` fresh replicates (common random numbers).  ``--fail`` adds a variant
of each study whose simulator fails in a box (``simulator.fail_region``), to count
failed runs per method beside the design's failure share.  CPU seconds are process
CPU time per proposal (runs included): averaged over the search (``cpu_s_per_run``) and
at the end of it (``cpu_s_last_run``: sequential's last round, GP-BO's last 4 runs, per
run), the marginal cost of a proposal at N.

    python benchmarks/sequential.py --quick      # minutes: 1 seed, N 128, K 1 and 3
    python benchmarks/sequential.py              # 2 seeds x 10 targets, N 128 256 512
    python benchmarks/sequential.py --report-only
    python benchmarks/sequential.py --report-only --from 'sequential_runs_*peers5*.csv'

Writes ``results/benchmarks/sequential_runs_<study>_<seed>_<methods>.csv`` (per
target and method; processes with different ``--methods`` write different files, a
``--k1-skip k`` run ``..._from<k>.csv``; rewritten after every job, so a killed run
keeps what it finished),
``sequential.csv`` (median and quartiles of Delta over seeds x targets,
runs, failed runs, CPU per proposal, the median distance of the answer to the true
inputs in the unit box, as the records' ``distance``) and ``sequential.png`` (Delta vs N per K).
"""

from __future__ import annotations

import argparse
import copy
import logging
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from breakeven import SCALE_RUNS, ScaleOnly, TimedRun, delta, design_prefix  # noqa: E402
from sbi_rounds import SBI_METHODS, run_rounds  # noqa: E402

from simcalib import io  # noqa: E402
from simcalib.config import load_config  # noqa: E402
from simcalib.metamodel.strategies import calibrate, compute_anchors, get  # noqa: E402
from simcalib.metamodel.strategies.ledger import read_targets  # noqa: E402
from simcalib.metamodel.strategies.runner import default_optimize, rescore  # noqa: E402
from simcalib.metamodel.strategies.sequential import FINAL_RULES  # noqa: E402
from simcalib.metamodel.strategies.settings import merged_settings, solver_options  # noqa: E402
from simcalib.metamodel.training import train_metamodel  # noqa: E402
from simcalib.seeds import rng  # noqa: E402
from simcalib.study import Study  # noqa: E402
from simcalib.study.simulation import make_targets, simulate_rows  # noqa: E402

# benchmarks/coverage.py shadows the ``coverage`` package that numba (imported by
# ArviZ, by the posterior) imports: the sibling modules are in, so the folder goes
sys.path[:] = [q for q in sys.path if Path(q or ".").resolve() != ROOT / "benchmarks"]

OUT = ROOT / "results" / "benchmarks"
#: a box where the failing variant's simulator fails (a third of the epidemic's
#: responsedelay values; a strip of Rosenbrock's x)
FAIL = {"epidemic_mean": {"responsedelay": [9, 10]}, "epidemic": {"responsedelay": [9, 10]},
        "rosenbrock": {"x": [0.5, 1e9]}}


def _study(cfg: dict[str, Any], name: str, n_targets: int, fail: bool) -> Study:
    scfg = copy.deepcopy(cfg["studies"][name])
    scfg["targets"] = {**scfg.get("targets", {}), "n": n_targets}
    if fail:
        scfg["simulator"]["fail_region"] = FAIL[name]
    return Study(name + ("_fail" if fail else ""), scfg)


LAST_RUNS = 4   # GP-BO's marginal CPU per proposal: over its last 4 runs (sequential's batch)


class RoundCPU(logging.Handler):
    """Process CPU time at each of the sequential strategy's round lines, with the runs
    used by then: the CPU of the *last* round per run it added is the cost of a
    proposal at that N (the goal compares it with GP-BO's last proposals, whose cost
    grows with N; an average over the whole search would hide both curves)."""

    PATTERN = re.compile(r"sequential round \d+: (\d+)/\d+ runs")

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.marks: list[tuple[float, int]] = []

    def emit(self, record: logging.LogRecord) -> None:
        m = self.PATTERN.search(record.getMessage())
        if m:
            self.marks.append((time.process_time(), int(m.group(1))))

    def last_per_run(self) -> float:
        if len(self.marks) < 2:
            return float("nan")
        (c0, u0), (c1, u1) = self.marks[-2], self.marks[-1]
        return (c1 - c0) / max(1, u1 - u0)


def seq_posterior_rows(study: Study, cfg: dict[str, Any], name: str, runs: pd.DataFrame,
                       targets: pd.DataFrame, rec: pd.DataFrame, seed: int
                       ) -> list[dict[str, Any]]:
    """Answers from ``sequential``'s own posterior on the same runs
    (:func:`simcalib.metamodel.posterior.sequential_posterior`), per target and rule:
    ``seq_posterior`` the one the workflow reports (on a stochastic simulator the
    posterior's median, or the run it ranks best where the median lies off its joint
    90 % region), and beside it, to choose that rule by measurement,
    ``seq_post_bestrun`` (the run of highest posterior density) and ``seq_post_map``
    (the draw of highest density).  Each row: ``method``, ``target_id``, ``x``,
    ``rule`` and the posterior's CPU seconds per run of the search.  No run is spent."""
    from simcalib.metamodel.posterior import sequential_posterior
    from simcalib.metamodel.posterior.sequential import (
        best_run_by_density,
        highest_density_draw,
    )

    cal = cfg["studies"][name]["calibration"] or {}
    t0 = time.process_time()
    res = sequential_posterior(study, runs, targets.reset_index(drop=True), rec,
                               cal.get("posterior") or {},
                               (cal.get("sequential") or {}).get("ensemble") or {}, seed)
    cpu = (time.process_time() - t0) / max(1, len(runs))
    names = study.space.tunable_names
    draws = res.draws
    out = []
    for t, (_, a) in enumerate(res.answers.iterrows()):
        tid = int(a["target_id"])
        out.append({"method": "seq_posterior", "target_id": tid, "cpu": cpu,
                    "rule": str(a["answer_rule"]),
                    "x": np.array([float(a[f"x_{n}"]) for n in names])})
        own = runs[(runs["target_id"] == tid) & (runs["status"] == "ok")]
        X = own[names].to_numpy(dtype=float)
        best = best_run_by_density(draws, t, X)
        if best is not None:
            out.append({"method": "seq_post_bestrun", "target_id": tid, "cpu": cpu,
                        "rule": "the run of highest posterior density", "x": X[best[0]]})
        out.append({"method": "seq_post_map", "target_id": tid, "cpu": cpu,
                    "rule": "the draw of highest posterior density",
                    "x": highest_density_draw(draws, t)[0].astype(float)})
    return out


def run_seed(cfg: dict[str, Any], name: str, seed: int, n_targets: int, totals: list[int],
             ks: list[int], methods: list[str], rescore_k: int, fail: bool,
             log: logging.Logger, k1: int = 3, k1_skip: int = 0, tag: str = "",
             final: str | None = None, sbi_rounds: int = 4,
             posterior_answer: bool = False) -> pd.DataFrame:
    study = _study(cfg, name, n_targets, fail)
    cal = merged_settings(cfg["studies"][name]["calibration"])
    r = int(cal["budget"])
    solver = solver_options(cfg, name)
    levels = max(1, len(study.space.context_levels()))
    design = study.space.design(int(np.ceil(max(max(totals), SCALE_RUNS) / levels)),
                                rng(seed, "design", name), "sobol")
    design.insert(0, "run_id", np.arange(len(design), dtype=np.int64))
    sim = simulate_rows(study, design, seed)
    head = design_prefix(sim, study, SCALE_RUNS)
    scale = head.loc[head["status"] == "ok", study.outputs].to_numpy(float).std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    design_fail = float((head["status"] != "ok").mean())
    smm = ScaleOnly(study, scale)
    tdf = simulate_rows(study, make_targets(study, seed), seed, stream="targets:targets",
                        id_column="target_id")
    tdf = tdf[tdf["status"] == "ok"].reset_index(drop=True)
    targets = read_targets(tdf, study, smm)
    rows: list[dict[str, Any]] = []
    # rewritten after every job, target and design cell, so a killed run keeps what it
    # finished; a run with --k1-skip writes its own file beside the earlier one
    path = OUT / (f"sequential_runs_{study.name}_{seed}_{'-'.join(methods)}"
                  f"{f'_from{k1_skip}' if k1_skip else ''}{f'_{tag}' if tag else ''}.csv")

    def flush() -> None:
        if rows:
            io.write_csv(pd.DataFrame(rows), path)

    def score(t: Any, x: np.ndarray, e: float) -> float:
        if rescore_k <= 0 or not np.isfinite(e):
            return e
        return rescore(study, smm, t, x, rescore_k, seed, scale)

    def add(method: str, N: int, K: int, t: Any, x: np.ndarray, e: float, runs: int,
            failed: int, cpu: float, extra: dict | None = None,
            scored: float | None = None) -> None:
        """One result row; ``scored``: its re-scored Delta when already computed."""
        x = np.asarray(x, dtype=float)
        dist = (float(np.linalg.norm(study.space.to_unit(x) - study.space.to_unit(t.x_true)))
                if t.x_true is not None and np.isfinite(x).all() else float("nan"))
        rows.append({"study": study.name, "seed": seed, "N": N, "K": K, "method": method,
                     "target_id": t.target_id, "error": e, "distance": dist,
                     "score": score(t, x, e) if scored is None else scored,
                     "runs": runs, "failed_runs": failed, "cpu_s_per_run": cpu,
                     "design_fail_share": design_fail, **(extra or {})})

    def jobs(K: int) -> list[list[int]]:
        """The target rows of each job: K = 1 on each of the first ``k1`` targets (a
        median over targets; the first ``k1_skip`` left out, measured by an earlier
        run), else the first K targets in one job."""
        return ([[i] for i in range(k1_skip, min(k1, len(targets)))] if K == 1
                else [list(range(K))])

    settings_of = {m: merged_settings({**cfg["studies"][name]["calibration"], "rescore": 0,
                                       "select": {"top": 0}}) for m in methods}
    if final is not None and "sequential" in settings_of:
        settings_of["sequential"]["sequential"]["final"] = final
    # ---- sequential: one job per (N, K) -------------------------------------------
    if "sequential" in methods:
        for N in totals:
            for K in ks:
                for sub in jobs(K):
                    rounds = RoundCPU()
                    seq_log = logging.getLogger("simcalib.metamodel.strategies.sequential")
                    # its round lines reach only this handler (the console stays quiet)
                    saved = seq_log.level, seq_log.propagate
                    seq_log.setLevel(logging.INFO)
                    seq_log.propagate = False
                    seq_log.addHandler(rounds)
                    t0 = time.process_time()
                    try:
                        rec, runs = calibrate(study, smm, tdf.loc[sub], "sequential",
                                              {**settings_of["sequential"], "budget": N // K},
                                              solver, seed)
                    finally:
                        seq_log.removeHandler(rounds)
                        seq_log.setLevel(saved[0])
                        seq_log.propagate = saved[1]
                    cpu = (time.process_time() - t0) / max(1, len(runs))
                    last = rounds.last_per_run()
                    names = study.space.tunable_names
                    for (_, rr), i in zip(rec.iterrows(), sub, strict=True):
                        x = np.array([rr[f"x_{p}"] for p in names])
                        # the best single run too (the answer of final: best_run; the
                        # runs are the same whatever final is), re-scored beside it
                        mine = runs[(runs["target_id"] == rr["target_id"])
                                    & np.isfinite(runs["error"])]
                        xb, eb = x, float(rr["error"])
                        if len(mine):
                            b = mine.loc[mine["error"].idxmin()]
                            xb, eb = b[names].to_numpy(dtype=float), float(b["error"])
                        t = targets[i]
                        same = bool(np.array_equal(xb, x))
                        sc = score(t, x, float(rr["error"]))
                        add("sequential", N, K, t, x, float(rr["error"]),
                            int(rr["runs"]), int(rr["failed_runs"]), cpu,
                            {"cpu_s_last_run": last, "error_best_run": eb,
                             # the same point re-scores the same (seeded replicates)
                             "score_best_run": sc if same else score(t, xb, eb),
                             "final_differs": not same}, scored=sc)
                    if posterior_answer:
                        for row in seq_posterior_rows(study, cfg, name, runs, tdf.loc[sub],
                                                      rec, seed):
                            t = next(t for t in targets if t.target_id == row["target_id"])
                            rr = rec[rec["target_id"] == row["target_id"]].iloc[0]
                            # no run of its own: its Delta is the fresh replicates' alone
                            add(row["method"], N, K, t, row["x"], float("nan"),
                                int(rr["runs"]), int(rr["failed_runs"]), row["cpu"],
                                {"answer_rule": row["rule"]},
                                scored=(rescore(study, smm, t, row["x"], rescore_k, seed,
                                                scale) if rescore_k > 0 else float("nan")))
                    log.info("%s seed %d N=%d K=%d sequential (targets %s): median Delta "
                             "%.4g, %.2f CPU-s/run (last round %.2f)", study.name, seed, N, K,
                             sub, rec["error"].median(), cpu, last)
                    flush()
    # ---- black boxes: anytime per target ------------------------------------------
    for m in (m for m in methods if m in ("gpbo", "blackbox")):
        need: dict[int, int] = {}
        member = {K: {i for job in jobs(K) for i in job} for K in ks}
        for K in ks:
            for i in member[K]:
                tid = targets[i].target_id
                need[tid] = max(need.get(tid, 0), max(totals) // K)
        for i, t in enumerate(targets):
            if t.target_id not in need:
                continue
            B = need[t.target_id]
            p = TimedRun(study, smm, t, B, 0.05, merged_settings({**settings_of[m], "budget": B}),
                         solver, seed, m, default_optimize())
            get(m).fn(p)
            errs = np.array([q["error"] for q in p.runs])
            for N in totals:
                for K in ks:
                    b = N // K
                    if i not in member[K] or b > B:
                        continue
                    e = np.where(np.isfinite(errs[:b]), errs[:b], np.inf)
                    j = int(np.argmin(e))
                    add(m, N, K, t, p.runs[j]["x"], float(errs[j]) if np.isfinite(e[j])
                        else float("nan"), b, int((~np.isfinite(errs[:b])).sum()),
                        p.cpu[b - 1] / b,
                        # the last LAST_RUNS proposals' CPU per run: the marginal cost at b
                        {"cpu_s_last_run": (p.cpu[b - 1] - p.cpu[b - 1 - LAST_RUNS])
                         / LAST_RUNS if b > LAST_RUNS else float("nan")})
            log.info("%s seed %d %s target %d: %d runs, best Delta %.4g", study.name, seed, m,
                     t.target_id, B, np.nanmin(np.where(np.isfinite(errs), errs, np.nan)))
            flush()
    # ---- sbi's multi-round NPE: N runs per target in rounds (K = 1) -----------------
    for m in (m for m in methods if m in SBI_METHODS):
        if any(K != 1 for K in ks):
            log.info("%s runs one target a search: K > 1 skipped", m)
        if 1 not in ks:
            continue
        for N in totals:
            for (i,) in jobs(1):
                t = targets[i]
                p = TimedRun(study, smm, t, N, 0.05, merged_settings({**settings_of[m],
                                                                      "budget": N}),
                             solver, seed, m, default_optimize())
                t0 = time.process_time()
                info = run_rounds(p, m, sbi_rounds, seed)
                cpu = (time.process_time() - t0) / max(1, len(p.runs))
                best = p.best_run()
                failed = sum(not np.isfinite(q["error"]) for q in p.runs)
                add(m, N, 1, t, (best or p.runs[0])["x"],
                    float(best["error"]) if best else float("nan"), len(p.runs), failed, cpu,
                    {"rounds": info["rounds"], "train_cpu_s": info["train_cpu_s"]})
                log.info("%s seed %d N=%d %s target %d: %d runs in %d rounds, best Delta "
                         "%.4g (training %.0f CPU-s)", study.name, seed, N, m, t.target_id,
                         len(p.runs), info["rounds"], rows[-1]["error"], info["train_cpu_s"])
                flush()
    # ---- design + adaptive ---------------------------------------------------------
    def design_cells() -> Any:
        """(N, K, target rows, design) of the design routes: a Sobol prefix of N - r K
        runs, none where that leaves fewer than 2 r."""
        for N in totals:
            for K in ks:
                if N - r * K >= 2 * r:
                    yield (N, K, sorted({i for job in jobs(K) for i in job}),
                           design_prefix(sim, study, N - r * K))

    if "adaptive" in methods:
        for N, K, sel, sub in design_cells():
            ok = sub[sub["status"] == "ok"]
            t0 = time.process_time()
            mcfg = dict(study.cfg["metamodel"])
            mm, metrics = train_metamodel(ok, study.input_names, study.outputs, mcfg, seed,
                                          study.name)
            if (sub["status"] != "ok").any():
                from simcalib.metamodel.failure import fit_failure

                X = sub[list(study.input_names)].to_numpy(dtype=float)
                mm.failure = fit_failure(X, (sub["status"] == "ok").to_numpy(),
                                         study.input_names, mcfg.get("failure"), seed,
                                         "design")
            anchors = compute_anchors(study, mm, tdf.loc[sel], solver, seed)
            rec, runs = calibrate(study, mm, tdf.loc[sel], "adaptive",
                                  {**settings_of["adaptive"], "budget": r}, solver, seed,
                                  anchors=anchors)
            cpu = (time.process_time() - t0) / (len(sub) + len(runs))
            for (_, rr), i in zip(rec.iterrows(), sel, strict=True):
                t = targets[i]
                x = np.array([rr[f"x_{p}"] for p in study.space.tunable_names])
                Y = np.array([rr[f"sim_{o}"] for o in study.outputs])
                e = float(delta(Y, t.z, scale)[0]) if np.isfinite(Y).all() else np.nan
                add("adaptive", N, K, t, x, e, int(rr["runs"]), int(rr["failed_runs"]), cpu,
                    {"design_n": len(sub), "min_test_r2": metrics["min_test_r2"]})
            log.info("%s seed %d N=%d K=%d adaptive (design %d): median Delta %.4g",
                     study.name, seed, N, K, len(sub), rec["error"].median())
            flush()
    # ---- sbi's NPE on a design of N - r K runs, r posterior draws per target ---------
    if "npe" in methods:
        from coverage import best_of_draws, npe_draws, npe_fit

        for N, K, sel, sub in design_cells():
            t0 = time.process_time()
            prep = {"study": study, "design": sub[sub["status"] == "ok"]
                    .reset_index(drop=True), "targets": tdf.loc[sel].reset_index(drop=True)}
            fit = npe_fit(prep, seed)
            _, _, _, raw = npe_draws(fit, prep, max(200, 4 * r), seed)
            for i, X in zip(sel, raw, strict=True):
                t = targets[i]
                x, err, failed = best_of_draws(study, t, X, r, seed, scale, study.outputs)
                cpu = (time.process_time() - t0) / (len(sub) + r * len(sel))
                add("npe", N, K, t, x, err if np.isfinite(err) else float("nan"), r, failed,
                    cpu, {"design_n": len(sub)})
            log.info("%s seed %d N=%d K=%d npe (design %d + %d draws run per target) done",
                     study.name, seed, N, K, len(sub), r)
            flush()
    flush()
    return pd.DataFrame(rows)


def summary(df: pd.DataFrame) -> pd.DataFrame:
    for col in ("cpu_s_last_run", "distance"):   # rows written before the column existed
        if col not in df:
            df = df.assign(**{col: float("nan")})
    g = df.groupby(["study", "K", "N", "method"])
    out = g.agg(median=("score", "median"), q25=("score", lambda s: s.quantile(0.25)),
                q75=("score", lambda s: s.quantile(0.75)), mean=("score", "mean"),
                n=("score", "size"), failed_targets=("score", lambda s: int(s.isna().sum())),
                runs=("runs", "sum"), failed_runs=("failed_runs", "sum"),
                cpu_s_per_run=("cpu_s_per_run", "median"),
                cpu_s_last_run=("cpu_s_last_run", "median"),
                design_fail_share=("design_fail_share", "first"),
                distance=("distance", "median")).reset_index()
    out["failed_share"] = out["failed_runs"] / out["runs"].where(out["runs"] > 0)
    return out


def figure(s: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    studies = list(dict.fromkeys(s["study"]))
    ks = sorted(s["K"].unique())
    fig, axes = plt.subplots(len(studies), len(ks), figsize=(3.6 * len(ks), 3 * len(studies)),
                             squeeze=False)
    for i, st in enumerate(studies):
        for j, K in enumerate(ks):
            ax = axes[i][j]
            for m, d in s[(s["study"] == st) & (s["K"] == K)].groupby("method"):
                d = d.sort_values("N")
                ax.errorbar(d["N"], d["median"], yerr=[d["median"] - d["q25"],
                                                       d["q75"] - d["median"]],
                            marker="o", capsize=3, label=m)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"{st}, K = {K}", fontsize=9)
            ax.set_xlabel("total simulator runs N")
            if j == 0:
                ax.set_ylabel("Delta (median, quartiles)")
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def report(patterns: list[str] | None = None) -> pd.DataFrame:
    """The table over every ``sequential_runs_*.csv``, or over the files matching
    ``patterns`` (globs in results/benchmarks): a new measurement (``--tag``) lies
    beside the older ones it supersedes, and pooling all of them mixes code versions.
    Rows of one (study, seed, K, N, method, target) in more than one file are said."""
    pats = patterns or ["sequential_runs_*.csv"]
    files = sorted({f for p in pats for f in OUT.glob(p)})
    if not files:
        raise SystemExit(f"no file matching {pats} in results/benchmarks: run without "
                         "--report-only first")
    df = pd.concat([pd.read_csv(f).assign(_file=f.name) for f in files], ignore_index=True)
    key = ["study", "seed", "K", "N", "method", "target_id"]
    dup = df[df.duplicated(key, keep=False)]
    if len(dup):
        print(f"warning: {dup[key].drop_duplicates().shape[0]} (study, seed, K, N, method, "
              f"target) cells lie in more than one file ({sorted(dup['_file'].unique())}): "
              "pooled as they are; choose the files with --from", file=sys.stderr)
    df = df.drop(columns="_file")
    s = summary(df)
    io.write_csv(s, OUT / "sequential.csv")
    figure(s, OUT / "sequential.png")
    with pd.option_context("display.width", 200, "display.max_rows", 500):
        print(s[["study", "K", "N", "method", "median", "q25", "q75", "n", "failed_targets",
                 "failed_share", "design_fail_share", "distance", "cpu_s_per_run",
                 "cpu_s_last_run"]]
              .to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    # ratios the goals read, per (study, K, N)
    piv = s.pivot_table(index=["study", "K", "N"], columns="method", values="median")
    for other in ("gpbo", "adaptive", "blackbox", "npe", *SBI_METHODS):
        if "sequential" in piv and other in piv:
            piv[f"{other}/sequential"] = piv[other] / piv["sequential"]
        if "seq_posterior" in piv and other in piv:   # the stochastic studies' answer
            piv[f"{other}/seq_posterior"] = piv[other] / piv["seq_posterior"]
    print()
    print(piv.to_string(float_format=lambda v: f"{v:.3g}"))
    # the answer's distance to the true inputs (unit box, Euclidean; median per cell)
    dist = s.pivot_table(index=["study", "K", "N"], columns="method", values="distance")
    print("\nmedian distance of the answer to the true inputs (unit box):")
    print(dist.to_string(float_format=lambda v: f"{v:.3g}"))
    return s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default=str(ROOT / "config" / "config.yaml"))
    ap.add_argument("--studies", nargs="+", default=["epidemic_mean", "rosenbrock"])
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--seed-offset", type=int, default=10)
    ap.add_argument("--targets", type=int, default=10)
    ap.add_argument("--totals", type=int, nargs="+", default=[128, 256, 512])
    ap.add_argument("--ks", type=int, nargs="+", default=[1, 3, 10])
    ap.add_argument("--methods", nargs="+", default=["sequential", "gpbo", "adaptive"])
    ap.add_argument("--k1-targets", type=int, default=3,
                    help="K = 1: one job on each of this many targets")
    ap.add_argument("--k1-skip", type=int, default=0,
                    help="K = 1: leave out the first this many targets (measured by an "
                         "earlier run; the targets are a prefix series); own output file")
    ap.add_argument("--rescore", type=int, default=5)
    ap.add_argument("--tag", default="",
                    help="appended to the per-seed CSV names (a new measurement beside "
                         "older ones)")
    ap.add_argument("--final", choices=FINAL_RULES, default=None,
                    help="sequential.final for the sequential runs (default: the config's)")
    ap.add_argument("--sbi-rounds", type=int, default=4,
                    help="rounds of the apt and tsnpe methods (N / rounds runs each)")
    ap.add_argument("--posterior-answer", action=argparse.BooleanOptionalAction,
                    default=None,
                    help="also score sequential's posterior answer (method seq_posterior: "
                         "the answer the workflow reports; default: on stochastic studies)")
    ap.add_argument("--fail", action="store_true",
                    help="the studies' failing variants (simulator.fail_region) instead")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--from", dest="from_files", nargs="+", default=None,
                    help="the table from these files only (globs in results/benchmarks, "
                         "e.g. 'sequential_runs_*_peers5*.csv'); default: every "
                         "sequential_runs_*.csv")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("simcalib").setLevel(logging.WARNING)
    log = logging.getLogger("sequential")
    if not args.report_only:
        if args.quick:
            args.seeds, args.targets, args.totals, args.ks = 1, 3, [128], [1, 3]
            args.k1_targets = 2
        cfg = load_config(args.config)
        for name in args.studies:
            stochastic = bool((cfg["studies"][name]["simulator"].get("options") or {})
                              .get("stochastic", cfg["studies"][name]["simulator"]["type"]
                                   == "epidemic"))
            first = cfg["seed"] + args.seed_offset
            for seed in range(first, first + args.seeds):
                run_seed(cfg, name, seed, args.targets, args.totals, args.ks, args.methods,
                         args.rescore if stochastic else 0, args.fail, log, args.k1_targets,
                         args.k1_skip, args.tag, args.final, args.sbi_rounds,
                         args.posterior_answer if args.posterior_answer is not None
                         else stochastic)
    report(args.from_files)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
