"""HiGHS's thread count is process-global: the first ``run()`` initialises one
scheduler with its ``threads`` option, and a later instance asking for another
count fails without solving (status "not set").  Training records stability with
single-threaded LPs, then OP solves with the option set's threads in the same
process (the benchmark, the calibration strategies), so every HiGHS instance sets
its threads through :func:`set_threads`, which resets the scheduler when the count
changes.

HiGHS also prints a banner on the process's standard output when its first instance
is made; :func:`new_highs` sends it to the log instead, so library code prints
nothing to stdout (a notebook or a script's own output stays clean)."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
import threading
from typing import Any

log = logging.getLogger(__name__)

_current: int | None = None
_banner_lock = threading.Lock()
_banner_done = False


def new_highs() -> Any:
    """A ``highspy.Highs`` instance with its output off; the banner HiGHS writes to
    file descriptor 1 the first time is captured and logged (DEBUG)."""
    global _banner_done
    import highspy

    with _banner_lock:
        if _banner_done:
            h = highspy.Highs()
        else:
            _banner_done = True
            text = ""
            with contextlib.suppress(OSError, ValueError):
                sys.stdout.flush()
            try:
                with tempfile.TemporaryFile() as tmp:
                    saved = os.dup(1)
                    try:
                        os.dup2(tmp.fileno(), 1)
                        h = highspy.Highs()
                    finally:
                        os.dup2(saved, 1)
                        os.close(saved)
                    tmp.seek(0)
                    text = tmp.read().decode(errors="replace").strip()
            except OSError:  # no usable descriptor 1: nothing to keep clean
                h = highspy.Highs()
            if text:
                log.debug("HiGHS: %s", " | ".join(text.splitlines()))
    h.setOptionValue("output_flag", False)
    return h


def set_threads(h: Any, threads: int) -> None:
    """Set ``threads`` (> 0) on HiGHS instance ``h``, resetting the global scheduler
    first when an earlier instance of this process used another count."""
    global _current
    import highspy

    n = int(threads)
    if n <= 0:
        return
    if _current is not None and _current != n:
        highspy.Highs.resetGlobalScheduler(True)
    _current = n
    h.setOptionValue("threads", n)
