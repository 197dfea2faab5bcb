# Stage jobs: the init-NTK Gram of a run's network over train ∪ test, and its eigendecomposition.
import ntkpipe.jobs


rule ntk_gram:
    output:
        directory(f"{RESULTS}/stages/ntk_gram/{{stage_id}}.zarr"),
    run:
        ntkpipe.jobs.compute_ntk_gram(INDEX.stages[wildcards.stage_id], output[0])


rule eigendecomposition:
    input:
        lambda wc: INDEX.stages[wc.stage_id].input_path,
    output:
        directory(f"{RESULTS}/stages/eigendecomposition/{{stage_id}}.zarr"),
    run:
        ntkpipe.jobs.compute_eigendecomposition(INDEX.stages[wildcards.stage_id], output[0])
