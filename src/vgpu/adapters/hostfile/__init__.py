"""Files the node's processes keep on the host: the device plugin's served record
(ServedRecordPort), and the DRA driver's CDI specs (CdiSpecPort, CdiCatalogPort), per-claim
directories (ClaimDirsPort) and prepared-claims record (PreparedStorePort)."""

from vgpu.adapters.hostfile.cdi_specs import CdiSpecFiles, StaticCdiCatalog
from vgpu.adapters.hostfile.claim_dirs import ClaimDirs
from vgpu.adapters.hostfile.prepared_store import PreparedStore
from vgpu.adapters.hostfile.served_record import JsonServedRecord

__all__ = ["CdiSpecFiles", "ClaimDirs", "JsonServedRecord", "PreparedStore", "StaticCdiCatalog"]
