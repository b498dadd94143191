"""NVML failures put in words a node operator can act on."""

from types import ModuleType

_FAKE_HINT = "For development without a GPU, pass --fake-gpus FILE (device plugin, monitor)."


def init_failure(nvml: ModuleType, err: Exception) -> str:
    """Why nvmlInit failed and what to check."""
    if _is(nvml, err, "NVMLError_LibraryNotFound"):
        return (
            "the NVIDIA driver library libnvidia-ml.so.1 was not found: check that the NVIDIA "
            "driver is installed on this node (`nvidia-smi` works on the host) and, in a "
            "container, that the NVIDIA container toolkit makes the driver visible (runtime "
            f"class `nvidia`, or the driver libraries mounted on the library path). {_FAKE_HINT}"
        )
    if _is(nvml, err, "NVMLError_DriverNotLoaded"):
        return (
            "the NVIDIA kernel driver is not loaded: check `lsmod | grep nvidia` and "
            f"`nvidia-smi` on the host, and the driver installation. {_FAKE_HINT}"
        )
    if _is(nvml, err, "NVMLError_NoPermission"):
        return (
            "NVML was refused access to the GPUs: the process needs access to /dev/nvidia* "
            "(run the device plugin privileged, as NVIDIA's and HAMi's charts do)"
        )
    if _is(nvml, err, "NVMLError_LibRmVersionMismatch"):
        return (
            "libnvidia-ml.so.1 does not match the loaded NVIDIA kernel driver (usually a driver "
            "upgrade without a reboot): reboot the node or reload the nvidia kernel modules"
        )
    return f"NVML failed to start ({type(err).__name__}: {err}); check `nvidia-smi` on the node"


def no_gpu() -> str:
    """The driver works but lists no GPU."""
    return (
        "NVML reports no NVIDIA GPU on this node: check `nvidia-smi -L` on the host and, in a "
        "container, NVIDIA_VISIBLE_DEVICES (it must not be `void` or empty). " + _FAKE_HINT
    )


def _is(nvml: ModuleType, err: Exception, class_name: str) -> bool:
    # Older bindings lack some error classes; a missing class simply never matches.
    cls = getattr(nvml, class_name, None)
    return isinstance(cls, type) and isinstance(err, cls)
