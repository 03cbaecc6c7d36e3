"""Keeping a command program's writes inside its scratch directory.

``simulator.confine`` chooses how (docs/command.md, "Containment"):

* ``strict``: every run is started under a Linux **Landlock** ruleset that allows
  writing (creating, changing, removing, renaming, truncating files) only beneath the
  run's scratch directory, the ``writable`` paths the study declares and ``/dev``
  (``/dev/null``, terminals, ``/dev/shm`` for MPI and POSIX semaphores).  Reading and
  executing stay allowed everywhere.  A write elsewhere fails in the program with
  ``EACCES`` ("Permission denied"), whatever path leads there (``../``, an absolute
  path, a symlink) and whichever of its child processes tries, because the ruleset
  is inherited by every process the run starts and cannot be lifted.  ``TMPDIR`` is
  pointed at the scratch directory (unless the study's ``env`` sets it).
* ``warn``: nothing is blocked; the top level of the workflow root, the home
  directory and the scratch directories' parent (a directory of the batch's own,
  so ``../x`` is attributed for certain) is listed before and after each run
  (names, sizes, modification times, so a file added inside a top-level directory
  shows as that directory changed).  What changed during the run is logged as a
  warning and appended to the run's ``message``.  Another process writing there at
  the same time is reported too (the report says "during the run", not "by it"),
  and a file changed deeper than one level below those directories is not seen.
* ``off``: neither.
* ``auto`` (the default): ``strict`` where Landlock works, else ``warn`` with one log
  line saying why.

Why Landlock: it is in the mainline kernel since 5.13 (on the machines this project
runs and tests on: ABI 7), needs no privilege, no setuid helper and no new package
(``bubblewrap`` would be a system dependency CI does not have; user namespaces are
disabled on many clusters and change the program's view of users and PIDs), costs
microseconds per run, and follows symlinks and child processes by construction.
An ``LD_PRELOAD`` shim would miss static binaries and direct system calls.

How a run gets its ruleset: Landlock restricts the calling *thread* and everything
it starts afterwards, and a restriction can never be removed.  So each confined run
is started from a short-lived thread of its own that restricts itself and then calls
``Popen`` (:func:`spawn_confined`); the job's other threads stay unrestricted.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import platform
import stat
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from simcalib.errors import ConfigError

log = logging.getLogger(__name__)

MODES = ("auto", "strict", "warn", "off")

# linux/landlock.h
_SYS_CREATE, _SYS_ADD_RULE, _SYS_RESTRICT = 444, 445, 446  # same on every architecture
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
_WRITE_FILE = 1 << 1
_REMOVE_DIR, _REMOVE_FILE = 1 << 4, 1 << 5
_MAKE_CHAR, _MAKE_DIR, _MAKE_REG, _MAKE_SOCK = 1 << 6, 1 << 7, 1 << 8, 1 << 9
_MAKE_FIFO, _MAKE_BLOCK, _MAKE_SYM = 1 << 10, 1 << 11, 1 << 12
_REFER = 1 << 13  # ABI 2
_TRUNCATE = 1 << 14  # ABI 3
_WRITES_V1 = (_WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_CHAR | _MAKE_DIR | _MAKE_REG
              | _MAKE_SOCK | _MAKE_FIFO | _MAKE_BLOCK | _MAKE_SYM)
#: always writable beneath these (devices, shared memory)
SYSTEM_WRITABLE = ("/dev",)

_T = TypeVar("_T")


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_LIBC: Any = None


def _libc() -> Any:
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        _LIBC.syscall.restype = ctypes.c_long
    return _LIBC


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 where there is none (not Linux, an old
    kernel, Landlock not enabled at boot)."""
    if platform.system() != "Linux":
        return 0
    try:
        abi = int(_libc().syscall(ctypes.c_long(_SYS_CREATE), None, ctypes.c_size_t(0),
                               ctypes.c_uint32(_CREATE_RULESET_VERSION)))
    except (OSError, AttributeError):
        return 0
    return max(abi, 0)


def handled_writes(abi: int) -> int:
    """The write rights a ruleset of this ABI handles (denies unless allowed)."""
    return _WRITES_V1 | (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0)


_ABI: int | None = None
_NOTED = False
_LOCK = threading.Lock()


def abi() -> int:
    """:func:`landlock_abi`, probed once per process."""
    global _ABI
    if _ABI is None:
        _ABI = landlock_abi()
    return _ABI


def resolve_mode(mode: str | bool | None, key: str) -> str:
    """``strict``, ``warn`` or ``off`` for a study's ``confine`` (``auto`` picks the
    strongest that works; ``strict`` where Landlock is missing is a config error).
    ``False`` is ``off`` (YAML 1.1 reads a bare ``off`` as false)."""
    mode = "off" if mode is False else (mode or "auto")
    if mode not in MODES:
        raise ConfigError(key, f"{mode!r} is not one of {list(MODES)}")
    if mode == "strict" and not abi():
        raise ConfigError(key, f"'strict' needs Linux Landlock (kernel >= 5.13 with Landlock "
                          f"enabled), which this machine ({platform.system()} "
                          f"{platform.release()}) lacks; use 'warn' (writes outside the "
                          "scratch directory are detected and reported) or 'off'")
    if mode == "auto":
        if abi():
            return "strict"
        _note_fallback()
        return "warn"
    return mode


