"""Progress lines for long jobs, safe when several jobs share one terminal (one line per update)."""

from __future__ import annotations

import sys
import time


class Progress:
    """Prints ``[label] 40% 4000/10000 loss=1.2e-03 eta 3s`` at most every ``interval`` seconds."""

    def __init__(self, label: str, total: int, *, interval: float = 5.0, stream=None):
        self.label, self.total, self.interval = label, max(int(total), 1), interval
        self.stream = stream or sys.stderr
        self.start = self.last = time.perf_counter()
        self.printed = False

    def update(self, done: int, **info) -> None:
        now = time.perf_counter()
        if now - self.last < self.interval or done >= self.total:
            return
        self.last, self.printed = now, True
        rate = done / (now - self.start) if done else 0.0
        eta = f" eta {(self.total - done) / rate:.0f}s" if rate else ""
        extras = "".join(f" {k}={v:.3g}" for k, v in info.items() if v is not None)
        print(f"[{self.label}] {100 * done / self.total:3.0f}% {done}/{self.total}{extras}{eta}",
              file=self.stream, flush=True)

    def close(self, *, diverged: bool = False) -> None:
        if self.printed or diverged:
            status = "diverged (loss non-finite or exploded)" if diverged else "done"
            print(f"[{self.label}] {status} in {time.perf_counter() - self.start:.1f}s",
                  file=self.stream, flush=True)
