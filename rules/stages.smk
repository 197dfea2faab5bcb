# Stage jobs (NTK Grams, eigendecompositions, NADs, pretrained networks): one rule for every kind
# in ntkpipe.stages.STAGES; a stage's inputs are the stores of the stages it reads.
import ntkpipe.jobs


rule stage:
    input:
        lambda wc: list(INDEX.stages[wc.stage_id].inputs.values()),
    output:
        directory(f"{RESULTS}/stages/{{compute}}/{{stage_id}}.zarr"),
    run:
        ntkpipe.jobs.run_stage(INDEX.stages[wildcards.stage_id], output[0])
