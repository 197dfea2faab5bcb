"""The jobs of the workflow DAG; each Snakemake rule body is one call into this package."""

from ntkpipe.jobs.aggregate import aggregate_study
from ntkpipe.jobs.plot import plot_figure
from ntkpipe.jobs.stages import compute_eigendecomposition, compute_ntk_gram
from ntkpipe.jobs.train_run import train_run

__all__ = ["aggregate_study", "compute_eigendecomposition", "compute_ntk_gram", "plot_figure", "train_run"]
