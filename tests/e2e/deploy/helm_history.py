"""`helm install` and `helm upgrade` as Helm itself runs them, one after the other, with no cluster.

What an upgrade renders depends on how Helm merges the release's stored values with the new
ones (`--reuse-values`, `--reset-then-reuse-values`, `--set key=null`), and Helm's merging has
quirks no re-implementation keeps up with. So each command runs with the real helm binary,
`--dry-run=client -o json`: the release it prints is stored as deployed in Helm's memory driver
(`HELM_MEMORY_DRIVER_DATA`) for the next command. An upgrade asks the API server for its version
and discovery, which a stand-in on a loopback port answers (no API groups: the objects of
optional APIs are left out, as on a cluster without them); nothing else is asked.
"""

import json
import subprocess
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.deploy.render import CHART, tool

Release = dict[str, Any]

_DISCOVERY = {
    "/version": {"major": "1", "minor": "33", "gitVersion": "v1.33.0"},
    "/api": {"kind": "APIVersions", "versions": ["v1"]},
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": []},
    "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": []},
}


class _Discovery(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = _DISCOVERY.get(self.path.split("?", 1)[0])
        data = json.dumps(body).encode()
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class HelmHistory:
    """Runs `helm install|upgrade <release> charts/vgpu ...` command lines in `work`."""

    def __init__(self, work: Path, kubeconfig: Path) -> None:
        self._work = work
        self._kubeconfig = kubeconfig

    def run(self, argv: list[str], files: Mapping[str, Path], current: Release | None) -> Release:
        """The release `argv` (a command line of the guide: `charts/vgpu` and the file names
        in `files` stand for their paths) makes over `current`, the release deployed before."""
        args = [str(CHART) if a == "charts/vgpu" else str(files.get(a, a)) for a in argv[1:]]
        stored = self._work / "releases.json"
        stored.write_text(json.dumps([current] if current is not None else []))
        result = subprocess.run(
            [tool("helm"), *args, "--dry-run=client", "--output", "json"],
            capture_output=True,
            text=True,
            check=False,
            env={
                "HELM_DRIVER": "memory",
                "HELM_MEMORY_DRIVER_DATA": str(stored),
                "KUBECONFIG": str(self._kubeconfig),
                "HOME": str(self._work),
                "PATH": "/usr/bin:/bin",
            },
        )
        assert result.returncode == 0, f"{' '.join(argv)}\n{result.stderr}"
        release: Release = json.loads(result.stdout)
        release["info"]["status"] = "deployed"
        return release


@contextmanager
def helm_history(work: Path) -> Iterator[HelmHistory]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Discovery)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    kubeconfig = work / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": _url(server)}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "users": [{"name": "u", "user": {}}],
                "current-context": "c",
            }
        )
    )
    try:
        yield HelmHistory(work, kubeconfig)
    finally:
        server.shutdown()
        server.server_close()


def objects(release: Release) -> list[dict[str, Any]]:
    """The objects the release's manifest holds (its hooks apart)."""
    return [o for o in yaml.safe_load_all(release["manifest"]) if o]


def _url(server: ThreadingHTTPServer) -> str:
    host, port = server.server_address[:2]
    return f"http://{host!s}:{port}"
