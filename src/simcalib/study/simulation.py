"""The simulation stage: design -> chunks -> simulated rows -> merged dataset.

Each chunk is simulated by its own job, so a cluster runs chunks in parallel and a
finished chunk is never recomputed when only downstream settings change.  Every row
carries a ``run_id`` (its position in the full design) and its random stream is
derived from (seed, study, run_id), so the numbers do not depend on the chunking.

Inside a chunk (:func:`run_chunk`) runs are dispatched one at a time to at most
``threads`` workers and each finished run is journaled (:mod:`simcalib.study.journal`),
so a killed chunk, rerun, redoes only the runs that were in flight.  The first run
goes alone, as a probe: a study whose outputs do not parse fails in one run, not
after the whole chunk.  Progress (``k/N runs, ok/failed, ETA``) is logged every
``progress_s`` seconds.
"""

from __future__ import annotations

import logging
import resource
import signal
import threading
import time
import types
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simcalib.errors import DataError
from simcalib.seeds import rng, row_seeds
from simcalib.simulators import strays
from simcalib.simulators.base import result_columns
from simcalib.study.journal import Journal, fingerprint, program_digest
from simcalib.study.model import Study

log = logging.getLogger(__name__)


def n_chunks(study_cfg: Mapping[str, Any]) -> int:
    d = study_cfg["design"]
    return int(np.ceil(design_size(study_cfg) / d["chunk_size"]))


def design_size(study_cfg: Mapping[str, Any]) -> int:
    """Rows in the full design (``n`` per level of the discrete contexts when
    ``per_level``)."""
    d = study_cfg["design"]
    levels = 1
    for spec in (study_cfg.get("contexts") or {}).values():
        if "values" in spec:
            levels *= len(spec["values"])
    return int(d["n"] * levels if d.get("per_level", True) else d["n"])


def make_design(study: Study, seed: int) -> pd.DataFrame:
    d = study.cfg["design"]
    df = study.space.design(int(d["n"]), rng(seed, "design", study.name), d["method"],
                            per_level=bool(d.get("per_level", True)))
    df.insert(0, "run_id", np.arange(len(df), dtype=np.int64))
    return df


def make_targets(study: Study, seed: int, which: str = "targets") -> pd.DataFrame:
    """Held-out targets: true inputs drawn away from the design's stream, with
    discrete contexts cycled over their (optionally overridden) levels."""
    tcfg = study.cfg[which] if which == "targets" else study.cfg["extra_targets"][which]
    n = int(tcfg["n"])
    r = rng(seed, "targets", study.name, which)
    levels = study.space.context_levels(tcfg.get("contexts") or None)
    rows = []
    cont = [c for c in study.space.contexts if not c.discrete]
    for i in range(n):
        level = dict(levels[i % len(levels)])
        for c in cont:
            override = (tcfg.get("contexts") or {}).get(c.name)
            lo, hi = (min(override), max(override)) if override else c.span
            level[c.name] = float(lo + r.random() * (hi - lo))
        rows.append(study.space.sample_tunables(1, r, tcfg.get("method", "uniform"), level))
    df = pd.concat(rows, ignore_index=True)[study.input_names]
    df.insert(0, "target_id", np.arange(len(df), dtype=np.int64))
    return df


def chunk_rows(design: pd.DataFrame, chunk: int, chunk_size: int) -> pd.DataFrame:
    part = design.iloc[chunk * chunk_size:(chunk + 1) * chunk_size]
    if part.empty:
        raise DataError("design", f"chunk {chunk} is empty (design has {len(design)} rows)")
    return part


