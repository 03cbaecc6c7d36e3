"""Processes a run leaves behind after leaving its process group.

Two nets, because either alone misses something:

* **A token.**  Each command run's environment carries a unique token
  (:data:`TOKEN_VAR`); when the run ends or times out, every process of this user
  whose environment holds it is killed (:func:`kill_tagged`).  It follows children
  through ``setsid``, daemonising and double forks, but not a program that clears its
  environment (``env -i``) before detaching.
* **The subreaper.**  The job makes itself the *child subreaper* of everything it
  starts (Linux ``prctl(PR_SET_CHILD_SUBREAPER)``, :func:`enable_subreaper`): a
  process whose parent dies is re-parented to the job instead of PID 1, whatever it
  did to its environment, session or name.  So after a run, a child of the job that
  the job did not start itself is an orphan of a run (:func:`orphans`), and
  :func:`sweep` kills it (and reaps it: a subreaper must, or its orphans stay zombies).

To tell its own children from orphans, the job's simulator code starts processes
through :func:`spawning` (a lock plus a registry of the pids it started); a sweep
holds the same lock, so a run being started is never mistaken for an orphan.
Children started by other code in the job are not registered: a sweep only counts
processes that started after the run (or batch) it sweeps for, and chunk jobs start
nothing else.

Limits (docs/command.md): Linux only (``/proc``, ``prctl``).  A descendant that makes
itself a subreaper keeps its own orphans (they die with it when the job kills it).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import secrets
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

#: the environment variable that tags a run's processes
TOKEN_VAR = "SIMCALIB_RUN_TOKEN"
PROC = Path("/proc")
_PR_SET_CHILD_SUBREAPER = 36

_LOCK = threading.RLock()
_SPAWNED: set[int] = set()
_SUBREAPER: bool | None = None


def new_token() -> str:
    """A token unique to one run (random: runs of parallel jobs never share one)."""
    return f"{os.getpid()}-{secrets.token_hex(8)}"


def tagged_pids(token: str) -> list[int]:
    """PIDs of this user's processes whose environment holds ``token`` (none where
    ``/proc`` is missing)."""
    if not PROC.is_dir():
        return []
    needle = f"{TOKEN_VAR}={token}\0".encode()
    uid, me = os.getuid(), os.getpid()
    found = []
    for entry in os.scandir(PROC):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            with open(f"{entry.path}/environ", "rb") as fh:
                env = fh.read()
        except OSError:  # gone, or not ours to read
            continue
        if needle in env or env.endswith(needle[:-1]):
            found.append(int(entry.name))
    return found


def kill_tagged(token: str) -> list[int]:
    """SIGKILL every process tagged with ``token``; returns their PIDs."""
    pids = tagged_pids(token)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    for pid in pids:  # our own orphans among them: reap, or they stay zombies
        _reap(pid)
    return pids


# ---------------------------------------------------------------------------
# the subreaper
# ---------------------------------------------------------------------------
def enable_subreaper() -> bool:
    """Make this process the child subreaper of its descendants (once; idempotent).
    False where the OS has no such thing."""
    global _SUBREAPER
    with _LOCK:
        if _SUBREAPER is None:
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
                _SUBREAPER = libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
            except (OSError, AttributeError):
                _SUBREAPER = False
            log.debug("child subreaper: %s", _SUBREAPER)
        return _SUBREAPER


@contextlib.contextmanager
def spawning() -> Iterator[set[int]]:
    """Hold while starting a process; add its pid to the yielded set (the
    registry).  No sweep runs meanwhile."""
    with _LOCK:
        yield _SPAWNED


def forget(pid: int) -> None:
    """A registered child was waited for: it is no longer ours to protect."""
    with _LOCK:
        _SPAWNED.discard(pid)


def now_ticks() -> int:
    """Now, in the units of :func:`start_ticks` (clock ticks since boot), one tick
    early so a process started this instant counts as later."""
    clock = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)  # (Linux: BOOTTIME)
    return int(time.clock_gettime(clock) * os.sysconf("SC_CLK_TCK")) - 1


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (``/proc/<pid>/stat``)."""
    try:
        raw = (PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2:].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def _status(pid: int) -> tuple[int, str, str] | None:
    """(parent pid, state, name) of ``pid``."""
    try:
        raw = (PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    name = raw[raw.find(b"(") + 1:raw.rfind(b")")].decode(errors="replace")
    fields = raw[raw.rfind(b")") + 2:].split()
    return int(fields[1]), fields[0].decode(), name


def orphans(since: int | None) -> list[tuple[int, str, str]]:
    """``(pid, name, state)`` of this process's children that it did not start through
    :func:`spawning` and that started at or after ``since`` (clock ticks; None: any)."""
    if not _SUBREAPER or not PROC.is_dir():
        return []
    me = os.getpid()
    try:
        kids = [int(x) for t in os.listdir(PROC / str(me) / "task")
                for x in (PROC / str(me) / "task" / t / "children").read_text().split()]
    except OSError:
        kids = [int(e.name) for e in os.scandir(PROC) if e.name.isdigit()
                and (_status(int(e.name)) or (0,))[0] == me]
    out = []
    for pid in kids:
        st = _status(pid)
        if pid in _SPAWNED or st is None or st[0] != me:
            continue
        t = start_ticks(pid)
        if since is None or (t is not None and t >= since):
            out.append((pid, st[2], st[1]))
    return out


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        for _ in range(50):
            done, _status_ = os.waitpid(pid, os.WNOHANG)
            if done:
                return
            time.sleep(0.01)


def sweep(since: int | None, rounds: int = 5) -> list[str]:
    """Kill and reap the orphans started at or after ``since`` (their own children
    become orphans when they die: repeated up to ``rounds`` times).  Returns
    ``'pid (name)'`` of those that were still running (zombies are only reaped)."""
    killed: list[str] = []
    with _LOCK:
        for _ in range(rounds):
            found = orphans(since)
            if not found:
                break
            for pid, name, state in found:
                if state != "Z":
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
                    killed.append(f"{pid} ({name})")
            for pid, _name, _state in found:
                _reap(pid)
    return killed


_ACTIVE = 0
_EPOCH: int | None = None


@contextlib.contextmanager
def scope(who: str) -> Iterator[None]:
    """A batch of simulator runs: when the last batch in progress in this process
    ends, every orphan started since the first of them began is killed (with a
    warning naming ``who``).  Why the last: threads may run batches side by side
    (targets of a calibration), and an orphan cannot be told to one of them."""
    global _ACTIVE, _EPOCH
    since = now_ticks() if enable_subreaper() else None
    with _LOCK:
        if _ACTIVE == 0:
            _EPOCH = since
        _ACTIVE += 1
    try:
        yield
    finally:
        with _LOCK:
            _ACTIVE -= 1
            epoch = _EPOCH if _ACTIVE == 0 else None
        if epoch is not None:
            sweep_and_warn(epoch, who)


def sweep_and_warn(since: int | None, who: str) -> list[str]:
    """:func:`sweep`, with the warning that says what was killed and whose it was."""
    left = sweep(since)
    if left:
        log.warning("%s left %d process(es) behind (re-parented to the job: daemons, double "
                    "forks or children that cleared their environment); killed %s", who,
                    len(left), left[:5])
    return left
