"""The read-me-first page (``results/report/summary.html`` and ``summary.md``): what to
trust first, then the answer of every study and Bayes setting, then their detail tables.

Order, so the page answers before it explains:

1. **What to trust**: every flag of :func:`simcalib.report.flags.collect` (the same list
   the console prints at the end of a run), one red box each, or a green "no result
   flagged";
2. per metamodel study, the answer (:func:`simcalib.report.answer.study_answer`:
   calibrated inputs per target, observed vs re-simulated figure, posterior
   intervals), then its metamodel, OP and strategy tables;
3. per Bayes setting, the posterior per method with NOT CONVERGED boxes
   (:func:`simcalib.report.answer.bayes_answer`), then the replication tables;
4. multi-source calibration (iPro-NC).

Section titles name the method; a paper appears only where the study is the paper's
own (its numbers stand beside ours), never on a user's study.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from simcalib.report import answer
from simcalib.report import flags as fl
from simcalib.report import sections as sec
from simcalib.report.sections import Block, Section

INTRO = (
    "Read this page first. It opens with what to trust (every result that may be wrong, "
    "the same list the console printed at the end of the run), then gives each study's "
    "answer: the calibrated inputs per target, the observed outputs beside the simulator "
    "re-run at those inputs and, where sampled, the posterior intervals; then each Bayes "
    "setting's posterior per method. The tables behind each answer follow it.",
    "Strategy names are the config's names (rs, op, stp, pts, adaptive, blackbox, gpbo). "
    "Actual error Δ = Σ_j |S_j(x) − ẑ_j| / s_j: each study states what s_j is (the "
    "metamodel's training sd of the output, or the observations' sd_ columns).",
)


def flag_blocks(flags: Sequence[fl.Flag]) -> list[Block]:
    """One box per flag with the file to open, or the green "no result flagged"."""
    if not flags:
        return ["**No result flagged**: no metamodel below metamodel.min_r2, no unproven "
                "MILP, no unconverged chain, no failed target and no failed-run share above "
                "report.flag_failed_share."]
    out: list[Block] = [f"**FLAG** {f.subject}: **{f.what}**: {f.message} (open `{f.file}`)"
                        for f in flags]
    out.append(fl.count_line(len(flags)) + ".")
    return out


def study_title(study: str) -> str:
    """"Metamodel calibration: study `x`", naming paper 1 only for its own study."""
    paper = " (paper 1's study, its numbers beside ours)" if study.startswith("epidemic") else ""
    return f"Metamodel calibration: study `{study}`{paper}"


def bayes_title(results: Path, setting: str) -> str:
    params = sec.read_if_exists(results / "bayes" / setting / "table_params.csv")
    paper = (params is not None and any(str(c).startswith("paper_") for c in params.columns))
    data = "your data" if answer.bayes_observed(results, setting) else "simulated data"
    return (f"Bayesian calibration, KOH vs MOS: setting `{setting}` ({data}"
            + ("; paper 3's setting, its numbers beside ours" if paper else "") + ")")


def sections(results: Path, studies: Sequence[str] = (), bayes: Sequence[str] = (),
             multisource: bool = False, failed_share: float = 0.1,
             figures: Path | None = None) -> list[Section]:
    """The page's sections, in reading order; a study without results is left out."""
    flags = fl.collect(results, studies, bayes, failed_share)
    out: list[Section] = [("What to trust", flag_blocks(flags))]
    for study in studies:
        # the study's flags open its section, as prominent as the Bayes NOT CONVERGED
        # boxes (the posterior's go with its table)
        own = [f"**FLAG** **{f.what}**: {f.message} (open `{f.file}`)" for f in flags
               if f.subject == study and "posterior" not in f.what]
        blocks = own + answer.study_answer(results, study, figures)
        detail = sec.paper1_section(results, study)
        if blocks or detail:
            out.append((study_title(study), blocks + detail))
    for setting in bayes:
        detail = sec.paper3_section(results, [setting])
        if answer.bayes_observed(results, setting):   # the answer's table holds these
            for b in detail:
                if isinstance(b, sec.Table):
                    b.collapsed = True
        blocks = answer.bayes_answer(results, setting) + detail
        if blocks:
            out.append((bayes_title(results, setting), blocks))
    if multisource:
        blocks = sec.paper2_section(results)
        if blocks:
            out.append(("Multi-source calibration, iPro-NC (paper 2's examples)", blocks))
    return out
