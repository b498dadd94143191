"""The committed DRA protos and stubs speak the kubelet's wire contract: packages, services,
methods, messages and field numbers as a 1.34-1.36 kubelet sends and expects them."""

import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from google.protobuf import descriptor_pb2

from tests.unit.kubelet.test_proto import _drop_json_names

ROOT = Path(__file__).resolve().parents[3]
PROTOS = ROOT / "src" / "vgpu" / "adapters" / "kubelet_dra" / "protos"
GENERATED = "vgpu.adapters.kubelet_dra.generated"

T = descriptor_pb2.FieldDescriptorProto
_CLAIMS = [("namespace", 1, T.TYPE_STRING, False), ("uid", 2, T.TYPE_STRING, False),
           ("name", 3, T.TYPE_STRING, False)]
_DEVICE = [
    ("request_names", 1, T.TYPE_STRING, True),
    ("pool_name", 2, T.TYPE_STRING, False),
    ("device_name", 3, T.TYPE_STRING, False),
    ("cdi_device_ids", 4, T.TYPE_STRING, True),
]


def _dra(device: list[tuple[str, int, int, bool]]) -> dict[str, list[tuple[str, int, int, bool]]]:
    return {
        "NodePrepareResourcesRequest": [("claims", 1, T.TYPE_MESSAGE, True)],
        "NodePrepareResourcesResponse": [("claims", 1, T.TYPE_MESSAGE, True)],  # a map
        "NodePrepareResourceResponse": [
            ("devices", 1, T.TYPE_MESSAGE, True),
            ("error", 2, T.TYPE_STRING, False),
        ],
        "Device": device,
        "NodeUnprepareResourcesRequest": [("claims", 1, T.TYPE_MESSAGE, True)],
        "NodeUnprepareResourcesResponse": [("claims", 1, T.TYPE_MESSAGE, True)],
        "NodeUnprepareResourceResponse": [("error", 1, T.TYPE_STRING, False)],
        "Claim": _CLAIMS,
    }


def _dra_methods(package: str) -> dict[str, tuple[str, str, bool]]:
    return {
        f"/{package}.DRAPlugin/NodePrepareResources": (
            "NodePrepareResourcesRequest", "NodePrepareResourcesResponse", False),
        f"/{package}.DRAPlugin/NodeUnprepareResources": (
            "NodeUnprepareResourcesRequest", "NodeUnprepareResourcesResponse", False),
    }


V1 = "k8s.io.kubelet.pkg.apis.dra.v1"
V1BETA1 = "k8s.io.kubelet.pkg.apis.dra.v1beta1"
# (proto file, module, package, messages, methods)
CONTRACTS = [
    ("dra_v1.proto", "dra_v1_pb2", V1,
     _dra([*_DEVICE, ("share_id", 5, T.TYPE_STRING, False)]), _dra_methods(V1)),
    ("dra_v1beta1.proto", "dra_v1beta1_pb2", V1BETA1, _dra(_DEVICE), _dra_methods(V1BETA1)),
    (
        "pluginregistration_v1.proto",
        "pluginregistration_v1_pb2",
        "pluginregistration",
        {
            "PluginInfo": [
                ("type", 1, T.TYPE_STRING, False),
                ("name", 2, T.TYPE_STRING, False),
                ("endpoint", 3, T.TYPE_STRING, False),
                ("supported_versions", 4, T.TYPE_STRING, True),
            ],
            "RegistrationStatus": [
                ("plugin_registered", 1, T.TYPE_BOOL, False),
                ("error", 2, T.TYPE_STRING, False),
            ],
            "RegistrationStatusResponse": [],
            "InfoRequest": [],
        },
        {
            "/pluginregistration.Registration/GetInfo": ("InfoRequest", "PluginInfo", False),
            "/pluginregistration.Registration/NotifyRegistrationStatus": (
                "RegistrationStatus", "RegistrationStatusResponse", False),
        },
    ),
    (
        "dra_health_v1alpha1.proto",
        "dra_health_v1alpha1_pb2",
        "v1alpha1",
        {
            "NodeWatchResourcesRequest": [],
            "DeviceIdentifier": [
                ("pool_name", 1, T.TYPE_STRING, False),
                ("device_name", 2, T.TYPE_STRING, False),
            ],
            "DeviceHealth": [
                ("device", 1, T.TYPE_MESSAGE, False),
                ("health", 2, T.TYPE_ENUM, False),
                ("last_updated_time", 3, T.TYPE_INT64, False),
                ("health_check_timeout_seconds", 4, T.TYPE_INT64, False),
                ("message", 5, T.TYPE_STRING, False),
            ],
            "NodeWatchResourcesResponse": [("devices", 1, T.TYPE_MESSAGE, True)],
        },
        {
            "/v1alpha1.DRAResourceHealth/NodeWatchResources": (
                "NodeWatchResourcesRequest", "NodeWatchResourcesResponse", True),
        },
    ),
]
IDS = [contract[0] for contract in CONTRACTS]


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"{GENERATED}.{name}")


