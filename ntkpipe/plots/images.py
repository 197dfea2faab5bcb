"""``kind: images`` figures: stacks of images such as the NADs of a network (linearized-networks
Fig. 10). One row per value of ``rows``, the first ``count`` items left to right; with ``fourier``
each item gets a second row with |FFT| (centred, summed over channels), as the paper shows. A
row without a finite image (its runs diverged) says why."""

from __future__ import annotations

import numpy as np
import xarray as xr

from ntkpipe.labels import display_name
from ntkpipe.layout import axis_values, select, sub_grid
from ntkpipe.plots.finish import explain_empty, finish_figure
from ntkpipe.plots.style import hue_label, new_figure


def _first_run(var: xr.DataArray, keep: tuple[str, ...]) -> np.ndarray:
    """The stack of the first run (first finite entry along every other dimension)."""
    others = [d for d in var.dims if d not in keep]
    stacked = var.transpose(*others, *keep).values.reshape(-1, *[var.sizes[d] for d in keep])
    finite = np.flatnonzero(np.isfinite(stacked).all(axis=tuple(range(1, stacked.ndim))))
    return stacked[finite[0]] if len(finite) else np.full(stacked.shape[1:], np.nan)


def plot_images(ds: xr.Dataset, spec, title: str):
    ds = select(ds, spec.where)
    var = ds[spec.variable]
    item, *image_dims = var.dims[-4:]  # its own dims (item, row, column, channel) follow the sweep axes
    groups = axis_values(ds, spec.rows) if spec.rows else [None]
    count = min(spec.count, var.sizes[item])
    per_group = 2 if spec.fourier else 1
    fig, axes = new_figure(len(groups) * per_group, count, width=1.15, height=1.3)
    for g, value in enumerate(groups):
        sub = sub_grid(ds, {spec.rows: value} if spec.rows else None)[spec.variable]
        images = _first_run(sub, (item, *image_dims))[:count]
        for j, image in enumerate(images):
            plane = image.sum(-1) if image.shape[-1] > 1 else image[..., 0]
            panels = [(plane, "RdBu_r", True)]
            if spec.fourier:
                panels.append((np.abs(np.fft.fftshift(np.fft.fft2(image, axes=(0, 1)), axes=(0, 1))).sum(-1),
                               "magma", False))
            for k, (shown, cmap, symmetric) in enumerate(panels):
                ax = axes[g * per_group + k, j]
                limit = np.max(np.abs(shown), where=np.isfinite(shown), initial=0.0) or 1.0
                ax.imshow(shown, cmap=cmap, vmin=-limit if symmetric else 0.0, vmax=limit)
                ax.set_xticks([])
                ax.set_yticks([])
                if g * per_group + k == 0:
                    ax.set_title(f"{display_name(item)} {j + 1}", fontsize=8)
            if j == 0:
                label = hue_label(spec.rows, value) if spec.rows else ""
                axes[g * per_group, 0].set_ylabel(label, fontsize=8)
                if spec.fourier:
                    axes[g * per_group + 1, 0].set_ylabel("|FFT|", fontsize=8)
        if not np.isfinite(images).any():
            explain_empty(axes[g * per_group, 0], sub_grid(ds, {spec.rows: value} if spec.rows else None))
    return finish_figure(fig, title, fontsize=10)

