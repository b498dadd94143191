"""One lock per pod, so that filter and bind for the same pod never interleave."""

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class PodLocks:
    """`with locks.hold("ns/name"):` serialises work on that pod; unused locks are dropped."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, tuple[threading.Lock, int]] = {}

    @contextmanager
    def hold(self, pod: str) -> Iterator[None]:
        with self._guard:
            lock, users = self._locks.get(pod, (threading.Lock(), 0))
            self._locks[pod] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._guard:
                lock, users = self._locks[pod]
                if users == 1:
                    del self._locks[pod]
                else:
                    self._locks[pod] = (lock, users - 1)

    def __len__(self) -> int:
        with self._guard:
            return len(self._locks)
