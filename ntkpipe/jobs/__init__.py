"""The jobs of the workflow DAG; each Snakemake rule body is one call into this package.

Each job is imported when first used (a rule body runs), so that parsing the Snakefile does not
import the training and measurement library."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ntkpipe.lazy_names import lazy_getattr

if TYPE_CHECKING:
    from ntkpipe.jobs.aggregate import aggregate_study
    from ntkpipe.jobs.claims import study_claims
    from ntkpipe.jobs.final_measurements import final_run
    from ntkpipe.jobs.index import study_index_file
    from ntkpipe.jobs.log import logged
    from ntkpipe.jobs.pack_training import train_pack
    from ntkpipe.jobs.plot import plot_figure
    from ntkpipe.jobs.table import phase_table_file, study_table
    from ntkpipe.jobs.training import train_run
    from ntkpipe.stages import run_stage

_HOME = {"aggregate_study": "ntkpipe.jobs.aggregate", "final_run": "ntkpipe.jobs.final_measurements",
         "study_index_file": "ntkpipe.jobs.index", "logged": "ntkpipe.jobs.log",
         "plot_figure": "ntkpipe.jobs.plot", "study_claims": "ntkpipe.jobs.claims", "study_table": "ntkpipe.jobs.table", "phase_table_file": "ntkpipe.jobs.table", "train_pack": "ntkpipe.jobs.pack_training",
         "train_run": "ntkpipe.jobs.training", "run_stage": "ntkpipe.stages"}

__all__ = ["aggregate_study", "final_run", "logged", "phase_table_file", "plot_figure", "run_stage", "study_claims", "study_index_file", "study_table", "train_pack",
           "train_run"]


__getattr__ = lazy_getattr(__name__, _HOME, globals())
