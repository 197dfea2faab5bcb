# Run stores and their final stores -> the study dataset (sweep axes as dimensions, summaries as variables).
import ntkpipe.jobs
from ntkpipe.resources import runtime_minutes
from ntkpipe.lang.identity import canonical_json


rule aggregate:
    input:
        lambda wc: [job.path for job in INDEX.plans[wc.tag].runs],
        finals=lambda wc: [job.path for job in INDEX.plans[wc.tag].finals.values()],
    output:
        directory(f"{RESULTS}/{{tag}}/{{tag}}.zarr"),
    log:
        f"{RESULTS}/logs/aggregate/{{tag}}.log",
    params:
        config=lambda wc: canonical_json(INDEX.plans[wc.tag].aggregate_config()),
    resources:
        mem_mb=2048,
        runtime=runtime_minutes("aggregate", config),
    run:
        ntkpipe.jobs.logged(log[0], ntkpipe.jobs.aggregate_study, INDEX.plans[wildcards.tag], output[0])