def simulate_rows(study: Study, rows: pd.DataFrame, seed: int, stream: str = "sim",
                  id_column: str = "run_id", threads: int = 1) -> pd.DataFrame:
    """Run the study's simulator on ``rows``; returns rows + outputs + status/message."""
    missing = [c for c in study.input_names if c not in rows.columns]
    if missing:
        raise DataError("design", f"missing input column(s) {missing}")
    seeds = row_seeds(seed, f"{stream}:{study.name}", rows[id_column].to_numpy())
    t0 = time.perf_counter()
    # the row ids travel as the index, so an external command sees its global run id
    batch = rows[study.input_names].set_axis(pd.Index(rows[id_column].to_numpy(), name=id_column))
    with strays.scope(f"{study.name}: the simulator"):  # none outlives its runs
        res = study.simulator.run(batch, seeds, threads).reset_index(drop=True)
    dt = time.perf_counter() - t0
    out = pd.concat([rows.reset_index(drop=True),
                     res[result_columns(study.simulator, study.outputs)]],
                    axis=1)
    n_bad = int((out["status"] != "ok").sum())
    log.debug("%s: simulated %d rows in %.2f s (%d failed)", study.name, len(out), dt, n_bad)
    return out


# Simulator types whose ``run`` may be called from several threads at once (each call
# waits on an external process).  In-process Python simulators run one call at a time:
# a user's function need not be thread-safe, and the GIL would serialise it anyway.
CONCURRENT_TYPES = frozenset({"command"})
# Failure kinds that mean the study's output settings are wrong rather than the run:
# when the first run of a chunk fails this way, the chunk stops at once.
SETUP_FAILURES = frozenset({"parse_error", "missing_output"})
MAX_MESSAGES = 5
# Study keys a journal's fingerprint covers (see run_chunk).
FINGERPRINT_KEYS = ("simulator", "parameters", "contexts", "outputs", "series")


def concurrent_calls(cfg: Mapping[str, Any]) -> bool:
    """Whether the study's simulator may run several rows at once in threads."""
    spec = cfg.get("simulator") or {}
    # an isolated python simulator (a subprocess per run) is as safe as a command
    isolated = spec.get("isolate") or (spec.get("options") or {}).get("isolate")
    return spec.get("type") in CONCURRENT_TYPES or bool(isolated)


