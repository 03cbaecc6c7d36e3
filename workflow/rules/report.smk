# The report: results/report/summary.md (every headline table beside the papers'
# numbers, and the runtime table from the rules' benchmark files).  Included last,
# so it depends on every final target of the other stages.  The HTML report of every
# figure: `snakemake --report results/report.html` (figures are registered in their
# own rules with report(..., category="Paper N")).

REPORT_INPUTS = list(ALL_TARGETS)


localrules:
    report_summary,


rule report_summary:
    input:
        REPORT_INPUTS,
    output:
        summary="results/report/summary.md",
        runtime="results/report/runtime.csv",
    params:
        studies=" ".join(
            s for s in STUDIES if config["studies"][s].get("metamodel", {}).get("enabled")
        ),
        bayes=" ".join(config.get("bayes", {}).get("settings", []) or []),
    log:
        "results/logs/report/summary.log",
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        "simcalib report-summary --results results --studies {params.studies} "
        "--bayes-settings {params.bayes} --multisource "
        "--output {output.summary} --output-runtime {output.runtime} > {log} 2>&1"


ALL_TARGETS += ["results/report/summary.md"]
