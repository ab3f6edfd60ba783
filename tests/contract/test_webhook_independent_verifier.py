"""Independent verifiers accept our deliveries: GitHub's `@octokit/webhooks-methods` (Node), installed from the
npm registry into the gitignored `.cache/node`, checks the `sha256=<hex>` header of a delivery we captured, and
Stripe's Node library checks the timestamped `t=...,v1=...` header (with two secrets during a rotation)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rewards_lab.contract.webhook_signatures import SIGNATURE_HEADER, TIMESTAMPED_SIGNATURE_HEADER, sign_timestamped
from tests.live_server import LiveServer, start_server
from tests.webhook_receiver import Receiver, ok, rewarding_world

ALLOW_PRIVATE = ("--allow-private-webhook-targets",)
NODE_PREFIX = Path(__file__).resolve().parents[2] / ".cache" / "node"
PACKAGE = "@octokit/webhooks-methods"
VERIFY_SCRIPT = """
import { verify } from "@octokit/webhooks-methods";
import { readFileSync } from "node:fs";
const cases = JSON.parse(readFileSync(0, "utf8"));
const results = [];
for (const c of cases) {
  results.push(await verify(c.secret, c.payload, c.signature));
}
process.stdout.write(JSON.stringify(results));
"""


@pytest.fixture(scope="module")
def octokit() -> Path:
    """The package installed with npm (once; later runs reuse it) and a script that imports it."""
    node, npm = shutil.which("node"), shutil.which("npm")
    assert node and npm, "node and npm are needed for the independent verifier test"
    if not (NODE_PREFIX / "node_modules" / PACKAGE / "package.json").exists():
        subprocess.run(
            [npm, "install", "--prefix", str(NODE_PREFIX), "--no-audit", "--no-fund", PACKAGE],
            check=True,
            capture_output=True,
            timeout=300,
        )
    script = NODE_PREFIX / "verify.mjs"  # beside node_modules, so that the bare import resolves
    script.write_text(VERIFY_SCRIPT)
    return script


def _node_verify(script: Path, cases: list[dict[str, str]]) -> list[bool]:
    result = subprocess.run(
        ["node", str(script)], input=json.dumps(cases), capture_output=True, text=True, check=True, timeout=60
    )
    verdicts: list[bool] = json.loads(result.stdout)
    return verdicts


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    # the receiver listens on 127.0.0.1: the operator's setting for private targets is on
    live = start_server(tmp_path_factory.mktemp("verifier") / "service.duckdb", serve_args=ALLOW_PRIVATE)
    yield live
    live.stop()


def test_octokit_verifies_our_deliveries(octokit: Path, server: LiveServer) -> None:
    receiver = Receiver()
    try:
        with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=10) as http:
            rewarding_world(http)
            hook = ok(http.post("/webhooks", json={"url": receiver.url, "events": ["reward.issued"]}), 201)
            # non-ASCII text travels as JSON escapes (bodies are ASCII): the signature covers the exact bytes
            event = {"type": "order.completed", "external_event_id": "caf\u00e9-1", "customer_id": "user-42"}
            ok(http.post("/events", json={**event, "data": {"amount": 12.5}}), 202)
            ok(http.post(f"/webhooks/{hook['id']}/test"), 202)
            got = receiver.wait_for(lambda seen: len(seen) == 2)
    finally:
        receiver.close()
    secret = hook["signing_secret"]
    cases = []
    for delivery in got:
        payload = delivery.raw.decode("utf-8")
        signature = delivery.headers[SIGNATURE_HEADER]
        cases.append({"secret": secret, "payload": payload, "signature": signature})
        cases.append({"secret": secret, "payload": payload.replace('"kind":"', '"kind":"x'), "signature": signature})
        cases.append({"secret": secret + "x", "payload": payload, "signature": signature})
    assert _node_verify(octokit, cases) == [True, False, False] * len(got)
    assert {d.body["kind"] for d in got} == {"reward.issued", "webhook.test"}
    assert any(b"caf\\u00e9-1" in d.raw for d in got) and all(d.raw.isascii() for d in got)


STRIPE_PACKAGE = "stripe"
STRIPE_SCRIPT = """
import Stripe from "stripe";
import { readFileSync } from "node:fs";
const stripe = new Stripe("sk_test_offline_verifier_only");
const cases = JSON.parse(readFileSync(0, "utf8"));
const results = [];
for (const c of cases) {
  try {
    stripe.webhooks.constructEvent(c.payload, c.header, c.secret, c.tolerance);
    results.push(true);
  } catch (error) {
    if (error.type !== "StripeSignatureVerificationError") throw error;
    results.push(false);
  }
}
process.stdout.write(JSON.stringify(results));
"""


@pytest.fixture(scope="module")
def stripe_verifier() -> Path:
    """Stripe's own Node library (its webhook verifier runs offline), installed like octokit above."""
    npm = shutil.which("npm")
    assert shutil.which("node") and npm, "node and npm are needed for the independent verifier test"
    if not (NODE_PREFIX / "node_modules" / STRIPE_PACKAGE / "package.json").exists():
        subprocess.run(
            [npm, "install", "--prefix", str(NODE_PREFIX), "--no-audit", "--no-fund", STRIPE_PACKAGE],
            check=True,
            capture_output=True,
            timeout=300,
        )
    script = NODE_PREFIX / "verify_stripe.mjs"
    script.write_text(STRIPE_SCRIPT)
    return script


def test_stripes_verifier_accepts_our_timestamped_header_and_refuses_replays(
    stripe_verifier: Path, server: LiveServer
) -> None:
    receiver = Receiver()
    try:
        with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=10) as http:
            hook = ok(http.post("/webhooks", json={"url": receiver.url, "events": ["asset.paused"]}), 201)
            ok(http.post(f"/webhooks/{hook['id']}/test"), 202)
            (before,) = receiver.wait_for(lambda seen: len(seen) == 1)
            rotated = ok(http.post(f"/webhooks/{hook['id']}/rotate-secret", json={"grace_period_s": 3600}), 200)
            ok(http.post(f"/webhooks/{hook['id']}/test"), 202)
            during = receiver.wait_for(lambda seen: len(seen) == 2)[1]
    finally:
        receiver.close()
    old, new = hook["signing_secret"], rotated["signing_secret"]
    cases: list[dict[str, Any]] = []
    for delivery, secrets in ((before, [old]), (during, [new, old])):
        payload = delivery.raw.decode("utf-8")
        header = delivery.headers[TIMESTAMPED_SIGNATURE_HEADER]
        cases += [{"payload": payload, "header": header, "secret": s, "tolerance": 300} for s in secrets]
        cases.append({"payload": payload + " ", "header": header, "secret": secrets[0], "tolerance": 300})
        cases.append({"payload": payload, "header": header, "secret": secrets[0] + "x", "tolerance": 300})
    # a delivery captured 20 minutes ago, replayed now: refused at Stripe's default tolerance
    stale = sign_timestamped(before.raw, [old], int(time.time()) - 1200)
    cases.append({"payload": before.raw.decode(), "header": stale, "secret": old, "tolerance": 300})
    verdicts = subprocess.run(
        ["node", str(stripe_verifier)], input=json.dumps(cases), capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(verdicts.stdout) == [True, False, False, True, True, False, False, False]
