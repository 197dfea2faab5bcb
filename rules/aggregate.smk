# Run stores and their final stores -> the study dataset (sweep axes as dimensions, summaries as variables).
import ntkpipe.jobs
from ntkpipe.resources import runtime_minutes


rule aggregate:
    input:
        lambda wc: WIRING.studies[wc.tag].runs,
        finals=lambda wc: WIRING.studies[wc.tag].finals,
    output:
        directory(f"{RESULTS}/{{tag}}/{{tag}}.zarr"),
    log:
        f"{RESULTS}/logs/aggregate/{{tag}}.log",
    params:
        config=lambda wc: WIRING.studies[wc.tag].aggregate_config,
    resources:
        mem_mb=2048,
        runtime=runtime_minutes("aggregate", config),
    run:
        ntkpipe.jobs.logged(log[0], ntkpipe.jobs.aggregate_study, INDEX.plans[wildcards.tag], output[0])
