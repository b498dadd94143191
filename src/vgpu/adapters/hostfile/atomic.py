"""Replacing a host file all at once: `<file>.tmp` in the same directory, written and fsynced,
renamed over the file, then the directory fsynced. After a crash or a power cut the file holds
the old content or the new one, never a mix, and never nothing once something was written; a
failed write leaves no temporary file behind."""

import contextlib
import os
import time
from pathlib import Path


def replace_file(path: Path, data: bytes, mode: int | None = None, *, durable: bool = True) -> None:
    """Write `data` to `path` atomically and durably (the directory is made when missing);
    OSError when any step fails. `mode`: the file's permission bits, else the umask's.
    `durable=False` skips both fsyncs: still all or nothing for every reader, but a power cut
    may leave the old content (for files rebuilt from a durable record at start)."""
    temporary = path.with_name(path.name + ".tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with temporary.open("wb") as file:
            file.write(data)
            file.flush()
            if durable:
                os.fsync(file.fileno())
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
    if durable:
        sync_directory(path.parent)


def set_aside(path: Path) -> Path:
    """Move a file that does not read to `<name>.corrupt-<unix time>` beside it, kept for a
    person to look at; where it went. OSError when it cannot be moved."""
    aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
    os.replace(path, aside)
    sync_directory(path.parent)
    return aside


def sync_directory(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def why(exc: OSError) -> str:
    """The system's reason, as a person reads it (`Read-only file system`)."""
    return exc.strerror or str(exc)
