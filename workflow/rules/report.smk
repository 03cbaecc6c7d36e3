# The report: results/report/summary.md (every headline table beside the papers'
# numbers, and the runtime table from the rules' benchmark files), the same tables as
# HTML pages for the Snakemake report (summary.html, the "read me first" page, and one
# page per paper under results/report/tables/), all from one `simcalib report-summary`.
# Included last, so it depends on every final target of the other stages.  The HTML
# report: `snakemake --report results/report.html` (figures are registered in their
# own rules with report(..., category="Paper N")).


include: "helpers/report.smk"


localrules:
    report_summary,


rule report_summary:
    input:
        REPORT_INPUTS,
    output:
        summary="results/report/summary.md",
        runtime="results/report/runtime.csv",
        html=figure("results/report/summary.html", "summary", "0 Read me first"),
        tables=report_table_pages(),
    log:
        "results/logs/report/summary.log",
    conda:
        "../../envs/simcalib.yaml"
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        studies=" ".join(REPORT_STUDIES),
        bayes=" ".join(REPORT_BAYES),
        multisource="--multisource" if REPORT_MS else "",
        tables=lambda w, output: os.path.join(os.path.dirname(output.html), "tables"),
        figures=lambda w, output: os.path.join(os.path.dirname(output.html), "figures"),
        failed_share=config["report"]["flag_failed_share"],
    shell:
        "python -m simcalib report-summary --results results --studies {params.studies} "
        "--bayes-settings {params.bayes} {params.multisource} "
        "--output {output.summary} --output-runtime {output.runtime} "
        "--output-html {output.html} --output-tables-dir {params.tables} "
        "--output-figures-dir {params.figures} --flag-failed-share {params.failed_share} "
        "> {log} 2>&1"


ALL_TARGETS += ["results/report/summary.md", "results/report/summary.html"]
