"""Exponential backoff with jitter, for reconnecting watches and retrying optimistic writes."""

import random
from collections.abc import Callable, Iterator


class Backoff:
    """Delays that grow `factor` times per failure up to `cap`, each stretched by up to `jitter`.

    `next_delay()` gives the wait after one more failure; `reset()` after a success.
    """

    def __init__(
        self,
        initial: float = 0.2,
        factor: float = 2.0,
        cap: float = 30.0,
        jitter: float = 0.2,
        rand: Callable[[], float] = random.random,
    ) -> None:
        if initial <= 0 or factor < 1 or cap < initial or jitter < 0:
            raise ValueError(
                f"backoff needs initial > 0, factor >= 1, cap >= initial, jitter >= 0; got "
                f"initial={initial}, factor={factor}, cap={cap}, jitter={jitter}"
            )
        self._initial = initial
        self._factor = factor
        self._cap = cap
        self._jitter = jitter
        self._rand = rand
        self._failures = 0
        self._base = initial

    def next_delay(self) -> float:
        # the base grows by multiplication, not factor**failures, which overflows after ~1000
        base = self._base
        self._base = min(self._cap, base * self._factor)
        self._failures += 1
        return min(self._cap, base * (1 + self._jitter * self._rand()))

    def reset(self) -> None:
        self._failures = 0
        self._base = self._initial

    @property
    def failures(self) -> int:
        return self._failures


def retry_delays(
    attempts: int,
    initial: float = 0.1,
    factor: float = 2.0,
    jitter: float = 0.2,
    rand: Callable[[], float] = random.random,
) -> Iterator[float]:
    """The waits between `attempts` tries: `attempts - 1` delays, e.g. 0.1, 0.2, 0.4, 0.8 s."""
    backoff = Backoff(
        initial, factor, cap=initial * factor ** max(attempts, 1), jitter=jitter, rand=rand
    )
    for _ in range(attempts - 1):
        yield backoff.next_delay()
