"""Measurements taken on runs, kernels and sweeps."""

from ntkpipe.measure.registry import REGISTRY, Measurement

__all__ = ["REGISTRY", "Measurement"]
