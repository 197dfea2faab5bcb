"""Compiled optax training with checkpointed measurements."""

from ntkpipe.train.loop import Trajectory, checkpoint_steps, total_steps, train

__all__ = ["Trajectory", "checkpoint_steps", "total_steps", "train"]
