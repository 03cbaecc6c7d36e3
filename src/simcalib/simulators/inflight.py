"""Which in-process runs are in flight, said while they run and when the job dies.

An in-process Python function (``type: python`` without ``isolate``) cannot be
stopped: a hang blocks its job forever and a crash takes the interpreter with it.
This module makes both visible in the job log:

* **Heartbeat.**  Every call registers its run ids (:func:`flight`).  One daemon
  thread logs, every ``heartbeat`` seconds, the runs in flight for longer than that
  and for how long, with how to add a timeout.  A hang is then a growing line in the
  log, not an empty one.
* **Death notice.**  A sentinel process (an ``awk`` program: it starts in
  milliseconds, a Python one would take a tenth of a second) started once per job
  holds a pipe from it and is told each run as it starts and ends.  When the pipe
  closes without the job saying goodbye (the job called ``os._exit``, was killed by
  a signal, crashed in native code), the sentinel writes to the job's stderr (its
  log) which runs were in flight, for how long, and the cause the job could record
  first: ``os._exit(n)`` is wrapped while a run is in flight and records its status;
  ``SystemExit``/``KeyboardInterrupt`` out of a run are logged by :func:`flight`;
  anything else (SIGKILL from an out-of-memory killer or a time limit, a segfault:
  see the ``Fatal Python error`` above it) is named as "no word from Python".

Why a child, not a parent: the job's pid is what Snakemake and the cluster watch and
signal; a parent wrapper would have to forward every signal and exit status.  The
price is that the sentinel cannot read the job's exit status, so a kill by a signal
is named as such but not which one.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from simcalib.simulators import strays

log = logging.getLogger(__name__)

#: seconds between heartbeat lines (the ``python`` simulator's ``heartbeat`` option)
DEFAULT_HEARTBEAT_S = 60.0

SENTINEL_AWK = r"""
$1 == "+" { t[$2] = $3; what[$2] = substr($0, index($0, $4)); next }
$1 == "-" { delete t[$2]; delete what[$2]; delete c[$2]; next }
$1 == "c" { c[$2] = substr($0, index($0, $3)); next }
$1 == "q" { clean = 1; exit }
END {
  if (clean) exit 0
  srand(); now = srand()
  n = 0; line = ""
  for (k in t) {
    line = line (n ? "; " : "") what[k] " (in flight for " (now - t[k]) " s)"; n++
    if (k in c) cause = c[k]
  }
  if (!n) exit 0
  if (cause == "") cause = "no word from Python: killed by a signal (SIGKILL from an " \
    "out-of-memory killer, a time limit or kill -9), or a crash in native code (see a " \
    "'Fatal Python error' above)"
  printf "simcalib: the job (pid %s) ended with %d run(s) in flight: %s; cause: %s\n", \
    pid, n, line, cause > "/dev/stderr"
}
"""


@dataclass
class _Run:
    what: str
    t0: float
    heartbeat: float
    last: float


class _Recorder:
    """The process-wide registry of in-process runs (see the module docstring)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs: dict[int, _Run] = {}
        self.next = 0
        self.sentinel: subprocess.Popen | None = None
        self.pid = -1
        self.thread: threading.Thread | None = None
        self.wake = threading.Event()

    # ---- sentinel -----------------------------------------------------------
    def _send(self, line: str) -> None:
        proc = self._sentinel()
        if proc is None or proc.stdin is None:
            return
        with contextlib.suppress(OSError, ValueError):
            proc.stdin.write(line + "\n")
            proc.stdin.flush()

    def _sentinel(self) -> subprocess.Popen | None:
        if self.pid == os.getpid():
            return self.sentinel
        self.pid, self.sentinel = os.getpid(), None  # (a forked child starts its own)
        awk = shutil.which("awk")
        if awk is None:
            return None
        try:
            with strays.spawning() as registry:
                self.sentinel = subprocess.Popen(
                    [awk, "-v", f"pid={os.getpid()}", SENTINEL_AWK], stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL, stderr=sys.__stderr__ or None,
                    start_new_session=True, close_fds=True, text=True)
                registry.add(self.sentinel.pid)
        except (OSError, ValueError):
            return None
        atexit.register(self.close)
        return self.sentinel

    def close(self) -> None:
        """The job ends normally: the sentinel exits without a word."""
        proc, self.sentinel = self.sentinel, None
        if proc is None or self.pid != os.getpid():
            return
        with contextlib.suppress(OSError, ValueError):
            proc.stdin.write("q\n")  # type: ignore[union-attr]
            proc.stdin.close()  # type: ignore[union-attr]
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        strays.forget(proc.pid)

    # ---- runs -----------------------------------------------------------------
    def start(self, what: str, heartbeat: float) -> int:
        now = time.monotonic()
        with self.lock:
            self.next += 1
            token = self.next
            self.runs[token] = _Run(what, now, heartbeat, now)
            self._send(f"+ {token} {int(time.time())} {what}")
        if heartbeat > 0:
            self._heartbeat_thread()
            self.wake.set()  # re-plan the next beat for this run's period
        return token

    def end(self, token: int) -> None:
        with self.lock:
            self.runs.pop(token, None)
            self._send(f"- {token}")

    def cause(self, text: str, token: int | None = None) -> None:
        """Why the job is about to end, for run ``token`` (None: every run in flight);
        forgotten when the run ends, so a stale cause is never reported."""
        with self.lock:
            for t in [token] if token is not None else list(self.runs):
                self._send(f"c {t} " + text.replace("\n", " "))

    def in_flight(self) -> list[str]:
        now = time.monotonic()
        with self.lock:
            return [f"{r.what} ({now - r.t0:.0f} s)" for r in self.runs.values()]

    # ---- heartbeat ----------------------------------------------------------
    def _heartbeat_thread(self) -> None:
        with self.lock:
            if self.thread is not None and self.thread.is_alive():
                return
            self.thread = threading.Thread(target=self._beat, name="simcalib-heartbeat",
                                           daemon=True)
            self.thread.start()

    def _beat(self) -> None:
        while True:
            with self.lock:
                runs = [r for r in self.runs.values() if r.heartbeat > 0]
            step = min((r.heartbeat for r in runs), default=DEFAULT_HEARTBEAT_S)
            self.wake.wait(min(step, 1.0) if runs else step)
            self.wake.clear()
            self._log_due(time.monotonic())

    def _log_due(self, now: float) -> None:
        with self.lock:
            due = [r for r in self.runs.values()
                   if r.heartbeat > 0 and now - r.last >= r.heartbeat]
            for r in due:
                r.last = now
        for r in due:
            log.warning("%s still in flight after %s; an in-process function cannot be "
                        "stopped: to give each run a timeout set 'isolate: true' and "
                        "'timeout: <seconds>' in simulator.options (docs/your_simulator.md)",
                        r.what, _duration(now - r.t0))


