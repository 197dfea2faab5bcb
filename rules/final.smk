# Final measurements a study adds to a trained run whose store lacks them, read from that store (no
# retraining); the id hashes the run id and the items. Resources as the run's training job.
import ntkpipe.jobs
from ntkpipe.resources import run_memory_mb, runtime_minutes


rule final:
    input:
        lambda wc: WIRING.final_inputs[wc.final_id],
    output:
        directory(f"{RESULTS}/finals/{{final_id}}.zarr"),
    log:
        f"{RESULTS}/logs/finals/{{final_id}}.log",
    resources:
        mem_mb=lambda wc: run_memory_mb(INDEX.finals[wc.final_id].run.spec),
        runtime=runtime_minutes("final", config),
        gpu=GPUS,
    run:
        ntkpipe.jobs.logged(log[0], ntkpipe.jobs.final_run, INDEX.finals[wildcards.final_id], output[0])
