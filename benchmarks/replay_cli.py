"""The headline of benchmarks/replay.py: the `rewards-lab replay` CLI against a hand-written DuckDB query that
writes the same issuance rows to Parquet (issue 16).

Every measured run is a fresh process, timed wall-clock from its start to its exit (interpreter start-up and
imports included, as a user running the command sees it), with its peak resident set: `ru_maxrss` from
`os.wait4`, that one process's own rather than the maximum over every child the benchmark ran. Linux counts in a
child's ru_maxrss the peak of the process that started it (exec records the old address space's high-water mark,
and a vfork child's old address space is its parent's), so the process that starts the measured ones stays small:
it neither reads the output files nor generates events; the checks run in a process of their own. The
hand-written query is one `COPY (SELECT ...) TO ... (FORMAT PARQUET)` over the benchmark programme's twenty rules
written by hand (RULE_CENTS): one row per rule action whose amount is not zero, in processing order, with the
columns of the replay's issuance output. It takes an event's position in processing order to be its input row,
so the events file must be in `occurred_at` order (the generated one is).
Checked outside the timed parts: both files have the same columns and the same rows (count, amount_minor total
and an order-free digest of every column), both are in seq order, their first and last rows are equal column by
column, and the CLI's files hold the issuances and totals it printed.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PROGRAMME = ROOT / "benchmarks" / "replay_programme.json"
SAMPLE = 1_000  # rows compared column by column at each end of the files, by seq

# The benchmark programme's twenty rules written by hand, per event type in programme order: each rule's amount
# in minor units (2 decimals), 0 when it does not match. `amount` is DECIMAL(12, 2), so amount * 100 is its
# integer cents; `x * r // 100` truncates a positive product toward zero, as the engine does.
_CENTS = "CAST(amount * 100 AS BIGINT)"
RULE_CENTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "order.completed",
        (
            f"CASE WHEN amount >= 20 THEN {_CENTS} * 5 // 100 ELSE 0 END",
            f"CASE WHEN amount >= 100 THEN {_CENTS} * 2 // 100 ELSE 0 END",
            "CASE WHEN amount < 20 AND amount >= 5 THEN 50 ELSE 0 END",
            "CASE WHEN channel_code = 3 THEN 100 ELSE 0 END",
            f"CASE WHEN channel_code = 2 AND amount >= 50 THEN {_CENTS} // 100 ELSE 0 END",
            "CASE WHEN size >= 3 AND drinks > 0 THEN drinks * 100 ELSE 0 END",
            "CASE WHEN size < 3 AND drinks > 0 THEN drinks * 50 ELSE 0 END",
            "CASE WHEN drinks >= 4 THEN 200 ELSE 0 END",
            "CASE WHEN amount >= 500 THEN 2500 ELSE 0 END",
            "CASE WHEN channel_code = 1 AND size = 4 THEN 75 ELSE 0 END",
            f"CASE WHEN amount > 35.5 AND amount <= 60 THEN {_CENTS} * 15 // 1000 ELSE 0 END",
            "CASE WHEN drinks = 1 AND channel_code <> 2 THEN 10 ELSE 0 END",
        ),
    ),
    ("customer.signed_up", ("1000", "500")),
    (
        "review.posted",
        (
            "CASE WHEN photos >= 1 THEN 250 ELSE 0 END",
            "CASE WHEN photos >= 3 THEN photos * 50 ELSE 0 END",
            "CASE WHEN photos = 0 THEN 25 ELSE 0 END",
            "CASE WHEN photos > 4 THEN 500 ELSE 0 END",
        ),
    ),
    ("referral.converted", ("2500", "CASE WHEN amount >= 0 THEN 500 ELSE 0 END")),
)
SLOTS = sum(len(rules) for _, rules in RULE_CENTS)  # every rule has one action: a rule's slot is its index


def sql_string(text: str | Path) -> str:
    return "'" + str(text).replace("'", "''") + "'"


def check_programme() -> None:
    """RULE_CENTS numbers the rules in programme order: the file must list them that way, one action each."""
    rules = json.loads(PROGRAMME.read_text())["rules"]
    expected = [event_type for event_type, amounts in RULE_CENTS for _ in amounts]
    _expect([rule["event_type"] for rule in rules] == expected, f"{PROGRAMME.name}: rules not as RULE_CENTS")
    _expect(all(len(rule["actions"]) == 1 for rule in rules), f"{PROGRAMME.name}: a rule without one action")


def hand_issuances_sql(events: Path) -> str:
    """The issuance rows of the programme without a supply ceiling: per event, the list of its type's slots and
    the list of their amounts, unnested side by side; the rows leave in input order (preserve_insertion_order),
    which is seq order, without a sort."""
    slots, amounts, first = [], [], 0
    for event_type, rules in RULE_CENTS:
        numbers = ", ".join(str(slot) for slot in range(first, first + len(rules)))
        slots.append(f"WHEN {sql_string(event_type)} THEN [{numbers}]")
        amounts.append(f"WHEN {sql_string(event_type)} THEN [{', '.join(f'CAST({r} AS BIGINT)' for r in rules)}]")
        first += len(rules)
    return f"""
        SELECT pos * {SLOTS} + slot AS seq, external_event_id, customer_id, event_type, occurred_at,
               slot AS rule_index, 0 AS action_index, 'STAR' AS asset,
               CAST(cents AS DECIMAL(38, 0)) * CAST(0.01 AS DECIMAL(38, 2)) AS amount, cents AS amount_minor,
               'issued' AS status, CAST(NULL AS VARCHAR) AS error_code
        FROM (
            SELECT file_row_number AS pos, external_event_id, customer_id, type AS event_type, occurred_at,
                   unnest(CASE type {" ".join(slots)} ELSE [] END) AS slot,
                   unnest(CASE type {" ".join(amounts)} ELSE [] END) AS cents
            FROM read_parquet({sql_string(events)}, file_row_number = true)
        )
        WHERE cents > 0"""


def measure_copy(events: Path, out: Path) -> dict[str, object]:
    """The hand-written query, written to `out`; run in its own process (`replay_cli.py copy EVENTS OUT`)."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET preserve_insertion_order = true")
    con.execute("SET enable_progress_bar = false")
    started = time.perf_counter()
    con.execute(f"COPY ({hand_issuances_sql(events)}) TO {sql_string(out)} (FORMAT PARQUET)")
    return {"query_seconds": time.perf_counter() - started}


