"""``aun-runtime transcript --archive A --archive B``: the archives of a team split across workers,
read while the workers still run, make one transcript, the same as the team's in one process."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from aun_runtime import AUNRuntime

from . import apps
from .processes import ROOT, Process, query, start_worker, wait_until

APPS = "tests.distributed.apps"


def _transcript(*archives: Path | str) -> str:
    args = [a for archive in archives for a in ("--archive", str(archive))]
    done = subprocess.run(
        [sys.executable, "-m", "aun_runtime", "transcript", *args],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _shape(transcript: str) -> list[str]:
    """The lines without message numbers, and with each list of recipients sorted: both follow the
    order of arrival, which differs across processes."""

    def recipients(found: re.Match[str]) -> str:
        return found.group(1) + ", ".join(sorted(found.group(2).split(", ")))

    return [
        re.sub(r"(delivered to |filtered for )([^·(]+?)(?= ·| \(|$)", recipients, re.sub(r"#\d+", "#n", line))
        for line in transcript.splitlines()
    ]


async def _in_one_process(tmp_path: Path) -> str:
    """The team's transcript when it runs in one process."""
    single = tmp_path / "single.sqlite"
    runtime = AUNRuntime(archive=single)
    await runtime.start()
    await apps.team_in_one_process(runtime)
    await runtime.settle()
    await runtime.close()
    return _transcript(single)


async def test_the_archives_of_several_workers_merge_into_the_one_process_transcript(
    host: str, procs: list[Process], tmp_path: Path
) -> None:
    expected = await _in_one_process(tmp_path)

    side_a, side_b, kick = tmp_path / "a.sqlite", tmp_path / "b.sqlite", tmp_path / "kick.sqlite"
    procs.append(start_worker(host, f"{APPS}:team_writer_side", side_a))
    procs.append(start_worker(host, f"{APPS}:team_reviewer_side", side_b))
    procs.append(start_worker(host, f"{APPS}:team_kickoff", kick))
    wait_until(
        lambda: bool(query(side_a, "SELECT 1 FROM archive WHERE owner='app.local' AND kind='received'")),
        what="the final post to reach app.local",
    )
    wait_until(
        lambda: len(query(side_b, "SELECT 1 FROM archive WHERE owner='scribe.local' AND kind='received'")) >= 1,
        what="the scribe's post",
    )
    merged = _transcript(side_a, side_b, kick)

    assert "from outside" not in merged  # each message is sent in one archive, received in another
    assert "task: a haiku about queues" in merged and "final: draft 3" in merged
    assert "delivered to reviewer.local" in merged  # sent in a.sqlite, received in b.sqlite
    assert sorted(_shape(merged)) == sorted(_shape(expected))
    alone = _transcript(side_b)  # one worker's archive alone: what came from elsewhere says so
    assert "from outside" in alone


async def test_workers_sharing_a_postgresql_archive_are_one_transcript_and_one_live_console(
    host: str, procs: list[Process], tmp_path: Path, postgres_url: str
) -> None:
    import aiohttp

    expected = await _in_one_process(tmp_path)

    console = Process(["console", "--archive", postgres_url, "--port", "0"])
    procs.append(console)
    line = console.wait_for_line(lambda s: "console: http://" in s)
    console_url = line[line.index("http://") :].split()[0]
    follow = Process(["transcript", "--archive", postgres_url, "--follow"])  # started before anything is written
    procs.append(follow)

    for name, side in (("a", "team_writer_side"), ("b", "team_reviewer_side"), ("kick", "team_kickoff")):
        procs.append(start_worker(host, f"{APPS}:{side}", postgres_url, extra=["--name", name]))
    shape = sorted(_shape(expected))
    try:
        wait_until(lambda: sorted(_shape(_transcript(postgres_url))) == shape, what="the whole exchange")
    except TimeoutError:
        raise AssertionError(f"expected:\n{expected}\nin the shared archive:\n{_transcript(postgres_url)}") from None
    assert "from outside" not in _transcript(postgres_url)  # every side of every message is in the one archive

    # The console follows the same archive, live: every worker's AIDs and records.
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        async with http.get(console_url + "api/records?after=0") as response:
            records = (await response.json())["records"]
        async with http.get(console_url + "api/info") as response:
            assert (await response.json())["state"] == "live"
    owners = {record["owner"] for record in records}
    assert {"writer.local", "reviewer.local", "app.local"} <= owners  # written by different workers
    # And the transcript that was following printed the exchange as it came.
    follow.wait_for_line(lambda s: "final: draft 3" in s, timeout=30)
