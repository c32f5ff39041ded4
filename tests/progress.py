"""Progress by file: one line per test file as it finishes, instead of a dot per test.

It also keeps each file's time in pytest's cache (when the cache plugin runs), which
tests/conftest.py reads to start the long files first.

With the suite spread over several processes (pytest-xdist), dots say nothing about where it is.
Each line names the file that just finished, how its tests went and how long they took, and which
worker ran it:

```text
[ 412/1061] tests/network/test_many_aids.py: 1 passed in 108.2 s (gw1)
```

A test still running after `STILL_RUNNING_AFTER` seconds is named too (and again each time as
long again has passed), so a slow or stuck test is never a silent pause. Failures are listed in full
at the end, as usual. `-v` gives pytest's own line per test instead.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Generator, Iterable
from typing import Any

import pytest

__all__ = ["STILL_RUNNING_AFTER", "FileProgress"]

#: Seconds after which a test that has not finished is named. The slowest tests of the suite take
#: about half that on a quiet machine; one that passes it is either stuck or the machine is loaded.
STILL_RUNNING_AFTER = 60.0
#: How often the watch looks at what is running.
_WATCH_EVERY = 5.0


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


class FileProgress:
    """A pytest plugin for the terminal: a line per finished file, and a word on long-running tests."""

    def __init__(self, config: pytest.Config, seconds_key: str) -> None:
        self.config = config
        self.seconds_key = seconds_key
        self.totals: Counter[str] = Counter()
        self.done: Counter[str] = Counter()
        self.outcomes: dict[str, Counter[str]] = {}
        self.seconds: Counter[str] = Counter()
        self.workers: dict[str, set[str]] = {}
        self.finished = 0
        self.running: dict[str, float] = {}  # nodeid -> when it started
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._watch = threading.Thread(target=self._watch_running, name="test-progress", daemon=True)

    # -- what there is to run --------------------------------------------------------------------

    def _count(self, nodeids: Iterable[str]) -> None:
        if not self.totals:  # every xdist worker collects the same tests: the first one says it
            self.totals.update(_file_of(nodeid) for nodeid in nodeids)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if not hasattr(self.config, "workerinput"):
            self._count(item.nodeid for item in session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self._count(ids)

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self._watch.start()

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self._stop.set()
        cache = getattr(self.config, "cache", None)
        finished = {path: round(self.seconds[path], 1) for path, total in self.totals.items()
                    if self.done[path] == total}
        if cache is not None and finished:  # the next run starts the long files first (tests/conftest.py)
            cache.set(self.seconds_key, {**cache.get(self.seconds_key, {}), **finished})

    # -- as tests run ----------------------------------------------------------------------------

    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        with self._lock:
            self.running[nodeid] = time.monotonic()

    @pytest.hookimpl(wrapper=True)
    def pytest_report_teststatus(
        self, report: pytest.TestReport, config: pytest.Config
    ) -> Generator[None, tuple[str, str, str], tuple[str, str, str]]:
        category, _letter, _word = yield
        return category, "", ""  # counted in the summary as usual; shown here by file instead

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        path = _file_of(report.nodeid)
        outcomes = self.outcomes.setdefault(path, Counter())
        self.seconds[path] += report.duration
        worker = getattr(getattr(report, "node", None), "gateway", None)
        if worker is not None:
            self.workers.setdefault(path, set()).add(worker.id)
        if report.when == "call" or (report.when == "setup" and not report.passed):
            outcome = "xfailed" if hasattr(report, "wasxfail") else report.outcome
            outcomes["error" if report.when == "setup" and report.failed else outcome] += 1
        if report.when == "teardown":
            if report.failed:
                outcomes["error"] += 1
            with self._lock:
                self.running.pop(report.nodeid, None)
            self.done[path] += 1
            self.finished += 1
            if self.done[path] == self.totals.get(path, 0):
                self._file_line(path)

    def _file_line(self, path: str) -> None:
        outcomes = ", ".join(f"{count} {outcome}" for outcome, count in sorted(self.outcomes[path].items()))
        width = len(str(sum(self.totals.values())))
        workers = ",".join(sorted(self.workers.get(path, ())))
        where = f" ({workers})" if workers else ""
        self._write(
            f"[{self.finished:>{width}}/{sum(self.totals.values())}] {path}: {outcomes} "
            f"in {self.seconds[path]:.1f} s{where}"
        )

    def _watch_running(self) -> None:
        named: dict[str, int] = {}  # nodeid -> how many periods it was named for
        while not self._stop.wait(_WATCH_EVERY):
            now = time.monotonic()
            with self._lock:
                running = list(self.running.items())
            for nodeid, started in running:
                periods = int((now - started) // STILL_RUNNING_AFTER)
                if periods > named.get(nodeid, 0):
                    named[nodeid] = periods
                    self._write(f"  ... still running after {periods * STILL_RUNNING_AFTER:.0f} s: {nodeid}")

    def _write(self, line: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            with self._lock:
                reporter.write_line(line)
