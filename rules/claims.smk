# A study's claims checked against its dataset: the claims table (ntkpipe.jobs.claims). The aggregation writes the
# verdicts into the study dataset (claim_*); claims enter no run id, so editing a claim re-aggregates, never
# retrains. A failing claim is printed in red, never an error.
import ntkpipe.jobs
from ntkpipe.resources import runtime_minutes


rule claims:
    input:
        lambda wc: WIRING.studies[wc.tag].dataset,
    output:
        report(f"{RESULTS}/{{tag}}/{{tag}}_claims.csv", caption="../report/caption.rst", category="{tag}",
               subcategory="claims", labels={"item": "claims"}),
    log:
        f"{RESULTS}/logs/claims/{{tag}}.log",
    params:
        caption=lambda wc: WIRING.studies[wc.tag].claims_caption,
    resources:
        mem_mb=1024,
        runtime=runtime_minutes("plot", config),
    run:
        ntkpipe.jobs.logged(log[0], ntkpipe.jobs.study_claims, INDEX.plans[wildcards.tag], output[0])
