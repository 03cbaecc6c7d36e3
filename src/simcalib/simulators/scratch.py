"""Keeping a command simulator inside its scratch directory, and leaving nothing
behind when the job dies.

* :func:`check_name`: the file names a study gives (``input_file.name``,
  ``output_file``, link names) are relative names inside the scratch directory:
  an absolute path, ``~`` or a ``..`` component is a config error, so a run can
  neither write its inputs nor read its outputs elsewhere.
* :class:`LinkStage`: ``link_files`` are not linked to the originals.  Each batch
  copies them once into a read-only staging directory and every run's scratch
  directory gets symlinks to those copies, so a program that writes to a linked
  file can never change the original (a copy per batch, not per run, keeps the
  cost at one copy per chunk).  A run that changes a staged copy anyway (a
  process running as root ignores the read-only mode) is detected afterwards by
  size and modification time, reported as a failed run, and the copy is made
  again for the runs that follow.
* :class:`Watchdog`: runs start in their own sessions (so a timeout can kill a
  wrapper script's children with its group), which also means a SIGKILL of the
  job does not reach them.  A small watchdog process, in a session of its own,
  holds the read end of a pipe from the batch; the batch registers every process
  group and scratch directory on it.  When the pipe closes without the batch
  saying goodbye (the Python process died, even by SIGKILL), the watchdog kills
  the registered groups and removes the registered directories.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from simcalib.errors import ConfigError
from simcalib.simulators import strays

RESERVED_PREFIX = ".simcalib"


def check_name(text: str, key: str, what: str, allow_dirs: bool = True) -> None:
    """Reject a file name that could leave the scratch directory (``key`` names the
    option).  ``allow_dirs``: a relative path with subdirectories (``out/summary``)
    is allowed for input and output files, not for link names."""
    if not text or text in (".", ".."):
        raise ConfigError(key, f"{what} {text!r} is not a file name")
    if "\x00" in text:
        raise ConfigError(key, f"{what} {text!r} contains a NUL byte")
    if text.startswith(("/", "~", "\\")) or "{root}" in text or "{workdir}" in text:
        raise ConfigError(key, f"{what} {text!r} must be a name inside the run's scratch "
                          "directory, not an absolute path")
    parts = PurePosixPath(text.replace("\\", "/")).parts
    if ".." in parts:
        raise ConfigError(key, f"{what} {text!r} must stay inside the run's scratch directory "
                          "('..' is not allowed)")
    if not allow_dirs and len(parts) != 1:
        raise ConfigError(key, f"{what} {text!r} must be a plain name (no '/')")
    if parts and parts[0].startswith(RESERVED_PREFIX):
        raise ConfigError(key, f"{what} {text!r}: names starting with {RESERVED_PREFIX!r} are "
                          "simcalib's own (its stdout/stderr logs)")


def inside(path: Path, scratch: Path) -> bool:
    """Whether ``path`` (symlinks resolved) lies inside ``scratch``."""
    try:
        path.resolve().relative_to(scratch.resolve())
    except (ValueError, OSError, RuntimeError):
        return False
    return True


# ---------------------------------------------------------------------------
# read-only copies of link_files
# ---------------------------------------------------------------------------
def _signature(root: Path) -> dict[str, tuple[int, int]]:
    if root.is_file():
        st = root.stat()
        return {"": (st.st_size, st.st_mtime_ns)}
    sig = {}
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            with contextlib.suppress(OSError):
                st = p.lstat()
                sig[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return sig


def _set_mode(root: Path, writable: bool) -> None:
    """Files 0444 / dirs 0555 (read-only), or owner-writable again for removal."""
    paths = [root] if root.is_file() else \
        [Path(d) for d, _, _ in os.walk(root)] + [Path(d) / f for d, _, fs in os.walk(root)
                                                  for f in fs]
    for p in paths:
        with contextlib.suppress(OSError):
            mode = p.lstat().st_mode
            if stat.S_ISLNK(mode):
                continue
            if writable:
                os.chmod(p, stat.S_IMODE(mode) | stat.S_IWUSR | stat.S_IRUSR | stat.S_IXUSR)
            else:
                os.chmod(p, 0o555 if stat.S_ISDIR(mode) else 0o444)


class LinkStage:
    """Read-only copies of ``links`` (name -> original) for one batch."""

    def __init__(self, links: Mapping[str, Path], base: Path) -> None:
        self.links = dict(links)
        self.base = base
        self.dir: Path | None = None
        self._sig: dict[str, dict[str, tuple[int, int]]] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> LinkStage:
        self.base.mkdir(parents=True, exist_ok=True)
        self.dir = Path(tempfile.mkdtemp(prefix="simcalib-links-", dir=self.base))
        for name in self.links:
            self._copy(name)
        return self

    def _copy(self, name: str) -> None:
        assert self.dir is not None
        src, dst = self.links[name], self.dir / name
        if dst.exists() or dst.is_symlink():
            _set_mode(dst, True)
            if dst.is_dir() and not dst.is_symlink():
                shutil.rmtree(dst)
            else:
                dst.unlink()
        if src.is_dir():
            shutil.copytree(src, dst, symlinks=False)
        else:
            shutil.copy2(src, dst)
        _set_mode(dst, False)
        self._sig[name] = _signature(dst)

    def link_into(self, scratch: Path) -> None:
        assert self.dir is not None
        for name in self.links:
            (scratch / name).symlink_to(self.dir / name)

    def check(self) -> list[str]:
        """Names whose staged copy was changed since it was made; those are copied
        again from the (untouched) originals."""
        with self._lock:
            changed = [n for n in self.links if _signature(self.dir / n) != self._sig[n]]
            for n in changed:
                self._copy(n)
        return changed

    def __exit__(self, *exc: object) -> None:
        if self.dir is not None:
            _set_mode(self.dir, True)
            shutil.rmtree(self.dir, ignore_errors=True)


# ---------------------------------------------------------------------------
# the watchdog
# ---------------------------------------------------------------------------
# The watchdog is an awk program (it starts in milliseconds; a Python
# interpreter takes 50-300 ms, too much for one-row batches), with a Python
# fallback where there is no awk.  Protocol, one line each: "+g PGID", "-g PGID",
# "+d PATH", "-d PATH", "q" (the batch ended normally).  It acts only at
# end-of-input, so input buffering does not matter.
WATCHDOG_AWK = r"""
$1 == "+g" { g[$2] = 1; next }
$1 == "-g" { delete g[$2]; next }
$1 == "+d" { d[substr($0, 4)] = 1; next }
$1 == "-d" { delete d[substr($0, 4)]; next }
$1 == "+e" { e[substr($0, 4)] = 1; next }
$1 == "q" { clean = 1; exit }
END {
  if (clean) exit 0
  n = 0
  for (p in g) { system("kill -TERM -" p " 2>/dev/null"); n++ }
  if (n) system("sleep " grace)
  for (p in g) system("kill -KILL -" p " 2>/dev/null")
  for (x in d) {
    q = x; gsub(/'/, "'\\''", q)
    system("chmod -R u+rwx '" q "' 2>/dev/null; rm -rf '" q "'")
  }
  for (x in e) { q = x; gsub(/'/, "'\\''", q); system("rmdir '" q "' 2>/dev/null") }
}
"""
WATCHDOG_PY = r"""
import os, shutil, signal, sys, time
groups, dirs, empty, clean = set(), set(), set(), False
for line in sys.stdin:
    op, _, arg = line.rstrip("\n").partition(" ")
    if op == "+g": groups.add(int(arg))
    elif op == "-g": groups.discard(int(arg))
    elif op == "+d": dirs.add(arg)
    elif op == "-d": dirs.discard(arg)
    elif op == "+e": empty.add(arg)
    elif op == "q": clean = True; break
if not clean:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for g in groups:
            try: os.killpg(g, sig)
            except OSError: pass
        if sig == signal.SIGTERM and groups: time.sleep(float(sys.argv[1]))
    for d in dirs:
        for root, subdirs, files in os.walk(d):
            for n in subdirs:
                try: os.chmod(os.path.join(root, n), 0o700)
                except OSError: pass
        shutil.rmtree(d, ignore_errors=True)
    for d in empty:
        try: os.rmdir(d)
        except OSError: pass
"""


def watchdog_argv(grace: float) -> list[str]:
    awk = shutil.which("awk")
    if awk:
        return [awk, "-v", f"grace={grace:g}", WATCHDOG_AWK]
    return [sys.executable, "-S", "-c", WATCHDOG_PY, str(grace)]


class Watchdog:
    """Kills registered process groups and removes registered directories if this
    process dies before :meth:`close` (see the module docstring)."""

    def __init__(self, grace: float = 0.5) -> None:
        self._lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        try:
            with strays.spawning() as registry:  # the job's own child, not an orphan
                self.proc = subprocess.Popen(
                    watchdog_argv(grace),
                    stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    start_new_session=True, close_fds=True, text=True)
                registry.add(self.proc.pid)
        except OSError:
            self.proc = None  # no watchdog: interrupts are still handled in-process

    def _send(self, line: str) -> None:
        if self.proc is None or self.proc.stdin is None:
            return
        with self._lock, contextlib.suppress(OSError, ValueError):
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()

    def add_group(self, pgid: int) -> None:
        self._send(f"+g {pgid}")

    def drop_group(self, pgid: int) -> None:
        self._send(f"-g {pgid}")

    def add_dir(self, path: Path) -> None:
        self._send(f"+d {path}")

    def drop_dir(self, path: Path) -> None:
        self._send(f"-d {path}")

    def add_parent(self, path: Path) -> None:
        """Remove ``path`` too if the job dies, but only once it is empty (it may hold
        a kept failed run's directory)."""
        self._send(f"+e {path}")

    def close(self) -> None:
        """The batch ended (normally or by an exception it handled): the watchdog
        exits without touching anything."""
        if self.proc is None:
            return
        self._send("q")
        with contextlib.suppress(OSError, ValueError):
            self.proc.stdin.close()  # type: ignore[union-attr]
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        strays.forget(self.proc.pid)
        self.proc = None


def trap_sigterm() -> Any:
    """While a batch runs in the main thread, turn SIGTERM (a cancelled cluster
    job, Snakemake stopping) into ``SystemExit`` so the batch's cleanup runs; the
    runs live in their own sessions and would not get the signal otherwise.
    Returns the function that restores the previous handler.  A handler someone
    else installed is left alone."""
    import threading as _threading

    if _threading.current_thread() is not _threading.main_thread():
        return lambda: None
    previous = signal.getsignal(signal.SIGTERM)
    if previous not in (signal.SIG_DFL, None):
        return lambda: None

    def handler(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)
    return lambda: signal.signal(signal.SIGTERM, previous)
