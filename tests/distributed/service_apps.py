"""Apps for the service AID tests (``--app tests.distributed.service_apps:<name>``), set by environment."""

from __future__ import annotations

import os

from aun_runtime import AUNRuntime

from .apps import Source, Tally


async def instance(runtime: AUNRuntime) -> None:
    """``svc.local``: a Tally (``TALLY_DELAY`` seconds per message); run it with ``--service svc.local``."""
    await runtime.register_agent("svc.local", lambda: Tally(float(os.environ.get("TALLY_DELAY", "0"))))


async def sender(runtime: AUNRuntime) -> None:
    """``SOURCE_AID`` sends ``SOURCE_COUNT`` numbered messages to ``svc.local``, ``SOURCE_BURST`` at a time."""
    count, burst = int(os.environ.get("SOURCE_COUNT", "100")), int(os.environ.get("SOURCE_BURST", "0"))
    pause = float(os.environ.get("SOURCE_PAUSE", "0"))
    aid = os.environ.get("SOURCE_AID", "source.local")
    await runtime.register_agent(aid, lambda: Source("svc.local", count, burst, pause), eager=True)
