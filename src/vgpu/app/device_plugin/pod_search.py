"""The pod an Allocate call is for, looked up as `pending.find_pending_pod` says, waiting a
moment for it to reach the cluster port's cache (the kubelet may see a bound pod a moment
before the plugin); a refusal that says why when no pod waits with a grant the plugin trusts.
"""

import time
from collections.abc import Callable

from vgpu.app.device_plugin.keyring import KeyRingUnavailable
from vgpu.app.device_plugin.pending import Waiting, find_pending_pod
from vgpu.app.device_plugin.trust import NodeGrantTrust
from vgpu.domain.pod import Pod
from vgpu.domain.vendor import Vendor
from vgpu.ports.cluster import ClusterError, ClusterPort
from vgpu.ports.kubelet import DevicePluginError

SETTLE_POLL_S = 0.05


class PodSearch:
    """`settle_s`: how long `settled` waits for a trusted pod to show up before giving up."""

    def __init__(
        self,
        cluster: ClusterPort,
        node: str,
        vendor: Vendor,
        trust: NodeGrantTrust,
        settle_s: float = 2.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._cluster = cluster
        self._node = node
        self._vendor = vendor
        self._trust = trust
        self._settle_s = settle_s
        self._sleep = sleep

    def now(self) -> Waiting:
        """The waiting pods as the cache shows them now; DevicePluginError when the pods or the
        key ring cannot be read."""
        try:
            return find_pending_pod(self._cluster, self._node, self._vendor, self._trust)
        except ClusterError as exc:
            raise DevicePluginError(f"cannot look up pods on node {self._node}: {exc}") from exc
        except KeyRingUnavailable as exc:
            raise self.unverifiable(exc) from exc

    def settled(self) -> Waiting:
        """As `now`, polled until a pod is chosen or `settle_s` has passed."""
        waited = 0.0
        waiting = self.now()
        while waiting.chosen is None and waited < self._settle_s:
            self._sleep(SETTLE_POLL_S)
            waited += SETTLE_POLL_S
            waiting = self.now()
        return waiting

    def chosen(self, waiting: Waiting) -> Pod:
        """The pod to serve; DevicePluginError naming what was refused, or what was expected."""
        if waiting.chosen is not None:
            return waiting.chosen
        if waiting.refused:
            reasons = "; ".join(f"{pod.key}: {reason}" for pod, reason in waiting.refused)
            raise DevicePluginError(
                f"no pod on node {self._node} waits with a grant this plugin can trust, "
                f"refused: {reasons}"
            )
        raise DevicePluginError(
            f"no pod on node {self._node} is waiting for GPUs: expected a Pending pod bound "
            f"here with hami.io/bind-phase=allocating and grants left in "
            f"{self._vendor.to_allocate_annotation} (was it scheduled by vgpu?)"
        )

    def unverifiable(self, exc: KeyRingUnavailable) -> DevicePluginError:
        """No key ring: refuse the call but fail no pod, since none could be judged."""
        return DevicePluginError(f"cannot verify grants on node {self._node}: {exc}")
