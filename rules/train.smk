# One training run per job; its id is the hash of its resolved config, so the path is its identity.
# Memory is estimated from the run's shapes (ntkpipe.resources); `--config gpus=1` requests a GPU.
# Runs to be made that differ only in mapped leaves (seed, σ, lr, label index) are trained
# together by one `train_pack_<pack id>` job (ntkpipe.study.packs; `--config pack=1`, by default only
# with `gpus=1`: ntkpipe.workflow.packing);
# the `train` rule makes every other run. Both rules have the same body, inputs and no params, so
# Snakemake (which records them per output) does not rerun a packed run when `train` makes it later.
from pathlib import Path

import ntkpipe.jobs
from ntkpipe.resources import pack_memory_mb, run_memory_mb, runtime_minutes
from ntkpipe.study.packs import packs_by_run, plan_packs, unpacked_pattern
from ntkpipe.workflow import packing

PACKS = packs_by_run(plan_packs(INDEX.runs.values()) if packing(config) else {})


def training(output):
    """The job body that writes ``output``: its run's training, or its pack's."""
    run_id = Path(output[0]).stem
    if run_id in PACKS:
        return ntkpipe.jobs.train_pack, PACKS[run_id].runs, list(output)
    return ntkpipe.jobs.train_run, INDEX.runs[run_id], output[0]


def training_rules():
    """(name, input, output, log, wildcard constraints, mem_mb) of `train` and of each pack's rule."""
    yield ("train", lambda wc: WIRING.run_inputs[wc.run_id],
           [directory(f"{RESULTS}/runs/{{run_id}}.zarr")], f"{RESULTS}/logs/train/{{run_id}}.log",
           {"run_id": unpacked_pattern(set(PACKS))}, lambda wc: run_memory_mb(INDEX.runs[wc.run_id].spec))
    for pack in {pack.id: pack for pack in PACKS.values()}.values():
        yield (f"train_pack_{pack.id}", list(pack.runs[0].stage_paths.values()),
               [directory(str(job.path)) for job in pack.runs], f"{RESULTS}/logs/train/pack-{pack.id}.log",
               {}, pack_memory_mb([job.spec for job in pack.runs]))


# One loop defines both, so that their bodies are one source line (Snakemake's code trigger compares it).
for rule_name, rule_input, rule_output, rule_log, constraints, mem in training_rules():

    rule:
        name:
            rule_name
        input:
            rule_input,
        output:
            *rule_output,
        log:
            rule_log,
        wildcard_constraints:
            **constraints,
        resources:
            mem_mb=mem,
            runtime=runtime_minutes("train", config),
            gpu=GPUS,
        run:
            ntkpipe.jobs.logged(log[0], *training(output))
