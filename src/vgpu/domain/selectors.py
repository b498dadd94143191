"""A pod's constraints on which cards it may use, read from its annotations."""

import re
from collections.abc import Mapping
from dataclasses import dataclass

from vgpu.domain.device import HAMI_CORE_MODE, MIG_MODE, Device
from vgpu.domain.vendor import Vendor

_WORD = re.compile(r"[a-z0-9]+")
_TRUE = {"1", "t", "true", "y", "yes", "on"}
_DEFAULT_MODES = (HAMI_CORE_MODE,)  # what a pod that names no mode asks for


@dataclass(frozen=True, slots=True)
class CardSelector:
    """Which cards a pod accepts: model names, UUIDs, NUMA locality, device mode."""

    use_types: tuple[tuple[str, ...], ...] = ()
    avoid_types: tuple[tuple[str, ...], ...] = ()
    use_uuids: frozenset[str] = frozenset()
    avoid_uuids: frozenset[str] = frozenset()
    numa_bind: bool = False
    modes: tuple[str, ...] = ()

    @property
    def picks_cards(self) -> bool:
        """False when the pod accepts any card: the filter can skip the per-card checks."""
        return bool(
            self.use_types or self.avoid_types or self.use_uuids or self.avoid_uuids or self.modes
        )

    def type_ok(self, device: Device) -> bool:
        words = _words(device.type)
        if self.use_types and not any(_contains(words, t) for t in self.use_types):
            return False
        return not any(_contains(words, t) for t in self.avoid_types)

    def uuid_ok(self, device: Device) -> bool:
        if self.use_uuids and device.uuid not in self.use_uuids:
            return False
        return device.uuid not in self.avoid_uuids

    def mode_ok(self, device: Device) -> bool:
        """A card registered without a mode ("") suits every pod, as in HAMi; otherwise its mode
        must be one the pod names, hami-core when it names none. So a card in MIG mode takes
        only pods that name `mig` (and gets a MIG instance for them, never a hami-core slice:
        its memory and SMs belong to its instances), whereas HAMi also puts pods that name no
        mode there."""
        return not device.mode or device.mode in (self.modes or _DEFAULT_MODES)

    @property
    def takes_mig(self) -> bool:
        """Whether the pod may get MIG instances (it names `mig` in `nvidia.com/vgpu-mode`)."""
        return MIG_MODE in self.modes


def selector_from_annotations(annotations: Mapping[str, str], vendor: Vendor) -> CardSelector:
    """Read `use-gputype`, `nouse-gputype`, `use-gpuuuid`, `nouse-gpuuuid`, `numa-bind`, mode.

    Types match on whole words, case-insensitively: `A100` selects `NVIDIA A100-SXM4-80GB` and
    `A10` does not (HAMi's substring match would take it).
    """
    return CardSelector(
        use_types=_type_list(annotations.get(vendor.use_type_annotation, "")),
        avoid_types=_type_list(annotations.get(vendor.nouse_type_annotation, "")),
        use_uuids=_uuid_set(annotations.get(vendor.use_uuid_annotation, "")),
        avoid_uuids=_uuid_set(annotations.get(vendor.nouse_uuid_annotation, "")),
        numa_bind=annotations.get(vendor.numa_bind_annotation, "").strip().lower() in _TRUE,
        modes=tuple(m for m in _split(annotations.get(vendor.mode_annotation, ""))),
    )


def parse_uuid_list(text: str) -> frozenset[str]:
    """A comma list of card UUIDs (also the node's `hami.io/device-cordon`)."""
    return _uuid_set(text)


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _type_list(text: str) -> tuple[tuple[str, ...], ...]:
    return tuple(words for words in (_words(t) for t in _split(text)) if words)


def _uuid_set(text: str) -> frozenset[str]:
    return frozenset(_split(text))


def _words(text: str) -> tuple[str, ...]:
    return tuple(_WORD.findall(text.lower()))


def _contains(words: tuple[str, ...], phrase: tuple[str, ...]) -> bool:
    n = len(phrase)
    return any(words[i : i + n] == phrase for i in range(len(words) - n + 1))
