"""The support assistant's evaluation: a tenant's records, the questions of tests/service/ai_eval_questions.json,
and how often the right source is among an answer's first three.

    python benchmarks/ai_eval.py            # seeds a fresh DuckDB file, asks, writes reports/ai-eval.md

Each question (or chain of questions: a conversation, the last one evaluated) names its expected sources with
placeholders the seed resolves: `{event:o-1}` (an event by external id), `{customer:alice}`, `{wallet:alice}`,
`{programme:spring}`, `{version:spring:2}` (`prg_... v2`); documentation sections as `path#title` (`docs/rules.md#
Expiry`, `error registry#asset_paused`). A question is a hit when every expected source is in the top 3.
tests/service/test_ai_eval.py runs the same and asserts the hit rate.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rewards_lab.contract import requests as rq  # noqa: E402
from rewards_lab.contract import resources as r  # noqa: E402
from rewards_lab.contract.scope import Scope  # noqa: E402
from rewards_lab.contract.validation import validate  # noqa: E402
from rewards_lab.engine.event_processing import process_all  # noqa: E402
from rewards_lab.service import assets, conversations, customers, event_intake, organizations, programmes  # noqa: E402
from rewards_lab.store.database import Database  # noqa: E402

QUESTIONS = ROOT / "tests" / "service" / "ai_eval_questions.json"
REPORT = ROOT / "reports" / "ai-eval.md"
TOP = 3
GOAL = 0.9
# When each version was published (the seed moves the service's clock-made times to these).
PUBLISHED = {("spring", 1): "2026-01-10T09:00:00", ("spring", 2): "2026-03-01T09:00:00"}
PUBLISHED |= {("spring", 3): "2026-06-01T09:00:00", ("referral", 1): "2026-02-15T12:00:00"}


@dataclass
class Names:
    """The seeded records' ids by the names the questions use."""

    scope: Scope
    ids: dict[str, str] = field(default_factory=dict)

    def fill(self, text: str) -> str:
        """A question with its placeholders (`{event:o-2}`) replaced by the seeded ids."""
        return re.sub(r"\{[a-z]+:[^{}]+\}", lambda match: self.resolve(match.group(0)), text)

    def resolve(self, expected: str) -> str:
        if not expected.startswith("{"):
            return expected
        kind, _, rest = expected.strip("{}").partition(":")
        if kind == "version":
            name, _, number = rest.partition(":")
            return f"{self.ids['programme:' + name]} v{number}"
        return self.ids[f"{kind}:{rest}"]


@dataclass(frozen=True)
class Result:
    id: str
    asked: list[str]
    expected: list[str]  # resolved: record ids
    cited: list[str]
    wanted: list[str]  # as the question file names them (placeholders: the same in every run)

    @property
    def hit(self) -> bool:
        """Every expected source (one of a `a|b` choice) among the first citations."""
        top = self.cited[:TOP]
        return all(any(choice in top for choice in source.split("|")) for source in self.expected)


def _customer(database: Database, scope: Scope, name: str, wallet: bool, names: Names) -> None:
    customer = customers.create_customer(database, scope, validate(rq.CustomerCreate, {"external_id": name}))
    names.ids[f"customer:{name}"] = customer.id
    if wallet:
        body = validate(rq.WalletCreate, {"customer_id": customer.id, "type": "customer"})
        names.ids[f"wallet:{name}"] = customers.create_wallet(database, scope, body).id


def _rule(
    database: Database, scope: Scope, programme: r.Programme, event_type: str, conditions: Any, amount: Any
) -> str:
    body = {
        "program_id": programme.id,
        "event_type": event_type,
        "conditions": conditions,
        "actions": [{"type": "issue", "amount": amount}],
    }
    return programmes.create_rule(database, scope, validate(rq.RuleCreate, body)).id


def _event(database: Database, scope: Scope, external_id: str, event_type: str, customer: str, data: Any) -> None:
    body = {"type": event_type, "external_event_id": external_id, "customer_id": customer, "data": data}
    event_intake.submit_event(database, scope, validate(rq.EventCreate, body))


