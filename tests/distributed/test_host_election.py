"""Hosts sharing their state in PostgreSQL: one is elected at a time, and a deposed one writes nothing."""

from __future__ import annotations

import asyncio

import pytest

from aun_runtime.distributed._errors import HostStateError
from aun_runtime.distributed._host_election import HOST_LOCK, ElectedHostState
from aun_runtime.testing.infrastructure import ExternalPostgres, PostgresServer


def _state(workers: dict[str, str]) -> dict[str, dict[str, str]]:
    return {"workers": workers, "aids": {}, "services": {}, "groups": {}}


async def test_one_host_is_elected_at_a_time_and_the_standby_takes_over_with_the_state(postgres_url: str) -> None:
    first, second = ElectedHostState(postgres_url), ElectedHostState(postgres_url)
    await asyncio.wait_for(first.elect(), 10)
    await first.save(lambda: _state({"w": "digest"}))
    standby = asyncio.ensure_future(second.elect())
    await asyncio.sleep(1.5)
    assert not standby.done()  # the first holds the lock: the second stands by
    first.close()  # the serving host goes away (its session, and the lock, with it)
    await asyncio.wait_for(standby, 10)
    assert second.loaded["workers"] == {"w": "digest"}  # what the first kept
    second.close()


async def test_a_deposed_host_writes_nothing_and_is_told(
    postgres_url: str, postgres_server: ExternalPostgres | PostgresServer
) -> None:
    host = ElectedHostState(postgres_url)
    await asyncio.wait_for(host.elect(), 10)
    postgres_server.sql(
        "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory'"
        f" AND classid::bigint = {HOST_LOCK[0]} AND objid::bigint = {HOST_LOCK[1]}"
    )
    with pytest.raises(HostStateError):
        await host.save(lambda: _state({"late": "digest"}))
    await asyncio.wait_for(host.lost.wait(), 5)
    host.close()
    again = ElectedHostState(postgres_url)
    await asyncio.wait_for(again.elect(), 10)
    assert "late" not in again.loaded["workers"]
    again.close()


async def test_a_serving_host_rides_out_a_database_restart_by_standing_by_and_being_elected_again() -> None:
    with PostgresServer(durable=True) as server:
        url = server.url("postgres")
        host = ElectedHostState(url)
        await asyncio.wait_for(host.elect(), 10)
        await host.save(lambda: _state({"w": "digest"}))
        server.crash()
        await asyncio.wait_for(host.lost.wait(), 10)  # deposed: it must stop serving
        host.close()
        again = ElectedHostState(url)
        electing = asyncio.ensure_future(again.elect())  # stands by while the database is down
        await asyncio.sleep(2)
        assert not electing.done()
        server.start_again()
        await asyncio.wait_for(electing, 30)
        assert again.loaded["workers"] == {"w": "digest"}
        again.close()
