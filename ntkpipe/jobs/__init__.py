"""The jobs of the workflow DAG; each Snakemake rule body is one call into this package."""

from ntkpipe.jobs.aggregate import aggregate_study
from ntkpipe.jobs.final_run import final_run
from ntkpipe.jobs.index import study_index_file
from ntkpipe.jobs.log import logged
from ntkpipe.jobs.plot import plot_figure
from ntkpipe.jobs.table import study_table
from ntkpipe.jobs.train_pack import train_pack
from ntkpipe.jobs.train_run import train_run
from ntkpipe.stages import run_stage

__all__ = ["aggregate_study", "final_run", "logged", "plot_figure", "run_stage", "study_index_file", "study_table",
           "train_pack", "train_run"]
