"""``python`` simulators with ``isolate: true``: every row in a worker process.

A Python simulator normally runs inside the chunk job, so a segfault in its C
extension kills the job with an empty log and a hang blocks it forever.  With
``isolate: true`` rows go to a small pool of worker processes (``threads`` of
them); each row has a ``timeout``.  A worker that dies (a signal, ``os._exit``)
turns its row into an ``error`` row naming the signal, a row past its timeout into
a ``timeout`` row; the worker is replaced and the batch goes on.

Workers are plain ``python -m simcalib.simulators.isolate`` subprocesses talking
over a socket pair (not ``multiprocessing``'s spawn, which re-imports the
caller's ``__main__`` script), in sessions of their own (Ctrl-C reaches only the
job, which then stops them), registered with the batch's
:class:`~simcalib.simulators.scratch.Watchdog`, which kills them if the job dies
without cleaning up (SIGKILL).  Each worker loads the function itself from its
``module:function`` name, so nothing unpicklable crosses the process boundary.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Mapping
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simcalib.simulators import strays
from simcalib.simulators.base import (
    STATUS_ERROR,
    STATUS_OK,
    STATUS_TIMEOUT,
    check_columns,
    finalize,
    mask_seeds,
)
from simcalib.simulators.scratch import Watchdog, trap_sigterm

log = logging.getLogger(__name__)

STARTUP_S = 120.0  # a worker must import the function within this long
MAX_START_FAILURES = 3  # workers dying before they are ready: give up on the batch


def worker_main(fd: int) -> None:
    """Worker loop: receive ``(spec, path, outputs, options, sys_path)``, load the
    function, then answer ``(pos, row, seed)`` with ``(pos, raw result dict)``
    until told to stop (``None``) or the parent is gone."""
    conn = Connection(fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when we stop
    try:
        spec, path, outputs, options, sys_path = conn.recv()
    except (EOFError, OSError):
        return
    sys.path.extend(p for p in sys_path if p not in sys.path)
    # the one deferred import kept on purpose: the worker process imports the user's
    # function through pyfunc (pyfunc builds this module's IsolatedPython in the parent)
    from simcalib.simulators.pyfunc import PythonFunction, load_callable

    try:
        sim = PythonFunction(load_callable(spec, "function", path), outputs, options,
                             record=False)
    except Exception as exc:
        conn.send(("failed", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", None))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return  # the parent died
        if msg is None:
            return
        pos, row, seed = msg
        raw = sim._call(row, np.array([seed]))
        conn.send(("result", (pos, raw.iloc[0].to_dict())))


class _Slot:
    """One worker process and the row it is running."""

    def __init__(self, args: tuple, watchdog: Watchdog) -> None:
        self.conn, child = mp.Pipe()
        fd = child.fileno()
        with strays.spawning() as registry:  # the job's own child, not an orphan
            self.proc = subprocess.Popen([sys.executable, "-m", "simcalib.simulators.isolate",
                                          str(fd)], pass_fds=(fd,), start_new_session=True)
            registry.add(self.proc.pid)
        child.close()
        self.watchdog = watchdog
        watchdog.add_group(self.proc.pid)
        self.conn.send((*args, list(sys.path)))
        self.pos: int | None = None
        self.deadline = time.monotonic() + STARTUP_S
        self.ready = False
        self.dead = False

    def stop(self, kill: bool) -> None:
        if self.dead:
            return
        if not kill:
            with contextlib.suppress(OSError, ValueError):
                self.conn.send(None)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                kill = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # the worker and anything it started
        self.proc.wait()
        strays.forget(self.proc.pid)
        self.watchdog.drop_group(self.proc.pid)
        self.conn.close()
        self.dead = True


def _death(rc: int | None) -> str:
    if rc is not None and rc < 0:
        try:
            return f"killed by signal {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exited with status {rc}"


class _Run:
    """One batch of rows on a pool of worker slots (:meth:`IsolatedPython.run_raw`)."""

    def __init__(self, sim: IsolatedPython, inputs: pd.DataFrame, seeds: np.ndarray,
                 watchdog: Watchdog, since: int) -> None:
        self.sim, self.inputs, self.seeds = sim, inputs, seeds
        self.args = (sim.spec, sim.path, sim.outputs, sim.options)
        self.watchdog, self.since = watchdog, since
        self.todo = deque(range(len(inputs)))
        self.results: list[dict[str, Any] | None] = [None] * len(inputs)
        self.slots: list[_Slot] = []
        self.start_failures = 0

    def new_slot(self) -> _Slot:
        return _Slot(self.args, self.watchdog)

    def busy(self) -> bool:
        return bool(self.todo) or any(s.pos is not None for s in self.slots)

    def dispatch(self) -> None:
        """Hand the next rows to the ready, idle workers."""
        for s in self.slots:
            if s.ready and not s.dead and s.pos is None and self.todo:
                s.pos = self.todo.popleft()
                s.deadline = time.monotonic() + self.sim.timeout
                s.conn.send((s.pos, self.inputs.iloc[[s.pos]], int(self.seeds[s.pos])))

    def collect(self, i: int, s: _Slot, outcome: tuple[str, Any] | None) -> None:
        """Act on what slot ``i`` did: ready, a result, a load failure, death or timeout."""
        if outcome is None:
            return
        kind, value = outcome
        if kind == "ready":
            s.ready = True
        elif kind == "result":
            pos, res = value
            self.results[pos] = {"status": STATUS_OK, "message": "", **res}
            s.pos = None
        elif kind == "failed":  # the function cannot be loaded: no row can run
            s.stop(kill=True)
            for p in [*([s.pos] if s.pos is not None else []), *self.todo]:
                self.results[p] = {"status": STATUS_ERROR, "message":
                                   f"worker could not load the function: {value}"}
            self.todo.clear()
        else:
            self._replace(i, s, value)

    def _replace(self, i: int, s: _Slot, value: dict[str, Any]) -> None:
        """A worker died or timed out: record its row, start a fresh worker (or give
        up after MAX_START_FAILURES workers died before they were ready)."""
        s.stop(kill=True)
        if s.pos is not None:
            self.results[s.pos] = value
        else:
            self.start_failures += 1
        if self.start_failures >= MAX_START_FAILURES:
            for p in self.todo:
                self.results[p] = {**value, "message": f"{value['message']} "
                                   f"({self.start_failures} workers failed to start)"}
            self.todo.clear()
        elif self.todo:
            self.slots[i] = self.new_slot()

    def close(self) -> None:
        """Stop every worker, kill what they left (orphans re-parented to the job)."""
        for s in self.slots:
            s.stop(kill=s.pos is not None or not s.ready)
        self.watchdog.close()
        left = strays.sweep(self.since)
        if left:
            log.warning("%s: worker processes left %d process(es) behind (re-parented to the "
                        "job); killed %s", self.sim.key, len(left), left[:5])


class IsolatedPython:
    """The ``python`` simulator with ``isolate: true`` (see the module docstring)."""

    def __init__(self, spec: str, path: str | None, outputs: list[str],
                 options: Mapping[str, Any], timeout: float, key: str,
                 seed_bits: int = 63) -> None:
        self.spec, self.path, self.outputs = spec, path, list(outputs)
        self.options, self.timeout, self.key = dict(options), float(timeout), key
        self.seed_bits = seed_bits

    def run(self, inputs: pd.DataFrame, seeds: np.ndarray, threads: int = 1) -> pd.DataFrame:
        raw = self.run_raw(inputs, seeds, threads)
        return finalize(pd.DataFrame(raw, index=inputs.index), self.outputs, inputs.index,
                        f"{self.key}.function")

    def program_files(self) -> list[Path]:
        """The function's module file, found without importing it (hashed into the
        chunk journal's fingerprint)."""
        import importlib.util

        module = self.spec.split(":", 1)[0]
        if self.path and (Path(self.path) / f"{module.replace('.', '/')}.py").is_file():
            return [Path(self.path) / f"{module.replace('.', '/')}.py"]
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            return []
        origin = getattr(spec, "origin", None)
        return [Path(origin)] if origin and Path(origin).is_file() else []

    def probe_row(self, inputs: pd.DataFrame, seed: int) -> pd.DataFrame:
        raw = pd.DataFrame(self.run_raw(inputs.iloc[:1], np.array([seed])),
                           index=inputs.index[:1])
        check_columns(raw, self.outputs, f"{self.key}.outputs")
        return finalize(raw, self.outputs, inputs.index[:1], f"{self.key}.function")

    def run_raw(self, inputs: pd.DataFrame, seeds: np.ndarray,
                threads: int = 1) -> list[dict[str, Any]]:
        """One raw result dict per row, in order: start the workers, then, until every
        row has a result, hand rows to idle workers (dispatch), wait, and take what
        each worker did (collect)."""
        seeds = mask_seeds(seeds, self.seed_bits)
        if len(seeds) != len(inputs):
            raise ValueError(f"{len(seeds)} seeds for {len(inputs)} rows")
        n = len(inputs)
        if n == 0:
            return []
        strays.enable_subreaper()
        batch = _Run(self, inputs, seeds, Watchdog(), strays.now_ticks())
        restore = trap_sigterm()
        try:
            batch.slots = [batch.new_slot() for _ in range(max(1, min(int(threads), n)))]
            while batch.busy():
                batch.dispatch()
                live = [s for s in batch.slots
                        if not s.dead and (s.pos is not None or not s.ready)]
                if not live:
                    break
                left = min(s.deadline for s in live) - time.monotonic()
                wait([s.conn for s in live], timeout=max(0.0, left))
                for i, s in enumerate(batch.slots):
                    if not s.dead:
                        batch.collect(i, s, self._check(s))
        finally:
            batch.close()
            restore()
        return [r if r is not None else {"status": STATUS_ERROR, "message": "no result"}
                for r in batch.results]

    def _check(self, s: _Slot) -> tuple[str, Any] | None:
        """What happened to slot ``s``: a message, its death, its timeout, or
        nothing yet."""
        try:
            if s.conn.poll():
                kind, value = s.conn.recv()
                return kind, value
        except (EOFError, OSError):  # the worker's end closed: it died
            try:
                rc = s.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                rc = None
            what = "running its row" if s.pos is not None else "starting"
            return "died", {"status": STATUS_ERROR,
                            "message": f"worker process {_death(rc)} while {what}"}
        if time.monotonic() >= s.deadline:
            if s.pos is None:
                return "died", {"status": STATUS_ERROR,
                                "message": f"worker did not start within {STARTUP_S:g} s"}
            return "died", {"status": STATUS_TIMEOUT,
                            "message": f"timed out after {self.timeout:g} s (worker process "
                                       "killed)"}
        return None


if __name__ == "__main__":
    worker_main(int(sys.argv[1]))
