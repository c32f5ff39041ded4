"""Redrive on distributed workers, as real processes: a host, bot.local's worker and alice.local's.

bot's model goes down after its first round, in which it already said "part one": its turn is a
retryable dead letter in its worker's archive. The app on that worker redrives its dead letters
every half second (`runtime.redrive()`): while the model is down each redrive fails again
(a new dead letter, and its "part one" dropped by alice's channel as the repeat it is); once the
model is back, alice has heard each part exactly once and no dead letter is left open.
"""

from __future__ import annotations

from pathlib import Path

from tests.agents.test_redrive import environment
from tests.models.openai_stand_in import openai_stand_in

from .processes import ROOT, Process, query, start_host, start_worker, wait_until
from .test_worker_redrive import Model


def heard(archive: Path) -> list[str]:
    rows = query(archive, "SELECT json_extract(body, '$.payload.text') FROM archive "
                          "WHERE owner='alice.local' AND kind='received' ORDER BY id")
    return [text for (text,) in rows]


def count(archive: Path, kind: str) -> int:
    return len(query(archive, "SELECT id FROM archive WHERE kind=?", (kind,)))


def test_a_workers_dead_letters_are_redriven_and_nothing_is_said_twice(procs: list[Process], tmp_path: Path) -> None:
    model = Model()  # down until cleared
    with openai_stand_in(model) as stand_in:
        env = {"PYTHONPATH": str(ROOT), **environment(stand_in)}
        host, address = start_host()
        procs.append(host)
        bots, alices = tmp_path / "w1.sqlite", tmp_path / "w2.sqlite"
        procs.append(start_worker(address, "tests.distributed.redrive_apps:bot", bots, env=env, extra=["--name", "w1"]))
        procs.append(start_worker(address, "tests.distributed.redrive_apps:alice", alices, env=env, extra=["--name", "w2"]))
        wait_until(lambda: heard(alices) == ["part one"], what="the first part")
        wait_until(lambda: count(bots, "redriven") >= 1 and count(bots, "dead_letter") >= 2,
                   what="a redrive failing again while the model is down")
        model.down.clear()
        wait_until(lambda: len(heard(alices)) >= 2, what="the second part")
        wait_until(lambda: count(bots, "redriven") >= count(bots, "dead_letter"), what="every dead letter closed")
        assert heard(alices) == ["part one", "part two"]
        listing = Process(["dead-letters", "list", "--archive", str(bots)])
        assert listing.finish() == 0
        assert "bot.local" not in listing.output, listing.output  # none left open
