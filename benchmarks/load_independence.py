"""Same config, same answers, whatever the machine's load (issue 40, item 4).

Runs a config's workflow twice into two fresh folders, once on an idle machine and
once beside ``--load`` CPU-bound processes, then compares every result file and the
trust flags.  Timings differ by design and are left out: columns and JSON keys that
name seconds, CPU or wall time, the timing sidecars, logs and benchmark files.
Figures (PNG) and posteriors (netCDF) are compared by their numbers, not bytes: a
PNG is skipped, a netCDF's variables are compared.

    python benchmarks/load_independence.py                       # config/quick.yaml
    python benchmarks/load_independence.py --targets results/oscillator_obs/all.done
    python benchmarks/load_independence.py --keep /tmp/li         # keep both folders

Prints one line per differing file and the flags of both runs; exits 1 on any
difference.  Writes ``<out>/load_independence.csv`` (file, status, detail).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

#: name parts of columns and keys that hold timings (they differ between runs by design);
#: ``time_limited`` is a result, not a timing
TIMING_PARTS = {"seconds", "s", "cpu", "wall", "elapsed", "runtime", "timing", "duration",
                "eta", "timestamp", "started", "finished", "date", "speed"}


def is_timing(name: object) -> bool:
    parts = set(re.split(r"[^a-z0-9]+", str(name).lower()))
    return bool(parts & TIMING_PARTS) or "seconds" in str(name).lower()
SKIP_PARTS = {"logs", "benchmarks", ".snakemake"}
SKIP_SUFFIX = (".png", ".html", ".log", ".tsv", ".pkl", ".pt", ".done")


def burn() -> None:  # pragma: no cover - runs in the load processes
    x = 0
    while True:
        x = (x * 1103515245 + 12345) % 2**31


def start_load(n: int) -> list[subprocess.Popen]:
    code = f"import sys; sys.path.insert(0, {str(ROOT / 'benchmarks')!r}); " \
           "import load_independence as li; li.burn()"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]


def stop_load(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()


def run_workflow(workdir: Path, configfile: str, targets: list[str], cores: int) -> float:
    cmd = ["snakemake", *targets, "--cores", str(cores), "-s", str(ROOT / "Snakefile"),
           "-d", str(workdir), "--configfile", str(ROOT / configfile), "--quiet", "all"]
    t0 = time.perf_counter()
    with open(workdir / "snakemake.log", "w") as log:
        rc = subprocess.call(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    if rc != 0:
        raise SystemExit(f"snakemake failed (rc {rc}); see {workdir / 'snakemake.log'}")
    return time.perf_counter() - t0


def _strip(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if not is_timing(k)}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def _csv(path: Path) -> pd.DataFrame:
    df = pd.read_csv(path)
    return df[[c for c in df.columns if not is_timing(c)]]


def compare_file(a: Path, b: Path) -> str | None:
    """None when equal (timings aside), else what differs."""
    if a.suffix == ".csv":
        da, db = _csv(a), _csv(b)
        if list(da.columns) != list(db.columns) or da.shape != db.shape:
            return f"shape/columns {da.shape} vs {db.shape}"
        diff = [c for c in da.columns if not da[c].equals(db[c])]
        return f"columns differ: {diff}" if diff else None
    if a.suffix == ".json":
        ja, jb = _strip(json.loads(a.read_text())), _strip(json.loads(b.read_text()))
        return None if ja == jb else "JSON differs"
    if a.suffix == ".nc":
        import xarray as xr

        with xr.open_dataset(a) as xa, xr.open_dataset(b) as xb:
            return None if xa.equals(xb) else "netCDF variables differ"
    return None if a.read_bytes() == b.read_bytes() else "bytes differ"


def result_files(root: Path) -> list[Path]:
    out = []
    for p in sorted((root / "results").rglob("*")):
        rel = p.relative_to(root)
        if p.is_file() and not SKIP_PARTS & set(rel.parts) and not p.name.endswith(SKIP_SUFFIX) \
                and "timing" not in p.name and p.name != "runtime.csv":
            out.append(rel)
    return out


def flags(root: Path, configfile: str) -> list[str]:
    from simcalib.config import load_config
    from simcalib.report.flags import collect

    cfg = load_config(ROOT / configfile)
    bayes = list((cfg.get("bayes") or {}).get("settings") or [])
    return [f.line() for f in collect(root / "results", list(cfg["studies"]), bayes,
                                      cfg["report"]["flag_failed_share"])]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configfile", default="config/quick.yaml")
    ap.add_argument("--targets", nargs="*", default=[], help="snakemake targets (default all)")
    ap.add_argument("--load", type=int, default=4, help="CPU-bound processes of the loaded run")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--keep", help="folder to keep both runs in (default: a temporary one)")
    ap.add_argument("--out", default="results/benchmarks", help="where the CSV goes")
    a = ap.parse_args()
    base = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="load_independence_"))
    runs = {"idle": base / "idle", "loaded": base / "loaded"}
    for d in runs.values():
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    wall = {"idle": run_workflow(runs["idle"], a.configfile, a.targets, a.cores)}
    procs = start_load(a.load)
    try:
        wall["loaded"] = run_workflow(runs["loaded"], a.configfile, a.targets, a.cores)
    finally:
        stop_load(procs)
    files = sorted(set(result_files(runs["idle"])) | set(result_files(runs["loaded"])))
    rows = []
    for rel in files:
        pa, pb = runs["idle"] / rel, runs["loaded"] / rel
        if not (pa.is_file() and pb.is_file()):
            rows.append({"file": str(rel), "status": "missing", "detail": "only in one run"})
            continue
        why = compare_file(pa, pb)
        rows.append({"file": str(rel), "status": "differs" if why else "equal",
                     "detail": why or ""})
    fl = {k: flags(d, a.configfile) for k, d in runs.items()}
    rows.append({"file": "(flags)", "status": "equal" if fl["idle"] == fl["loaded"]
                 else "differs", "detail": " | ".join(fl["loaded"])})
    df = pd.DataFrame(rows)
    out = ROOT / a.out
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / "load_independence.csv", index=False)
    bad = df[df.status != "equal"]
    print(f"{a.configfile}: idle {wall['idle']:.0f} s, beside {a.load} CPU-bound processes "
          f"{wall['loaded']:.0f} s (wall); {len(df) - 1} result files compared, "
          f"{len(bad)} differ")
    for r in bad.itertuples():
        print(f"  {r.file}: {r.status} {r.detail}")
    for k, v in fl.items():
        print(f"flags ({k}, {len(v)}): " + ("; ".join(v) if v else "none"))
    if not a.keep:
        shutil.rmtree(base, ignore_errors=True)
    return 1 if len(bad) else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