@dataclass(frozen=True)
class Finished:
    """A measured process: wall-clock from its start to its exit, its own peak resident set, what it printed."""

    seconds: float
    peak_mib: float
    returncode: int
    stdout: str
    stderr: str

    def summary(self) -> dict[str, Any]:
        """The JSON object that ends what the process printed (the CLI indents its summary over several lines)."""
        text = self.stdout.rstrip()
        for start in (index for index, char in enumerate(text) if char == "{"):
            try:
                value, end = json.JSONDecoder().raw_decode(text, start)
            except json.JSONDecodeError:
                continue
            if end == len(text) and isinstance(value, dict):
                return value
        raise AssertionError(f"no JSON summary at the end of:\n{self.stdout[-2000:]}")

    def failure(self, what: str) -> str:
        return f"{what} exited with {self.returncode}:\n{self.stdout[-2000:]}\n{self.stderr[-3000:]}"


def run_measured(command: Sequence[str]) -> Finished:
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        process = subprocess.Popen(list(command), stdout=out, stderr=err, cwd=ROOT)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
        out.seek(0)
        err.seek(0)
        return Finished(seconds, usage.ru_maxrss / 1024, process.returncode, out.read(), err.read())  # KiB


def cli_command(events: Path, programme: Path, out: Path, engine: str | None = None) -> list[str]:
    command = [sys.executable, "-m", "rewards_lab.cli.main", "replay", str(events)]
    command += ["--programme", str(programme), "--out", str(out)]
    return command + (["--engine", engine] if engine else [])


def copy_command(events: Path, out: Path) -> list[str]:
    return [sys.executable, __file__, "copy", str(events), str(out)]


