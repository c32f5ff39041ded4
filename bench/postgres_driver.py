"""Benchmark: which async PostgreSQL driver for the shared store, psycopg 3 or asyncpg, on the two
write patterns the store has, against one throwaway server (fsync on, as a real one), with SQLite's
batched archive write measured in the same run as the baseline.

* **Batched archive writes.** Batches of 256 message rows and the 512 records that point at them
  (a send and a receipt each), like the SQLite archive writer's batches, committed one transaction
  per batch, written three ways per driver: ``executemany``, one ``INSERT ... SELECT FROM unnest``
  of arrays per table (one statement per table, as SQLite's archive writes one statement per batch),
  and ``COPY``. The baseline is the archive's own SQLite statement (a batch's rows as JSON, inserted
  by ``json_each``) on a WAL file with ``synchronous=NORMAL``, in a file beside the server's.
* **Small transactional commits.** A service AID's claim: insert a claim row unless it exists and
  move the sender's stream position, in one transaction, one after another (each waits for the
  last, as an instance's claims do), each driver's plain way; and psycopg's pipeline mode, which
  sends the whole transaction in one round trip.

Rounds alternate the drivers; the medians are reported. Prints one JSON line: rows per second of
each batched way and transactions per second of each commit way, and the ratios (asyncpg over
psycopg; each batched way over SQLite), and this process's CPU (the client side, which a runtime's
event loop pays): each driver's cheapest batched way over SQLite's, and microseconds per commit.

    python bench/postgres_driver.py [--batches 40] [--commits 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import asyncpg
import psycopg

from aun_runtime.testing.infrastructure import PostgresServer

MESSAGES_PER_BATCH = 256
SCHEMA = [
    "DROP TABLE IF EXISTS records, messages, claims, streams",
    "CREATE TABLE messages (id bigint PRIMARY KEY, message_id text NOT NULL, from_aid text NOT NULL, to_aid text,"
    " group_id text, thread text, in_reply_to text, created_at bigint NOT NULL, body text NOT NULL)",
    "CREATE TABLE records (id bigserial PRIMARY KEY, owner text NOT NULL, kind text NOT NULL, reason text,"
    " message bigint REFERENCES messages(id), text text, recorded_at bigint NOT NULL)",
    "CREATE INDEX records_owner ON records (owner, id)",
    "CREATE TABLE claims (origin text NOT NULL, seq bigint NOT NULL, instance text NOT NULL, done boolean NOT NULL,"
    " PRIMARY KEY (origin, seq))",
    "CREATE TABLE streams (origin text PRIMARY KEY, through bigint NOT NULL)",
]
MESSAGE_COLUMNS = ["id", "message_id", "from_aid", "to_aid", "group_id", "thread", "in_reply_to", "created_at", "body"]
RECORD_COLUMNS = ["owner", "kind", "reason", "message", "text", "recorded_at"]
Rows = list[tuple[Any, ...]]


def batches(count: int) -> list[tuple[Rows, Rows]]:
    """``count`` batches of message rows and their records, numbered from 1."""
    made: list[tuple[Rows, Rows]] = []
    row = 0
    for _ in range(count):
        messages: Rows = []
        records: Rows = []
        for _ in range(MESSAGES_PER_BATCH):
            row += 1
            body = json.dumps({"message_id": f"m-{row}", "from_aid": "source.local", "to": "sink.local",
                               "payload": {"type": "text", "text": f"message number {row} " + "x" * 200}})  # fmt: skip
            messages.append((row, f"m-{row}", "source.local", "sink.local", None, f"t-{row % 50}", None, 1_700_000_000_000 + row, body))
            records.append(("source.local", "sent", None, row, None, 1_700_000_000_000 + row))
            records.append(("sink.local", "received", None, row, None, 1_700_000_000_001 + row))
        made.append((messages, records))
    return made


def _placeholders(columns: list[str], style: str) -> str:
    return ", ".join(f"${i + 1}" if style == "$" else "%s" for i in range(len(columns)))


MESSAGE_TYPES = ["bigint", "text", "text", "text", "text", "text", "text", "bigint", "text"]
RECORD_TYPES = ["text", "text", "text", "bigint", "text", "bigint"]


def _unnest(table: str, columns: list[str], types: list[str], style: str) -> str:
    arrays = ", ".join(f"${i + 1}::{t}[]" if style == "$" else f"%s::{t}[]" for i, t in enumerate(types))
    return f"INSERT INTO {table} ({', '.join(columns)}) SELECT * FROM unnest({arrays})"


def _columns(rows: Rows) -> list[list[Any]]:
    return [list(column) for column in zip(*rows, strict=True)]


# -- asyncpg -----------------------------------------------------------------------------------------


async def asyncpg_batches(url: str, data: list[tuple[Rows, Rows]], way: str) -> float:
    conn = await asyncpg.connect(url)
    try:
        for statement in SCHEMA:
            await conn.execute(statement)
        insert_m = f"INSERT INTO messages ({', '.join(MESSAGE_COLUMNS)}) VALUES ({_placeholders(MESSAGE_COLUMNS, '$')})"
        insert_r = f"INSERT INTO records ({', '.join(RECORD_COLUMNS)}) VALUES ({_placeholders(RECORD_COLUMNS, '$')})"
        unnest_m = _unnest("messages", MESSAGE_COLUMNS, MESSAGE_TYPES, "$")
        unnest_r = _unnest("records", RECORD_COLUMNS, RECORD_TYPES, "$")
        began = time.perf_counter()
        for messages, records in data:
            async with conn.transaction():
                if way == "executemany":
                    await conn.executemany(insert_m, messages)
                    await conn.executemany(insert_r, records)
                elif way == "unnest":
                    await conn.execute(unnest_m, *_columns(messages))
                    await conn.execute(unnest_r, *_columns(records))
                else:
                    await conn.copy_records_to_table("messages", records=messages, columns=MESSAGE_COLUMNS)
                    await conn.copy_records_to_table("records", records=records, columns=RECORD_COLUMNS)
        return time.perf_counter() - began
    finally:
        await conn.close()


async def asyncpg_commits(url: str, commits: int) -> float:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("TRUNCATE claims, streams")
        await conn.execute("INSERT INTO streams VALUES ('w1', 0)")
        began = time.perf_counter()
        for seq in range(1, commits + 1):
            async with conn.transaction():
                await conn.execute(
                    "INSERT INTO claims VALUES ($1, $2, $3, false) ON CONFLICT (origin, seq) DO NOTHING", "w1", seq, "i1"
                )
                await conn.execute("UPDATE streams SET through = $2 WHERE origin = $1", "w1", seq)
        return time.perf_counter() - began
    finally:
        await conn.close()


# -- psycopg 3 ---------------------------------------------------------------------------------------


async def psycopg_batches(url: str, data: list[tuple[Rows, Rows]], way: str) -> float:
    conn = await psycopg.AsyncConnection.connect(url)
    try:
        for statement in SCHEMA:
            await conn.execute(statement)
        await conn.commit()
        insert_m = f"INSERT INTO messages ({', '.join(MESSAGE_COLUMNS)}) VALUES ({_placeholders(MESSAGE_COLUMNS, '%')})"
        insert_r = f"INSERT INTO records ({', '.join(RECORD_COLUMNS)}) VALUES ({_placeholders(RECORD_COLUMNS, '%')})"
        unnest_m = _unnest("messages", MESSAGE_COLUMNS, MESSAGE_TYPES, "%")
        unnest_r = _unnest("records", RECORD_COLUMNS, RECORD_TYPES, "%")
        began = time.perf_counter()
        for messages, records in data:
            async with conn.transaction(), conn.cursor() as cur:
                if way == "executemany":
                    await cur.executemany(insert_m, messages)
                    await cur.executemany(insert_r, records)
                elif way == "unnest":
                    await cur.execute(unnest_m, _columns(messages))
                    await cur.execute(unnest_r, _columns(records))
                else:
                    async with cur.copy(f"COPY messages ({', '.join(MESSAGE_COLUMNS)}) FROM STDIN") as copy:
                        for row in messages:
                            await copy.write_row(row)
                    async with cur.copy(f"COPY records ({', '.join(RECORD_COLUMNS)}) FROM STDIN") as copy:
                        for row in records:
                            await copy.write_row(row)
        return time.perf_counter() - began
    finally:
        await conn.close()


async def psycopg_commits(url: str, commits: int, *, pipeline: bool) -> float:
    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    try:
        await conn.execute("TRUNCATE claims, streams")
        await conn.execute("INSERT INTO streams VALUES ('w1', 0)")
        began = time.perf_counter()
        for seq in range(1, commits + 1):
            async with conn.pipeline() if pipeline else contextlib.nullcontext(), conn.transaction():
                await conn.execute("INSERT INTO claims VALUES (%s, %s, %s, false) ON CONFLICT (origin, seq) DO NOTHING", ("w1", seq, "i1"))
                await conn.execute("UPDATE streams SET through = %s WHERE origin = %s", (seq, "w1"))
        return time.perf_counter() - began
    finally:
        await conn.close()


# -- SQLite: the archive's batch statement -----------------------------------------------------------------

SQLITE_SCHEMA = """
CREATE TABLE messages (id INTEGER PRIMARY KEY, message_id TEXT NOT NULL, from_aid TEXT NOT NULL, to_aid TEXT,
    group_id TEXT, thread TEXT, in_reply_to TEXT, created_at INTEGER NOT NULL, body TEXT NOT NULL);
