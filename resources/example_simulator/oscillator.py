#!/usr/bin/env python3
r"""A small external simulator for the ``command`` adapter: a kicked, damped oscillator.

It behaves like a legacy program such as FluTE: it reads a config file of
``name value`` lines (or a JSON object), runs, and writes a summary file of
``key: value`` lines (``Summary0`` by default; CSV or JSON with ``--format``).
Standard library only, so any ``python3`` runs it.

Model: a mass ``mass`` on a spring ``stiffness`` with viscous ``damping``, at rest
at x = 0 and kicked to velocity ``velocity`` at t = 0:

    m x'' + c x' + k x = 0,   x(0) = 0,   x'(0) = v0.

With w0 = sqrt(k/m) and zeta = c / (2 sqrt(k m)) the first (largest) excursion is

    peak time         t* = acos(zeta) / (w0 sqrt(1 - zeta^2))       (zeta < 1)
                          = 1 / w0                                    (zeta = 1)
                          = acosh(zeta) / (w0 sqrt(zeta^2 - 1))       (zeta > 1)
    peak displacement x* = (v0 / w0) exp(-w0 zeta t*)
    rebound ratio     r  = exp(-pi zeta / sqrt(1 - zeta^2)) for zeta < 1, else 0
                           (size of the first swing back relative to x*)

All three are smooth in the inputs.  ``noise`` > 0 adds Gaussian noise of that
standard deviation to the displacement outputs, drawn from ``seed`` (so a seed
reproduces a run).  The summary also holds ``Displacement samples`` (x at t = 1,
2, 3, comma-separated, FluTE's "by age" style) and a few echo lines.

Failures on purpose, driven by the *inputs* so a study can exercise them:
``failmode`` 1: exit status 3 with a message on stderr; 2: hang (and a child
process that hangs too, to check that the whole process group is killed);
3: garbage on stdout and in the summary file; 4: NaN outputs; 5: exit 0 but
write no summary.  Physically invalid inputs (mass or stiffness <= 0, damping < 0)
exit with status 2 and a message, as a real simulator would.

Usage: oscillator.py [--config FILE] [--output FILE] [--format keyvalue|csv|json]
                     [NAME=VALUE ...]        (NAME=VALUE overrides the config file)
"""

import argparse
import json
import math
import sys

DEFAULTS = {"mass": 1.0, "stiffness": 1.0, "damping": 0.2, "velocity": 1.0, "noise": 0.0,
            "seed": 0, "failmode": 0}
LABELS = {"peak_displacement": "Peak displacement", "peak_time": "Peak time",
          "rebound_ratio": "Rebound ratio"}


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


def displacement(t, m, k, c, v0):
    w0 = math.sqrt(k / m)
    z = c / (2 * math.sqrt(k * m))
    if abs(z - 1) < 1e-9:
        return v0 * t * math.exp(-w0 * t)
    if z < 1:
        wd = w0 * math.sqrt(1 - z * z)
        return v0 / wd * math.exp(-z * w0 * t) * math.sin(wd * t)
    s = w0 * math.sqrt(z * z - 1)
    return v0 / s * math.exp(-z * w0 * t) * math.sinh(s * t)


def simulate(m, k, c, v0):
    w0 = math.sqrt(k / m)
    z = c / (2 * math.sqrt(k * m))
    if abs(z - 1) < 1e-9:
        t = 1 / w0
    elif z < 1:
        t = math.acos(z) / (w0 * math.sqrt(1 - z * z))
    else:
        t = math.acosh(z) / (w0 * math.sqrt(z * z - 1))
    peak = v0 / w0 * math.exp(-w0 * z * t)
    rebound = math.exp(-math.pi * z / math.sqrt(1 - z * z)) if z < 1 else 0.0
    return {"peak_displacement": peak, "peak_time": t, "rebound_ratio": rebound}


def main(argv=None):
    ap = argparse.ArgumentParser(description="Kicked damped oscillator (example simulator).")
    ap.add_argument("--config", help="config file: 'name value' lines or a JSON object")
    ap.add_argument("--output", default="Summary0", help="summary file (default Summary0)")
    ap.add_argument("--format", default="keyvalue", choices=["keyvalue", "csv", "json"])
    ap.add_argument("overrides", nargs="*", metavar="NAME=VALUE")
    args = ap.parse_args(argv)

    cfg = dict(DEFAULTS)
    if args.config:
        cfg.update(read_config(args.config))
    for item in args.overrides:
        if "=" not in item:
            sys.exit(f"ERROR: expected NAME=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        cfg[k] = v
    unknown = sorted(set(cfg) - set(DEFAULTS))
    if unknown:
        sys.exit(f"ERROR: unknown parameter(s) {unknown}; known: {sorted(DEFAULTS)}")
    try:
        m, k, c, v0, noise = (float(cfg[n]) for n in ("mass", "stiffness", "damping",
                                                      "velocity", "noise"))
        seed, failmode = int(float(cfg["seed"])), int(float(cfg["failmode"]))
    except ValueError as exc:
        sys.exit(f"ERROR: bad parameter value: {exc}")

    if failmode == 1:
        print("oscillator: starting", flush=True)
        print("ERROR: simulated crash (failmode 1)", file=sys.stderr)
        return 3
    if failmode == 2:
        import subprocess
        import time

        print("hanging on purpose (failmode 2)", file=sys.stderr, flush=True)
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        with open("child.pid", "w") as fh:
            fh.write(f"{child.pid}\n")
        while True:
            time.sleep(3600)
    if m <= 0 or k <= 0 or c < 0:
        print(f"ERROR: need mass > 0, stiffness > 0, damping >= 0 (got {m}, {k}, {c})",
              file=sys.stderr)
        return 2

    out = simulate(m, k, c, v0)
    if noise > 0:
        import random

        rng = random.Random(seed)
        out["peak_displacement"] += rng.gauss(0.0, noise)
    samples = [displacement(t, m, k, c, v0) for t in (1.0, 2.0, 3.0)]
    if failmode == 4:
        out = {key: float("nan") for key in out}
    if failmode == 5:
        return 0
    if failmode == 3:
        sys.stdout.write("\x00\x1b[31m#@!~ garbage \xff\xfe ~!@#\n" * 3)
        with open(args.output, "w") as fh:
            fh.write("Peak displacement: ###\nPeak time: ?!\nRebound ratio: 0x1F??\n")
        return 0

    with open(args.output, "w") as fh:
        if args.format == "json":
            doc = {LABELS[key]: v for key, v in out.items()}
            doc["Displacement samples"] = samples
            json.dump(doc, fh, indent=1)
        elif args.format == "csv":
            fh.write(",".join(LABELS[key] for key in out) + "\n")
            fh.write(",".join(repr(v) for v in out.values()) + "\n")
        else:
            fh.write("Oscillator summary\n")
            fh.write(f"Mass: {m!r}\nStiffness: {k!r}\nDamping: {c!r}\nSeed: {seed}\n")
            for key, v in out.items():
                fh.write(f"{LABELS[key]}: {v!r}\n")
            fh.write("Displacement samples: " + ",".join(repr(v) for v in samples) + ",\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