def seed(database: Database) -> Names:
    """A shop's tenant: five customers, an asset whose points expire, a programme with three versions and one with
    one, events that issued, issued nothing, failed or wait; and a second tenant with look-alike names."""
    org = organizations.create_organization(database, "Eval shop")
    scope = Scope(org.id, "sandbox")
    names = Names(scope)
    for name, wallet in (("alice", True), ("bob", True), ("carol", True), ("dave", False), ("erin", True)):
        _customer(database, scope, name, wallet, names)
    body = {"name": "Stars", "symbol": "STAR", "type": "points", "decimals": 2, "expiry": {"after_days": 365}}
    asset = assets.activate_asset(
        database, scope, assets.create_asset(database, scope, validate(rq.AssetCreate, body)).id
    )
    spring = programmes.create_programme(
        database, scope, validate(rq.ProgrammeCreate, {"name": "Spring launch", "asset_id": asset.id})
    )
    names.ids["programme:spring"] = spring.id
    rule = _rule(
        database,
        scope,
        spring,
        "order.completed",
        [{"field": "amount", "operator": "gte", "value": 50}],
        {"per": "amount", "rate": Decimal("0.05")},
    )
    programmes.publish(database, scope, spring.id)
    update = {"conditions": [{"field": "amount", "operator": "gte", "value": 30}]}
    programmes.update_rule(database, scope, rule, validate(rq.RuleUpdate, update))
    programmes.publish(database, scope, spring.id)
    programmes.update_rule(
        database,
        scope,
        rule,
        validate(rq.RuleUpdate, {"conditions": [{"field": "amount", "operator": "gte", "value": 20}]}),
    )
    programmes.publish(database, scope, spring.id)
    referral = programmes.create_programme(
        database, scope, validate(rq.ProgrammeCreate, {"name": "Referral bonus", "asset_id": asset.id})
    )
    names.ids["programme:referral"] = referral.id
    _rule(database, scope, referral, "referral.completed", [], {"fixed": "5.00"})
    programmes.publish(database, scope, referral.id)
    _backdate(database, scope, names)
    for external_id, event_type, customer, data in (
        ("o-1", "order.completed", "alice", {"amount": Decimal("42.50")}),
        ("o-2", "order.completed", "alice", {"amount": Decimal("12.00")}),
        ("o-3", "order.completed", "bob", {"amount": Decimal("120")}),
        ("o-4", "order.completed", "carol", {"amount": Decimal("19.99")}),
        ("ref-1", "referral.completed", "erin", {}),
        ("news-1", "newsletter.signup", "carol", {}),
    ):
        _event(database, scope, external_id, event_type, customer, data)
    process_all(database)
    _event(database, scope, "o-5", "order.completed", "bob", {"amount": Decimal("80")})  # not processed yet
    for external_id in ("o-1", "o-2", "o-3", "o-4", "o-5", "ref-1", "news-1"):
        (event,) = database.reader().execute(
            "SELECT id FROM events WHERE organization_id = ? AND environment = ? AND external_event_id = ?",
            [*scope.params, external_id],
        ).fetchone() or (None,)
        names.ids[f"event:{external_id}"] = str(event)
    _other_tenant(database)
    return names


def _backdate(database: Database, scope: Scope, names: Names) -> None:
    """Publication times as the questions know them (the service stamps them now)."""
    with database.transaction() as con:
        for (programme, number), at in PUBLISHED.items():
            con.execute(
                "UPDATE programme_versions SET published_at = ? "
                "WHERE organization_id = ? AND environment = ? AND program_id = ? AND number = ?",
                [datetime.fromisoformat(at), *scope.params, names.ids[f"programme:{programme}"], number],
            )


def _other_tenant(database: Database) -> None:
    """Another tenant with a customer named alice and an event o-1: never an answer's source."""
    other = Scope(organizations.create_organization(database, "Other shop").id, "sandbox")
    customers.create_customer(database, other, validate(rq.CustomerCreate, {"external_id": "alice"}))
    _event(database, other, "o-1", "order.completed", "alice", {"amount": Decimal("99")})


def questions(path: Path = QUESTIONS) -> list[dict[str, Any]]:
    return list(json.loads(path.read_text()))


def citation(hit: r.KnowledgeHit) -> str:
    """A record's id (`evt_...`, `prg_... v2`) as it is; a passage as `source#title`."""
    documentary = hit.source.endswith(".md") or hit.source in ("error registry", "permissions")
    return f"{hit.source}#{hit.title}" if documentary else hit.source


def evaluate(database: Database, names: Names, items: list[dict[str, Any]]) -> list[Result]:
    results = []
    for number, item in enumerate(items):
        asked = [item["ask"]] if isinstance(item["ask"], str) else list(item["ask"])
        conversation = f"eval-{number}"
        answer = None
        for question in asked:
            answer = conversations.conversation_message(
                database, names.scope, conversation, validate(rq.MessageCreate, {"content": names.fill(question)})
            )
        assert answer is not None
        expected = ["|".join(names.resolve(choice) for choice in source.split("|")) for source in item["expect"]]
        cited = [citation(hit) for hit in answer.sources]
        results.append(Result(item["id"], asked, expected, cited, list(item["expect"])))
    return results


def hit_rate(results: list[Result]) -> float:
    return sum(result.hit for result in results) / len(results)


def report(results: list[Result], names: Names) -> str:
    names_of = {value: "{" + key + "}" for key, value in names.ids.items()}
    names_of |= {
        f"{value} v{n}": "{version:" + key.split(":")[1] + f":{n}" + "}"
        for key, value in names.ids.items()
        if key.startswith("programme:")
        for n in range(1, 4)
    }
    rate = hit_rate(results)
    lines = [
        "# Support assistant: evaluation",
        "",
        f"Written by `python benchmarks/ai_eval.py` from tests/service/ai_eval_questions.json ({len(results)} "
        f"questions) over a seeded tenant. A hit: every expected source among the answer's first {TOP} citations.",
        "",
        f"**Hit rate: {sum(r.hit for r in results)}/{len(results)} = {rate:.1%}** (goal {GOAL:.0%}).",
        "",
        "| id | question | expected | hit |",
        "|---|---|---|---|",
    ]
    for result in results:
        question = " / ".join(result.asked).replace("|", "\\|")
        lines.append(f"| {result.id} | {question} | {', '.join(result.wanted)} | {'yes' if result.hit else 'no'} |")
    misses = [result for result in results if not result.hit]
    if misses:
        lines += ["", "## Misses", ""]
        for result in misses:
            cited = [names_of.get(source, source) for source in result.cited[:TOP]]
            lines.append(f"- {result.id}: cited {', '.join(cited) or 'nothing'}")
    return "\n".join(lines) + "\n"


def main() -> int:
    with tempfile.TemporaryDirectory() as folder, Database(Path(folder) / "eval.duckdb") as database:
        names = seed(database)
        results = evaluate(database, names, questions())
    text = report(results, names)
    REPORT.write_text(text)
    print(f"hit rate {hit_rate(results):.1%} ({sum(r.hit for r in results)}/{len(results)}); wrote {REPORT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
