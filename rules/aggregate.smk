# Run stores -> the study dataset (sweep axes as dimensions, summaries as variables).
import ntkpipe.jobs
from ntkpipe.spec.identity import canonical_json


rule aggregate:
    input:
        lambda wc: [job.path for job in INDEX.plans[wc.tag].runs],
    output:
        directory(f"{RESULTS}/{{tag}}/{{tag}}.zarr"),
    params:
        config=lambda wc: canonical_json(INDEX.plans[wc.tag].aggregate_config()),
    run:
        ntkpipe.jobs.aggregate_study(INDEX.plans[wildcards.tag], output[0])
