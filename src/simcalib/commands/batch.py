"""Verb ``batch``: several simcalib verbs, one after another, in one process.

Why: a verb's process pays ~1.3 CPU-s to start (Python, pandas, SciPy, PyTorch) before
it does anything.  For a simulator that takes milliseconds a run, as in the default
config's studies, a calibration job's runs cost less than that, so a target set's
strategies, each its own job, spend most of their CPU starting up.  The workflow
(``calibration.one_job``) then hands the whole set to one ``batch`` job: every member
is the same verb with the same arguments its own job would get (so the same code path
and the same output bytes), and writes its own log where its own job would have.

A member's stdout and stderr (file descriptors 1 and 2, so also what a simulator's
child process or a C library prints) go to its log.  A member that fails does not stop
the others (each one's outputs are complete or absent); the batch then exits non-zero
naming every failed member and its log.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import time
import traceback
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from simcalib.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "batch", help="several verbs in one process (one job for cheap calibration steps)",
        description="Run the verbs of a plan one after another in this process, each "
        "with its own log, so their start-up (Python, PyTorch) is paid once.  The plan "
        "is a JSON list of {\"argv\": [verb, args...], \"log\": FILE}; the workflow writes "
        "it (calibration.one_job).")
    p.add_argument("--plan", required=True,
                   help="the plan as JSON text, or @FILE for a JSON file holding it")
    p.set_defaults(func=cmd_batch)


def load_plan(text: str) -> list[dict[str, Any]]:
    """The plan's members, checked: each a verb's argv (not ``batch`` itself) and a log
    path (None: the batch's own stdout/stderr)."""
    where = "--plan"
    if text.startswith("@"):
        where = text[1:]
        try:
            text = Path(where).read_text()
        except OSError as exc:
            raise ConfigError(where, f"cannot read the plan: {exc}") from None
    try:
        plan = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(where, f"not valid JSON: {exc}") from None
    if not isinstance(plan, list) or not plan:
        raise ConfigError(where, "expected a non-empty JSON list of members")
    for i, m in enumerate(plan):
        argv = m.get("argv") if isinstance(m, dict) else None
        if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
            raise ConfigError(f"{where}[{i}].argv", "expected a non-empty list of strings")
        if argv[0] == "batch":
            raise ConfigError(f"{where}[{i}].argv", "a batch cannot contain a batch")
        if m.get("log") is not None and not isinstance(m["log"], str):
            raise ConfigError(f"{where}[{i}].log", "expected a file path or null")
    return plan


@contextlib.contextmanager
def _output_to(log: str | None) -> Iterator[None]:
    """Send everything the member prints to ``log``, as ``> log 2>&1`` would for its own
    job: Python's stdout/stderr and the logging records (the member's own handler), and
    file descriptors 1 and 2 (what a simulator's child process or a C library writes).
    All back afterwards."""
    if log is None:
        yield
        return
    from simcalib import cli

    Path(log).parent.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    sys.stdout.flush()
    sys.stderr.flush()
    saved_fds = os.dup(1), os.dup(2)
    saved_handlers = root.handlers[:]
    try:
        with open(log, "w", buffering=1) as f:
            handler = logging.StreamHandler(f)
            handler.setFormatter(logging.Formatter(cli.LOG_FORMAT))
            root.handlers[:] = [handler]
            os.dup2(f.fileno(), 1)
            os.dup2(f.fileno(), 2)
            try:
                with contextlib.redirect_stdout(f), contextlib.redirect_stderr(f):
                    yield
            finally:
                f.flush()
                os.dup2(saved_fds[0], 1)
                os.dup2(saved_fds[1], 2)
                root.handlers[:] = saved_handlers
    finally:
        os.close(saved_fds[0])
        os.close(saved_fds[1])


def _label(argv: list[str]) -> str:
    """``cal-run epidemic pts R=0.1``: the verb and what tells members apart."""
    keys = {"--study": "", "--strategy": "", "--proximity": "R="}
    words = [argv[0]]
    for flag, a in zip(argv, argv[1:], strict=False):
        if flag in keys:
            words.append(keys[flag] + a)
    return " ".join(words)


def run_member(argv: list[str]) -> int:
    """One verb, as ``python -m simcalib ARGV`` would run it; its exit status."""
    from simcalib import cli

    # a warning shown by an earlier member would be silenced here as "already shown":
    # each member starts from the interpreter's filters, so its log has its warnings
    with warnings.catch_warnings():
        try:
            return cli.main(argv)
        except SystemExit as exc:  # argparse's usage errors
            return exc.code if isinstance(exc.code, int) else 2
        except Exception:  # noqa: BLE001 - reported in the member's log, others go on
            traceback.print_exc()
            return 1


def cmd_batch(args: argparse.Namespace) -> int:
    plan = load_plan(args.plan)
    failed: list[str] = []
    t_all = time.perf_counter()
    for i, m in enumerate(plan, 1):
        label = _label(m["argv"])
        t0 = time.perf_counter()
        with _output_to(m.get("log")):
            rc = run_member(m["argv"])
        state = "ok" if rc == 0 else f"FAILED (exit {rc}; see {m.get('log') or 'above'})"
        print(f"[{i}/{len(plan)}] {label}: {state}, {time.perf_counter() - t0:.1f} s",
              flush=True)
        if rc:
            failed.append(f"{m['argv'][0]} (log {m.get('log') or '-'})")
    print(f"{len(plan) - len(failed)} of {len(plan)} members done in "
          f"{time.perf_counter() - t_all:.1f} s", flush=True)
    if failed:
        print(f"simcalib batch: error: {len(failed)} member(s) failed: " + "; ".join(failed),
              file=sys.stderr)
        return 1
    return 0
