"""A series at init and at its end, as one table (e.g. linearized-networks Table 1)."""

from __future__ import annotations

from typing import Literal

import xarray as xr
from pydantic import Field, model_validator

from ntkpipe.labels import variable_label
from ntkpipe.layout import final_value
from ntkpipe.measure.record import Variable
from ntkpipe.summaries.record import SummaryKind, SummaryOptions


class EndpointsOptions(SummaryOptions):
    """``endpoints`` tabulates the series ``y`` at init and at its last finite time over a dimension
    ``checkpoint`` = [init, end] (e.g. linearized-networks Table 1); figures may plot it."""

    kind: Literal["endpoints"]
    """the summary kind (this record\'s name)"""
    y: str = Field(description="the series tabulated")

    @model_validator(mode="after")
    def _only_y(self):
        if self.x is not None or self.by is not None:
            raise ValueError("an 'endpoints' summary takes only 'y' (a series)")
        return self


def endpoints(s: EndpointsOptions, ds: xr.Dataset, study=None) -> xr.Dataset:
    """``<name>``: ``y`` at t = 0 and at its last finite time, over ``checkpoint`` = [init, end]."""
    series = ds[s.y]
    table = xr.concat([series.isel(time=0, drop=True), final_value(series)], dim="checkpoint")
    return xr.Dataset({s.name: table.assign_coords(checkpoint=["init", "end"])})


def endpoints_attrs(s: EndpointsOptions, study) -> dict[str, dict[str, str]]:
    return {s.name: {"long_name": f"{variable_label(s.y)} (init, end)",
                     "description": f"{s.y} at init (t = 0) and at its last finite time, over checkpoint"}}


def endpoints_table(s: EndpointsOptions, variables: dict[str, Variable]) -> dict[str, Variable]:
    """The table is a variable over ``checkpoint`` and ``y``'s other dims."""
    if s.y not in variables:
        return {}
    y = variables[s.y]
    return {s.name: Variable(s.name, f"{y.label} (init, end)", ("checkpoint", *[d for d in y.dims if d != "time"]))}


KINDS = [SummaryKind("endpoints", EndpointsOptions, endpoints, endpoints_attrs,
                     lambda s, check: check.variable(s.y, ("series",), ("y",)), endpoints_table)]
