"""A worker is a core the facade can run on: it has every member of :class:`AUNCore`."""

from __future__ import annotations

from aun_runtime.delivery._core_protocol import AUNCore
from aun_runtime.distributed import WorkerRuntime


async def test_worker_runtime_is_an_aun_core_without_connecting() -> None:
    worker = WorkerRuntime("127.0.0.1:1")  # nothing connects before start
    try:
        assert isinstance(worker, AUNCore)
        core: AUNCore = worker  # the same, checked statically
        assert core.drains_mailboxes is False
        assert core.mailbox_options is None
        assert core.archive is worker.archive
        assert core.directory is worker.directory
        core.attach(mailbox_provider=lambda aid: None, on_undeliverable=lambda aid, message, error: None)
        await core.close()  # never started: nothing to stop, nothing to release
        await core.close()
    finally:
        worker.archive.close()


async def test_close_stops_a_started_worker_and_releases_its_connection(host: str) -> None:
    worker = WorkerRuntime(host)
    try:
        await worker.start()
        assert worker.stats.connected
        await worker.close()
        assert not worker.stats.connected
        await worker.close()
    finally:
        worker.archive.close()
