"""The ``simcalib`` command: one verb per workflow step.

Each verb lives in ``simcalib.commands.<module>`` and registers itself through a
``register(subparsers)`` function; the Snakemake rules call these verbs with
explicit input and output paths, so any step can be run by hand.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import logging
import sys

from simcalib.errors import SimcalibError

# One module per workflow stage; each defines register(subparsers).
VERB_MODULES: list[str] = [
    "simcalib.commands.simulate",
    "simcalib.commands.metamodel",
    "simcalib.commands.calibrate",
    "simcalib.commands.multisource",
    "simcalib.commands.bayes",
    "simcalib.commands.report",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="simcalib",
        description="Calibrate expensive simulators (see README.md). "
        "Each verb is one workflow step with explicit input and output paths.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--version", action="version",
                        version=f"simcalib {importlib.metadata.version('simcalib')}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    for name in VERB_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
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
