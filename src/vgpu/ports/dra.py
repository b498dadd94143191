"""The Kubernetes DRA objects (`resource.k8s.io/v1`) as `vgpu explain` reads them.

Objects come as the API serves them (JSON mappings); `vgpu.domain.dra` reads them and says
which field of which object cannot be read.
"""

from typing import Any, Protocol


class DraReadPort(Protocol):
    """Lists ResourceClaims (every namespace), ResourceClaimTemplates, ResourceSlices and
    DeviceClasses. ClusterError when the API cannot be read; an API server without
    `resource.k8s.io/v1` (DRA off, Kubernetes before 1.34) lists nothing."""

    def list_resource_claims(self) -> list[dict[str, Any]]: ...

    def list_resource_claim_templates(self) -> list[dict[str, Any]]: ...

    def list_resource_slices(self) -> list[dict[str, Any]]: ...

    def list_device_classes(self) -> list[dict[str, Any]]: ...
