#!/usr/bin/env python3
r"""A small external simulator with a curve output, for the ``command`` adapter's series
(issue 42; docs/command.md, "Curves"): logistic growth written as a time series.

It reads a config file of ``name value`` lines (or a JSON object) and writes one row per
day (CSV, the default) or arrays (JSON, ``--format json``).  Standard library only, so
any ``python3`` runs it.

Model: a cumulative count that grows logistically from ``initial`` towards ``capacity``
at rate ``rate`` per day,

    C(t) = capacity / (1 + (capacity / initial - 1) exp(-rate t)),

and the daily new cases ``cases(d) = C(d) - C(d - 1)`` on days d = 1 .. ``days``.  With
``noise`` > 0 each day's cases are multiplied by exp(noise z - noise^2 / 2), z standard
normal drawn from ``seed`` (mean-preserving; a seed reproduces a run), and the
cumulative count is the running sum of the noisy cases.

Output, CSV (``Summary0`` by default)::

    day,cases,cumulative,final_size
    1,0.0931,1.0931,95.2
    ...

``cases`` and ``cumulative`` are series (one value per day); ``final_size`` (the
cumulative count on the last day) is a scalar written on every row, so the adapter's
"last row" rule reads it.  JSON: ``{"day": [...], "cases": [...], "cumulative": [...],
"final_size": x}``.

Bad output on purpose, driven by ``fault`` (an input, so a study can exercise the
adapter's checks): 1 writes day 2 twice; 2 swaps days 2 and 3 (unsorted); 3 writes
``nan`` on day 3; 4 stops 5 days early (a shorter curve than the other runs); 5 writes
no ``cases`` column (array).  Invalid inputs (capacity <= initial, initial <= 0,
rate <= 0, days < 1) exit with status 2 and a message, as a real simulator would.

Usage: logistic_curve.py [--config FILE] [--output FILE] [--format csv|json]
                         [NAME=VALUE ...]        (NAME=VALUE overrides the config file)
"""

import argparse
import json
import math
import random
import sys

DEFAULTS = {"rate": 0.3, "capacity": 100.0, "initial": 1.0, "days": 30, "noise": 0.0,
            "seed": 0, "fault": 0}


def read_config(path):
    text = open(path).read()
    if text.lstrip().startswith("{"):
        return dict(json.loads(text))
    cfg = {}
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        parts = s.split(None, 1)
        if len(parts) != 2:
            sys.exit(f"ERROR: {path}:{n}: expected 'name value', got {s!r}")
        cfg[parts[0]] = parts[1].strip()
    return cfg


def cumulative(t, rate, capacity, initial):
    return capacity / (1.0 + (capacity / initial - 1.0) * math.exp(-rate * t))


def simulate(p):
    """Days 1..days, daily cases and the cumulative count (noise from the seed)."""
    days = int(p["days"])
    rng = random.Random(int(p["seed"]))
    sd = p["noise"]
    day, cases, cum = [], [], []
    total = p["initial"]
    for d in range(1, days + 1):
        c = (cumulative(d, p["rate"], p["capacity"], p["initial"])
             - cumulative(d - 1, p["rate"], p["capacity"], p["initial"]))
        if sd > 0:
            c *= math.exp(sd * rng.gauss(0.0, 1.0) - sd * sd / 2.0)
        total += c
        day.append(d)
        cases.append(c)
        cum.append(total)
    return day, cases, cum


def apply_fault(fault, day, cases, cum):
    if fault == 1 and len(day) > 2:
        day[2] = day[1]
    elif fault == 2 and len(day) > 2:
        day[1], day[2] = day[2], day[1]
    elif fault == 3 and len(day) > 2:
        cases[2] = float("nan")
    elif fault == 4:
        keep = max(1, len(day) - 5)
        del day[keep:], cases[keep:], cum[keep:]
    return day, cases, cum


def write(path, fmt, day, cases, cum, fault):
    final = cum[-1]
    if fmt == "json":
        doc = {"day": day, "cumulative": cum, "final_size": final}
        if fault != 5:
            doc["cases"] = [None if math.isnan(c) else c for c in cases]
        text = json.dumps(doc) + "\n"
    else:
        cols = ["day", "cases", "cumulative", "final_size"]
        keep = [i for i, c in enumerate(cols) if not (fault == 5 and c == "cases")]
        lines = [",".join(cols[i] for i in keep)]
        for i, d in enumerate(day):  # (no zip(strict=): any python3 runs this file)
            row = [str(d), repr(cases[i]), repr(cum[i]), repr(final)]
            lines.append(",".join(row[i] for i in keep))
        text = "\n".join(lines) + "\n"
    if path == "-":
        sys.stdout.write(text)
    else:
        with open(path, "w") as fh:
            fh.write(text)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config")
    ap.add_argument("--output", default="Summary0")
    ap.add_argument("--format", choices=["csv", "json"], default="csv")
    ap.add_argument("overrides", nargs="*", metavar="NAME=VALUE")
    args = ap.parse_args(argv)
    raw = dict(DEFAULTS)
    if args.config:
        raw.update(read_config(args.config))
    for item in args.overrides:
        name, _, value = item.partition("=")
        raw[name] = value
    try:
        p = {k: float(raw[k]) for k in DEFAULTS}
    except (TypeError, ValueError) as exc:
        sys.exit(f"ERROR: bad input value: {exc}")
    if p["initial"] <= 0 or p["capacity"] <= p["initial"] or p["rate"] <= 0 or p["days"] < 1:
        print(f"ERROR: need 0 < initial < capacity, rate > 0, days >= 1; got {p}",
              file=sys.stderr)
        return 2
    day, cases, cum = simulate(p)
    day, cases, cum = apply_fault(int(p["fault"]), day, cases, cum)
    write(args.output, args.format, day, cases, cum, int(p["fault"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
