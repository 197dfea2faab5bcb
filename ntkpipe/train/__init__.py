"""Training: one driver (:mod:`ntkpipe.train.driver`) stepping each model kind's stepper over checkpoints.

The names below are imported on first use, so that the Snakefile's ``ntkpipe.train.stop`` (signal
watching, on every dry run) does not import JAX, optax and the language with the driver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ntkpipe.lazy_names import lazy_getattr

if TYPE_CHECKING:
    from ntkpipe.train.driver import Trajectory, checkpoint_steps, total_steps
    from ntkpipe.train.loop import train

_HOME = {"Trajectory": "ntkpipe.train.driver", "checkpoint_steps": "ntkpipe.train.driver",
         "total_steps": "ntkpipe.train.driver", "train": "ntkpipe.train.loop"}
"""Where each public name lives."""


__getattr__ = lazy_getattr(__name__, _HOME, globals())


__all__ = ["Trajectory", "checkpoint_steps", "total_steps", "train"]
