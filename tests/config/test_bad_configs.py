"""The bad-config table: every case is a ConfigError from ``validate_config`` (what the
Snakefile runs before any job), and the message names the offending key path.

One base config exercises every section (a study with contexts, constraints, extra
target sets, metamodel, OP and calibration; a command-line simulator; bayes;
multisource; report); each case patches it in one place.  Cases marked "new" in the
comments were accepted (or failed late or with a bare traceback).
"""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from simcalib.config import load_yaml, validate_config
from simcalib.errors import ConfigError
from tests.fixtures.configs import BASE, DEL, OSC, _patched

REPO = Path(__file__).resolve().parents[2]
RB = "studies.rb"
OPT = "studies.osc.simulator.options"
HD = "solvers.highs-default"
A_FILE = str(REPO / "pyproject.toml")  # an existing regular file, not a directory

# (id, {dotted.path: value (DEL removes)}, the key path the message must name)
CASES: list[tuple[str, dict[str, Any], str]] = [
    # ---- top level
    ("seed-missing", {"seed": DEL}, "seed"),
    ("seed-negative", {"seed": -1}, "seed"),
    ("seed-string", {"seed": "x"}, "seed"),
    ("threads-zero", {"threads": 0}, "threads"),
    ("top-typo", {"studys": {}}, "studys"),
    ("max-runs-zero", {"max_runs": 0}, "max_runs"),
    # ---- solvers
    ("solver-backend", {f"{HD}.backend": "cplex"}, f"{HD}.backend"),
    ("solver-time-limit", {f"{HD}.time_limit": 0}, f"{HD}.time_limit"),
    ("solver-gap", {f"{HD}.mip_gap_abs": -1}, f"{HD}.mip_gap_abs"),
    ("solver-threads", {f"{HD}.threads": -1}, f"{HD}.threads"),
    ("solver-feastol", {f"{HD}.feasibility_tol": 0}, f"{HD}.feasibility_tol"),
    ("solver-obbt-typo", {f"{HD}.obbt.time_limt": 5}, f"{HD}.obbt.time_limt"),
    ("solver-ws-samples", {f"{HD}.warm_start.samples": 0}, f"{HD}.warm_start.samples"),
    ("solver-no-backend", {"solvers.mine": {"time_limit": 5}}, "solvers.mine.backend"),
    ("solver-unknown-key", {f"{HD}.gap": 0.1}, f"{HD}.gap"),
    ("highs-option-name", {f"{HD}.options.presolv": "off"}, f"{HD}.options.presolv"),  # new
    ("highs-option-type", {f"{HD}.options.mip_rel_gap": "abc"},
     f"{HD}.options.mip_rel_gap"),  # new
    ("highs-option-range", {f"{HD}.options.threads": -5}, f"{HD}.options.threads"),  # new
    ("highs-option-enum", {f"{HD}.options.presolve": "sometimes"},
     f"{HD}.options.presolve"),  # new
    # ---- study structure
    ("study-name-path", {"studies.../x": copy.deepcopy({"simulator": {"type": "rosenbrock"}})},
     "studies"),
    ("study-typo", {f"{RB}.desing": {"n": 3}}, f"{RB}.desing"),
    ("study-no-simulator", {f"{RB}.simulator": DEL}, f"{RB}.simulator"),
    ("study-no-design", {f"{RB}.design": DEL}, f"{RB}.design"),
    ("study-no-targets", {f"{RB}.targets": DEL}, f"{RB}.targets"),
    ("simulator-type", {f"{RB}.simulator.type": "flute"}, f"{RB}.simulator.type"),
    ("simulator-option-typo", {f"{RB}.simulator.options": {"nosie_sd": 1}},
     f"{RB}.simulator.options.nosie_sd"),
    ("simulator-unknown-key", {f"{RB}.simulator.version": 2}, f"{RB}.simulator.version"),
    ("outputs-unknown", {f"{RB}.outputs": ["nope"]}, f"{RB}.outputs"),
    ("outputs-type", {f"{RB}.outputs": "y"}, f"{RB}.outputs"),
    # ---- design and targets
    ("design-n-string", {f"{RB}.design.n": "many"}, f"{RB}.design.n"),
    ("design-n-zero", {f"{RB}.design.n": 0}, f"{RB}.design.n"),
    ("design-n-float", {f"{RB}.design.n": 1e12}, f"{RB}.design.n"),
    ("design-n-huge", {f"{RB}.design.n": 10**12}, f"{RB}.design.n"),  # new
    ("design-n-over-cap", {f"{RB}.design.n": 300_000}, f"{RB}.design.n"),  # new (x4 levels)
    ("design-cap-lowered", {"max_runs": 10}, f"{RB}.design.n"),  # new
    ("design-method", {f"{RB}.design.method": "halton"}, f"{RB}.design.method"),
    ("design-chunk", {f"{RB}.design.chunk_size": 0}, f"{RB}.design.chunk_size"),
    ("design-threads", {f"{RB}.design.threads": 0}, f"{RB}.design.threads"),
    ("design-per-level", {f"{RB}.design.per_level": "yes"}, f"{RB}.design.per_level"),
    ("design-unknown", {f"{RB}.design.size": 3}, f"{RB}.design.size"),
    ("targets-n-zero", {f"{RB}.targets.n": 0}, f"{RB}.targets.n"),
    ("targets-n-huge", {f"{RB}.targets.n": 10**9}, f"{RB}.targets.n"),  # new
    ("targets-method", {f"{RB}.targets.method": "grid"}, f"{RB}.targets.method"),
    ("targets-context", {f"{RB}.targets.contexts": {"zz": [1]}}, f"{RB}.targets.contexts"),
    ("targets-context-empty", {f"{RB}.targets.contexts": {"a": []}},
     f"{RB}.targets.contexts.a"),
    ("extra-n-zero", {f"{RB}.extra_targets.oos.n": 0}, f"{RB}.extra_targets.oos.n"),
    ("extra-n-huge", {f"{RB}.extra_targets.oos.n": 10**9}, f"{RB}.extra_targets.oos.n"),  # new
    ("extra-name-escape", {f"{RB}.extra_targets": {"../../escape": {"n": 1}}},
     f"{RB}.extra_targets"),  # new
    ("extra-name-slash", {f"{RB}.extra_targets": {"a/b": {"n": 1}}},
     f"{RB}.extra_targets"),  # new
    ("extra-context", {f"{RB}.extra_targets.oos.contexts": {"zz": [1]}},
     f"{RB}.extra_targets.oos.contexts"),
    ("extra-unknown-key", {f"{RB}.extra_targets.oos.seed": 1},
     f"{RB}.extra_targets.oos.seed"),
    # ---- parameters
    ("bounds-order", {f"{RB}.parameters.x": {"lower": 3, "upper": 2}}, f"{RB}.parameters.x"),
    ("bounds-order-at-context", {f"{RB}.parameters.x": {"lower": 6, "upper": "a"}},
     f"{RB}.parameters.x"),
    ("upper-inf", {f"{RB}.parameters.x": {"lower": 0, "upper": float("inf")}},
     f"{RB}.parameters.x.upper"),  # new
    ("lower-minus-inf", {f"{RB}.parameters.x": {"lower": float("-inf"), "upper": 1}},
     f"{RB}.parameters.x.lower"),  # new
    ("upper-nan", {f"{RB}.parameters.x": {"lower": 0, "upper": float("nan")}},
     f"{RB}.parameters.x.upper"),  # new
    ("bound-overflow", {f"{RB}.parameters.x.lower": "a**a**a"},
     f"{RB}.parameters.x.lower"),  # new: was a bare OverflowError
    ("bound-huge-power", {f"{RB}.parameters.x.upper": "10**400"},
     f"{RB}.parameters.x.upper"),  # new
    ("bound-div-zero", {f"{RB}.parameters.x.lower": "a / (a - 5)"},
     f"{RB}.parameters.x.lower"),  # new
    ("bound-unknown-name", {f"{RB}.parameters.x.lower": "c - 1"}, f"{RB}.parameters.x.lower"),
    ("bound-code", {f"{RB}.parameters.x.lower": "__import__('os')"},
     f"{RB}.parameters.x.lower"),
    ("bound-syntax", {f"{RB}.parameters.x.lower": "a -"}, f"{RB}.parameters.x.lower"),
    ("bound-type", {f"{RB}.parameters.x.lower": [1]}, f"{RB}.parameters.x.lower"),
    ("upper-missing", {f"{RB}.parameters.x": {"lower": 0}}, f"{RB}.parameters.x.upper"),
    ("param-integer-type", {f"{RB}.parameters.x.integer": "yes"}, f"{RB}.parameters.x.integer"),
    ("param-unknown-key", {f"{RB}.parameters.x.step": 1}, f"{RB}.parameters.x.step"),
    ("param-log-nonpositive", {f"{RB}.parameters.n": {"lower": -1, "upper": 1, "log": True}},
     f"{RB}.parameters.n.lower"),
    ("param-no-integer", {f"{RB}.parameters.n": {"lower": 1.2, "upper": 1.8, "integer": True}},
     f"{RB}.parameters.n"),
    ("param-is-context", {f"{RB}.parameters.a": {"lower": 0, "upper": 1}},
     f"{RB}.parameters.a"),
    ("params-empty", {f"{RB}.parameters": {}}, f"{RB}.parameters"),
    # ---- contexts
    ("context-values-empty", {f"{RB}.contexts.a.values": []}, f"{RB}.contexts.a.values"),
    ("context-values-and-range", {f"{RB}.contexts.a": {"values": [5], "lower": 0, "upper": 10}},
     f"{RB}.contexts.a"),  # new
    ("context-values-and-lower", {f"{RB}.contexts.a.lower": 1}, f"{RB}.contexts.a"),  # new
    ("context-half-range", {f"{RB}.contexts.a": {"lower": 5}}, f"{RB}.contexts.a"),
    ("context-range-order", {f"{RB}.contexts.a": {"lower": 9, "upper": 5}}, f"{RB}.contexts.a"),
    ("context-range-inf", {f"{RB}.contexts.a": {"lower": 5, "upper": float("inf")}},
     f"{RB}.contexts.a.upper"),  # new
    ("context-value-inf", {f"{RB}.contexts.a.values": [5, float("inf")]},
     f"{RB}.contexts.a.values"),  # new
    ("context-unknown-key", {f"{RB}.contexts.a.vals": [1]}, f"{RB}.contexts.a.vals"),
    ("context-value-type", {f"{RB}.contexts.a.values": ["five"]}, f"{RB}.contexts.a.values.0"),
    # ---- constraints
    ("constraint-unknown-input", {f"{RB}.constraints": ["x + z <= 1"]},
     f"{RB}.constraints[0]"),
    ("constraint-nonlinear", {f"{RB}.constraints": ["x * y <= 1"]}, f"{RB}.constraints[0]"),
    ("constraint-chained", {f"{RB}.constraints": ["x <= 1 <= y"]}, f"{RB}.constraints[0]"),
    ("constraint-no-vars", {f"{RB}.constraints": ["1 <= 2"]}, f"{RB}.constraints[0]"),
    ("constraint-not-equal", {f"{RB}.constraints": ["x != y"]}, f"{RB}.constraints[0]"),
    ("constraint-type", {f"{RB}.constraints": [5]}, f"{RB}.constraints.0"),
    ("constraint-infeasible-level", {f"{RB}.constraints": ["x + y >= 100"]},
     f"{RB}.constraints"),  # new: empty at a = 5 only
    ("constraint-infeasible-eq", {f"{RB}.constraints": ["x == 1000"]},
     f"{RB}.constraints"),  # new
    ("constraint-infeasible-pair", {f"{RB}.constraints": ["x - y >= 1", "y <= 2"]},
     f"{RB}.constraints"),  # new
    ("constraint-infeasible-context", {f"{RB}.constraints": ["b + x <= 0"]},
     f"{RB}.constraints"),  # new
    # ---- metamodel and optimize
    ("mm-hidden", {f"{RB}.metamodel.hidden": [0]}, f"{RB}.metamodel.hidden.0"),
    ("mm-epochs", {f"{RB}.metamodel.epochs": 0}, f"{RB}.metamodel.epochs"),
    ("mm-split", {f"{RB}.metamodel.split": {"train": 0.5, "val": 0.1, "test": 0.1}},
     f"{RB}.metamodel.split"),
    ("mm-dropout", {f"{RB}.metamodel.dropout": 1.5}, f"{RB}.metamodel.dropout"),
    ("mm-unknown", {f"{RB}.metamodel.activation": "tanh"}, f"{RB}.metamodel.activation"),
    ("opt-solver", {f"{RB}.optimize.solver": "nope"}, f"{RB}.optimize.solver"),
    ("opt-weights", {f"{RB}.optimize.weights": {"nope": 1.0}}, f"{RB}.optimize.weights"),
    # ---- calibration
    ("cal-budget", {f"{RB}.calibration.budget": 1}, f"{RB}.calibration.budget"),
    ("cal-strategy", {f"{RB}.calibration.strategies": ["zz"]}, f"{RB}.calibration.strategies.0"),
    ("cal-proximity", {f"{RB}.calibration.proximity": 0}, f"{RB}.calibration.proximity"),
    ("cal-sweep", {f"{RB}.calibration.sweep": [1.5]}, f"{RB}.calibration.sweep.0"),
    ("cal-extra-targets", {f"{RB}.calibration.extra_targets": ["nope"]},
     f"{RB}.calibration.extra_targets"),
    ("cal-noise-studies", {f"{RB}.calibration.noise_studies": ["nope"]},
     f"{RB}.calibration.noise_studies"),
    ("cal-solver", {f"{RB}.calibration.solver": "nope"}, f"{RB}.calibration.solver"),
    ("cal-mc-no-dropout", {f"{RB}.calibration.mc_samples": 10},
     f"{RB}.calibration.mc_samples"),  # new
    ("cal-no-metamodel", {f"{RB}.metamodel.enabled": False}, f"{RB}.calibration"),
    ("cal-unknown", {f"{RB}.calibration.budgets": 3}, f"{RB}.calibration.budgets"),
    # ---- command simulator
    ("cmd-parser", {f"{OPT}.parser": "xml"}, f"{OPT}.parser"),
    ("cmd-timeout", {f"{OPT}.timeout": 0}, f"{OPT}.timeout"),
    ("cmd-keep-failed", {f"{OPT}.keep_failed": "yes"}, f"{OPT}.keep_failed"),
    ("cmd-max-parallel", {f"{OPT}.max_parallel": 0}, f"{OPT}.max_parallel"),
    ("cmd-link-missing", {f"{OPT}.link_files": ["no/such/file.dat"]}, f"{OPT}.link_files.0"),
    ("cmd-env-placeholder", {f"{OPT}.env": {"X": "{nope}"}}, f"{OPT}.env.X"),
    ("cmd-placeholder-typo", {f"{OPT}.command": [OSC, "{mss}"]}, f"{OPT}.command.1"),
    ("cmd-positional", {f"{OPT}.command": [OSC, "{}"]}, f"{OPT}.command.1"),
    ("cmd-lone-brace", {f"{OPT}.command": [OSC, "{mass"]}, f"{OPT}.command.1"),
    ("cmd-width-huge", {f"{OPT}.command": [OSC, "{mass:>20000000000}"]},
     f"{OPT}.command.1"),  # new: allocated 20 GB
    ("cmd-precision-huge", {f"{OPT}.input_file.extra.seed": "{seed:.100000f}"},
     f"{OPT}.input_file.extra.seed"),  # new
    ("cmd-env-width-huge", {f"{OPT}.env": {"X": "{mass:099999999d}"}}, f"{OPT}.env.X"),  # new
    ("cmd-bad-spec", {f"{OPT}.command": [OSC, "{mass:qq}"]}, f"{OPT}.command.1"),  # new
    ("cmd-workdir-file", {f"{OPT}.workdir": A_FILE}, f"{OPT}.workdir"),  # new
    ("cmd-workdir-under-file", {f"{OPT}.workdir": A_FILE + "/scratch"},
     f"{OPT}.workdir"),  # new
    ("cmd-workdir-readonly", {f"{OPT}.workdir": "/proc/sys/simcalib"}, f"{OPT}.workdir"),  # new
    ("cmd-no-outputs", {"studies.osc.outputs": DEL, f"{OPT}.output_map": DEL},
     f"{OPT}.outputs"),
    # ---- bayes
    ("bayes-setting", {"bayes.settings": ["three_mass"]}, "bayes.settings"),
    ("bayes-setting-name", {"bayes.settings": ["../x"]}, "bayes.settings.0"),
    ("bayes-method", {"bayes.methods": ["xyz"]}, "bayes.methods.0"),
    ("bayes-replications", {"bayes.replications": 0}, "bayes.replications"),
    ("bayes-burn-in", {"bayes.sampler.burn_in": 200}, "bayes.sampler.burn_in"),
    ("bayes-sampler-typo", {"bayes.sampler.iteration": 10}, "bayes.sampler.iteration"),
    ("bayes-kernel-sequential", {"bayes.sampler.theta_kernel": "hmc",
                                 "bayes.sampler.engine": "sequential"},
     "bayes.sampler.theta_kernel"),  # new
    ("bayes-kernel-unknown", {"bayes.sampler.theta_kernel": "nuts"},
     "bayes.sampler.theta_kernel"),  # new
    ("bayes-predict-draws", {"bayes.predict_draws": 5}, "bayes.predict_draws"),
    ("bayes-bounds-unknown", {"bayes.setting_options": {"two_mass": {"bounds": {"zz": [0, 1]}}}},
     "bayes.setting_options.two_mass.bounds.zz"),  # new
    ("bayes-bounds-order", {"bayes.setting_options": {"two_mass": {"bounds": {"k1": [5, 1]}}}},
     "bayes.setting_options.two_mass.bounds.k1"),
    ("bayes-bounds-inf", {"bayes.setting_options": {
        "two_mass": {"bounds": {"k1": [0, float("inf")]}}}},
     "bayes.setting_options.two_mass.bounds.k1"),
    ("bayes-gamma-prior", {"bayes.setting_options": {"two_mass": {"gamma_prior": [0, -1]}}},
     "bayes.setting_options.two_mass.gamma_prior"),
    ("bayes-sigma2-prior", {"bayes.setting_options": {"two_mass": {"sigma2_prior": [-1, 1]}}},
     "bayes.setting_options.two_mass.sigma2_prior"),
    ("bayes-option-unknown", {"bayes.setting_options": {"two_mass": {"noise": 1}}},
     "bayes.setting_options.two_mass.noise"),
    # ---- multisource
    ("ms-fit-typo", {"multisource.fit.epoch": 3}, "multisource.fit.epoch"),
    ("ms-scenario-order", {"multisource.analytic": {"scenarios": {"x": ["s1", "s0"]}}},
     "multisource.analytic.scenarios.x"),
    ("ms-step1-theta", {"multisource.hardening": {"step1": {"theta": ["E", "Rinf2"]}}},
     "multisource.hardening.step1.theta"),
    ("ms-step2-fix", {"multisource.hardening": {"step2": {"fix": ["nu"]},
                                                "step1": {"theta": ["E"]}}},
     "multisource.hardening.step2.fix"),
    ("ms-threads", {"multisource.threads": 0}, "multisource.threads"),
    # ---- report
    ("report-unknown", {"report.title": "x"}, "report.title"),  # new
    ("report-type", {"report": "yes"}, "report"),
    ("report-share", {"report.flag_failed_share": 1.5}, "report.flag_failed_share"),
]

