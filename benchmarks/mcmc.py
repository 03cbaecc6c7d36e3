"""MCMC speed: seconds per chain and ESS per second, KOH and MOS, every model, for
both sampler engines side by side (``vectorized`` = the lock-step engine, default;
``sequential`` = the earlier one-chain-at-a-time engine) with their ratio.

    python benchmarks/mcmc.py            # 10,000 iterations (5,000 burn-in), 2 chains
    python benchmarks/mcmc.py --quick    # 2,000 iterations, plus the 10,000-iteration
                                         # two-mass MOS speed target (minutes)
    python benchmarks/mcmc.py --engines vectorized   # one engine only
    python benchmarks/mcmc.py --engines sequential vectorized batched --batch-size 25
                                         # + replications as lanes (paper-scale driver)

The old path is the sequential engine with LSODA for the nonlinear models (what
landed before issue 16; ``--old-solver auto`` gives it the compiled solver too); the
new path is the vectorized engine with the model's default solver (compiled
Dormand-Prince for nonlinear models, exact ``expm`` for linear ones).
Both engines see the same data set and the same least-squares start; ESS at 2,000
iterations (``--quick``) is small and noisy (chains still adapting for half of them),
so the ratios there are indicative; ``--iterations 10000`` gives the stable ones.

Goal: one 10,000-iteration MOS chain on the two-mass model in <= 30 s on one core
(the reference code needs about 16 min).  Each row: one data set (replication 0 of the
setting, simulated as in the workflow), ``chains`` chains run one after the other on one
core; ``seconds`` is the mean wall time of one chain (sampling only: model build, least
squares start and file output excluded) and ``cpu_seconds`` its process CPU time (what
one dedicated core needs; on a shared, overloaded machine wall time is longer),
``ess_bulk_min`` / ``rhat_max`` over theta,
gamma, ell and sigma^2 (ArviZ, post burn-in), ``ess_per_s`` = ess_bulk_min / total chain
seconds.  ``load`` is the 1-minute load average at the end of the row: on a shared
machine, times grow with it.

Writes ``results/benchmarks/mcmc.csv``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
# benchmarks/coverage.py would shadow the coverage package numba probes for, and numba
# would then fail to compile the ODE solver (simcalib falls back to LSODA, much slower)
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
sys.path.insert(0, str(ROOT / "src"))

from simcalib.bayes._threads import limit_blas_threads  # noqa: E402
from simcalib.bayes.models import BUILTIN, build_setting, set_solver  # noqa: E402
from simcalib.bayes.posterior import build_idata, posterior_summary  # noqa: E402
from simcalib.bayes.sampler import Likelihood, SamplerConfig, run, run_many  # noqa: E402
from simcalib.bayes.synthetic import simulate  # noqa: E402
from simcalib.io import write_csv  # noqa: E402
from simcalib.seeds import rng  # noqa: E402

COLUMNS = ["setting", "method", "engine", "solver", "rep", "iterations", "seconds", "ess_bulk_min",
           "rhat_max", "ess_per_s", "ms_per_iteration", "cpu_seconds", "ess_per_cpu_s",
           "acceptance", "ode_failures", "chains", "batch", "load"]


def bench(name: str, method: str, iterations: int, chains: int, seed: int,
          engine: str = "vectorized", lsoda: bool = False, rep: int = 0) -> dict:
    """One row; ``lsoda``: a model that would be compiled (dopri5) uses LSODA instead,
    as before the compiled solver (linear models keep their exact expm)."""
    setting = build_setting(name)
    if lsoda and setting.model.solver == "dopri5":
        set_solver(setting.model, "lsoda", name)
    sim = simulate(setting, rng(seed, "bayes", name, "data", rep))
    pb = Likelihood(setting, sim.obs, method)
    cfg = SamplerConfig(iterations=iterations, burn_in=iterations // 2, chains=chains,
                        log_every=0, progress=False, engine=engine)
    res = run(pb, cfg, seed, ("bayes", name, method, rep),
              init_keys=("bayes", name, "init", rep))
    return _row(name, method, engine, setting, pb, res, rep, iterations, chains, 1)


def bench_batched(name: str, method: str, iterations: int, chains: int, seed: int,
                  reps: int, batch: int) -> list[dict]:
    """Rows for replications ``0 .. reps - 1``, sampled with replications
    ``0 .. max(reps, batch) - 1`` as lanes of one lock-step program (``run_many``):
    the same draws as the vectorized engine's (bit for bit), the batch's CPU shared
    equally by its chains."""
    setting = build_setting(name)
    n = max(reps, batch)
    sims = [simulate(setting, rng(seed, "bayes", name, "data", r)) for r in range(n)]
    pbs = [Likelihood(setting, sim.obs, method) for sim in sims]
    cfg = SamplerConfig(iterations=iterations, burn_in=iterations // 2, chains=chains,
                        log_every=0, progress=False)
    out = run_many(pbs, cfg, seed, [("bayes", name, method, r) for r in range(n)],
                   [("bayes", name, "init", r) for r in range(n)])
    return [_row(name, method, "batched", setting, pbs[r], out[r], r, iterations, chains, n)
            for r in range(reps)]


def _row(name: str, method: str, engine: str, setting, pb, res, rep: int, iterations: int,
         chains: int, batch: int) -> dict:
    summ = posterior_summary(build_idata(pb, res, {"setting": name, "method": method}),
                             setting.params)
    secs = [c.seconds for c in res.chains]
    cpu = [c.cpu_seconds for c in res.chains]
    ess = float(summ["ess_bulk"].min())
    return {"setting": name, "method": method, "engine": engine,
            "solver": setting.model.solver, "rep": rep, "iterations": iterations,
            "seconds": sum(secs) / len(secs), "ess_bulk_min": ess,
            "rhat_max": float(summ["r_hat"].max()), "ess_per_s": ess / sum(secs),
            "ms_per_iteration": 1000 * sum(secs) / (len(secs) * iterations),
            "cpu_seconds": sum(cpu) / len(cpu), "ess_per_cpu_s": ess / sum(cpu),
            "acceptance": sum(c.acceptance for c in res.chains) / len(secs),
            "ode_failures": sum(c.counters.ode_failures for c in res.chains),
            "chains": chains, "batch": batch, "load": os.getloadavg()[0]}


def ratio_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (setting, method, iterations): CPU ms per iteration and bulk ESS per
    CPU second of the engines (medians over the data sets ``rep``: the ESS of one
    chain set swings several-fold between data sets and seeds), their ratios to the
    sequential (old) engine and the number of data sets.  Suffixes: ``_seq``
    sequential, ``_vec`` vectorized (one run's chains as lanes), ``_bat`` batched
    (replications as lanes too)."""
    keys = ["setting", "method", "iterations"]
    cols = ["ms_per_iteration", "cpu_seconds", "ess_bulk_min", "rhat_max", "ess_per_cpu_s"]
    med = df.groupby(["engine", *keys])[cols].median()
    med["data_sets"] = df.groupby(["engine", *keys])["rep"].nunique()
    out = med.loc["sequential"].add_suffix("_seq")
    for engine, suf in (("vectorized", "vec"), ("batched", "bat")):
        if engine not in med.index.get_level_values(0):
            continue
        out = out.merge(med.loc[engine].add_suffix(f"_{suf}"), left_index=True,
                        right_index=True)
        speed = "cpu_speedup" + ("" if suf == "vec" else "_batched")
        ratio = "ess_per_cpu_s_ratio" + ("" if suf == "vec" else "_batched")
        out[speed] = out["cpu_seconds_seq"] / out[f"cpu_seconds_{suf}"]
        out[ratio] = out[f"ess_per_cpu_s_{suf}"] / out["ess_per_cpu_s_seq"]
    return out.reset_index()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="2,000 iterations (plus the target)")
    ap.add_argument("--iterations", type=int, help="override the chain length")
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--reps", type=int, default=1,
                    help="data sets per row (replications 0..N-1); ratios use medians")
    ap.add_argument("--settings", nargs="+", default=list(BUILTIN))
    ap.add_argument("--methods", nargs="+", default=["koh", "mos"])
    ap.add_argument("--engines", nargs="+", default=["sequential", "vectorized"],
                    choices=["sequential", "vectorized", "batched"],
                    help="batched: the vectorized engine with --batch-size replications "
                         "as lanes of one program (same draws, shared overhead)")
    ap.add_argument("--batch-size", type=int, default=25,
                    help="replications per batch of the batched engine (>= --reps)")
    ap.add_argument("--old-solver", default="lsoda", choices=["lsoda", "auto"],
                    help="ODE solver of the sequential (old) path's nonlinear models: lsoda, "
                         "as before the compiled solver (default), or the model's own")
    ap.add_argument("--seed", type=int, default=20261202)
    ap.add_argument("--output", default=str(ROOT / "results" / "benchmarks" / "mcmc.csv"))
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    limit_blas_threads(1)
    iters = args.iterations or (2000 if args.quick else 10000)
    jobs = [(s, m, iters) for s in args.settings for m in args.methods]
    if args.quick and "two_mass" in args.settings and iters != 10000:
        jobs.insert(0, ("two_mass", "mos", 10000))   # the speed target, always at full length
    rows = []
    t0 = time.perf_counter()
    runs = ((j, e, r) for j in jobs for r in range(args.reps) for e in args.engines)
    for (s, m, n), e, r in runs:
        if e == "batched":
            if r == 0:
                new = bench_batched(s, m, n, args.chains, args.seed, args.reps,
                                    args.batch_size)
                rows.extend(new)
                for row in new:
                    print(f"{s:16s} {m:4s} batch of {row['batch']} rep {row['rep']} {n:6d} it  "
                          f"{row['cpu_seconds']:6.2f} CPU s/chain  ESS_min "
                          f"{row['ess_bulk_min']:7.1f}  R-hat {row['rhat_max']:.3f}", flush=True)
            continue
        old = e == "sequential" and args.old_solver == "lsoda"
        row = bench(s, m, n, args.chains, args.seed, e, old, r)
        rows.append(row)
        print(f"{s:16s} {m:4s} {e[:4]} {row['solver']:6s} rep {r} {n:6d} it  "
              f"{row['seconds']:7.2f} s/chain "
              f"({row['cpu_seconds']:6.2f} CPU s)  "
              f"{row['ms_per_iteration']:6.2f} ms/it  ESS_min {row['ess_bulk_min']:7.1f}  "
              f"ESS/s {row['ess_per_s']:7.2f}  R-hat {row['rhat_max']:.3f}  "
              f"load {row['load']:.1f}", flush=True)
    df = pd.DataFrame(rows, columns=COLUMNS)
    write_csv(df, args.output)
    print()
    print(df.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if "sequential" in args.engines and len(args.engines) > 1:
        ratios = ratio_table(df)
        ratio_path = str(Path(args.output).with_name(Path(args.output).stem + "_ratios.csv"))
        write_csv(ratios, ratio_path)
        print("\nnew / sequential (same data sets, same starts, same run; medians):")
        print(ratios.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
        print(f"wrote {ratio_path}")
    target = df[(df.setting == "two_mass") & (df.method == "mos") & (df.iterations == 10000)
                & (df.engine == args.engines[-1])]
    if len(target):
        sec = float(target["seconds"].iloc[0])
        cpu = float(target["cpu_seconds"].iloc[0])
        print(f"\ntwo-mass MOS, 10,000 iterations: {sec:.1f} s wall, {cpu:.1f} s CPU per chain "
              f"(goal <= 30 s on one core): {'met' if cpu <= 30 else 'NOT met'}")
    print(f"total {time.perf_counter() - t0:.0f} s; wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
