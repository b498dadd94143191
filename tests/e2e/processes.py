"""What e2e tests do with the real `vgpu` processes they start: start them (the harness's
`command()` and `environment()`, output to its `log_file`), read their log, wait for a line in
it, kill them with SIGKILL, stop them with SIGTERM. A harness mixes this in; `processes` lists
what it started, for the fixture to stop."""

import signal
import subprocess
import time
from pathlib import Path


class ProcessControl:
    log_file: Path
    processes: list[subprocess.Popen[bytes]]

    def command(self, *extra: str) -> list[str]:
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        raise NotImplementedError

    def start(self, *extra: str) -> subprocess.Popen[bytes]:
        log = self.log_file.open("ab")
        process = subprocess.Popen(
            self.command(*extra), env=self.environment(), stdout=log, stderr=subprocess.STDOUT
        )
        self.processes.append(process)
        return process

    def log(self) -> str:
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""

    def wait_for_log(self, text: str, timeout: float = 15.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log():
                return True
            time.sleep(0.05)
        return text in self.log()

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        """SIGKILL: no shutdown hook runs, whatever the process was in the middle of."""
        process.kill()
        process.wait(timeout=15)

    def stop(self, process: subprocess.Popen[bytes]) -> int:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        return process.returncode