# Cases only raw YAML text can express: (id, text, key path).
RAW_CASES: list[tuple[str, str, str]] = [
    ("dup-top", "seed: 1\nseed: 2\n", "seed"),  # new
    ("dup-nested", "seed: 1\nstudies:\n  rb:\n    design: {n: 4, n: 5}\n",
     "studies.rb.design.n"),  # new
    ("dup-in-list", "seed: 1\nbayes:\n  settings: [two_mass]\n  sampler:\n    iterations: 9\n"
     "  sampler: {iterations: 10}\n", "bayes.sampler"),  # new
    ("dup-in-sequence-item", "seed: 1\nx:\n  - {a: 1, a: 2}\n", "x.0.a"),  # new
]


def test_base_config_is_valid() -> None:
    """The table means something only if the unpatched config passes."""
    cfg = validate_config(copy.deepcopy(BASE))
    assert cfg["max_runs"] == 1_000_000 and cfg["report"] == {"flag_failed_share": 0.1}


def test_the_table_is_big_enough() -> None:
    assert len(CASES) + len(RAW_CASES) >= 100
    assert len({c[0] for c in CASES} | {c[0] for c in RAW_CASES}) == len(CASES) + len(RAW_CASES)


@pytest.mark.parametrize(("patch", "path"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_config_is_a_keyed_error(patch: dict[str, Any], path: str) -> None:
    cfg = _patched(patch)
    with pytest.raises(ConfigError) as err:
        validate_config(cfg)
    assert err.value.path == path, str(err.value)
    assert f"'{path}'" in str(err.value)


@pytest.mark.parametrize(("text", "path"), [c[1:] for c in RAW_CASES],
                         ids=[c[0] for c in RAW_CASES])
def test_duplicate_yaml_keys_are_keyed_errors(tmp_path: Path, text: str, path: str) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_yaml(f)
    assert err.value.path == path, str(err.value)
    assert "duplicate key" in str(err.value) and f"'{path}'" in str(err.value)


@pytest.mark.parametrize(("name", "text", "path"), [
    ("duplicate", "seed: 1\nstudies: {}\nseed: 2\n", "seed"),
    ("huge-design", yaml.safe_dump(_patched({f"{RB}.design.n": 10**12})), f"{RB}.design.n"),
])
def test_snakemake_stops_before_any_job(tmp_path: Path, name: str, text: str, path: str) -> None:
    """Snakemake reads --configfile itself (keeping the last duplicate); the Snakefile
    re-reads it strictly, so both cases stop with the key path and no results."""
    cfg = tmp_path / f"{name}.yaml"
    cfg.write_text(text)
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(tmp_path),
         "--configfile", str(cfg), "--cores", "1", "-n"],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert f"'{path}'" in proc.stderr + proc.stdout
    assert not (tmp_path / "results").exists()
