"""Processes a command run leaves behind after leaving its process group.

Each run's environment carries a unique token (:data:`TOKEN_VAR`); when the run ends
or times out, every process of this user whose environment holds that token is
killed (:func:`kill_tagged`).  Why: killing the run's process group misses a child
that starts a new session (``setsid``, a daemonising program, a double fork); such
children used to keep running after the job, re-parented to PID 1.  The environment
is inherited through ``setsid`` and ``fork``/``exec``, so it follows them.

Limits (docs/command.md): Linux only (``/proc``); a program that clears its
environment (``env -i``) before detaching is not found.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
from pathlib import Path

#: the environment variable that tags a run's processes
TOKEN_VAR = "SIMCALIB_RUN_TOKEN"
PROC = Path("/proc")


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
    return pids
