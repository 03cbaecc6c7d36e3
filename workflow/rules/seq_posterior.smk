# sequential's own posterior (docs/posterior.md): from the strategy's records and every
# one of its runs, an ensemble refitted on those runs and a posterior over the tunable
# inputs of every target, beside the design posterior's files.  Downstream of the
# strategy's job: the runs are never re-simulated, and a change of the posterior's
# settings reruns only this job.


include: "helpers/seq_posterior.smk"


rule cal_seq_posterior:
    input:
        records="results/{study}/{caldir}/sequential.csv",
        runs="results/{study}/{caldir}/runs/sequential.csv",
        targets=seq_posterior_targets,
    output:
        summary=figure(
            "results/{study}/{caldir}/sequential_posterior/posterior_summary.csv",
            "cal_seq_posterior",
            "Posterior",
            "{study}",
        ),
        intervals=figure(
            "results/{study}/{caldir}/sequential_posterior/intervals.png",
            "cal_seq_posterior",
            "Posterior",
            "{study}",
        ),
        answer="results/{study}/{caldir}/sequential_posterior/answer.csv",
        meta="results/{study}/{caldir}/sequential_posterior/posterior.json",
        targets=directory("results/{study}/{caldir}/sequential_posterior/targets"),
    log:
        "results/logs/{study}/{caldir}/cal_seq_posterior.log",
    benchmark:
        "results/benchmarks/rules/{study}/{caldir}/cal_seq_posterior.tsv"
    priority: PRIORITY["calibrate"]
    conda:
        "../../envs/simcalib.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        cfg=seq_posterior_params,
        seed=config["seed"],
        out=lambda w, output: os.path.dirname(output.answer),
    shell:
        "python -m simcalib cal-seq-posterior --study {wildcards.study} --params {params.cfg:q} "
        "--seed {params.seed} --runs {input.runs} --records {input.records} "
        "--targets {input.targets} --output-dir {params.out} > {log} 2>&1"


for _s in seq_posterior_studies():
    ALL_TARGETS += [
        f"results/{_s}/calibration/sequential_posterior/posterior_summary.csv",
        f"results/{_s}/calibration/sequential_posterior/intervals.png",
        f"results/{_s}/calibration/sequential_posterior/answer.csv",
    ]