def own_peak_mib() -> float:
    """This process's own peak resident set since it started (VmHWM), which its children's ru_maxrss include."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024  # kB
    return 0.0


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def _minor(amount: str) -> int:
    return int(Decimal(amount).scaleb(2))


def _parquet(path: Path) -> str:
    """read_parquet of a file, or of every part file of a directory (an engine may write one)."""
    return f"read_parquet({sql_string(path / '**' / '*.parquet' if path.is_dir() else path)})"


def _connect() -> Any:
    import duckdb

    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    return con


def _figures(con: Any, path: Path, digest: bool = False) -> tuple[int, int, int, int, int]:
    """rows, amount_minor total, issued rows, their amount_minor total, and with `digest` an order-free digest of
    every column of every row (else 0)."""
    columns = (
        "seq, external_event_id, customer_id, event_type, epoch_us(occurred_at), rule_index, action_index, asset, "
        "amount, amount_minor, status, error_code"
    )
    (row,) = con.sql(
        f"SELECT count(*), sum(amount_minor), count(*) FILTER (status = 'issued'), "
        f"coalesce(sum(amount_minor) FILTER (status = 'issued'), 0), "
        f"{f'bit_xor(hash({columns}))' if digest else '0'} FROM {_parquet(path)}"
    ).fetchall()
    return int(row[0]), int(row[1] or 0), int(row[2]), int(row[3]), int(row[4] or 0)


def check_printed(con: Any, path: Path, summary: dict[str, Any], digest: bool = False) -> tuple[int, ...]:
    """The CLI's file holds the issuances, failures and total it printed."""
    figures = _figures(con, path, digest)
    rows, _, issued_rows, issued_minor, _ = figures
    issuances, failed = int(summary["issuances"]), int(summary["failed"])
    _expect(rows == issuances + failed, f"{path.name}: {rows:,} rows, printed {issuances:,} + {failed:,} failed")
    _expect(issued_rows == issuances, f"{path.name}: {issued_rows:,} issued rows, printed {issuances:,}")
    _expect(issued_minor == _minor(summary["issued"]), f"{path.name}: issued {issued_minor}, printed {summary}")
    return figures


def _in_seq_order(path: Path) -> bool:
    """Whether seq never decreases along the file (one column, one batch at a time)."""
    import numpy as np
    import pyarrow.parquet as pq

    last = -1
    for batch in pq.ParquetFile(path).iter_batches(columns=["seq"], batch_size=1 << 20):
        seq = np.asarray(batch.column(0).to_numpy(zero_copy_only=False), dtype=np.int64)
        if len(seq) == 0:
            continue
        if int(seq[0]) < last or bool(np.any(seq[1:] < seq[:-1])):
            return False
        last = int(seq[-1])
    return True


def _ends(path: Path, rows: int) -> list[list[dict[str, Any]]]:
    """The first and the last `rows` rows along the file, occurred_at as epoch microseconds (the time zone a
    writer records is not compared), reading only the row groups that hold them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    file = pq.ParquetFile(path)
    sizes = [file.metadata.row_group(index).num_rows for index in range(file.num_row_groups)]
    starts = [sum(sizes[:index]) for index in range(len(sizes))]
    total = sum(sizes)
    ends: list[list[dict[str, Any]]] = []
    for low, high in ((0, min(rows, total)), (max(total - rows, 0), total)):
        groups = [g for g, start in enumerate(starts) if start < high and start + sizes[g] > low]
        if not groups:
            ends.append([])
            continue
        table = file.read_row_groups(groups).slice(low - starts[groups[0]], high - low)
        at = table.schema.get_field_index("occurred_at")
        stamps = table.column(at).cast(pa.timestamp("us")).cast(pa.int64())
        ends.append(table.set_column(at, "occurred_at", stamps).to_pylist())
    return ends


def check_same_rows(con: Any, cli: Path, hand: Path, summary: dict[str, Any]) -> str:
    """The CLI's file (no ceiling) and the hand-written one hold the same rows; returns what was checked."""
    cli_figures = check_printed(con, cli, summary, digest=True)
    hand_figures = _figures(con, hand, digest=True)
    _expect(cli_figures[:2] == hand_figures[:2], f"rows and totals differ: CLI {cli_figures}, hand {hand_figures}")
    _expect(cli_figures == hand_figures, f"same count and total, other rows: CLI {cli_figures}, hand {hand_figures}")
    schemas = [con.sql(f"DESCRIBE SELECT * FROM {_parquet(p)}").fetchall() for p in (cli, hand)]
    _expect(schemas[0] == schemas[1], f"columns differ: CLI {schemas[0]}, hand-written {schemas[1]}")
    _expect(_in_seq_order(hand), "the hand-written file is not in seq order: preserve_insertion_order did not hold")
    _expect(_in_seq_order(cli), "the CLI's file is not in seq order (processing order)")
    for label, cli_rows, hand_rows in zip(("first", "last"), _ends(cli, SAMPLE), _ends(hand, SAMPLE), strict=True):
        _expect(cli_rows == hand_rows, f"{label} rows differ: CLI {cli_rows[:2]}..., hand-written {hand_rows[:2]}...")
    return (
        f"same {cli_figures[0]:,} rows in CLI and hand-written files (columns, amount_minor total "
        f"{cli_figures[1]:,}, digest of every column), {cli_figures[0]:,} = the CLI's issuances; both files in seq "
        f"order, first and last {SAMPLE:,} rows equal"
    )


