"""Drive a real `vgpu scheduler` process the way kube-apiserver and kube-scheduler do.

`SchedulerProcess` starts `python -m vgpu.app.cli scheduler` with its three listeners on free
127.0.0.1 ports (`port`: webhook and health, `extender_port`: the verbs, `metrics_port`) and
waits for `/readyz`; `stop()` sends SIGTERM and waits. `client`, `extender` and `scrape` are
HTTP clients for the three listeners. The helper functions build the exact bodies:
an `admission.k8s.io/v1` AdmissionReview for a pod CREATE, and the extender's
`{"Pod": ..., "Nodes": null, "NodeNames": [...]}` and `{"PodName": ..., ...}`.
"""

import base64
import json
import os
import random
import signal
import socket
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.certs import Pair

TLS_DIR = Path(__file__).parent / "tls"
REPO = Path(__file__).resolve().parents[3]


def free_port() -> int:
    """A loopback port free now, below the system's ephemeral range: a port the system hands
    out (bind to 0) can be taken again by any outgoing connection before the scheduler binds
    it, which made a start fail now and then with "Address already in use"."""
    below = max(_ephemeral_start(), 10001)
    for _ in range(100):
        port = random.randrange(10000, below)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free loopback port in 10000-{below}")


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def wait_until(condition: Callable[[], bool], timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


@dataclass(frozen=True)
class ExtenderClientTls:
    """How a client (kube-scheduler) talks to an extender served over mutual TLS: the CA that
    signed the server's certificate, and the client certificate it presents (if any)."""

    server_ca: Path
    client: Pair | None = None

    def context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.server_ca)
        if self.client is not None:
            context.load_cert_chain(self.client.cert, self.client.key)
        return context


