"""A counting external simulator for the chunk tests: each run appends its run id
to a counter file when it starts, sleeps, and prints ``q: <value>``.  The counter
tells how many times each run was started, so a test can count redone runs."""

from __future__ import annotations

from pathlib import Path

import yaml

# a shell script (starts in milliseconds, unlike a Python interpreter)
SCRIPT = """\
#!/bin/sh
# args: x y run_id counter sleep
echo "$3" >> "$4"
sleep "$5"
awk -v x="$1" -v y="$2" 'BEGIN { printf "q: %.17g\\nr: %.17g\\n", (x - 0.3) ^ 2 + y, x * y }'
"""


def counting_config(tmp: Path, n: int = 24, chunk_size: int = 24, threads: int = 3,
                    sleep: float = 0.3, output_key: str = "q") -> Path:
    """Write the counting script and a one-study config using it; returns the config."""
    script = tmp / "counting_sim.sh"
    script.write_text(SCRIPT)
    cfg = {
        "seed": 5,
        "studies": {"count": {
            "simulator": {"type": "command", "options": {
                "command": ["/bin/sh", str(script), "{x}", "{y}", "{run_id}",
                            str(tmp / "counter.txt"), str(sleep)],
                "output_file": "-", "parser": "keyvalue", "output_map": {output_key: "q", "r": "r"},
                "timeout": 60, "writable": [str(tmp)]}},  # the counter (confine)
            "parameters": {"x": {"lower": 0, "upper": 1}, "y": {"lower": 0, "upper": 1}},
            "outputs": ["q", "r"],
            "design": {"n": n, "chunk_size": chunk_size, "method": "uniform",
                       "threads": threads},
            "targets": {"n": 1},
        }},
    }
    path = tmp / "count.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def started(tmp: Path) -> list[int]:
    """Run ids in the order their runs started (one entry per start)."""
    f = tmp / "counter.txt"
    return [int(s) for s in f.read_text().split()] if f.exists() else []
