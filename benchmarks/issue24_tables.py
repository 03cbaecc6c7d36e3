"""Issue 24's tables (docs/strategies_results.md, "One data set, few runs") from the per-target
CSVs that benchmarks/breakeven.py and benchmarks/sequential.py write: medians and
quartiles over seeds x targets, the pairs each method wins, the ratios the issue's goals
read and CPU seconds per run.  It only reads; nothing is re-run.

* K = 1, anytime (``breakeven_runs_<study>_<seed>_bb*.csv``, written by
  ``breakeven.py --methods --peers sequential gpbo``): one long run per target, read
  at N runs; CPU-s per run = the process CPU of the target's run up to N / N.
* K targets in one job and the stochastic study's K = 1 (``sequential_runs_*.csv``,
  written by ``sequential.py``): score = Delta (re-scored for a stochastic study).

A (seed, target) pair is compared only where both methods were measured; a row
measured by two files (a rerun) counts once, the later file's (a file tagged
``_v<k>`` by ``sequential.py --tag`` after every untagged one, then by time).
``sequential`` rows with a ``score_best_run`` column (written since
``sequential.final``) replace a study's older ``sequential`` rows, pair or not: the
older ones chose by the best single run, on older code.  Their best single run,
re-scored on the same runs, is compared with the answer of ``final`` in a table of
its own (``sequential (best run)``).

    python benchmarks/issue24_tables.py             # markdown tables on stdout
    python benchmarks/issue24_tables.py --dir results/benchmarks
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
BASE = "sequential"
BEST_RUN = "sequential (best run)"


def _fmt(v: float) -> str:
    if not np.isfinite(v):
        return "—"
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 0.01:
        return f"{v:.3g}"
    return f"{v:.2e}".replace("e-0", "e-")


def _read(files: list[Path]) -> pd.DataFrame:
    frames = []
    def version(p: Path) -> int:
        m = re.search(r"_v(\d+)\.csv$", p.name)
        return int(m.group(1)) if m else 0

    for order, f in enumerate(sorted(files, key=lambda p: (version(p), p.stat().st_mtime))):
        d = pd.read_csv(f)
        if len(d):
            frames.append(d.assign(_file=f.name, _order=order))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def anytime(d: pd.DataFrame) -> pd.DataFrame:
    """K = 1 rows of the breakeven.py black-box part, one per (study, seed, target,
    method, N), in sequential.py's columns."""
    d = d[d["design_n"] == 0].rename(columns={"runs_per_target": "N"})
    d = d.assign(K=1, cpu_s_per_run=d["cpu_s"] / d["N"])
    return d.sort_values("_order").drop_duplicates(
        ["study", "seed", "target_id", "method", "N"], keep="last")


def compare(d: pd.DataFrame, methods: list[str]) -> list[dict]:
    """Per (study, K, N): each method's median and quartiles, per-seed medians, CPU,
    and against ``sequential`` the ratio of medians, the median per-pair ratio and
    the pairs it is lower on (paired by seed and target)."""
    out = []
    for (study, K, N), g in d.groupby(["study", "K", "N"]):
        wide = g.pivot_table(index=["seed", "target_id"], columns="method", values="score",
                             aggfunc="last")
        have = [m for m in methods if m in wide]
        if BASE not in have or len(have) < 2:
            continue
        wide = wide.dropna(subset=have)
        if wide.empty:
            continue
        row: dict = {"study": study, "K": int(K), "N": int(N), "pairs": len(wide),
                     "seeds": wide.index.get_level_values("seed").nunique()}
        for m in have:
            s = wide[m]
            row[m] = (s.median(), s.quantile(0.25), s.quantile(0.75))
            row[f"{m}_seeds"] = s.groupby(level="seed").median().to_list()
            cpu = g[g["method"] == m].set_index(["seed", "target_id"])["cpu_s_per_run"]
            cpu = cpu[~cpu.index.duplicated(keep="last")].reindex(wide.index)
            row[f"{m}_cpu"] = (cpu.median(), cpu.quantile(0.25), cpu.quantile(0.75))
            if "cpu_s_last_run" in g:
                last = g[g["method"] == m]["cpu_s_last_run"]
                row[f"{m}_cpu_last"] = float(last.median()) if last.notna().any() else np.nan
            if m != BASE:
                row[f"{m}/seq"] = s.median() / wide[BASE].median()
                row[f"{m}/seq_pair"] = float((s / wide[BASE]).median())
                row[f"{m}_seed_ratio"] = (s.groupby(level="seed").median()
                                          / wide[BASE].groupby(level="seed").median()).to_list()
                row[f"won_vs_{m}"] = int((wide[BASE] < s).sum())
        out.append(row)
    return out