def ceiling_programme(directory: Path, ceiling: str) -> Path:
    definition = json.loads(PROGRAMME.read_text())
    definition["asset"]["supply_ceiling"] = ceiling
    path = directory / "programme_with_ceiling.json"
    path.write_text(json.dumps(definition, indent=2))
    return path


def _fresh(path: Path) -> Path:
    """No output left from an earlier run, so that a check never reads a stale file."""
    if path.is_dir():
        shutil.rmtree(path)
    path.unlink(missing_ok=True)
    return path


def check_round(paths: dict[str, str], summaries: dict[str, dict[str, Any]], ceiling: str) -> str:
    """Every check of one round (CLI, hand-written, CLI with a ceiling); returns what was checked."""
    con = _connect()
    cli, hand, bound = Path(paths["cli"]), Path(paths["hand"]), Path(paths["ceiling"])
    checked = check_same_rows(con, cli, hand, summaries["cli"])
    bound_figures = check_printed(con, bound, summaries["ceiling"])
    _expect(bound_figures[0] == summaries["cli"]["issuances"], f"ceiling: {bound_figures[0]:,} rows attempted")
    _expect(bound_figures[3] <= int(ceiling) * 100, f"ceiling {ceiling}: issued {summaries['ceiling']['issued']}")
    return f"{checked}; the file with a ceiling holds the issuances and total printed, {bound_figures[0]:,} attempted"


def check_spark(paths: dict[str, str], summaries: dict[str, dict[str, Any]], _ceiling: str) -> str:
    """Informational: whether the Spark engine's file holds the CLI's issuances and total."""
    rows, _, issued_rows, issued_minor, _ = _figures(_connect(), Path(paths["spark"]))
    cli = summaries["cli"]
    if (rows, issued_rows, issued_minor) == (cli["issuances"], cli["issuances"], _minor(cli["issued"])):
        return "same issuances and total as the CLI"
    return f"DIFFERENT from the CLI: {rows:,} rows, {issued_rows:,} issued, {issued_minor:,} minor units"


_CHECKS = {"round": check_round, "spark": check_spark}


def run_check(kind: str, paths: dict[str, Path], summaries: dict[str, dict[str, Any]], ceiling: str = "") -> str:
    """A check in a process of its own (reading the files would grow this one, see the module's docstring)."""
    payload = json.dumps({"paths": {k: str(v) for k, v in paths.items()}, "summaries": summaries, "ceiling": ceiling})
    command = [sys.executable, __file__, "check", kind, payload]
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT)
    _expect(done.returncode == 0, f"check {kind} failed:\n{done.stderr[-4000:]}")
    return done.stdout.strip()


def _argparse_error(run: Finished) -> bool:
    return run.returncode == 2 and "usage:" in run.stderr


def _line(label: str, run: Finished, note: str) -> str:
    return f"  {label:<28} {run.seconds:7.2f} s  peak {run.peak_mib:6.0f} MiB  {note}"


def _measured(command: Sequence[str], what: str) -> Finished:
    run = run_measured(command)
    _expect(run.returncode == 0, run.failure(what))
    return run


