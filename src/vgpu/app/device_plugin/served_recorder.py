"""No record, no answer: before any Allocate answer leaves, the pod's whole grant is saved in
the served record (`served`), which keeps it counted until the pod ends, whatever its
annotations say later and across restarts."""

from collections.abc import Mapping

from vgpu.app.device_plugin.served import GrantChanged, ServedRecord
from vgpu.app.device_plugin.trust import NodeGrantTrust
from vgpu.domain.mig import MigRuntime
from vgpu.domain.pod import Pod
from vgpu.domain.trust import GrantClaim
from vgpu.ports.kubelet import DevicePluginError
from vgpu.ports.served import RecordError


class ServedRecorder:
    def __init__(self, served: ServedRecord, trust: NodeGrantTrust) -> None:
        self._served = served
        self._trust = trust

    def record(
        self,
        pod: Pod,
        claim: GrantClaim | None,
        runtimes: Mapping[tuple[int, int], MigRuntime],
    ) -> None:
        """Save the grant `pod` is served under, and the MIG instances this call serves it
        (`runtimes`); DevicePluginError when it cannot be saved."""
        if claim is None:  # a trusted grant always has its claim; refuse rather than forget
            raise DevicePluginError(f"no grant claim to record for pod {pod.key}")
        try:
            self._served.add(pod, claim, self._trust.signed(pod), runtimes)
        except GrantChanged as exc:
            raise DevicePluginError(str(exc)) from exc
        except RecordError as exc:
            raise DevicePluginError(
                f"{exc}; nothing is served without a record, which keeps the grant counted "
                "across restarts"
            ) from exc
