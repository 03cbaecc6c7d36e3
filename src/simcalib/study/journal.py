"""Per-run journal of a simulation chunk: resume a killed chunk where it stopped.

A chunk job appends one JSON line per finished run to its journal and fsyncs it, so
whatever kills the job (SIGKILL of the workflow, Ctrl-C, a cluster's time limit, a
power cut after the fsync) loses only the runs that were still in flight.  Rerun,
the chunk reads the journal back and simulates only the runs it does not hold.

The journal is deliberately *not* a declared Snakemake output: Snakemake deletes
the outputs of a failed or incomplete job before rerunning it, and the journal
must survive exactly that.  It lives under ``results/<study>/chunks/.journal/``.

Its first line is a header with a fingerprint of everything that determines the
chunk's numbers (the study's simulation settings, the seed, the chunk's design
rows, the simulator's program files: :func:`program_digest`); a journal written
under other settings or by another version of the program is ignored, never reused.
A first run that fails because the outputs cannot be read (the fail-fast probe) is
never journaled, so a fixed program's rerun has no stale failed row.  A line
cut by a kill mid-write is dropped and the file rewritten without it.  The merge
removes the journals of the chunks it merged, so a later forced rerun simulates
afresh.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

log = logging.getLogger(__name__)

FORMAT = "simcalib-chunk-journal"
VERSION = 1


def journal_path(chunk_csv: str | os.PathLike[str]) -> Path:
    """``.../chunks/chunk_3.csv`` -> ``.../chunks/.journal/chunk_3.jsonl``."""
    p = Path(chunk_csv)
    return p.parent / ".journal" / (p.stem + ".jsonl")


def fingerprint(study: str, cfg: Mapping[str, Any], seed: int, stream: str,
                rows: pd.DataFrame, programs: str = "") -> str:
    """sha256 over what determines a chunk's results; ``programs`` is
    :func:`program_digest` of the simulator (its program and data files)."""
    h = hashlib.sha256()
    h.update(json.dumps({"study": study, "cfg": cfg, "seed": int(seed), "stream": stream},
                        sort_keys=True, default=str).encode())
    h.update(rows.to_csv(index=False, float_format="%.17g").encode())
    h.update(programs.encode())
    return h.hexdigest()


#: files above this size are fingerprinted by size and modification time, not content
HASH_LIMIT_BYTES = 64 * 1024 * 1024


def program_digest(simulator: Any) -> str:
    """A digest of the files a simulator's runs read that the config does not hold
    (``program_files()`` of the simulator and of the layers it wraps: a command's
    program and scripts, a python function's source file).

    Why: a user fixes their program and reruns; the config is unchanged, so without
    this the journal would hand back the broken program's rows as finished runs."""
    files: list[Path] = []
    sim, seen = simulator, 0
    while sim is not None and seen < 8:
        fn = getattr(sim, "program_files", None)
        if callable(fn):
            files += [Path(f) for f in fn()]
        sim, seen = getattr(sim, "inner", None), seen + 1
    h = hashlib.sha256()
    for f in sorted(set(files)):
        try:
            st = f.stat()
            h.update(str(f).encode())
            if st.st_size > HASH_LIMIT_BYTES:
                h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
            else:
                h.update(f.read_bytes())
        except OSError:
            h.update(f"{f}: unreadable".encode())
    return h.hexdigest() if files else ""


def _plain(value: Any) -> Any:
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating | float):
        return float(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class Journal:
    """Append-only, fsync'd record of finished runs, safe to use from many threads.

    Every record is written through to the operating system at once, so killing the
    process loses none.  It is fsync'd at once too, unless the last fsync was under
    ``sync_s`` ago (a fast simulator: one fsync per run would cost more than the
    runs); :meth:`sync`, called by the chunk's loop twice a second, and
    :meth:`close` catch up, so a power cut loses at most about half a second of
    finished runs."""

    def __init__(self, path: Path, fp: str, sync_s: float = 0.05) -> None:
        self.path = path
        self.fingerprint = fp
        self.sync_s = sync_s
        self._lock = threading.Lock()
        self._fh: Any = None
        self._dirty = False
        self._synced = 0.0

    @classmethod
    def open(cls, path: str | os.PathLike[str], fp: str,
             id_column: str = "run_id") -> tuple[Journal, dict[int, dict[str, Any]]]:
        """Open (or start) the journal at ``path``; returns it and the runs it holds,
        keyed by id.  Stale (other fingerprint) or unreadable journals are replaced."""
        j = cls(Path(path), fp)
        done = j._load(id_column)
        j.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = j.path.with_name(j.path.name + ".tmp")
        with open(tmp, "w") as fh:  # rewrite: header + the intact records only
            fh.write(json.dumps({"format": FORMAT, "version": VERSION, "fingerprint": fp}) + "\n")
            for rec in done.values():
                fh.write(json.dumps(rec) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, j.path)
        _fsync_dir(j.path.parent)
        j._fh = open(j.path, "a")  # noqa: SIM115  (closed by close())
        return j, done

    def _load(self, id_column: str) -> dict[int, dict[str, Any]]:
        try:
            lines = self.path.read_text().splitlines(keepends=True)
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("journal %s unreadable (%s); starting the chunk afresh", self.path, exc)
            return {}
        if not lines:
            return {}
        try:
            head = json.loads(lines[0])
        except json.JSONDecodeError:
            head = {}
        if head.get("format") != FORMAT or head.get("fingerprint") != self.fingerprint:
            log.info("journal %s was written under other settings; starting the chunk afresh",
                     self.path)
            return {}
        done: dict[int, dict[str, Any]] = {}
        for n, line in enumerate(lines[1:], start=2):
            try:
                if not line.endswith("\n"):
                    raise ValueError("no line end")
                rec = json.loads(line)
                done[int(rec[id_column])] = rec
            except (ValueError, KeyError, TypeError):
                log.warning("journal %s: line %d is cut or damaged (a kill mid-write); "
                            "it and any after it are dropped", self.path, n)
                break
        return done

    def append(self, record: Mapping[str, Any]) -> None:
        line = json.dumps({k: _plain(v) for k, v in record.items()}) + "\n"
        with self._lock:
            self._fh.write(line)
            self._fh.flush()
            self._dirty = True
            if time.monotonic() - self._synced >= self.sync_s:
                self._sync()

    def _sync(self) -> None:
        if self._dirty and self._fh is not None:
            os.fsync(self._fh.fileno())
            self._dirty = False
            self._synced = time.monotonic()

    def sync(self) -> None:
        """fsync records written since the last fsync."""
        with self._lock:
            self._sync()

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._sync()
                self._fh.close()
                self._fh = None


def remove(chunk_csv: str | os.PathLike[str]) -> None:
    """Delete a chunk's journal (after a merge has taken its results)."""
    path = journal_path(chunk_csv)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    with contextlib.suppress(OSError):  # only when empty
        path.parent.rmdir()
