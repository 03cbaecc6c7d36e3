"""Same config, same answers, whatever the machine's load (issue 40, item 4).

Runs a config's workflow twice into two fresh folders, once on an idle machine and
once beside ``--load`` CPU-bound processes, then compares every result file and the
trust flags.  Timings differ by design and are left out: columns and JSON keys that
name seconds, CPU or wall time, the timing sidecars, logs and benchmark files.  The
report's markdown (``summary.md``) is compared the same way: a table's timing columns
(found by header name, :func:`is_timing`, as a CSV's), durations written in its prose
("median 0.96 s") and a section whose heading names the runtime (the benchmark
files' table) are left out.  A file that differs only there is "timing only", not a
difference.  Figures (PNG) and posteriors (netCDF) are compared by their numbers, not
bytes: a PNG is skipped, a netCDF's variables are compared.

    python benchmarks/load_independence.py                       # config/quick.yaml
    python benchmarks/load_independence.py --targets results/oscillator_obs/all.done
    python benchmarks/load_independence.py --keep /tmp/li         # keep both folders

Prints one line per differing file (and the files that differ in timings only) and
the flags of both runs; exits 1 on any difference but timings.  Writes
``<out>/load_independence.csv`` (file, status: equal, timing only, differs or
missing; detail).
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


#: statuses of a compared file; only ``differs`` (and ``missing``) fail the check
EQUAL, TIMING_ONLY, DIFFERS = "equal", "timing only", "differs"

#: heading words of a markdown section that is all timings (summary.md's "Runtime"
#: section: the rules' benchmark files, skipped as runtime.csv is)
TIMING_SECTION_PARTS = {"runtime", "timing", "timings"}

#: a duration written in prose: "0.96 s", "128 s", "103 CPU-seconds", "2 min"
_DURATION = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?\s*(?:CPU[- ])?"
                       r"(?:ms|s|sec|secs|seconds?|min|minutes?|h|hours?)\b", re.IGNORECASE)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _is_rule(line: str) -> bool:
    """A table's header rule (``|---|:--:|``)."""
    return all(re.fullmatch(r":?-{3,}:?", c) for c in _cells(line))


def markdown_content(text: str) -> list[tuple[Any, ...]]:
    """``text`` as (kind, ...) items with its timings left out: headings, prose lines
    with their durations masked, and tables as (header, rows) without the columns
    whose header :func:`is_timing` names; a section whose heading names the runtime is
    one item (its heading), its contents skipped."""
    out: list[tuple[Any, ...]] = []
    lines = text.splitlines()
    i, skip_level = 0, 0
    while i < len(lines):
        line = lines[i]
        head = re.match(r"(#+)\s+(.*)", line)
        if head:
            level = len(head.group(1))
            if skip_level and level > skip_level:
                i += 1
                continue
            words = set(re.split(r"[^a-z0-9]+", head.group(2).lower()))
            skip_level = level if words & TIMING_SECTION_PARTS else 0
            out.append(("heading", line.strip()))
            i += 1
            continue
        if skip_level:
            i += 1
            continue
        if line.lstrip().startswith("|") and i + 1 < len(lines) and _is_rule(lines[i + 1]):
            header = _cells(line)
            keep = [j for j, h in enumerate(header) if not is_timing(h)]
            rows, i = [], i + 2
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                cells = _cells(lines[i])
                rows.append(tuple(cells[j] if j < len(cells) else "" for j in keep))
                i += 1
            out.append(("table", tuple(header[j] for j in keep), tuple(rows)))
            continue
        if line.strip():
            out.append(("text", _DURATION.sub("<duration>", line.strip())))
        i += 1
    return out


def compare_markdown(a: str, b: str) -> tuple[str, str]:
    """(status, detail) of two markdown texts, timings left out (:func:`markdown_content`)."""
    if a == b:
        return EQUAL, ""
    ca, cb = markdown_content(a), markdown_content(b)
    if ca == cb:
        return TIMING_ONLY, "timing columns or durations only"
    k = next((k for k, (x, y) in enumerate(zip(ca, cb, strict=False)) if x != y),
             min(len(ca), len(cb)))
    where = ca[k] if k < len(ca) else cb[k]
    what = (f"table [{', '.join(where[1])}]" if where[0] == "table" else repr(where[1][:80]))
    return DIFFERS, f"markdown differs at {what}"


def compare_file(a: Path, b: Path) -> tuple[str, str]:
    """(status, detail): ``equal`` when the bytes are, ``timing only`` when they differ
    only in timings (columns, keys, durations), else ``differs`` and what differs."""
    if a.read_bytes() == b.read_bytes():
        return EQUAL, ""
    if a.suffix == ".csv":
        da, db = _csv(a), _csv(b)
        if list(da.columns) != list(db.columns) or da.shape != db.shape:
            return DIFFERS, f"shape/columns {da.shape} vs {db.shape}"
        diff = [c for c in da.columns if not da[c].equals(db[c])]
        return (DIFFERS, f"columns differ: {diff}") if diff else (TIMING_ONLY, "timing columns")
    if a.suffix == ".json":
        ja, jb = _strip(json.loads(a.read_text())), _strip(json.loads(b.read_text()))
        return (TIMING_ONLY, "timing keys") if ja == jb else (DIFFERS, "JSON differs")
    if a.suffix == ".md":
        return compare_markdown(a.read_text(), b.read_text())
    if a.suffix == ".nc":
        import xarray as xr

        with xr.open_dataset(a) as xa, xr.open_dataset(b) as xb:
            return (EQUAL, "") if xa.equals(xb) else (DIFFERS, "netCDF variables differ")
    return DIFFERS, "bytes differ"


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
        status, why = compare_file(pa, pb)
        rows.append({"file": str(rel), "status": status, "detail": why})
    fl = {k: flags(d, a.configfile) for k, d in runs.items()}
    rows.append({"file": "(flags)", "status": "equal" if fl["idle"] == fl["loaded"]
                 else "differs", "detail": " | ".join(fl["loaded"])})
    df = pd.DataFrame(rows)
    out = ROOT / a.out
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / "load_independence.csv", index=False)
    bad = df[~df.status.isin([EQUAL, TIMING_ONLY])]
    timing_only = df[df.status == TIMING_ONLY]
    print(f"{a.configfile}: idle {wall['idle']:.0f} s, beside {a.load} CPU-bound processes "
          f"{wall['loaded']:.0f} s (wall); {len(df) - 1} result files compared, "
          f"{len(bad)} differ, {len(timing_only)} in timings only")
    for r in bad.itertuples():
        print(f"  {r.file}: {r.status} {r.detail}")
    for r in timing_only.itertuples():
        print(f"  {r.file}: timing only ({r.detail})")
    for k, v in fl.items():
        print(f"flags ({k}, {len(v)}): " + ("; ".join(v) if v else "none"))
    if not a.keep:
        shutil.rmtree(base, ignore_errors=True)
    return 1 if len(bad) else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
