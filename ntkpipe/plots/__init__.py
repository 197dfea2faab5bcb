"""Figures of a study dataset, one function per figure kind."""

from ntkpipe.plots.images import plot_images
from ntkpipe.plots.matrix import plot_matrix
from ntkpipe.plots.scatter import plot_scatter
from ntkpipe.plots.sweep import plot_sweep
from ntkpipe.plots.time_series import plot_time_series

PLOTTERS = {"images": plot_images, "matrix": plot_matrix, "scatter": plot_scatter, "sweep": plot_sweep,
            "time_series": plot_time_series}

__all__ = ["PLOTTERS", "plot_images", "plot_matrix", "plot_scatter", "plot_sweep", "plot_time_series"]
