# One compact table per study (its scalar variables averaged over seeds), for `snakemake --report`.
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
