"""vgpu installed on a node HAMi runs, on the default settings (no takeover flag), against the
API emulator and a kubelet over real sockets.

HAMi's scheduler placed two pods (its annotations, unsigned) and HAMi's device plugin served
them (the kubelet's checkpoint records it). Then HAMi's plugin leaves the node, and vgpu's
device plugin and scheduler start. Both count HAMi's running pods from the start: the scheduler
because they are bound and hold GPUs, the plugin from the kubelet's checkpoint. A pod that
would over-commit a card is refused by the scheduler's filter, and, should a grant for it
reach the node anyway, by the plugin's Allocate.
"""

from pathlib import Path

from tests.e2e.device_plugin.hami_plugin import HamiPlugin
from tests.e2e.device_plugin.harness import NODE, SPLIT, UUID_A, UUID_B, PluginEnv
from tests.e2e.device_plugin.test_occupancy import HAMI_SPLIT, hami_pod, refused_over_capacity
from tests.e2e.k8s_emulator import pod_manifest
from tests.e2e.scheduler.harness import SchedulerProcess, wait_until

HAMI_GRANTS = {"hami-a": f"{UUID_A},NVIDIA,20000,0:;", "hami-b": f"{UUID_B},NVIDIA,20000,0:;"}
PODS = "/api/v1/namespaces/default/pods"


def hami_runs_its_pods(env: PluginEnv) -> dict[str, str]:
    """HAMi's scheduler places the pods, HAMi's plugin serves them, the kubelet starts them;
    then HAMi's plugin leaves the node. Returns their uids by name."""
    env.kubelet.start()
    hami = HamiPlugin(env.api, NODE, env.plugin_dir, [UUID_A, UUID_B], HAMI_SPLIT).start()
    uids = {}
    try:
        assert env.kubelet.wait_for(lambda: bool(env.kubelet.registrations))
        for replica, (name, grants) in enumerate(HAMI_GRANTS.items()):
            uids[name] = hami_pod(env, name, grants, bind_phase="allocating")
            card = UUID_A if name == "hami-a" else UUID_B
            env.kubelet.allocate([f"{card}-{replica}"])
            env.api.merge_patch(f"{PODS}/{name}", {"status": {"phase": "Running"}})
    finally:
        hami.stop()
    return uids


def test_on_the_default_settings_hamis_running_pods_are_counted_by_scheduler_and_plugin(
    plugin_env: PluginEnv, tmp_path: Path
) -> None:
    env = plugin_env
    uids = hami_runs_its_pods(env)
    assert {e["PodUID"] for e in env.kubelet.checkpoint.entries()} == set(uids.values())

    env.start()  # vgpu's device plugin, no takeover flag
    assert env.kubelet.wait_for(
        lambda: env.kubelet.registrations[-1].endpoint == "nvidia-gpu.sock"
    ), env.log()
    assert wait_until(lambda: "hami.io/node-nvidia-register" in env.node_annotations()), env.log()
    allocatable = {"nvidia.com/gpu": str(2 * SPLIT)}  # what the kubelet reports from its list
    env.api.merge_patch(f"/api/v1/nodes/{NODE}", {"status": {"allocatable": allocatable}})
    scheduler = SchedulerProcess(tmp_path, ["--kubeconfig", str(env.kubeconfig)])
    try:
        scheduler.start()
        newcomer = env.api.create(
            PODS,
            pod_manifest(
                "default",
                "newcomer",
                limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 20000},
                scheduler_name="vgpu-scheduler",
            ),
        )

        reply = scheduler.filter(newcomer, [NODE])

        assert not reply.get("NodeNames"), f"placed over HAMi's pods: {reply}\n{scheduler.logs()}"
        assert "insufficient memory" in reply["FailedNodes"][NODE], reply
        assert scheduler.metric("vgpu_unsigned_grants_counted") == [2.0]
    finally:
        scheduler.close()

    # a grant that reaches the node anyway (signed: a scheduler that did not count HAMi's pods)
    details = refused_over_capacity(env, "second", 0)
    assert "default/hami-a by its kubelet checkpoint" in details, details
