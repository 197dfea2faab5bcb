"""Theory of linearized networks (Ortiz-Jiménez et al. 2021) against the measurements: the label
eigenfunction's eigenvalue (Lemma 1) and the NADs of Theorem 1, read from the run's stages."""

from __future__ import annotations

import math

from ntkpipe.lang.schema import RunSpec
from ntkpipe.measure import requirements as req
from ntkpipe.measure.options import Option
from ntkpipe.measure.record import Measurement, Variable


def _nad_count_fits(options: dict, given: frozenset, run: RunSpec) -> tuple[str, str] | None:
    """count ≤ the input dimension: there are as many NADs as input coordinates."""
    if run.data.shape is None:
        return None
    d = math.prod(run.data.shape)
    if options["count"] > d:
        return "count", (f"count {options['count']} exceeds the {d} NADs of inputs of shape {list(run.data.shape)} "
                         f"(one per input coordinate); use count <= {d}")
    return None


def _directions(run):
    return run.stages["directions"]


MEASUREMENTS = [
    Measurement("eigenvalue", "final", "eigenvalue λ_j of the init-NTK eigenvector φ_j whose sign gives the labels "
                "(linearized-networks Sec. 3.1); by Lemma 1 it equals α(φ_j)",
                (Variable("eigenvalue", "λ_j", theory_of="alignment_init"),),
                lambda run, traj, item: {"eigenvalue": run.label_eigenpair[0]},
                req.needs_eigen_labels, where_applicable=True,
                assumptions="labels are the sign of an eigenvector of the init NTK Gram over train ∪ test "
                            "(data.labels.kind eigenvector_sign); NaN for other labels"),
    Measurement("nad_alignment", "final", "predicted alignment σ_j² of the NAD v_j the data is built on "
                "(linearized-networks Theorem 1, Fig. 4 right)",
                (Variable("nad_alignment", "σ_j² (predicted alignment)"),),
                lambda run, traj, item: {"nad_alignment": float(
                    _directions(run)["sigma_sq"].values[run.spec.data.directions.nad_index - 1])},
                req.needs_nad_data, where_applicable=True),
    Measurement("stein_check", "final", "Stein check of Theorem 1: relative error between the Monte-Carlo "
                "‖E[(uᵀx)∇θf(x)]‖² and ‖E[∇²ₓθf(x)]u‖² over stein_vector = 1…k, the top k NADs, then "
                "one random unit u (last)",
                (Variable("stein_relerr", "relative error of the Stein identity", ("stein_vector",)),),
                lambda run, traj, item: {"stein_relerr": _directions(run)["stein_relerr"].values},
                req.needs_nad_data, where_applicable=True),
    Measurement("nad_directions", "final", "the first NADs v_j (right singular vectors of ∇²ₓθ f) as images "
                "(linearized-networks Fig. 10)",
                (Variable("nad_directions", "NAD v_j", ("nad", "row", "column", "channel")),),
                lambda run, traj, item: {"nad_directions": _directions(run)["directions"].values[
                    : item.options["count"]]},
                req.needs_image_nad_data, where_applicable=True,
                options=(Option("count", int, 10, "how many NADs", 1),), check_options=_nad_count_fits),
]
