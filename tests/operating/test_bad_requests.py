"""Malformed HTTP cannot fill the log: the local gateway and the console, as real processes, answer
thousands of requests that do not parse (no ``Host`` header, a bad request line, a bad header) with
400, and their logs get a few summary lines, no traceback."""

from __future__ import annotations

import json
import re
import signal
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from aun_runtime import Archive
from tests.distributed.processes import Process

NO_HOST = b"GET / HTTP/1.1\r\n\r\n"
BAD_LINE = b"GET /\x01 HTTP/1.1 extra\r\nHost: x\r\n\r\n"
BAD_HEADER = b"GET / HTTP/1.1\r\nHost: x\r\nNot a header\r\n\r\n"
REQUESTS = [NO_HOST] * 2000 + [BAD_LINE] * 100 + [BAD_HEADER] * 100


def _answer(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
    return answer


def _gateway(tmp_path: Path) -> tuple[Process, Callable[[str], int | None]]:
    process = Process(["gateway", "--port", "0", "--data", str(tmp_path / "gateway"), "--json"])

    def port(line: str) -> int | None:
        return int(json.loads(line)["http_url"].rsplit(":", 1)[1]) if line.startswith("{") else None

    return process, port


def _console(tmp_path: Path) -> tuple[Process, Callable[[str], int | None]]:
    archive = tmp_path / "archive.sqlite"
    Archive(archive).close()
    process = Process(["console", "--archive", str(archive), "--port", "0"])

    def port(line: str) -> int | None:
        found = re.match(r"console: http://127\.0\.0\.1:(\d+)/", line)
        return int(found.group(1)) if found else None

    return process, port


@pytest.mark.parametrize("serve", [_gateway, _console], ids=["gateway", "console"])
def test_thousands_of_malformed_requests_get_400_and_a_few_log_lines(
    serve: Callable[[Path], tuple[Process, Callable[[str], int | None]]], tmp_path: Path
) -> None:
    process, port_of = serve(tmp_path)
    try:
        port = port_of(process.wait_for_line(lambda line: port_of(line) is not None))
        assert port is not None
        before = len(process.lines)
        statuses = {_answer(port, request).split(b"\r\n", 1)[0] for request in REQUESTS}
        assert {status.split(b" ")[1] for status in statuses} == {b"400"}
        process.proc.send_signal(signal.SIGINT)
        assert process.finish() == 0
    finally:
        process.kill()
    logged = process.lines[before:]
    assert not any("Traceback" in line for line in logged)
    malformed = [line for line in logged if "malformed HTTP request" in line]
    # One line at once, and one with the count when the process stopped (all in under a minute).
    assert len(malformed) == 2, logged
    # After the line's time stamp: the level, the logger and what happened.
    assert re.match(r"\S+ WARNING aiohttp\.server: malformed HTTP request answered 400: ", malformed[0]), malformed[0]
    assert re.search(r"\b2199 more malformed HTTP requests answered 400\b", malformed[1]), malformed[1]
    assert len(logged) <= len(malformed) + 3, logged  # and little else: the stop's own lines