def _file(module: ModuleType) -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto()
    module.DESCRIPTOR.CopyToProto(proto)
    return proto


@pytest.mark.parametrize(("proto", "module", "package", "messages", "methods"), CONTRACTS, ids=IDS)
def test_package_messages_and_fields_are_the_kubelets(
    proto: str, module: str, package: str, messages: dict[str, list[tuple[str, int, int, bool]]],
    methods: dict[str, tuple[str, str, bool]],
) -> None:
    described = _file(_module(module))
    assert (described.package, described.syntax) == (package, "proto3")
    found = {m.name: m for m in described.message_type}
    assert set(found) == set(messages)
    for name, fields in messages.items():
        got = [(f.name, f.number, f.type, f.label == T.LABEL_REPEATED) for f in found[name].field]
        assert got == fields, name


@pytest.mark.parametrize(("proto", "module", "package", "messages", "methods"), CONTRACTS, ids=IDS)
def test_every_rpc_has_the_kubelets_wire_path_and_types(
    proto: str, module: str, package: str, messages: object,
    methods: dict[str, tuple[str, str, bool]],
) -> None:
    described = _file(_module(module))
    found = {
        f"/{package}.{service.name}/{method.name}": (
            method.input_type.removeprefix(f".{package}."),
            method.output_type.removeprefix(f".{package}."),
            method.server_streaming,
        )
        for service in described.service
        for method in service.method
    }
    assert found == methods


def test_share_id_is_optional_so_an_absent_one_differs_from_an_empty_one() -> None:
    device = _module("dra_v1_pb2").Device(device_name="gpu-0")
    assert not device.HasField("share_id")
    device.share_id = ""
    assert device.HasField("share_id")


def test_health_status_values_are_the_kubelets() -> None:
    health = _module("dra_health_v1alpha1_pb2")
    assert (health.UNKNOWN, health.HEALTHY, health.UNHEALTHY) == (0, 1, 2)


@pytest.mark.parametrize(("proto", "module", "package", "messages", "methods"), CONTRACTS, ids=IDS)
def test_the_committed_stubs_match_the_proto_file(
    tmp_path: Path, proto: str, module: str, package: str, messages: object, methods: object
) -> None:
    out = tmp_path / "api.desc"
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTOS}",
         f"--descriptor_set_out={out}", str(PROTOS / proto)],
        check=True,
    )
    fresh = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]
    committed = descriptor_pb2.FileDescriptorProto.FromString(
        _module(module).DESCRIPTOR.serialized_pb
    )
    for message in fresh.message_type:  # protoc adds json names the embedded copy leaves out
        _drop_json_names(message)
    assert fresh == committed, "regenerate the stubs: python scripts/gen_protos.py"


@pytest.mark.parametrize("proto", IDS)
def test_each_grpc_module_imports_its_messages_as_a_package(proto: str) -> None:
    module = proto.removesuffix(".proto") + "_pb2"
    text = (PROTOS.parent / "generated" / f"{module}_grpc.py").read_text()
    assert f"from . import {module} as" in text
    assert f"\nimport {module}" not in text
