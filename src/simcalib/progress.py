"""Progress lines for long steps: ``k/N ... ETA 1m20s``, the same format in every
stage (chunks, training epochs, OP targets, strategies, MCMC, iPro-NC), so a log
of an hours-long job says how far it is and when it ends."""

from __future__ import annotations


def eta(elapsed: float, done: int, total: int) -> str:
    """``ETA 1m20s`` from the mean time per item so far (``done in ...`` at the end)."""
    if done >= total:
        return f"done in {hms(elapsed)}"
    return f"ETA {hms(elapsed / max(done, 1) * (total - done))}"


def hms(seconds: float) -> str:
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{sec:02d}s" if m else f"{sec}s")


def every(total: int, parts: int = 10) -> int:
    """Log every this many items: about ``parts`` lines per step, at least every item
    of a short one."""
    return max(1, total // parts)
