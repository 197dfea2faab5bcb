"""The final job: final measurements a study adds to a trained run, computed from the run's store.

The run's inputs (data, initial model, stages) are rebuilt as its training job built them, and its
trajectory (checkpoints, series, final model from the saved parameters) is read from its store, so
every value equals the one the training job would have computed.
"""

from __future__ import annotations

import time
from pathlib import Path

from ntkpipe.errors import ResultError
from ntkpipe.jobs.describe import describe
from ntkpipe.jobs.measured import checkpoint_variables, final_values, measured_dataset
from ntkpipe.lang.model_kinds import MODEL_KINDS
from ntkpipe.stages import run_context
from ntkpipe.store import read_store, write_store
from ntkpipe.study.plan import FinalJob
from ntkpipe.train.final_state import PARAMS, stored_trajectory


def final_run(job: FinalJob, out: str | Path) -> Path:
    """Compute ``job.items`` of the run ``job.run`` from its store and write them with ``seconds_final``."""
    tic = time.perf_counter()
    spec = job.run.spec
    store = read_store(job.run.path, expect_id=job.run.id).load()
    if PARAMS not in store and not MODEL_KINDS[spec.model.kind].kernel:
        raise ResultError(f"{job.run.path}: holds no final parameters ({PARAMS}), so final measurements cannot be "
                          "added to it; delete it and rerun (its training job computes them)")
    run = run_context(spec, job.run.stage_paths)
    traj = stored_trajectory(store, checkpoint_variables(spec), run.model0, run.dtype)
    ds = measured_dataset(final_values(run, traj, job.items), traj)
    ds["seconds_final"] = time.perf_counter() - tic
    return write_store(describe(ds), out, config=job.config, store_id=job.id)
