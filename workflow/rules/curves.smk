# What users of a curve study look at (issue 42): per strategy of a study that declares
# series, the observed curve of every target beside the answer's curve and the band of
# fresh re-runs there (the re-scoring seeds; one run on a deterministic simulator), and
# the weighted L1 misfit per point and series: results/<study>/curves/<strategy>.csv
# (long) and .png (one panel per target and series); the study's extra target sets
# (calibration.extra_targets, their extra_strategies) the same under
# results/<study>/curves/targets_<name>/.  The read-me-first page shows the
# recommended strategy's figure and the misfit per series in its table.  Downstream of
# the strategy's records: its runs are never repeated, only the answer is re-run.


include: "helpers/curves.smk"


rule cal_curves:
    input:
        unpack(curves_inputs),
    output:
        table=figure(
            "results/{study}/{curvedir}/{strategy}.csv", "cal_curves", "Paper 1", "{study}"
        ),
        figure=figure(
            "results/{study}/{curvedir}/{strategy}.png", "cal_curves", "Paper 1", "{study}"
        ),
    log:
        "results/logs/{study}/{curvedir}/cal_curves_{strategy}.log",
    benchmark:
        "results/benchmarks/rules/{study}/{curvedir}/cal_curves_{strategy}.tsv"
    wildcard_constraints:
        curvedir=CURVE_DIR,
    priority: PRIORITY["calibrate"]
    conda:
        "../../envs/simcalib.yaml"
    threads: cal_threads
    resources:
        mem_mb=2000,
        runtime=120,
    params:
        cfg=curves_params,
        seed=config["seed"],
        replicates=curves_replicates,
        band=" ".join(str(b) for b in CURVE_BAND),
        panels=CURVE_PANELS,
        extra=curves_extra_args,
        tset=curves_target_set,
    shell:
        "python -m simcalib cal-curves --study {wildcards.study} "
        "--params {params.cfg:q} --seed {params.seed} --strategy {wildcards.strategy} "
        "--target-set {params.tset} "
        "--records {input.records} --runs {input.runs} --targets {input.targets} "
        "{params.extra} --replicates {params.replicates} --band {params.band} "
        "--max-panels {params.panels} --threads {threads} "
        "--output {output.table} --output-figure {output.figure} > {log} 2>&1"


for _s in curve_studies():
    ALL_TARGETS += curve_targets(_s)
