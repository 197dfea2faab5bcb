# ntkpipe workflow: every study in specs/ -> training, kernel and eigendecomposition jobs -> one
# zarr dataset, figures and checked claims per study. The Snakefile only wires; the work happens in ntkpipe.jobs.
#
#   snakemake --cores 2                                   all studies, default variant
#   snakemake --cores 2 --config variant=paper            the larger variant of each study
#   snakemake --cores 2 results/depth_scaling/depth_scaling.zarr   one study
#   snakemake --cores 2 --config studies=depth_scaling    idem, with its figures
#   snakemake --profile profiles/slurm                    on a Slurm cluster (one job per GPU)
from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version

from ntkpipe.compilation_cache import flush as write_compilation_cache
from ntkpipe.errors import ConfigError, SpecError
from ntkpipe.jobs.worker_processes import use_worker_processes
from ntkpipe.scheduler_wakeups import one_pending_wakeup
from ntkpipe.train.stop import unwatch as unwatch_signals
from ntkpipe.train.stop import watch as watch_signals
from ntkpipe.workflow import build_index, check_config, check_results_writable, configure_jax, limit_blas_threads

min_version("9.0")

RESULTS = config.get("results", "results")
GPUS = config.get("gpus", 0)  # GPUs each training and kernel job requests (a cluster profile sets it)
try:  # --config max_runs=N: the most runs one study may have (default 10,000, or $NTKPIPE_MAX_RUNS)
    check_config(config)  # every key known (ntkpipe.workflow.CONFIG_KEYS), its value usable
    INDEX = build_index(config.get("specs", "specs"), RESULTS, config.get("variant", "default"),
                        config.get("studies"), config.get("max_runs"), memory_check=bool(config.get("memory_check", 1)),
                        cache=True)
    check_results_writable(INDEX)
    WIRING = INDEX.wiring  # every job's inputs and params, as plain data (ntkpipe.wiring)
except (SpecError, ConfigError) as err:
    raise WorkflowError(str(err)) from None
if workflow.is_main_process:  # not in job processes (cluster profiles parse this file in every job)
    INDEX.set_aside_invalid()  # a store is done when it verifies; an invalid one is made again
configure_jax(RESULTS)  # planning ran no JAX computation; every job after this does
# SIGTERM and SIGINT stop training jobs, which run in threads, at their next step with their state saved
watch_signals()
# one BLAS thread per job where jobs run as threads of this process; a job process the CPUs it was given
limit_blas_threads(1 if workflow.is_main_process else None)
# figures, aggregation, claims and tables (they hold the GIL) in worker processes where jobs are threads
use_worker_processes((workflow.resource_settings.cores or 0) if workflow.is_main_process else 0)
# Snakemake's scheduler with one timed wake-up pending, not a new chain of them per job (ntkpipe.scheduler_wakeups)
one_pending_wakeup()


wildcard_constraints:
    run_id="[0-9a-f]{16}",
    stage_id="[0-9a-f]{16}",
    final_id="[0-9a-f]{16}",
    compute="[a-z_]+",
    tag="[a-z][a-z0-9_]*(-[a-z0-9_]+)?",
    figure="[A-Za-z0-9_]+",


rule all:
    default_target: True
    input:
        INDEX.targets(),


onsuccess:
    unwatch_signals()
    use_worker_processes(0)  # later calls in this process (an API caller's) run in their thread
    write_compilation_cache()  # the entries compiled by job threads (ntkpipe.compilation_cache)


onerror:
    unwatch_signals()
    use_worker_processes(0)
    write_compilation_cache()


include: "rules/stages.smk"
include: "rules/train.smk"
include: "rules/final.smk"
include: "rules/aggregate.smk"
include: "rules/plot.smk"
include: "rules/table.smk"
include: "rules/claims.smk"
include: "rules/index.smk"
