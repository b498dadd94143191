"""How a long run reports progress: the callback it calls, and a one-line progress bar on a
terminal stream (silent when the stream is not a terminal)."""

from collections.abc import Callable
from typing import TextIO

Progress = Callable[[float], None]
"""What a long run calls with the fraction done (0 to 1)."""


class ProgressBar:
    """`label [#########.........]  45%`, redrawn in place when the percentage changes."""

    def __init__(self, stream: TextIO, label: str, *, enabled: bool, width: int = 30) -> None:
        self._stream = stream
        self._label = label
        self._enabled = enabled
        self._width = width
        self._shown = -1

    def update(self, fraction: float) -> None:
        if not self._enabled:
            return
        percent = int(max(0.0, min(fraction, 1.0)) * 100)
        if percent == self._shown:
            return
        self._shown = percent
        filled = self._width * percent // 100
        bar = "#" * filled + "." * (self._width - filled)
        self._stream.write(f"\r{self._label} [{bar}] {percent:3d}%")
        self._stream.flush()

    def close(self) -> None:
        if self._enabled and self._shown >= 0:
            self._stream.write("\n")
            self._stream.flush()
