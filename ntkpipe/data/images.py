"""Image transforms applied when loading: resizing and conversion to one luminance channel."""

from __future__ import annotations

from typing import cast

import numpy as np

LUMINANCE = np.array([0.299, 0.587, 0.114])
"""ITU-R BT.601 weights of R, G, B."""


def resize(images: np.ndarray, size: int) -> np.ndarray:
    """(n, H, W, C) images resized to (n, size, size, C) by bilinear interpolation (order-1 spline)."""
    import scipy.ndimage  # on first use: every job process imports this module with its study's plan

    n, h, w, _ = images.shape
    zoomed = scipy.ndimage.zoom(images, (1, size / h, size / w, 1), order=1, grid_mode=True, mode="nearest")
    return cast(np.ndarray, zoomed)  # an ndarray for an ndarray input (scipy's inferred type is wider)


def grayscale(images: np.ndarray) -> np.ndarray:
    """(n, H, W, 3) RGB images as (n, H, W, 1) luminance Y = 0.299 R + 0.587 G + 0.114 B."""
    return (images @ LUMINANCE)[..., None]
