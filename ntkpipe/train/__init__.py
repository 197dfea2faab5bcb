"""Training: one driver (:mod:`ntkpipe.train.driver`) stepping each model kind's stepper over checkpoints."""

from ntkpipe.train.driver import Trajectory, checkpoint_steps, total_steps
from ntkpipe.train.loop import train

__all__ = ["Trajectory", "checkpoint_steps", "total_steps", "train"]
