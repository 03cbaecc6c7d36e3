"""The ``simcalib`` command: one verb per workflow step.

Each verb lives in ``simcalib.commands.<module>`` and registers itself through a
``register(subparsers)`` function; the Snakemake rules call these verbs with
explicit input and output paths, so any step can be run by hand.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import functools
import importlib
import importlib.metadata
import logging
import sys

from simcalib.errors import SimcalibError

#: the line format of every verb's log
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# One module per workflow stage; each defines register(subparsers).
VERB_MODULES: list[str] = [
    "simcalib.commands.check",
    "simcalib.commands.simulate",
    "simcalib.commands.metamodel",
    "simcalib.commands.calibrate",
    "simcalib.commands.curves",
    "simcalib.commands.posterior",
    "simcalib.commands.multisource",
    "simcalib.commands.bayes",
    "simcalib.commands.report",
    "simcalib.commands.batch",
]


# The stages, in workflow order: (verb prefix, heading in ``simcalib --help``).
STAGES: list[tuple[str, str]] = [
    ("check", "Config: read and validate config files before a run"),
    ("sim", "Simulation: designs, simulator runs, datasets, targets"),
    ("mm", "Metamodel (paper 1): train, Optimally-Predict"),
    ("cal", "Calibration strategies (paper 1): anchors, runs, summaries, figures"),
    ("ms", "Multi-source calibration (paper 2, iPro-NC)"),
    ("bayes", "Bayesian ODE calibration (paper 3, KOH vs MOS)"),
    ("report", "Report"),
    ("batch", "Several verbs in one process (calibration.one_job)"),
]

CONVENTIONS = """\
Conventions (every verb):
  --output FILE          the verb's main output; --output-<what> FILE for its others;
                         --output-dir DIR for a directory it fills.  Inputs never start
                         with --output.
  --config FILE          run a verb by hand from a whole config file (the workflow's
                         rules pass the same settings as --params JSON instead).
  simcalib VERB --help   what a verb reads and writes."""


def _grouped_verbs(sub: argparse._SubParsersAction) -> str:
    """The verbs listed by stage, one line each (the epilog of ``simcalib --help``)."""
    helps = {a.dest: a.help or "" for a in sub._choices_actions}
    width = max(len(v) for v in sub.choices) + 2
    lines = []
    for prefix, title in STAGES:
        verbs = [v for v in sub.choices if v.split("-", 1)[0] == prefix]
        if verbs:
            lines.append(f"{title}:")
            lines += [f"  {v:<{width}}{helps.get(v, '')}" for v in verbs]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="simcalib",
        description="Calibrate expensive simulators (see README.md).\n"
        "Each verb is one workflow step with explicit input and output paths; the\n"
        "Snakemake rules call them, and any step can be run by hand.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--version", action="version",
                        version=f"simcalib {importlib.metadata.version('simcalib')}")
    # no abbreviated options: a shortened or misspelled flag is an error, never a guess
    # (``--output-m`` must not silently mean ``--output-metrics``)
    sub = parser.add_subparsers(dest="verb", metavar="VERB", required=True,
                                help="one of the verbs listed below by stage",
                                parser_class=functools.partial(argparse.ArgumentParser,
                                                               allow_abbrev=False))
    for name in VERB_MODULES:
        importlib.import_module(name).register(sub)
    for verb in sub.choices.values():  # outputs read as FILE / DIR in every usage line
        for action in verb._actions:
            opt = action.option_strings[0] if action.option_strings else ""
            if opt.startswith("--output") and action.metavar is None:
                action.metavar = "DIR" if opt.endswith("-dir") else "FILE"
    # one grouped list instead of argparse's flat one (which would repeat every verb)
    parser.epilog = _grouped_verbs(sub) + "\n\n" + CONVENTIONS
    sub._choices_actions.clear()
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # a simulator that aborts or segfaults inside the job kills the interpreter: print
    # the Python traceback (with the in-flight run ids, study.simulation.in_flight) to
    # the job log instead of leaving it empty
    if not faulthandler.is_enabled():
        with contextlib.suppress(AttributeError, OSError, ValueError):  # no real stderr
            faulthandler.enable(all_threads=True)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format=LOG_FORMAT,
        stream=sys.stderr,
    )
    try:
        rc = args.func(args)
    except SimcalibError as exc:
        print(f"simcalib {args.verb}: error: {exc}", file=sys.stderr)
        return 2
    return int(rc or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
