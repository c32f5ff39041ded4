"""Distributed workers: agents in several processes or machines, with the same AUN semantics.

A cluster is one host ([`AUNHost`][aun_runtime.distributed.AUNHost], autogen-ext's gRPC host with AUN additions) and any number
of workers ([`WorkerRuntime`][aun_runtime.distributed.WorkerRuntime], autogen-ext's gRPC worker runtime made reliable), each the core
of an [`AUNRuntime`][aun_runtime.AUNRuntime]. Agents behave exactly as in one process: mailbox, channel,
archive, loop guard, dead letters, no RPC.

How nothing gets lost (the mechanism, in short; the modules say more):

* **A durable outbox per sender.** Every direct or group message a worker sends to an AID gets the
  next number in that worker's stream to the AID and a row in the worker's journal (an extra table
  in its archive file). It is sent once that row is committed and stays until the receiving worker
  acknowledges it; it is sent again, in order, after a reconnect, when the AID is held again after
  its worker restarted, or (last resort) after a silence.
* **Acknowledged after the commit.** A receiving worker hands a stream's messages to the agent once
  and in order. What the handler causes (its `received` record, thoughts, outgoing messages) and
  the stream position are committed together when it returns; only then do the outgoing messages
  leave and the acknowledgement go back (through the host, on `aun.ack.<worker>`). So a worker
  killed with SIGKILL and restarted handles every message exactly once: what it had committed is
  skipped, what it had not is handled again, and nothing it did half-way had left the process.
* **Kept for absent AIDs.** A message to an AID whose worker is away (crashed, restarting, cut off)
  waits in the sender's outbox until the AID is held again. A message to an AID nobody holds is
  refused with [`UnknownAIDError`][aun_runtime.UnknownAIDError] and a dead letter, *and* kept: it is delivered
  if a worker registers that AID later.
* **Reconnect.** Workers reconnect after any loss of the host and register again; the host keeps a
  directory of AIDs and groups and sends it to all. Given a state file (`AUNHost(state=...)`), it
  keeps who owns what across its own restarts; without one, the directory is rebuilt from the
  workers as they reconnect.
* **Service AIDs.** An AID several workers register as instances (`services=` on the worker)
  gets its messages spread over the live instances, `round_robin` or by `sender_affinity`; a
  ledger the instances share keeps each message handled once when an instance dies (see
  `._service_store`).
* **Proven names.** A worker's secret, kept beside its archive (`<archive>.secret`, mode 0600),
  proves its name to the host on every connection; the host binds a name to the first secret it
  sees and refuses another. An AID belongs to the worker that registered it until that worker
  leaves, and the host takes acknowledgements of deliveries to an AID only from the stream that
  holds it (see `._servicer`).

Example:
    ```python
    from aun_runtime.distributed import worker_runtime

    runtime = worker_runtime("127.0.0.1:50051", archive="coder.sqlite")
    await runtime.register_agent("coder.local", Coder)
    await runtime.start()
    ```
"""

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from autogen_core import InterventionHandler
from opentelemetry.trace import TracerProvider

from ..api._runtime import AUNRuntime
from ..base._errors import OutboxFullError
from ..delivery._core_protocol import AUNCore
from ._errors import HostStateError, HostUnavailableError, WorkerIdentityError
from ._host import DEFAULT_HOST_ADDRESS, AUNHost
from ._servicer import HostStats
from ._tls import HostTLS, TLSConfig
from ._worker import WorkerRuntime, WorkerStats

__all__ = [
    "DEFAULT_HOST_ADDRESS",
    "AUNHost",
    "HostStateError",
    "HostStats",
    "HostTLS",
    "HostUnavailableError",
    "OutboxFullError",
    "TLSConfig",
    "WorkerIdentityError",
    "WorkerRuntime",
    "WorkerStats",
    "worker_runtime",
]


def worker_runtime(
    host_address: str,
    *,
    archive: str | Path = ":memory:",
    name: str | None = None,
    tls: TLSConfig | None = None,
    connect_timeout: float | None = 30.0,
    services: Mapping[str, str] | None = None,
    service_dir: str | Path | None = None,
    intervention_handlers: Sequence[InterventionHandler] | None = None,
    tracer_provider: TracerProvider | None = None,
    **options: Any,
) -> AUNRuntime:
    """An [`AUNRuntime`][aun_runtime.AUNRuntime] whose core is a [`WorkerRuntime`][aun_runtime.distributed.WorkerRuntime] of the host.

    `services` and `service_dir` make some of its AIDs instances of service AIDs;
    `intervention_handlers` and `tracer_provider` are the worker's too (see
    [`WorkerRuntime`][aun_runtime.distributed.WorkerRuntime]). `options` go to [`AUNRuntime`][aun_runtime.AUNRuntime] (`max_hops`,
    `mailbox_capacity`, ...). Nothing connects until `await runtime.start()`.
    """
    core: AUNCore = WorkerRuntime(
        host_address,
        archive=archive,
        name=name,
        tls=tls,
        intervention_handlers=intervention_handlers,
        tracer_provider=tracer_provider,
        connect_timeout=connect_timeout,
        services=services,
        service_dir=service_dir,
    )
    return AUNRuntime(core=core, **options)
