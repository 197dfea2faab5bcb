# One training run per job; its id is the hash of its resolved config, so the path is its identity.
import ntkpipe.jobs


rule train:
    input:
        lambda wc: list(INDEX.runs[wc.run_id].stage_paths.values()),
    output:
        directory(f"{RESULTS}/runs/{{run_id}}.zarr"),
    run:
        ntkpipe.jobs.train_run(INDEX.runs[wildcards.run_id], output[0])
