"""What /healthz and /readyz of the device plugin say, from its kubelet session's state."""

import threading

from tests.unit.device_plugin.fakes import OPTIONS, NullHandler
from tests.unit.device_plugin.test_session import Clock
from vgpu.adapters.fake.kubelet import FakeKubelet
from vgpu.app.device_plugin.probes import PluginProbes
from vgpu.app.device_plugin.session import KubeletSession


class Thread(threading.Thread):
    """Stands for the session thread; alive until told otherwise, never started."""

    def __init__(self) -> None:
        super().__init__()
        self.alive = True

    def is_alive(self) -> bool:
        return self.alive


class StuckKubelet(FakeKubelet):
    """A kubelet whose restart check takes `takes` seconds of `clock`, during which it asks
    `probes` for liveness (what the kubelet's probe would see while the step hangs)."""

    def __init__(self, clock: Clock, probes: PluginProbes, takes: float) -> None:
        super().__init__()
        self._clock, self._probes, self._takes = clock, probes, takes
        self.seen: list[str] = []

    def kubelet_restarted(self) -> bool:
        self._clock.now += self._takes
        self.seen.append(self._probes.liveness())
        return False


def _session(kubelet: FakeKubelet, clock: Clock) -> KubeletSession:
    return KubeletSession(kubelet, NullHandler(), "nvidia.com/gpu", OPTIONS, 5.0, clock)


def test_while_starting_it_is_live_and_not_ready_with_the_reason() -> None:
    probes = PluginProbes(stall_limit=60)
    assert (probes.liveness(), probes.readiness()) == ("", "starting")

    probes.waiting("waiting for the NVIDIA driver: the NVIDIA kernel driver is not loaded")

    assert probes.liveness() == ""
    assert probes.readiness() == (
        "waiting for the NVIDIA driver: the NVIDIA kernel driver is not loaded"
    )


def test_ready_only_once_registered_with_the_kubelet() -> None:
    kubelet, clock, probes = FakeKubelet(), Clock(), PluginProbes(stall_limit=60)
    kubelet.refusals = 1
    session = _session(kubelet, clock)
    probes.serving(session, Thread())

    session.start()
    assert probes.readiness() == (
        "not registered with the kubelet yet: kubelet at "
        "/var/lib/kubelet/device-plugins/kubelet.sock refused to register"
    )
    assert probes.liveness() == ""

    clock.now += 5
    session.tick()
    assert (probes.liveness(), probes.readiness()) == ("", "")


def test_not_live_nor_ready_once_the_session_thread_has_stopped() -> None:
    session, thread, probes = _session(FakeKubelet(), Clock()), Thread(), PluginProbes(60)
    probes.serving(session, thread)
    session.start()

    thread.alive = False

    dead = (
        "the kubelet session thread has stopped: the plugin would not register again after a "
        "kubelet restart"
    )
    assert (probes.liveness(), probes.readiness()) == (dead, dead)


def test_not_live_while_one_session_step_is_stuck_past_the_limit_and_live_again_after() -> None:
    clock, probes = Clock(), PluginProbes(stall_limit=60)
    quick, slow = StuckKubelet(clock, probes, 59), StuckKubelet(clock, probes, 61)
    for kubelet in (quick, slow):
        session = _session(kubelet, clock)
        probes.serving(session, Thread())
        session.start()

        session.tick()  # registered: checks for a kubelet restart, which hangs

        assert probes.liveness() == ""  # the step is over
    assert quick.seen == [""]
    assert slow.seen == [
        "a kubelet session step has been under way for 61 s (liveness_stall: 60 s)"
    ]
