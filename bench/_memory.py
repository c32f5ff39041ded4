"""What the memory benchmarks share: RSS readings, and one fresh process per configuration.

RSS is per process, so each configuration runs in a child process of its own: the script calls
itself with ``--child NAME`` and prints one JSON line, which the parent collects.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from collections.abc import Iterable
from typing import Any

MB = 1024 * 1024


def rss_bytes() -> int:
    """The process's resident set size now (Linux)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kilobytes on Linux


def run_children(
    script: str, names: Iterable[str], options: list[str], timeout: float | None = None
) -> dict[str, dict[str, Any]]:
    """Run ``script --child NAME *options`` for each name, each in a fresh process; their results.

    A child still running after ``timeout`` seconds is killed (``subprocess.TimeoutExpired``)."""
    results: dict[str, dict[str, Any]] = {}
    for name in names:
        done = subprocess.run(
            [sys.executable, script, "--child", name, *options], check=True, capture_output=True, text=True,
            timeout=timeout,
        )
        results[name] = json.loads(done.stdout.strip().splitlines()[-1])
    return results
