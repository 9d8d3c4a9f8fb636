"""Progress of `profstack analyze` on stderr, phase by phase (reading, report, Perfetto traces).

On a terminal each phase is a tqdm bar that is redrawn in place and cleared when the phase ends. On a
pipe or a log file (CI, a Lambda, `2> log`) tqdm's redrawing would fill the file with carriage
returns, so the same meter text (tqdm's `format_meter`) is printed as one plain line every few
seconds, and once when a phase ends.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import IO

from tqdm import tqdm


class _Bar(tqdm):  # type: ignore[misc]  # tqdm ships no types
    """A bar without tqdm's monitor thread: with a second thread alive, ``--jobs`` must start its workers
    by forkserver (~0.5 s) instead of fork (~4 ms each), since forking a threaded process can deadlock.
    The monitor only rescues bars that stall past ``maxinterval``; our callers update every 4 MB."""

    monitor_interval = 0


MB = 1_000_000


class Phase:
    """One phase of work measured in `unit`s (bytes or files). Call it with each increment."""

    def __init__(self, label: str, total: int | None, stream: IO[str], *, unit: str, interval_s: float | None) -> None:
        self.label = label
        self.total = total if total and total > 0 else None
        self.done = 0
        self.stream = stream
        self.unit = unit
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.interval = interval_s if interval_s is not None else (0.1 if self.tty else 5.0)
        self.start = self.last = time.monotonic()
        self.printed = False
        self._bar: tqdm[int] | None = None
        if self.tty:
            self._bar = _Bar(
                total=self.total,
                desc=f"  {label}",
                file=stream,
                unit="B" if unit == "bytes" else f" {unit}",
                unit_scale=unit == "bytes",
                unit_divisor=1000,
                mininterval=self.interval,
                leave=False,
                dynamic_ncols=True,
            )

    def __call__(self, amount: int) -> None:
        step = max(int(amount), 0)
        self.done += step
        if self._bar is not None:
            self._bar.update(step)
            return
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            self._line(now)

    def _line(self, now: float) -> None:
        meter = tqdm.format_meter(
            self.done,
            self.total,
            now - self.start,
            unit="B" if self.unit == "bytes" else f" {self.unit}",
            unit_scale=self.unit == "bytes",
            unit_divisor=1000,
            ncols=0,
        )
        self.stream.write(f"profstack: {self.label}: {meter}\n")
        self.stream.flush()
        self.printed = True

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self.printed or time.monotonic() - self.start >= self.interval:
            # a long phase on a plain stream ends with its final line, so a log shows it finished
            self._line(time.monotonic())

    def __enter__(self) -> Phase:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class Progress:
    """Progress of one `analyze` run: `phase(label, total)` opens a phase; the instance itself counts
    bytes read in the first phase ("reading traces"), as the engine's progress callback."""

    def __init__(self, total_bytes: int, stream: IO[str], *, interval_s: float | None = None) -> None:
        self.stream = stream
        self.interval = interval_s
        self.reading = Phase("reading traces", total_bytes, stream, unit="bytes", interval_s=interval_s)

    def __call__(self, nbytes: int) -> None:
        self.reading(nbytes)

    def finish(self) -> None:
        self.reading.close()

    def phase(self, label: str, total: int | None, *, unit: str = "files") -> Phase:
        return Phase(label, total, self.stream, unit=unit, interval_s=self.interval)