def _duration(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"


RECORDER = _Recorder()
_REAL_EXIT = os._exit
_PATCHED = 0
_PATCH_LOCK = threading.Lock()


def _recording_exit(status: int) -> None:
    """``os._exit`` while in-process runs are in flight: say so, then exit."""
    runs = RECORDER.in_flight()
    if runs:
        cause = f"os._exit({status}) called during the run (in-process: nothing after it ran)"
        RECORDER.cause(cause)
        if RECORDER.sentinel is None:  # no sentinel to say it: the log must
            log.error("simcalib: %s", cause)
            for h in logging.getLogger().handlers:
                h.flush()
    _REAL_EXIT(status)


@contextlib.contextmanager
def _exit_recorded() -> Iterator[None]:
    global _PATCHED
    with _PATCH_LOCK:
        _PATCHED += 1
        os._exit = _recording_exit  # type: ignore[assignment]
    try:
        yield
    finally:
        with _PATCH_LOCK:
            _PATCHED -= 1
            if not _PATCHED:
                os._exit = _REAL_EXIT


@contextlib.contextmanager
def flight(what: str, heartbeat: float = DEFAULT_HEARTBEAT_S) -> Iterator[None]:
    """Register the runs ``what`` (e.g. ``'studies.s.simulator.options.function:
    run_id [4, 5]'``) while the block runs: heartbeat lines, the death notice, and a
    log line when the block ends by ``SystemExit``/``KeyboardInterrupt``."""
    token = RECORDER.start(what, heartbeat)
    try:
        with _exit_recorded():
            yield
    except (SystemExit, KeyboardInterrupt) as exc:
        cause = (f"{type(exc).__name__}({exc.code!r})" if isinstance(exc, SystemExit)
                 else type(exc).__name__)
        RECORDER.cause(f"{cause} raised while {what} was in flight", token)
        log.error("%s ended by %s (the job stops)", what, cause)
        raise
    finally:
        RECORDER.end(token)
