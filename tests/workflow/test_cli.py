"""The CLI's conventions over the whole parser: every verb described, every argument
helped, one naming scheme for outputs, verbs grouped by stage, the rules calling only
flags that exist, and ``--config`` building the same params the rules build."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from simcalib import cli
from simcalib.cli import build_parser, main
from simcalib.config import load_config

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "configs" / "tiny.yaml"

# Every file or directory each verb writes, by flag (the naming scheme: --output for the
# main output, --output-<what> for the others, --output-dir for a directory).
OUTPUTS: dict[str, set[str]] = {
    "check": set(),
    "sim-design": {"--output"},
    "sim-run": {"--output", "--output-meta"},
    "sim-merge": {"--output", "--output-summary"},
    "sim-targets": {"--output"},
    "mm-train": {"--output-dir"},
    "mm-optimize": {"--output"},
    "cal-anchors": {"--output"},
    "cal-run": {"--output", "--output-runs", "--output-block"},
    "cal-merge": {"--output", "--output-runs"},
    "cal-curves": {"--output", "--output-figure"},
    "cal-step": {"--output-state", "--output-proposals"},
    "cal-sim": {"--output"},
    "cal-score": {"--output"},
    "cal-posterior": {"--output-dir"},
    "cal-seq-posterior": {"--output-dir"},
    "cal-summary": {"--output", "--output-figure", "--output-figure-rs-op"},
    "cal-sweep": {"--output", "--output-figure"},
    "cal-contexts": {"--output", "--output-figure"},
    "cal-noise": {"--output", "--output-figure"},
    "ms-data": {"--output-data", "--output-spec", "--output-theta-mse"},
    "ms-fit": {"--output-dir"},
    "ms-lsq": {"--output"},
    "ms-report": {"--output-dir"},
    "bayes-data": {"--output-obs", "--output-dense", "--output-truth"},
    "bayes-run": {"--output-posterior", "--output-summary", "--output-predictive",
                  "--output-run-info"},
    "bayes-metrics": {"--output-metrics", "--output-metrics-outputs", "--output-per-rep"},
    "bayes-table": {"--output-params", "--output-outputs"},
    "bayes-plot": {"--output-uq", "--output-marginals"},
    "bayes-diagnostics": {"--output-trace", "--output-rank", "--output-pair"},
    "bayes-compare": {"--output-params", "--output-outputs"},
    "bayes-run-batch": {"--output"},
    "sim-noise": {"--output"},
    "bayes-replication-tables": {"--output-dir", "--output-figure"},
    "report-summary": {"--output", "--output-runtime", "--output-html", "--output-tables-dir",
                       "--output-figures-dir"},
    # its members' verbs carry their own outputs in the plan
    "batch": set(),
}
# read and written (resume state), so neither an input nor an output flag
READ_WRITE = {("sim-run", "--journal")}
WRITES = re.compile(r"\b(to write|write|writes)\b")


def _verbs() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _options(p: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in p._actions if a.option_strings and a.dest != "help"]


def test_every_verb_has_a_description_and_every_argument_help() -> None:
    verbs = _verbs()
    assert set(verbs) == set(OUTPUTS), "a verb was added or removed: update OUTPUTS"
    for name, p in verbs.items():
        assert p.description and len(p.description) > 40, f"{name}: no description"
        for a in _options(p):
            assert a.help and a.help.strip(), f"{name} {a.option_strings}: no help"


def test_output_flags_follow_one_scheme() -> None:
    for name, p in _verbs().items():
        flags = {a.option_strings[0]: a for a in _options(p)}
        outputs = {f for f in flags if f.startswith("--output")}
        assert outputs == OUTPUTS[name], name
        for flag, a in flags.items():
            if (name, flag) in READ_WRITE:
                continue
            says_writes = bool(WRITES.search(a.help or ""))
            assert says_writes == (flag in outputs), (
                f"{name} {flag}: help {'says' if says_writes else 'does not say'} it writes")
            assert len(a.option_strings) == 1, f"{name} {flag}: one spelling per option"


def test_choices_come_from_the_registry_and_metavars_name_their_flag() -> None:
    """A new strategy is a valid ``--strategy`` and named in its help without editing
    the CLI; the usage line shows each option under its own name."""
    from simcalib.metamodel.strategies.registry import names

    verbs = _verbs()
    strat = next(a for a in _options(verbs["cal-run"]) if a.option_strings == ["--strategy"])
    assert list(strat.choices) == names()
    assert all(n in strat.help for n in names()) and "gpbo" in strat.help
    case = next(a for a in _options(verbs["ms-fit"]) if a.option_strings == ["--case"])
    assert set(case.choices) == {"analytic", "hardening/step1", "hardening/step2"}
    for name, p in verbs.items():
        for a in _options(p):
            flag = a.option_strings[0].lstrip("-").replace("-", "_")
            if a.nargs == 0 or a.metavar is not None or a.choices:
                continue
            assert a.dest == flag, f"{name} {a.option_strings[0]}: shown as {a.dest.upper()}"


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == \
        f"simcalib {importlib.metadata.version('simcalib')}"


def test_help_lists_every_verb_once_under_its_stage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    headings = [title for _, title in cli.STAGES]
    for name in _verbs():
        prefix = name.split("-", 1)[0]
        assert prefix in dict(cli.STAGES), f"{name}: prefix {prefix!r} is no stage"
        lines = [ln for ln in out.splitlines() if ln.split()[:1] == [name]]
        assert len(lines) == 1, f"{name} listed {len(lines)} times"
        # the verb sits under its own stage's heading
        before = out[: out.index(lines[0])]
        last = max(headings, key=lambda h: before.rfind(h + ":"))
        assert last == dict(cli.STAGES)[prefix], name


def _shell_commands() -> list[tuple[str, str, list[str]]]:
    """(rule file, verb, flags) of every ``python -m simcalib <verb>`` shell string of the rules."""
    out = []
    for smk in sorted((REPO / "workflow" / "rules").glob("*.smk")):
        text = smk.read_text()
        for block in re.findall(r"shell:\s*\n((?:[ \t]*\"[^\"\n]*\"[ \t]*\n)+)", text):
            cmd = "".join(re.findall(r"\"([^\"\n]*)\"", block))
            m = re.match(r"python -m simcalib ([a-z-]+)", cmd)
            if m:
                out.append((smk.name, m.group(1), re.findall(r"(--[a-z][a-z0-9-]*)", cmd)))
    return out


def test_rules_call_only_existing_flags() -> None:
    verbs = _verbs()
    cmds = _shell_commands()
    assert len(cmds) >= 25
    for smk, verb, flags in cmds:
        assert verb in verbs, f"{smk}: unknown verb {verb}"
        known = {s for a in _options(verbs[verb]) for s in a.option_strings}
        assert set(flags) <= known, f"{smk} {verb}: unknown {set(flags) - known}"
        # every required output of the verb is passed by its rule
        required = {a.option_strings[0] for a in _options(verbs[verb]) if a.required}
        assert required - {"--params", "--config"} <= set(flags) | {"--seed"}, (smk, verb)


# ------------------------------------------------------------------- --config route
def test_ms_data_with_config_equals_the_rules_params(tmp_path: Path) -> None:
    from simcalib.multisource.params import data_params

    cfg = load_config(TINY)
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["ms-data", "--case", "analytic", "--config", str(TINY),
                 "--output-data", str(a / "data.csv"), "--output-spec", str(a / "spec.json"),
                 "--output-theta-mse", str(a / "mse.csv")]) == 0
    assert main(["ms-data", "--case", "analytic", "--params",
                 json.dumps(data_params(cfg, "analytic")), "--seed", str(cfg["seed"]),
                 "--output-data", str(b / "data.csv"), "--output-spec", str(b / "spec.json"),
                 "--output-theta-mse", str(b / "mse.csv")]) == 0
    da, db = pd.read_csv(a / "data.csv"), pd.read_csv(b / "data.csv")
    # the tiny config's sizes, not the schema defaults
    assert (da["source"] == "s0").sum() >= 10
    pd.testing.assert_frame_equal(da, db)
    pd.testing.assert_frame_equal(pd.read_csv(a / "mse.csv"), pd.read_csv(b / "mse.csv"))
    assert (a / "spec.json").read_text() == (b / "spec.json").read_text()


def test_ms_fit_config_builds_the_step_params() -> None:
    from simcalib.commands.multisource import _ms_params

    cfg = load_config(TINY)
    args = build_parser().parse_args(
        ["ms-fit", "--case", "hardening/step1", "--scenario", "all", "--config", str(TINY),
         "--data", "d.csv", "--spec", "s.json", "--theta-mse", "m.csv", "--output-dir", "o"])
    p = _ms_params(args, "fit")
    assert p["fit"]["epochs"] == cfg["multisource"]["fit"]["epochs"] == 20
    assert p["sources"] == cfg["multisource"]["hardening"]["scenarios"]["all"]
    assert p["max_input"] == {"u": 0.4} and set(p["theta"]) == {"s1", "s2"}
    args.case = "hardening/step3"
    with pytest.raises(Exception, match="step3"):
        _ms_params(args, "fit")


def test_bayes_with_config_equals_the_rules_params(tmp_path: Path) -> None:
    from simcalib.bayes.params import data_params, run_params

    cfg = load_config(TINY)
    d = tmp_path
    assert main(["bayes-data", "--config", str(TINY), "--setting", "two_mass", "--rep", "0",
                 "--output-obs", str(d / "obs.csv"), "--output-dense", str(d / "dense.csv"),
                 "--output-truth", str(d / "truth.json")]) == 0
    assert main(["bayes-data", "--params", json.dumps(data_params(cfg, "two_mass")),
                 "--seed", str(cfg["seed"]), "--setting", "two_mass", "--rep", "0",
                 "--output-obs", str(d / "obs2.csv"), "--output-dense", str(d / "dense2.csv"),
                 "--output-truth", str(d / "truth2.json")]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(d / "obs.csv"), pd.read_csv(d / "obs2.csv"))
    runs = {}
    for how, src in (("config", ["--config", str(TINY)]),
                     ("params", ["--params", json.dumps(run_params(cfg, "two_mass")),
                                 "--seed", str(cfg["seed"])])):
        assert main(["bayes-run", *src, "--setting", "two_mass", "--method", "koh",
                     "--data", str(d / "obs.csv"), "--output-posterior", str(d / f"{how}.nc"),
                     "--output-summary", str(d / f"{how}.csv"),
                     "--output-run-info", str(d / f"{how}.json")]) == 0
        runs[how] = pd.read_csv(d / f"{how}.csv")
    pd.testing.assert_frame_equal(runs["config"], runs["params"])
    info = json.loads((d / "config.json").read_text())
    # the tiny config's sampler, not the schema's defaults
    assert (info["iterations"], info["burn_in"]) == (200, 100)


def test_config_and_params_are_exclusive_and_one_is_needed(
        capsys: pytest.CaptureFixture[str]) -> None:
    base = ["bayes-data", "--setting", "two_mass", "--rep", "0", "--output-obs", "o",
            "--output-dense", "d", "--output-truth", "t"]
    for extra in ([], ["--params", "{}", "--config", str(TINY)]):
        with pytest.raises(SystemExit) as exc:
            main([*base, *extra])
        assert exc.value.code == 2
    assert "--params" in capsys.readouterr().err
    # --params without --seed: a clear error naming --seed
    assert main([*base, "--params", "{}"]) == 2
    assert "--seed" in capsys.readouterr().err


def test_bayes_data_on_a_real_data_setting_is_a_clear_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    params = {"options": {"data": "x.csv"}, "refine": 2}
    assert main(["bayes-data", "--params", json.dumps(params), "--seed", "1", "--setting",
                 "two_mass", "--rep", "0", "--output-obs", str(tmp_path / "o.csv"),
                 "--output-dense", str(tmp_path / "d.csv"),
                 "--output-truth", str(tmp_path / "t.json")]) == 2
    assert "bayes.setting_options.two_mass.data" in capsys.readouterr().err
    assert not (tmp_path / "o.csv").exists()


def test_abbreviated_flags_are_errors(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["bayes-metrics", "--setting", "s", "--truth", "t.json", "--summary", "s.csv",
              "--output-m", "m.csv", "--output-metrics-outputs", "o.csv",
              "--output-per-rep", "p.csv"])
    assert exc.value.code == 2