def cpu_seconds() -> float:
    """CPU seconds of this process plus its finished child processes (an external
    simulator's work shows up only in ``RUSAGE_CHILDREN``)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


class Progress:
    """Logs ``k/N runs (ok/failed), elapsed, ETA`` every ``every_s`` seconds and at
    each tenth of the chunk (but not more than once a second)."""

    def __init__(self, label: str, total: int, resumed: int, every_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.label, self.total, self.resumed, self.every_s = label, total, resumed, every_s
        self.clock = clock
        self.t0 = self.last = clock()
        self.last_tenth = -1
        self.ok = self.failed = 0

    def add(self, status: str) -> None:
        if status == "ok":
            self.ok += 1
        else:
            self.failed += 1

    def line(self) -> str:
        done = self.ok + self.failed
        new = done - self.resumed
        left = self.total - done
        elapsed = self.clock() - self.t0
        eta = (f"ETA {_duration(elapsed / new * left)}" if new > 0 and left > 0
               else "ETA -" if left > 0 else "done")
        resumed = f", {self.resumed} resumed from the journal" if self.resumed else ""
        return (f"{self.label}: {done}/{self.total} runs ({self.ok} ok, {self.failed} failed"
                f"{resumed}), {_duration(elapsed)} elapsed, {eta}")

    def maybe_log(self, force: bool = False) -> None:
        now = self.clock()
        done = self.ok + self.failed
        tenth = done * 10 // max(self.total, 1)
        due = now - self.last >= self.every_s or (tenth > self.last_tenth and now - self.last >= 1)
        if force or due:
            log.info(self.line())
            self.last, self.last_tenth = now, tenth


def _duration(s: float) -> str:
    s = max(0.0, float(s))
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


@contextmanager
def _sigterm_as_exit() -> Iterator[None]:
    """SIGTERM (Snakemake or a cluster stopping the job) raises SystemExit in the main
    thread, so a chunk stops like on Ctrl-C: no new runs, runs in flight killed."""
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _cancel(sim: Any) -> None:
    """Ask the simulator to kill the runs it has in flight (external processes live in
    their own sessions and do not get the terminal's signals)."""
    fn = getattr(sim, "cancel", None)
    if callable(fn):
        fn()


def _call(fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args)


def in_flight(label: str) -> Callable[..., Any]:
    """``_call`` under the frame name ``in_flight_<label>``.

    Why: a simulator that aborts or segfaults inside the job kills the interpreter;
    no Python code runs after it, so the job log used to be empty.  The CLI enables
    :mod:`faulthandler`, which prints each thread's frames by name on a fatal signal,
    and this frame's name carries the run id (about a microsecond per run)."""
    name = "in_flight_" + "".join(c if c.isalnum() else "_" for c in label)
    code = _call.__code__.replace(co_name=name, co_qualname=name)
    return types.FunctionType(code, _call.__globals__, name)


def run_chunk(study: Study, rows: pd.DataFrame, seed: int, threads: int = 1,
              journal: str | Path | None = None, label: str = "",
              progress_s: float = 10.0, stream: str = "sim",
              id_column: str = "run_id") -> tuple[pd.DataFrame, dict[str, Any]]:
    """Simulate ``rows`` run by run, journaling each finished run to ``journal``.

    Runs already in the journal (written under the same settings) are taken from
    it.  At most ``threads`` runs are in flight, so a kill loses at most that many.
    Returns the rows with outputs/status/message (in ``rows`` order) and the
    chunk's summary (:func:`chunk_summary` plus ``resumed`` and ``cpu_seconds``).

    By stage: prepare (:class:`_Chunk`: seeds, journal, what is left to do), dispatch
    (the probe run, then the rest on a thread pool), collect (the frame and summary)."""
    chunk = _Chunk(study, rows, seed, threads, journal, label or study.name, progress_s,
                   stream, id_column)
    t0, cpu0 = time.perf_counter(), cpu_seconds()
    # whatever any simulator (an in-process function too) left running dies here
    with strays.scope(f"{chunk.label}: the simulator"):
        chunk.dispatch()
    chunk.progress.maybe_log(force=True)
    return chunk.collect(time.perf_counter() - t0, cpu_seconds() - cpu0)


class _Chunk:
    """The state of one :func:`run_chunk` call."""

    def __init__(self, study: Study, rows: pd.DataFrame, seed: int, threads: int,
                 journal: str | Path | None, label: str, progress_s: float, stream: str,
                 id_column: str) -> None:
        missing = [c for c in study.input_names if c not in rows.columns]
        if missing:
            raise DataError("design", f"missing input column(s) {missing}")
        self.study, self.rows, self.label, self.id_column = study, rows, label, id_column
        self.ids = rows[id_column].to_numpy(dtype=np.int64)
        self.seeds = row_seeds(seed, f"{stream}:{study.name}", self.ids)
        self.inputs = rows[study.input_names].set_axis(pd.Index(self.ids, name=id_column))
        # outputs, their <output>_sd spread under replicates, status, message
        self.cols = result_columns(study.simulator, study.outputs)
        self.jr: Journal | None = None
        self.done: dict[int, dict[str, Any]] = {}
        if journal is not None:
            self._open_journal(journal, seed, stream)
        self.resumed = len(self.done)
        self.todo = [pos for pos in range(len(self.ids)) if int(self.ids[pos]) not in self.done]
        self.sim = study.simulator
        self.workers = self._workers(threads)
        self.progress = Progress(label, len(self.ids), self.resumed, progress_s)
        for rec in self.done.values():
            self.progress.add(str(rec.get("status")))
        if self.resumed:
            log.info("%s: resuming: %d of %d runs already done (journal %s)", label,
                     self.resumed, len(self.ids), journal)
        self.stop = threading.Event()

    # ---- prepare ------------------------------------------------------------
    def _open_journal(self, journal: str | Path, seed: int, stream: str) -> None:
        # what decides a run's numbers: the simulator and the input space (the rows
        # themselves are hashed too); not design.threads, chunk_size or anything later
        study = self.study
        fp = fingerprint(study.name, {k: study.cfg.get(k) for k in FINGERPRINT_KEYS}, seed,
                         stream, self.rows[[self.id_column, *study.input_names]],
                         program_digest(study.simulator))
        self.jr, held = Journal.open(journal, fp, self.id_column)
        wanted = set(self.ids.tolist())
        self.done = {k: v for k, v in held.items() if k in wanted}

    def _workers(self, threads: int) -> int:
        if not concurrent_calls(self.study.cfg):
            return 1
        cap = getattr(self.sim, "max_parallel", None) or int(threads or 1)
        # a command's max_parallel caps design.threads
        return max(1, min(int(threads or 1), int(cap), len(self.todo) or 1))

    # ---- one run ------------------------------------------------------------
    def one(self, pos: int, probe: bool = False) -> dict[str, Any] | None:
        if self.stop.is_set():
            return None
        # the call's frame is named after the run, so a fatal signal's traceback
        # (faulthandler, enabled by the CLI) says which runs were in flight
        run_id = int(self.ids[pos])
        res = in_flight(f"{self.id_column}_{run_id}")(self.sim.run, self.inputs.iloc[[pos]],
                                                      self.seeds[pos:pos + 1], 1)
        rec = {self.id_column: run_id, **{c: res[c].iloc[0] for c in self.cols}}
        rec["status"], rec["message"] = str(rec["status"]), str(rec["message"])
        if self.stop.is_set():
            return None  # finished because it was killed: not a result
        # a failed probe stops the chunk as a setup error: it is no finished run, and
        # journaling it would hand the stale row back after the user fixed the program
        if self.jr is not None and not (probe and rec["status"] in SETUP_FAILURES):
            self.jr.append(rec)
        return rec

    def record(self, rec: dict[str, Any]) -> None:
        self.done[int(rec[self.id_column])] = rec
        self.progress.add(rec["status"])

    # ---- dispatch -----------------------------------------------------------
    def dispatch(self) -> None:
        """The probe, then every other run; on an interrupt, kill what is in flight."""
        probe = bool(self.todo) and not any(r.get("status") == "ok"
                                            for r in self.done.values())
        pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="simcalib-run")
        self.pending: set[Future[dict[str, Any] | None]] = set()
        try:
            with _sigterm_as_exit():
                try:
                    if probe:
                        self._probe(pool)
                    self._run_rest(pool)
                except BaseException:
                    self._interrupt()
                    raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            if self.jr is not None:
                self.jr.close()

    def _submit_one(self, pool: ThreadPoolExecutor) -> dict[str, Any] | None:
        fut = pool.submit(self.one, self.todo.pop(0), True)
        self.pending = {fut}
        return _wait_one(fut)

    def _probe(self, pool: ThreadPoolExecutor) -> None:
        """The first run goes alone: wrong output settings fail in one run (a second
        run tells them from an input that made the program omit an output)."""
        rec = self._submit_one(pool)
        if rec is not None and rec["status"] in SETUP_FAILURES:
            second = self._submit_one(pool) if self.todo else None
            if second is None or second["status"] != "ok":
                self._setup_error(rec, second)
            log.warning("%s: the first run (%s %s) failed with %s: %s; the second "
                        "(%s %s) parsed fine, so the failure depends on the "
                        "input, not on the output settings (continuing)", self.label,
                        self.id_column, rec[self.id_column], rec["status"], rec["message"],
                        self.id_column, second[self.id_column])
            if self.jr is not None:
                self.jr.append(rec)
            self.record(rec)
            rec = second
        if rec is None:
            return
        self.record(rec)
        if rec["status"] == "ok":
            log.info("%s: first run ok, its outputs parse", self.label)
        else:
            log.warning("%s: first run failed with %s: %s (continuing)", self.label,
                        rec["status"], rec["message"])

    def _setup_error(self, rec: dict[str, Any], second: dict[str, Any] | None) -> None:
        idc = self.id_column
        also = ("" if second is None else f"; the second ({idc} {second[idc]}) failed too, "
                f"with {second['status']}")
        raise DataError(self.label, f"the first run ({idc} {rec[idc]}) failed with "
                        f"{rec['status']}: {rec['message']}{also}. The study's output "
                        "settings are probably wrong (simulator.options); no other run "
                        "was started")

    def _run_rest(self, pool: ThreadPoolExecutor) -> None:
        self.pending = {pool.submit(self.one, pos) for pos in self.todo}
        while self.pending:
            finished, self.pending = wait(self.pending, timeout=0.5,
                                          return_when=FIRST_COMPLETED)
            for fut in finished:
                rec = fut.result()
                if rec is not None:
                    self.record(rec)
            if self.jr is not None:
                self.jr.sync()
            self.progress.maybe_log()

    def _interrupt(self) -> None:
        """No new runs; kill what is in flight until every worker has returned."""
        self.stop.set()
        for fut in self.pending:
            fut.cancel()
        pending = self.pending
        while True:
            _cancel(self.sim)
            _, running = wait(pending, timeout=0.5)
            if not running:
                break
            pending = set(running)

    # ---- collect ------------------------------------------------------------
    def collect(self, seconds: float, cpu: float) -> tuple[pd.DataFrame, dict[str, Any]]:
        cols = self.cols
        res = pd.DataFrame([self.done[int(i)] for i in self.ids],
                           columns=[self.id_column, *cols])
        out = pd.concat([self.rows.reset_index(drop=True), res[cols]], axis=1)
        for o in self.study.outputs:
            out[o] = pd.to_numeric(out[o], errors="coerce").astype(float)
        out["message"] = _text(out["message"])
        summary = chunk_summary(out, seconds, cpu)
        summary["resumed"] = self.resumed
        return out, summary


