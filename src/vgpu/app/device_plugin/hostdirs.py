"""The host files an Allocate answer points at: HAMi-core's library, per-container dirs, lock.

The plugin sees the host's `<hook>/vgpu` at the same path (the DaemonSet mounts it there), so
the paths it prepares are the paths it returns as mount sources.
"""

import logging
import os
import re
import shutil
from pathlib import Path

from vgpu.ports.kubelet import DevicePluginError

log = logging.getLogger(__name__)

_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class HostDirs:
    """Prepares `<hook>/vgpu/containers/<pod uid>_<container>` and the HAMi-core lock dir."""

    def __init__(self, hook_path: str, lock_dir: str = "/tmp/vgpulock", version: str = "") -> None:
        self._vgpu = Path(hook_path) / "vgpu"
        self._lock_dir = Path(lock_dir)
        self._version = version

    def libvgpu_host_path(self) -> str:
        """`libvgpu.so.<version>` when that file exists (HAMi's rule), else "" (the default)."""
        if self._version:
            versioned = self._vgpu / f"libvgpu.so.{self._version}"
            if versioned.is_file():
                return str(versioned)
        return ""

    def license_present(self) -> bool:
        return (self._vgpu / "license").is_file()

    def prepare(self, pod_uid: str, container: str) -> None:
        """A fresh, world-writable cache dir for the container, and the shared lock dir."""
        for what, value in (("pod uid", pod_uid), ("container name", container)):
            if not _SAFE_NAME.match(value):
                raise DevicePluginError(f"{what} {value!r} cannot name a host directory")
        target = self._vgpu / "containers" / f"{pod_uid}_{container}"
        try:
            if target.exists():
                shutil.rmtree(target)
            _make_open_dir(target)
            if not self._lock_dir.is_dir():
                _make_open_dir(self._lock_dir)
        except OSError as exc:
            raise DevicePluginError(
                f"cannot prepare host directory {exc.filename or target}: {exc.strerror or exc} "
                f"(is {self._vgpu} mounted read-write into the device plugin?)"
            ) from exc
        log.debug("prepared %s", target)


def _make_open_dir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    # HAMi-core in any container user must be able to write here; umask would narrow mkdir's mode
    os.chmod(path, 0o777)
