"""core/v1 Events about a pod, as `kubectl describe pod` shows them."""

from datetime import datetime
from typing import Any

# events.k8s.io/v1 caps a note at 1 KiB; core/v1 has no cap, but readers of the newer API
# see our events through it, so longer messages are cut
MESSAGE_LIMIT = 1024


def event_manifest(
    namespace: str,
    pod: str,
    reason: str,
    message: str,
    *,
    warning: bool,
    component: str,
    now: datetime,
    pod_uid: str = "",
) -> dict[str, Any]:
    """A new Event about `namespace/pod`, named like client-go's (`<pod>.<hex nanoseconds>`)."""
    stamp = now.isoformat(timespec="seconds").replace("+00:00", "Z")
    involved: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": namespace,
        "name": pod,
    }
    if pod_uid:
        involved["uid"] = pod_uid
    if len(message) > MESSAGE_LIMIT:
        message = message[: MESSAGE_LIMIT - 3] + "..."
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{pod}.{_nanoseconds(now):x}", "namespace": namespace},
        "involvedObject": involved,
        "reason": reason,
        "message": message,
        "type": "Warning" if warning else "Normal",
        "source": {"component": component},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


def _nanoseconds(now: datetime) -> int:
    """Unix time in ns, exact to the microsecond (a float would round away ~250 ns)."""
    return int(now.replace(microsecond=0).timestamp()) * 10**9 + now.microsecond * 1000
