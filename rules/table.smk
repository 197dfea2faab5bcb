# One compact table per study (its scalar variables averaged over seeds), for `snakemake --report`; a study with a
# measured_phase summary also gets its phase table (solvable-model Table 1: one row per task × scaling).
import ntkpipe.jobs
from ntkpipe.resources import runtime_minutes


rule table:
    input:
        lambda wc: WIRING.studies[wc.tag].dataset,
    output:
        report(f"{RESULTS}/{{tag}}/{{tag}}_summary.csv", caption="../report/caption.rst", category="{tag}",
               subcategory="table", labels={"item": "summary table"}),
    log:
        f"{RESULTS}/logs/table/{{tag}}.log",
    params:
        caption=lambda wc: WIRING.studies[wc.tag].table_caption,
    resources:
        mem_mb=2048,
        runtime=runtime_minutes("plot", config),
    run:
        ntkpipe.jobs.logged(log[0], ntkpipe.jobs.study_table, INDEX.plans[wildcards.tag], output[0])


rule phase_table:
    input:
        lambda wc: WIRING.studies[wc.tag].dataset,
    output:
        report(f"{RESULTS}/{{tag}}/{{tag}}_phases.csv", caption="../report/caption.rst", category="{tag}",
               subcategory="table", labels={"item": "phase table"}),
    log:
        f"{RESULTS}/logs/phase_table/{{tag}}.log",
    params:
        caption=lambda wc: "Phase table (solvable-model Table 1): per group, the predicted phase and exponent p, "
                           "the fitted exponent b ± s, the measured phase and whether they agree.",
    resources:
        mem_mb=2048,
        runtime=runtime_minutes("plot", config),
    run:
        ntkpipe.jobs.logged(log[0], ntkpipe.jobs.phase_table_file, INDEX.plans[wildcards.tag], output[0])
