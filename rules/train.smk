# One training run per job; its id is the hash of its resolved config, so the path is its identity.
# Memory is estimated from the run's shapes (ntkpipe.resources); `--config gpus=1` requests a GPU.
import ntkpipe.jobs
from ntkpipe.resources import run_memory_mb, runtime_minutes


rule train:
    input:
        lambda wc: list(INDEX.runs[wc.run_id].stage_paths.values()),
    output:
        directory(f"{RESULTS}/runs/{{run_id}}.zarr"),
    log:
        f"{RESULTS}/logs/train/{{run_id}}.log",
    resources:
        mem_mb=lambda wc: run_memory_mb(INDEX.runs[wc.run_id].spec),
        runtime=runtime_minutes("train", config),
        gpu=GPUS,
    run:
        ntkpipe.jobs.logged(log[0], ntkpipe.jobs.train_run, INDEX.runs[wildcards.run_id], output[0])
