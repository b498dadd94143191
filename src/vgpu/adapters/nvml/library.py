"""The pynvml module, imported once without the packaging warning it prints.

The `pynvml` distribution (13.x) is a shim over NVIDIA's `nvidia-ml-py`, which provides the
`pynvml` module itself; the shim warns on every import that users should install
`nvidia-ml-py`. The module is the same either way, so the warning only confuses node logs.
"""

import warnings
from types import ModuleType


def load_pynvml() -> ModuleType:
    """The `pynvml` module (bindings only: loading libnvidia-ml.so.1 waits for nvmlInit)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import pynvml
    module: ModuleType = pynvml
    return module


def text(value: str | bytes) -> str:
    """A string from NVML; older bindings return bytes for names and UUIDs."""
    return value.decode(errors="replace") if isinstance(value, bytes) else value