CREATE TABLE records (id INTEGER PRIMARY KEY, owner TEXT NOT NULL, kind TEXT NOT NULL, reason TEXT,
    message INTEGER REFERENCES messages(id), text TEXT, recorded_at INTEGER NOT NULL);
CREATE INDEX records_owner ON records(owner, id);
CREATE VIEW batch (messages, records) AS SELECT NULL, NULL;
CREATE TRIGGER batch_insert INSTEAD OF INSERT ON batch BEGIN
    INSERT INTO messages SELECT value->>0, value->>1, value->>2, value->>3, value->>4, value->>5, value->>6,
        value->>7, value->>8 FROM json_each(NEW.messages) ORDER BY key;
    INSERT INTO records (owner, kind, reason, message, text, recorded_at) SELECT value->>0, value->>1,
        value->>2, value->>3, value->>4, value->>5 FROM json_each(NEW.records) ORDER BY key;
END;
"""


def sqlite_batches(path: Path, data: list[tuple[Rows, Rows]]) -> float:
    path.unlink(missing_ok=True)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.executescript(SQLITE_SCHEMA)
    encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    began = time.perf_counter()
    for messages, records in data:
        db.execute("INSERT INTO batch VALUES (?, ?)", (encode(messages), encode(records)))
    elapsed = time.perf_counter() - began
    db.close()
    return elapsed


# -- the run ---------------------------------------------------------------------------------------------


async def measure(url: str, sqlite_path: Path, data: list[tuple[Rows, Rows]], commits: int, rounds: int) -> dict[str, Any]:
    rows = len(data) * MESSAGES_PER_BATCH * 3  # a message row and its two records
    times: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}

    def keep(name: str, seconds: float, cpu_seconds: float) -> None:
        times.setdefault(name, []).append(seconds)
        cpu.setdefault(name, []).append(cpu_seconds)

    runs: list[tuple[str, Callable[[], Awaitable[float]]]] = []
    for way in ("executemany", "unnest", "copy"):
        runs.append((f"asyncpg_{way}", lambda way=way: asyncpg_batches(url, data, way)))  # type: ignore[misc]
        runs.append((f"psycopg_{way}", lambda way=way: psycopg_batches(url, data, way)))  # type: ignore[misc]
    runs.append(("asyncpg_commit", lambda: asyncpg_commits(url, commits)))
    runs.append(("psycopg_commit", lambda: psycopg_commits(url, commits, pipeline=False)))
    runs.append(("psycopg_pipeline_commit", lambda: psycopg_commits(url, commits, pipeline=True)))
    for n in range(rounds):
        began = time.process_time()
        keep("sqlite_batch", sqlite_batches(sqlite_path, data), time.process_time() - began)
        for name, run in runs if n % 2 == 0 else reversed(runs):
            began = time.process_time()
            elapsed = await run()
            keep(name, elapsed, time.process_time() - began)
    median = {name: statistics.median(values) for name, values in times.items()}
    median_cpu = {name: statistics.median(values) for name, values in cpu.items()}
    result: dict[str, Any] = {"bench": "postgres_driver", "rounds": rounds, "batches": len(data), "commits": commits}
    for name, seconds in median.items():
        per_second = (commits if name.endswith("commit") else rows) / seconds
        result[f"{name}_{'tx' if name.endswith('commit') else 'rows'}_per_s"] = round(per_second)
    for driver in ("asyncpg", "psycopg"):  # this process's CPU: what the runtime's own loop would pay
        result[f"{driver}_best_batch_cpu_over_sqlite"] = round(
            min(median_cpu[f"{driver}_{way}"] for way in ("executemany", "unnest", "copy")) / median_cpu["sqlite_batch"], 2
        )
        result[f"{driver}_commit_cpu_us"] = round(median_cpu[f"{driver}_commit"] / commits * 1e6)
    for way in ("executemany", "unnest", "copy"):
        result[f"{way}_asyncpg_over_psycopg"] = round(median[f"psycopg_{way}"] / median[f"asyncpg_{way}"], 2)
        for driver in ("asyncpg", "psycopg"):
            result[f"{driver}_{way}_over_sqlite"] = round(median["sqlite_batch"] / median[f"{driver}_{way}"], 2)
    result["commit_asyncpg_over_psycopg"] = round(median["psycopg_commit"] / median["asyncpg_commit"], 2)
    result["commit_asyncpg_over_psycopg_pipeline"] = round(median["psycopg_pipeline_commit"] / median["asyncpg_commit"], 2)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=40, help="batches of 256 messages per batched way")
    parser.add_argument("--commits", type=int, default=2000, help="claim transactions per commit way")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    data = batches(args.batches)
    with PostgresServer(durable=True) as server, tempfile.TemporaryDirectory() as scratch:
        url = server.create_database("bench")
        result = asyncio.run(measure(url, Path(scratch) / "archive.sqlite", data, args.commits, args.rounds))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