class SchedulerProcess:
    """One `vgpu scheduler` process; `args` are its flags, `env` its VGPU_* settings."""

    def __init__(
        self,
        workdir: Path,
        args: Sequence[str],
        env: Mapping[str, str] | None = None,
        tls: bool | tuple[Pair, Path] = False,
        name: str = "scheduler",
        extender_tls: ExtenderClientTls | None = None,
    ) -> None:
        """`tls`: serve the webhook over HTTPS, with the repository's test pair (True) or with
        `(pair, trust root)`; `extender_tls`: how the extender client does mutual TLS."""
        self.tls = bool(tls)
        pair, root = (
            tls
            if isinstance(tls, tuple)
            else (Pair(TLS_DIR / "tls.crt", TLS_DIR / "tls.key"), None)
        )
        root = root or pair.cert
        self.log_path = workdir / f"{name}.log"
        self._args = list(args)
        if tls:
            self._args += ["--tls-cert", str(pair.cert), "--tls-key", str(pair.key)]
        self._env = {k: v for k, v in os.environ.items() if not k.startswith("VGPU_")}
        self._env.update(env or {})
        self._env["PYTHONPATH"] = str(REPO / "src")
        self._process: subprocess.Popen[bytes] | None = None
        self._scheme = "https" if tls else "http"
        self._extender_scheme = "https" if extender_tls else "http"
        self.client = httpx.Client(
            timeout=30.0, verify=ssl.create_default_context(cafile=root) if tls else True
        )
        self.extender = httpx.Client(
            timeout=30.0, verify=extender_tls.context() if extender_tls else True
        )
        self.scrape = httpx.Client(timeout=30.0)
        self.explainer = httpx.Client(timeout=30.0)
        self._served = False
        self._take_ports()

    def _take_ports(self) -> None:
        self.port, self.extender_port, self.metrics_port, self.explain_port = (
            free_port() for _ in range(4)
        )
        self.url = f"{self._scheme}://127.0.0.1:{self.port}"
        self.extender_url = f"{self._extender_scheme}://127.0.0.1:{self.extender_port}"
        self.client.base_url = httpx.URL(self.url)
        self.extender.base_url = httpx.URL(self.extender_url)
        self.scrape.base_url = httpx.URL(f"http://127.0.0.1:{self.metrics_port}")
        self.explainer.base_url = httpx.URL(f"http://127.0.0.1:{self.explain_port}")

    def start(self, ready: bool = True) -> "SchedulerProcess":
        """Start the process; on a first start whose port another test's server took between
        `free_port` and the bind, start again on other ports."""
        for _ in range(5):
            logged = len(self.logs())
            self._spawn()
            if not ready:
                return self
            try:
                if wait_until(self.ready, 30):
                    self._served = True  # its URLs are in use now: a restart keeps them
                    return self
            except AssertionError:
                taken = "Address already in use" in self.logs()[logged:]
                if not taken or self._served:
                    raise
                self._process = None
                self._take_ports()
                continue
            raise AssertionError(f"the scheduler did not become ready:\n{self.logs()}")
        raise AssertionError(f"no free ports after 5 starts:\n{self.logs()}")

    def _spawn(self) -> None:
        listeners = [
            "--listen", f"127.0.0.1:{self.port}",
            "--extender-listen", f"127.0.0.1:{self.extender_port}",
            "--metrics-listen", f"127.0.0.1:{self.metrics_port}",
            "--explain-listen", f"127.0.0.1:{self.explain_port}",
        ]  # fmt: skip
        log = self.log_path.open("ab")
        command = [sys.executable, "-m", "vgpu.app.cli", "scheduler", *self._args, *listeners]
        self._process = subprocess.Popen(command, stdout=log, stderr=log, env=self._env)
        log.close()

    def ready(self) -> bool:
        if self._process is not None and self._process.poll() is not None:
            raise AssertionError(f"the scheduler exited early:\n{self.logs()}")
        try:
            return self.client.get("/readyz").status_code == 200
        except httpx.TransportError:
            return False

    def listening(self) -> bool:
        try:
            return self.client.get("/healthz").status_code == 200
        except httpx.TransportError:
            return False

    def signal(self, signum: int) -> None:
        assert self._process is not None
        self._process.send_signal(signum)

    @property
    def pid(self) -> int:
        assert self._process is not None, "not started"
        return self._process.pid

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stop(self) -> int | None:
        if self._process is None:
            return None
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(15)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(5)
        code = self._process.returncode
        self._process = None
        return code

    def close(self) -> None:
        for client in (self.client, self.extender, self.scrape, self.explainer):
            client.close()  # idle keep-alive connections would hold up a graceful shutdown
        self.stop()

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    # what kube-apiserver and kube-scheduler send ----------------------------------------------
    def review(
        self, pod: Mapping[str, Any], version: str = "admission.k8s.io/v1", path: str = "/webhook"
    ) -> Any:
        body = admission_review(pod, version)
        response = self.client.post(path, json=body)
        assert response.status_code == 200, response.text
        reply = response.json()
        assert reply["response"]["uid"] == body["request"]["uid"]
        assert reply["apiVersion"] == version
        return reply["response"]

    def admit(self, pod: Mapping[str, Any], path: str = "/webhook") -> dict[str, Any]:
        """The pod as the API server stores it after our webhook; AssertionError if denied."""
        response = self.review(pod, path=path)
        assert response["allowed"], response
        return apply_patch(pod, response)

    def filter(self, pod: Mapping[str, Any], nodes: Sequence[str]) -> Any:
        body = {"Pod": pod, "Nodes": None, "NodeNames": list(nodes)}
        response = self.extender.post("/filter", json=body)
        assert response.status_code == 200, response.text
        return response.json()

    def prioritize(self, pod: Mapping[str, Any], nodes: Sequence[str]) -> Any:
        body = {"Pod": pod, "Nodes": None, "NodeNames": list(nodes)}
        response = self.extender.post("/prioritize", json=body)
        assert response.status_code == 200, response.text
        return response.json()

    def bind(self, pod: Mapping[str, Any], node: str) -> str:
        meta = pod["metadata"]
        body = {
            "PodName": meta["name"],
            "PodNamespace": meta.get("namespace", "default"),
            "PodUID": meta.get("uid", ""),
            "Node": node,
        }
        response = self.extender.post("/bind", json=body)
        assert response.status_code == 200, response.text
        error: str = response.json()["Error"]
        return error

    def metric(self, name: str, **labels: str) -> list[float]:
        """Values of samples named `name` whose labels include `labels`."""
        from prometheus_client.parser import text_string_to_metric_families

        text = self.scrape.get("/metrics").text
        return [
            sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == name and labels.items() <= sample.labels.items()
        ]


def admission_review(pod: Mapping[str, Any], version: str) -> dict[str, Any]:
    meta = pod.get("metadata") or {}
    return {
        "apiVersion": version,
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", "default"),
            "operation": "CREATE",
            "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters"]},
            "object": pod,
            "oldObject": None,
            "dryRun": False,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
        },
    }


def apply_patch(pod: Mapping[str, Any], response: Mapping[str, Any]) -> dict[str, Any]:
    """Apply the webhook's base64 JSONPatch as the API server does (add/replace/remove)."""
    result: dict[str, Any] = json.loads(json.dumps(pod))
    if "patch" not in response:
        return result
    assert response["patchType"] == "JSONPatch"
    for op in json.loads(base64.b64decode(response["patch"])):
        *parents, last = [
            p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]
        ]
        target: Any = result
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if op["op"] == "remove":
            del target[int(last) if isinstance(target, list) else last]
        elif isinstance(target, list):
            target.append(op["value"]) if last == "-" else target.insert(int(last), op["value"])
        else:
            target[last] = op["value"]
    return result
