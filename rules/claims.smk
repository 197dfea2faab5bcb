# A study's claims checked against its dataset: the claims store and table (ntkpipe.jobs.claims). Claims enter no
# run id and not the aggregation's config: editing a claim reruns this job (and the index) only. A failing claim
# is printed in red, never an error.
import ntkpipe.jobs
from ntkpipe.resources import runtime_minutes


rule claims:
    input:
        lambda wc: WIRING.studies[wc.tag].dataset,
    output:
        store=directory(f"{RESULTS}/{{tag}}/{{tag}}_claims.zarr"),
        table=report(f"{RESULTS}/{{tag}}/{{tag}}_claims.csv", caption="../report/caption.rst", category="{tag}",
                     subcategory="claims", labels={"item": "claims"}),
    log:
        f"{RESULTS}/logs/claims/{{tag}}.log",
    params:
        config=lambda wc: WIRING.studies[wc.tag].claims_config,
        caption=lambda wc: WIRING.studies[wc.tag].claims_caption,
    resources:
        mem_mb=1024,
        runtime=runtime_minutes("plot", config),
    run:
        ntkpipe.jobs.logged(log[0], ntkpipe.jobs.study_claims, INDEX.plans[wildcards.tag], output.store, output.table)