def compare(events: Path, rounds: int, spark: bool) -> float:
    """Print the CLI against the hand-written query, each round and as medians; return the median ratio.
    Each round runs the CLI, the hand-written query and the CLI with a ceiling (then Spark), one after the
    other, so that the machine's load hits them alike."""
    check_programme()
    runs: dict[str, list[Finished]] = {"cli": [], "hand": [], "ceiling": [], "spark": []}
    ceiling, bound_programme = "", PROGRAMME
    summaries: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="replay-bench-") as temporary:
        directory = Path(temporary)
        paths = {mode: directory / f"{mode}.parquet" for mode in runs}
        for round_ in range(rounds):
            cli = _measured(cli_command(events, PROGRAMME, _fresh(paths["cli"])), "the CLI")
            summaries["cli"] = cli.summary()
            if round_ == 0:
                ceiling = f"{_minor(summaries['cli']['issued']) // 100 // 3}"  # binds about a third of the way
                bound_programme = ceiling_programme(directory, ceiling)
            hand = _measured(copy_command(events, _fresh(paths["hand"])), "the hand-written query")
            bound = _measured(cli_command(events, bound_programme, _fresh(paths["ceiling"])), "the CLI, ceiling")
            summaries["ceiling"] = bound.summary()
            checked = run_check("round", paths, summaries, ceiling)
            for mode, run in (("cli", cli), ("hand", hand), ("ceiling", bound)):
                runs[mode].append(run)
            free, capped = summaries["cli"], summaries["ceiling"]
            print(f"round {round_ + 1}: {load_average()}")
            print(_line("CLI, no ceiling", cli, f"{free['issuances']:,} issued, {free['issued']} STAR"))
            query = json.loads(hand.stdout.strip().splitlines()[-1])["query_seconds"]
            print(_line("hand-written COPY", hand, f"(the query itself {query:.2f} s)"))
            note = f"{capped['issuances']:,} issued, {capped['failed']:,} failed, {capped['issued']} STAR"
            print(_line(f"CLI, ceiling {ceiling}", bound, note))
            print(f"  checked: {checked}")
            if spark:
                spark = _spark_round(events, paths, runs["spark"], summaries)
    return _report(events, runs, ceiling, int(summaries["cli"]["events"]))


def _spark_round(
    events: Path, paths: dict[str, Path], runs: list[Finished], summaries: dict[str, dict[str, Any]]
) -> bool:
    """One Spark run, kept beside the others (informational); False when the CLI has no Spark engine to run."""
    run = run_measured(cli_command(events, PROGRAMME, _fresh(paths["spark"]), engine="spark"))
    if _argparse_error(run):
        print(f"  Spark engine skipped: the CLI does not take --engine spark ({run.stderr.strip().splitlines()[-1]})")
        return False
    if run.returncode != 0:
        print(f"  Spark engine skipped: it exited with {run.returncode}: {run.stderr.strip()[-500:]}")
        return False
    runs.append(run)
    verdict = run_check("spark", paths, summaries)
    print(_line("Spark engine (local)", run, f"{run.summary().get('issuances', '?')} issued; {verdict}"))
    return True


def _report(events: Path, runs: dict[str, list[Finished]], ceiling: str, n: int) -> float:
    rounds = len(runs["cli"])
    print(
        f"CLI replay against hand-written SQL: {n:,} events from {events.name}, {SLOTS} rules, median of "
        f"{rounds} round(s); each run a fresh process, wall-clock from start to exit; peak resident set, max of rounds"
    )
    labels = [("CLI replay, no ceiling", "cli"), (f"CLI replay, ceiling {ceiling}", "ceiling")]
    labels += [("hand-written COPY", "hand")] + ([("Spark engine (informational)", "spark")] if runs["spark"] else [])
    for label, mode in labels:
        seconds = statistics.median(run.seconds for run in runs[mode])
        peak = max(run.peak_mib for run in runs[mode])
        note = "(peak: the Python process only, not the JVM)" if mode == "spark" else ""
        print(f"{label:<30} {seconds:8.2f} s  {n / seconds:12,.0f} events/s  peak {peak:7.0f} MiB {note}".rstrip())
    ratio = statistics.median(c.seconds / h.seconds for c, h in zip(runs["cli"], runs["hand"], strict=True))
    print(f"ratio CLI / hand-written (no ceiling): {ratio:.2f}")
    if runs["spark"]:
        pairs = zip(runs["spark"], runs["hand"], strict=False)
        spark_ratio = statistics.median(s.seconds / h.seconds for s, h in pairs)
        print(f"ratio Spark engine / hand-written (informational): {spark_ratio:.2f}")
    print(f"(the process that started them peaked at {own_peak_mib():.0f} MiB: no peak above is below that)")
    return ratio


def load_average() -> str:
    one, five, _ = (float(x) for x in Path("/proc/loadavg").read_text().split()[:3])
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min)"


def _child(argv: list[str]) -> None:
    """The processes this module starts: `copy EVENTS OUT` (measured) and `check KIND PAYLOAD` (not measured)."""
    if argv[0] == "copy":
        print(json.dumps(measure_copy(Path(argv[1]), Path(argv[2]))))
    elif argv[0] == "check":
        payload = json.loads(argv[2])
        print(_CHECKS[argv[1]](payload["paths"], payload["summaries"], payload["ceiling"]))
    else:
        raise SystemExit(f"unknown: {argv}")


if __name__ == "__main__":
    _child(sys.argv[1:])
