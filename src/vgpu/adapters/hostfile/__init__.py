"""Files the node's processes keep on the host: implements ServedRecordPort."""

from vgpu.adapters.hostfile.served_record import JsonServedRecord

__all__ = ["JsonServedRecord"]