def table(rows: list[dict], methods: list[str], title: str) -> str:
    if not rows:
        return f"{title}: no paired rows\n"
    lines = [title, ""]
    have = [m for m in methods if any(m in r for r in rows)]
    peers = [m for m in have if m != BASE]
    head = ["study", "K", "N", "pairs (seeds)"]
    head += [f"`{m}` median (q25–q75)" for m in have]
    head += [f"`{m}` / `{BASE}` (of medians; median per pair)" for m in peers]
    head += [f"`{BASE}` lower than `{m}`" for m in peers]
    head += ["CPU-s per run, median: " + " / ".join(f"`{m}`" for m in have)]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["study"], str(r["K"]), str(r["N"]), f"{r['pairs']} ({r['seeds']})"]
        for m in have:
            v = r.get(m)
            cells.append("—" if v is None else
                         f"{'**' if m == BASE else ''}{_fmt(v[0])}{'**' if m == BASE else ''}"
                         f" ({_fmt(v[1])}–{_fmt(v[2])})")
        for m in peers:
            cells.append("—" if f"{m}/seq" not in r else
                         f"{r[f'{m}/seq']:.1f}; {r[f'{m}/seq_pair']:.1f}")
        for m in peers:
            cells.append("—" if f"won_vs_{m}" not in r else
                         f"{r[f'won_vs_{m}']} of {r['pairs']}")
        cells.append(" / ".join(_fmt(r[f"{m}_cpu"][0]) if f"{m}_cpu" in r else "—"
                                for m in have))
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for r in rows:   # per-seed medians and ratios, for the text
        per = "; ".join(f"{m} " + " / ".join(_fmt(v) for v in r[f"{m}_seeds"])
                        for m in have if f"{m}_seeds" in r)
        rat = "; ".join(f"{m}/{BASE} " + " / ".join(f"{v:.1f}" for v in r[f"{m}_seed_ratio"])
                        for m in peers if f"{m}_seed_ratio" in r)
        last = "; ".join(f"{m} {_fmt(r[f'{m}_cpu_last'])}" for m in have
                         if np.isfinite(r.get(f"{m}_cpu_last", np.nan)))
        q = "; ".join(f"{m} {_fmt(r[f'{m}_cpu'][1])}–{_fmt(r[f'{m}_cpu'][2])}"
                      for m in have if f"{m}_cpu" in r)
        lines.append(f"- {r['study']} K={r['K']} N={r['N']}: per-seed medians {per}; "
                     f"per-seed ratios {rat}; CPU-s/run q25–q75 {q}"
                     + (f"; CPU-s per run at the end {last}" if last else ""))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=str(ROOT / "results" / "benchmarks"))
    ap.add_argument("--totals", type=int, nargs="+", default=[128, 256])
    args = ap.parse_args(argv)
    out = Path(args.dir)
    bb = _read(list(out.glob("breakeven_runs_*_bb*.csv")))
    if len(bb):
        a = anytime(bb)
        a = a[a["method"].isin([BASE, "gpbo"]) & a["N"].isin(args.totals)]
        print(table(compare(a, [BASE, "gpbo"]), [BASE, "gpbo"],
                    "### K = 1, anytime runs (breakeven.py)"))
    seq = _read(list(out.glob("sequential_runs_*.csv")))
    if len(seq):
        if "score_best_run" in seq:
            new = seq["score_best_run"].notna() & (seq["method"] == BASE)
            renewed = set(seq.loc[new, "study"])
            seq = seq[~((seq["method"] == BASE) & seq["study"].isin(renewed) & ~new)]
        seq = seq.sort_values("_order").drop_duplicates(
            ["study", "seed", "N", "K", "method", "target_id"], keep="last")
        methods = [BASE, "gpbo", "adaptive", "npe"]
        k1 = seq[(seq["K"] == 1) & (seq["study"] != "epidemic_mean")]
        print(table(compare(k1, methods), methods, "### K = 1 (sequential.py)"))
        if "score_best_run" in seq and seq["score_best_run"].notna().any():
            b = seq[(seq["method"] == BASE) & seq["score_best_run"].notna()]
            both = pd.concat([b, b.assign(method=BEST_RUN, score=b["score_best_run"],
                                          error=b["error_best_run"]),
                              seq[seq["method"] == "gpbo"]], ignore_index=True)
            m2 = [BASE, BEST_RUN, "gpbo"]
            print(table(compare(both, m2), m2, "### sequential's answer (sequential.final) "
                        "against its best single run on the same runs (sequential.py)"))
            print(f"- the answer differs from the best single run on "
                  f"{int(b['final_differs'].astype(bool).sum())} of {len(b)} targets\n")
        kk = seq[seq["K"] > 1]
        print(table(compare(kk, methods), methods, "### K targets in one job (sequential.py)"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
