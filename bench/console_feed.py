"""What one console tick costs: following the archive by id, against re-sending it whole.

A console page is sent, per tick, only the records after its cursor (``Archive.rows_after`` and the
JSON the page receives, with each message spliced in as stored). Two baselines, measured in the same
run on the same archive:

* ``full_resend``: read and encode the whole archive every tick (what following by id avoids);
* ``parsed``: the same incremental page, but through ``records_after``, which validates each
  message and encodes it again (what reading unparsed rows avoids).

Prints one JSON line; the figures to quote are the ratios.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from aun_runtime import Archive, AUNMessage, RecordKind, TextPayload
from aun_runtime.console._feed import encode_records

ARCHIVED = 20_000  # records already in the archive when the page is open
NEW_PER_TICK = 10  # records the runtime adds between two ticks
TICKS = 20
PAGE = 500  # records per page, as the console reads them


def _message(n: int) -> AUNMessage:
    return AUNMessage(
        message_id=f"m{n}", from_aid="a.local", to="b.local", payload=TextPayload(text=f"message number {n}")
    )


def _timed(action: Callable[[], int]) -> tuple[float, int]:
    start = time.perf_counter()
    size = action()
    return time.perf_counter() - start, size


def main() -> None:
    archive = Archive(":memory:")
    for n in range(ARCHIVED):
        archive.record("b.local", RecordKind.RECEIVED, _message(n))
    archive.flush()
    cursor = archive.last_id()
    n = ARCHIVED
    totals = {"incremental": [0.0, 0], "full_resend": [0.0, 0], "parsed": [0.0, 0]}

    def parsed_page(after: int) -> int:
        page = archive.records_after(after, limit=PAGE)
        return len("[" + ",".join(r.message.to_json() for r in page if r.message is not None) + "]")

    for _ in range(TICKS):
        for _ in range(NEW_PER_TICK):
            archive.record("b.local", RecordKind.RECEIVED, _message(n))
            n += 1
        archive.flush()
        runs: dict[str, Callable[[], int]] = {
            "incremental": lambda after=cursor: len(encode_records(archive.rows_after(after, limit=PAGE))),
            "full_resend": lambda total=n: len(encode_records(archive.rows_after(0, limit=total + 1))),
            "parsed": lambda after=cursor: parsed_page(after),
        }
        for name, run in runs.items():
            seconds, size = _timed(run)
            totals[name][0] += seconds
            totals[name][1] += size
        cursor = archive.last_id()

    inc_s, inc_bytes = totals["incremental"]
    print(
        json.dumps(
            {
                "bench": "console_feed",
                "archived": ARCHIVED,
                "new_per_tick": NEW_PER_TICK,
                "ticks": TICKS,
                "full_resend_over_incremental_time": round(totals["full_resend"][0] / inc_s, 1),
                "full_resend_over_incremental_bytes": round(totals["full_resend"][1] / inc_bytes, 1),
                "parsed_over_unparsed_time": round(totals["parsed"][0] / inc_s, 1),
                "incremental_tick_us": round(inc_s / TICKS * 1e6, 1),
            }
        )
    )
    archive.close()


if __name__ == "__main__":
    main()
