"""The customers steps: the lookup (`customers`) and the events with their customer's facts (`facts`).

One definition for both executors. The lookup holds one row per reference, every customer under its id and under
its external_id (`__ref`), the customer's id (`__cid`) and the facts the rules read (columns whose expressions
over the customers table are the engine's own: how a JSON, STRUCT or MAP column reads differs, so the engine's
customers reader gives them, `Lookup`); among customers sharing an external_id, the smallest id, as the live
engine resolves a reference (store.customers.resolve_many). `facts` joins the events with it: one hash join on
`customer_id` when the rules read `customer.*`, and one per beneficiary field on the reference it names
(`{column}_id`, NULL: no customer has it). An event whose customer is not in the table reads no customer field.

Where `facts` sits differs: DuckDB joins the events as read and numbers the joined view (the view
`{prefix}_ordered` every path reads); Spark numbers the events first and joins the numbered rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp

from rewards_lab.replay.plan import schema
from rewards_lab.replay.plan.rules import Context
from rewards_lab.replay.plan.sql import Text

FOUND = "__cid"  # the customer's id (NULL: no customer has the reference)


@dataclass(frozen=True)
class Lookup:
    """The lookup's facts columns (empty when no rule reads customer.*): (name, expression over the customers
    table as a tree of the executor's engine, its DuckDB text when the engine is DuckDB), and whether the table has
    an external_id column."""

    columns: tuple[tuple[str, exp.Expr, str | None], ...]
    external: bool

    @property
    def names(self) -> list[str]:
        return [FOUND, *(name for name, _, _ in self.columns)]


def lookup_query(customers: str, lookup: Lookup) -> Text:
    """SQL of the lookup over the customers table `customers` (rows without an id are refused before)."""

    def branch(ref: str, pri: int, where: str, tag: str) -> tuple[str, str, dict[str, exp.Expr]]:
        tree = ", ".join(f":{tag}{i} AS {name}" for i, (name, _, _) in enumerate(lookup.columns))
        text = ", ".join(f"{duckdb} AS {name}" for name, _, duckdb in lookup.columns)
        head = f"SELECT CAST({ref} AS VARCHAR) AS __ref, {pri} AS __pri, CAST(id AS VARCHAR) AS {FOUND}"
        tail = f" FROM {customers} WHERE {where}"
        trees = {f"{tag}{i}": node for i, (_, node, _) in enumerate(lookup.columns)}
        return head + (", " + tree if tree else "") + tail, head + (", " + text if text else "") + tail, trees

    parts = [branch("id", 0, "id IS NOT NULL", "f")]
    if lookup.external:
        parts.append(branch("external_id", 1, "id IS NOT NULL AND external_id IS NOT NULL", "g"))
    listed = ", ".join(["__ref", *lookup.names])

    def whole(union: str) -> str:
        return (
            f"SELECT {listed} FROM (SELECT *, row_number() OVER (PARTITION BY __ref ORDER BY __pri, {FOUND}) "
            f"AS __rank FROM ({union}) r) q WHERE __rank = 1"
        )

    placeholders = {name: node for _, _, trees in parts for name, node in trees.items()}
    duckdb = None
    if all(text is not None for _, _, text in lookup.columns):
        duckdb = whole(" UNION ALL ".join(text for _, text, _ in parts))
    return Text(whole(" UNION ALL ".join(sql for sql, _, _ in parts)), placeholders, duckdb)


def facts_query(
    events: str,
    lookup: str | None,
    facts: Sequence[str],
    beneficiaries: Sequence[tuple[str, exp.Expr]],
) -> Text:
    """SQL of `events` with the facts columns `facts` of the customer (from the lookup table `lookup`, when given
    and `facts` is not empty), each beneficiary field's reference (its column) and, with a lookup, the customer id
    it resolves to (`{column}_id`)."""
    sql = f"SELECT * FROM {events}"
    if lookup is not None and facts:
        listed = ", ".join(f"c.{column} AS {column}" for column in facts)
        sql = f"SELECT s.*, {listed} FROM {events} s LEFT JOIN {lookup} c ON c.__ref = s.customer_id"
    placeholders: dict[str, exp.Expr] = {}
    if beneficiaries:
        references = ", ".join(f":r{j} AS {column}" for j, (column, _) in enumerate(beneficiaries))
        placeholders = {f"r{j}": reference for j, (_, reference) in enumerate(beneficiaries)}
        sql = f"SELECT t.*, {references} FROM ({sql}) t"
        if lookup is not None:
            resolved = ", ".join(f"b{j}.{FOUND} AS {column}_id" for j, (column, _) in enumerate(beneficiaries))
            joins = " ".join(
                f"LEFT JOIN {lookup} b{j} ON b{j}.__ref = u.{column}" for j, (column, _) in enumerate(beneficiaries)
            )
            sql = f"SELECT u.*, {resolved} FROM ({sql}) u {joins}"
    return Text(sql, placeholders)


def joins(ctx: Context) -> bool:
    """Whether the events need the `facts` step (a customers table the rules read, or a beneficiary field)."""
    return bool(ctx.plan.beneficiaries) or (ctx.lookup is not None and ctx.plan.reads_customers)


def customers(ctx: Context) -> Text:
    """`customers_lookup`: one row per reference with the customer's id and facts."""
    assert ctx.lookup is not None
    return lookup_query(ctx.table(schema.CUSTOMERS), ctx.lookup)


def facts(ctx: Context) -> Text:
    """`facts`: the events with their customer's facts and their beneficiaries' references and ids."""
    lookup = ctx.lookup
    named = [] if lookup is None or not ctx.plan.reads_customers else lookup.names
    table = None if lookup is None else ctx.table(schema.CUSTOMERS_LOOKUP)
    return facts_query(ctx.table(schema.EVENTS), table, named, ctx.plan.beneficiaries)