def _wait_one(fut: Future[dict[str, Any] | None]) -> dict[str, Any] | None:
    """Wait for one future in short steps (so Ctrl-C is seen promptly)."""
    while True:
        finished, _ = wait({fut}, timeout=0.5)
        if finished:
            return fut.result()


def chunk_summary(df: pd.DataFrame, seconds: float | None = None,
              cpu: float | None = None) -> dict[str, Any]:
    """Counts by status, the warnings of successful runs (an ``ok`` row with a
    message: stderr lines the simulator flagged), and one example message per
    failure kind, so a failed study says why without opening the CSV."""
    status = df["status"].astype(str)
    message = _text(df["message"]) if "message" in df else pd.Series("", index=df.index)
    counts = Counter(status.tolist())
    summary: dict[str, Any] = {
        "runs": int(len(df)),
        "ok": int(counts.get("ok", 0)),
        "failures": int(len(df) - counts.get("ok", 0)),
        "status_counts": {k: int(v) for k, v in sorted(counts.items())},
    }
    warned = (status == "ok") & (message.str.strip() != "")
    summary["warnings"] = int(warned.sum())
    summary["warning_messages"] = list(dict.fromkeys(message[warned]))[:MAX_MESSAGES]
    summary["failure_examples"] = {k: str(message[status == k].iloc[0])
                                   for k in sorted(counts) if k != "ok"}
    if seconds is not None:
        summary["seconds"] = round(float(seconds), 3)
    if cpu is not None:
        summary["cpu_seconds"] = round(float(cpu), 3)
    return summary


def failure_digest(df: pd.DataFrame) -> str:
    """``'all 40 runs failed; most often parse_error (38): <message>'`` for errors that
    must say why a study has no usable rows."""
    if "status" not in df or df.empty:
        return f"{len(df)} rows, no status column" if "status" not in df else "no rows"
    bad = df[df["status"].astype(str) != "ok"]
    if bad.empty:
        return f"all {len(df)} runs ok"
    kind, n = Counter(bad["status"].astype(str)).most_common(1)[0]
    msg = str(_text(bad.loc[bad["status"].astype(str) == kind, "message"]).iloc[0])
    return (f"{len(bad)} of {len(df)} runs failed; most often {kind} ({n}): "
            f"{msg or '(no message)'}")


def _text(col: pd.Series) -> pd.Series:
    """A message column as strings, missing -> '' (a CSV column of empty messages
    reads back as all-NaN floats)."""
    return col.astype(object).where(col.notna(), "").astype(str)
