# Stage jobs (NTK Grams, eigendecompositions, NADs, pretrained networks): one rule for every kind
# in ntkpipe.stages.STAGES; a stage's inputs are the stores of the stages it reads.
import ntkpipe.jobs
from ntkpipe.resources import runtime_minutes, stage_memory_mb


rule stage:
    input:
        lambda wc: WIRING.stage_inputs[wc.stage_id],
    output:
        directory(f"{RESULTS}/stages/{{compute}}/{{stage_id}}.zarr"),
    log:
        f"{RESULTS}/logs/stages/{{compute}}/{{stage_id}}.log",
    resources:
        mem_mb=lambda wc: stage_memory_mb(INDEX.stages[wc.stage_id].run),
        runtime=runtime_minutes("stage", config),
        gpu=GPUS,
    run:
        ntkpipe.jobs.logged(log[0], ntkpipe.jobs.run_stage, INDEX.stages[wildcards.stage_id], output[0])
