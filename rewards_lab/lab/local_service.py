"""A throwaway `rewards-lab serve` on 127.0.0.1 over a temporary DuckDB file, for notebooks run without a
deployment (the push notebook with an empty `base_url`): bootstrap, serve on a free port, wait, stop."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

START_TIMEOUT_S = 30.0


@dataclass
class LocalService:
    base_url: str
    organization_id: str
    keys: dict[str, str]
    process: subprocess.Popen[bytes]
    folder: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> LocalService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "rewards_lab.cli.main", *args]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_local_service(organization: str = "Lab") -> LocalService:
    folder = Path(tempfile.mkdtemp(prefix="rewards-lab-"))
    db = folder / "service.duckdb"
    boot = json.loads(
        subprocess.run(
            _command("bootstrap", "--db", str(db), "--org", organization), check=True, capture_output=True, text=True
        ).stdout
    )
    port = _free_port()
    log = (folder / "serve.log").open("wb")
    # a local service for notebooks: its webhooks may reach receivers on this machine (off in any deployment)
    serve = _command("serve", "--db", str(db), "--port", str(port), "--allow-private-webhook-targets")
    process = subprocess.Popen(serve, stdout=log, stderr=log)
    log.close()  # the child holds its own descriptor
    base_url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            if httpx.get(f"{base_url}/openapi.json", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"the local service did not start: {(folder / 'serve.log').read_text()}")
        time.sleep(0.1)
    return LocalService(base_url, str(boot["organization_id"]), dict(boot["api_keys"]), process, folder)
