"""The committed proto and stubs speak the kubelet's v1beta1 wire contract (docs/protocol.md#kubelet-device-plugin-api)."""

import subprocess
import sys
from pathlib import Path

from google.protobuf import descriptor_pb2

from vgpu.adapters.kubelet.generated import api_pb2

ROOT = Path(__file__).resolve().parents[3]
PROTO = ROOT / "src" / "vgpu" / "adapters" / "kubelet" / "api.proto"

# message -> [(field, number, type, repeated)] from the kubelet's api.proto
T = descriptor_pb2.FieldDescriptorProto
CONTRACT = {
    "DevicePluginOptions": [
        ("pre_start_required", 1, T.TYPE_BOOL, False),
        ("get_preferred_allocation_available", 2, T.TYPE_BOOL, False),
    ],
    "RegisterRequest": [
        ("version", 1, T.TYPE_STRING, False),
        ("endpoint", 2, T.TYPE_STRING, False),
        ("resource_name", 3, T.TYPE_STRING, False),
        ("options", 4, T.TYPE_MESSAGE, False),
    ],
    "Empty": [],
    "ListAndWatchResponse": [("devices", 1, T.TYPE_MESSAGE, True)],
    "TopologyInfo": [("nodes", 1, T.TYPE_MESSAGE, True)],
    "NUMANode": [("ID", 1, T.TYPE_INT64, False)],
    "Device": [
        ("ID", 1, T.TYPE_STRING, False),
        ("health", 2, T.TYPE_STRING, False),
        ("topology", 3, T.TYPE_MESSAGE, False),
    ],
    "PreStartContainerRequest": [("devices_ids", 1, T.TYPE_STRING, True)],
    "PreStartContainerResponse": [],
    "PreferredAllocationRequest": [("container_requests", 1, T.TYPE_MESSAGE, True)],
    "ContainerPreferredAllocationRequest": [
        ("available_deviceIDs", 1, T.TYPE_STRING, True),
        ("must_include_deviceIDs", 2, T.TYPE_STRING, True),
        ("allocation_size", 3, T.TYPE_INT32, False),
    ],
    "PreferredAllocationResponse": [("container_responses", 1, T.TYPE_MESSAGE, True)],
    "ContainerPreferredAllocationResponse": [("deviceIDs", 1, T.TYPE_STRING, True)],
    "AllocateRequest": [("container_requests", 1, T.TYPE_MESSAGE, True)],
    "ContainerAllocateRequest": [("devices_ids", 1, T.TYPE_STRING, True)],
    "CDIDevice": [("name", 1, T.TYPE_STRING, False)],
    "AllocateResponse": [("container_responses", 1, T.TYPE_MESSAGE, True)],
    "ContainerAllocateResponse": [
        ("envs", 1, T.TYPE_MESSAGE, True),  # map<string,string> is a repeated entry message
        ("mounts", 2, T.TYPE_MESSAGE, True),
        ("devices", 3, T.TYPE_MESSAGE, True),
        ("annotations", 4, T.TYPE_MESSAGE, True),
        ("cdi_devices", 5, T.TYPE_MESSAGE, True),
    ],
    "Mount": [
        ("container_path", 1, T.TYPE_STRING, False),
        ("host_path", 2, T.TYPE_STRING, False),
        ("read_only", 3, T.TYPE_BOOL, False),
    ],
    "DeviceSpec": [
        ("container_path", 1, T.TYPE_STRING, False),
        ("host_path", 2, T.TYPE_STRING, False),
        ("permissions", 3, T.TYPE_STRING, False),
    ],
}

METHODS = {
    "/v1beta1.Registration/Register": ("RegisterRequest", "Empty", False),
    "/v1beta1.DevicePlugin/GetDevicePluginOptions": ("Empty", "DevicePluginOptions", False),
    "/v1beta1.DevicePlugin/ListAndWatch": ("Empty", "ListAndWatchResponse", True),
    "/v1beta1.DevicePlugin/GetPreferredAllocation": (
        "PreferredAllocationRequest",
        "PreferredAllocationResponse",
        False,
    ),
    "/v1beta1.DevicePlugin/Allocate": ("AllocateRequest", "AllocateResponse", False),
    "/v1beta1.DevicePlugin/PreStartContainer": (
        "PreStartContainerRequest",
        "PreStartContainerResponse",
        False,
    ),
}


def _file() -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto()
    api_pb2.DESCRIPTOR.CopyToProto(proto)
    return proto


def test_package_and_syntax_are_the_kubelets() -> None:
    proto = _file()
    assert (proto.package, proto.syntax) == ("v1beta1", "proto3")


def test_every_message_has_exactly_the_contract_fields() -> None:
    messages = {m.name: m for m in _file().message_type}
    assert set(messages) == set(CONTRACT)
    for name, fields in CONTRACT.items():
        found = [
            (f.name, f.number, f.type, f.label == T.LABEL_REPEATED) for f in messages[name].field
        ]
        assert found == fields, name


def test_every_rpc_has_the_contract_wire_path_and_types() -> None:
    found = {}
    for service in _file().service:
        for method in service.method:
            path = f"/{api_pb2.DESCRIPTOR.package}.{service.name}/{method.name}"
            found[path] = (
                method.input_type.removeprefix(".v1beta1."),
                method.output_type.removeprefix(".v1beta1."),
                method.server_streaming,
            )
    assert found == METHODS


def test_the_committed_stubs_match_the_proto_file(tmp_path: Path) -> None:
    out = tmp_path / "api.desc"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{PROTO.parent}",
            f"--descriptor_set_out={out}",
            str(PROTO),
        ],
        check=True,
    )
    fresh = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]
    committed = descriptor_pb2.FileDescriptorProto.FromString(api_pb2.DESCRIPTOR.serialized_pb)
    for message in fresh.message_type:  # protoc adds json names the embedded copy leaves out
        _drop_json_names(message)
    assert fresh == committed, "regenerate the stubs: python scripts/gen_protos.py"


def _drop_json_names(message: descriptor_pb2.DescriptorProto) -> None:
    for field in message.field:
        field.ClearField("json_name")
    for nested in message.nested_type:
        _drop_json_names(nested)


def test_the_grpc_module_imports_its_messages_as_a_package() -> None:
    text = (PROTO.parent / "generated" / "api_pb2_grpc.py").read_text()
    assert "from . import api_pb2 as api__pb2" in text
    assert "\nimport api_pb2" not in text
