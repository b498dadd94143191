import pytest

from tests.unit.device_plugin.fakes import OPTIONS, NullHandler
from vgpu.adapters.fake.kubelet import FakeKubelet
from vgpu.ports.kubelet import KubeletError, PluginOptions


def test_registration_needs_a_serving_plugin_and_keeps_the_plugins_own_options() -> None:
    kubelet = FakeKubelet()
    with pytest.raises(
        KubeletError, match=r"no device plugin serves on /var/lib/kubelet/device-plugins/vgpu\.sock"
    ):
        kubelet.register("nvidia.com/gpu", OPTIONS)
    kubelet.serve(NullHandler())
    kubelet.register("nvidia.com/gpu", PluginOptions())
    assert kubelet.registered == [("nvidia.com/gpu", OPTIONS)]


@pytest.mark.parametrize("name", ["gpu", "kubernetes.io/gpu", "/gpu", "nvidia.com/"])
def test_resource_names_must_be_extended_resources(name: str) -> None:
    kubelet = FakeKubelet()
    kubelet.serve(NullHandler())
    with pytest.raises(KubeletError, match="not an extended resource"):
        kubelet.register(name, OPTIONS)


def test_a_restart_drops_the_plugin_until_it_serves_again() -> None:
    kubelet = FakeKubelet()
    kubelet.serve(NullHandler())
    kubelet.register("nvidia.com/gpu", OPTIONS)
    kubelet.restart()
    assert kubelet.kubelet_restarted()
    with pytest.raises(KubeletError):
        kubelet.devices()
    kubelet.serve(NullHandler())
    assert not kubelet.kubelet_restarted()
    assert kubelet.devices() == []


def test_allocate_goes_to_the_registered_plugin() -> None:
    kubelet = FakeKubelet()
    kubelet.serve(NullHandler())
    with pytest.raises(KubeletError, match="no device plugin has registered"):
        kubelet.allocate([["GPU-a-0"]])
    kubelet.register("nvidia.com/gpu", OPTIONS)
    assert kubelet.allocate([["GPU-a-0"]]) == []