def _note_fallback() -> None:
    global _NOTED
    with _LOCK:
        if _NOTED:
            return
        _NOTED = True
    log.warning("confine: Linux Landlock is not available here (%s %s), so command runs "
                "are not confined: writes outside their scratch directories are detected "
                "and reported (confine: warn), not blocked", platform.system(),
                platform.release())


def _restrict_self(writable: Iterable[Path]) -> None:
    """Restrict the calling thread (and what it starts) to writing beneath
    ``writable``; raises ``OSError`` where the kernel refuses."""
    libc = _libc()
    level = abi()
    handled = handled_writes(level)
    attr = ctypes.c_uint64(handled)
    fd = int(libc.syscall(ctypes.c_long(_SYS_CREATE), ctypes.byref(attr),
                          ctypes.c_size_t(8), ctypes.c_uint32(0)))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"landlock_create_ruleset: {os.strerror(err)}")
    try:
        for path in writable:
            try:
                pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a declared path that does not exist yet: nothing to allow
            try:
                is_dir = stat.S_ISDIR(os.fstat(pfd).st_mode)
                # a file (not a directory) rule takes only the file rights
                rights = handled if is_dir else handled & (_WRITE_FILE | _TRUNCATE)
                rule = _PathBeneath(rights, pfd)
                if libc.syscall(ctypes.c_long(_SYS_ADD_RULE), ctypes.c_int(fd),
                                ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(rule),
                                ctypes.c_uint32(0)) < 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"landlock_add_rule({path}): {os.strerror(err)}")
            finally:
                os.close(pfd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(err)}")
        if libc.syscall(ctypes.c_long(_SYS_RESTRICT), ctypes.c_int(fd), ctypes.c_uint32(0)) < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"landlock_restrict_self: {os.strerror(err)}")
    finally:
        os.close(fd)


def spawn_confined(writable: Sequence[Path], start: Callable[[], _T]) -> _T:
    """Call ``start`` (which starts the run's process) in a fresh thread restricted
    to writing beneath ``writable`` and the system paths; returns what ``start``
    returns and re-raises what it raises.  The thread ends right after, taking its
    restriction with it; the started process keeps it for life."""
    box: dict[str, Any] = {}

    def body() -> None:
        try:
            _restrict_self([*map(Path, SYSTEM_WRITABLE), *writable])
            box["value"] = start()
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    t = threading.Thread(target=body, name="simcalib-confined-start", daemon=True)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


# ---------------------------------------------------------------------------
# warn: what changed outside the scratch directory
# ---------------------------------------------------------------------------
Snapshot = dict[str, tuple[int, int, int]]


#: entries of the watched directories that other programs change all the time
SKIP_NAMES = frozenset({".snakemake"})


def snapshot(dirs: Iterable[Path], skip_prefix: str = "simcalib-") -> Snapshot:
    """``{path: (type, size, mtime_ns)}`` of the entries directly inside ``dirs``;
    names starting with ``skip_prefix`` (the runs' own scratch directories) and
    :data:`SKIP_NAMES` are left out."""
    snap: Snapshot = {}
    for d in dirs:
        with contextlib.suppress(OSError):
            for entry in os.scandir(d):
                if entry.name.startswith(skip_prefix) or entry.name in SKIP_NAMES:
                    continue
                with contextlib.suppress(OSError):
                    st = entry.stat(follow_symlinks=False)
                    snap[entry.path] = (stat.S_IFMT(st.st_mode), st.st_size, st.st_mtime_ns)
    return snap


def changes(before: Snapshot, after: Snapshot, limit: int = 8) -> list[str]:
    """``['/home/u/x (new)', '/tmp/y (changed)', ...]``: what differs, first ``limit``."""
    out = [f"{p} (new)" for p in after if p not in before]
    out += [f"{p} (changed)" for p in after if p in before and after[p] != before[p]]
    out += [f"{p} (removed)" for p in before if p not in after]
    out.sort()
    return out if len(out) <= limit else [*out[:limit], f"... {len(out) - limit} more"]


def watched_dirs(root: Path, base: Path) -> list[Path]:
    """The directories ``warn`` lists around each run: the workflow root, the home
    directory and the scratch directory's parent ``base`` (where ``../x`` lands; the
    batch's own directory, see ``CommandSimulator._make_home``)."""
    home = Path(os.environ.get("HOME") or Path.home())
    out: list[Path] = []
    for d in (root, home, base):
        with contextlib.suppress(OSError):
            d = d.resolve()
            if d.is_dir() and d not in out:
                out.append(d)
    return out
