"""Progress of long jobs on stderr (tqdm), labelled with the study and the sweep point, with an ETA
measured after the first compiled segment, so compilation does not inflate it.

On a terminal the line is redrawn in place; elsewhere (a job's log file, several jobs sharing one
stream) each update is a line of its own, at most one every ``interval`` seconds, the first after
``interval`` seconds: short jobs print nothing but a divergence.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from tqdm import tqdm

BAR_FORMAT = "{desc} {percentage:3.0f}% {n}/{total} steps{postfix} [eta {remaining}]"


class _Bar(tqdm):
    monitor_interval = 0  # no monitor thread: jobs may run in threads of one Snakemake process
    _time: Callable[[], float]  # the clock tqdm reads (set in its __init__, undeclared in its annotations)


class _Lines:
    """A stream for tqdm that writes each redraw (``\\r<status>``) as a line of its own."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> None:
        line = text.replace("\r", "").rstrip()
        if line:
            self.stream.write(line + "\n")

    def flush(self) -> None:
        self.stream.flush()


class Progress:
    """``<label>  40% 4000/10000 steps, loss=1.2e-03 [eta 00:03]``: steps done, the latest loss and
    the time left at the rate measured since the first update past step 0 (the segment that
    compiled the training step is not counted). ``clock`` is for tests."""

    def __init__(self, label: str, total: int, *, interval: float | None = None, stream=None,
                 clock=time.perf_counter):
        stream = stream or sys.stderr
        tty = hasattr(stream, "isatty") and stream.isatty()
        self.label, self.clock = label, clock
        interval = (0.5 if tty else 5.0) if interval is None else interval
        self.bar = _Bar(total=max(int(total), 1), desc=label, file=stream if tty else _Lines(stream),
                        mininterval=interval, delay=interval,  # a job shorter than that prints nothing
                        smoothing=0, bar_format=BAR_FORMAT, dynamic_ncols=False, ascii=True)
        self.bar._time = clock
        self.bar.start_t = self.bar.last_print_t = clock()
        self.compiled = False

    def update(self, done: int, **info) -> None:
        """``done`` steps so far; ``info`` (e.g. ``loss``) is shown with the next line."""
        values = {k: f"{v:.3g}" for k, v in info.items() if v is not None}
        self.bar.set_postfix(values, refresh=False)
        if self.compiled:
            self.bar.update(done - self.bar.n)
            return
        # until the first compiled segment ends, only count: the rate starts from here
        self.compiled = done > 0
        self.bar.n = self.bar.initial = self.bar.last_print_n = done
        self.bar.start_t = self.bar.last_print_t = self.clock()

    def close(self, *, diverged: bool = False) -> None:
        """The last line, then ``<label> diverged (…)`` if the run diverged."""
        self.bar.close()
        if diverged:
            self.bar.fp.write(f"{self.label} diverged (loss or parameters non-finite, or the loss above train.divergence_factor × its initial value)\n")
            self.bar.fp.flush()
