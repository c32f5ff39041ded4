"""autogen-core's intervention handlers on an AUN runtime: `on_publish`, run when a message is published.

Every core takes `intervention_handlers` and runs them the same way:

* **When.** In `publish_message`, in the publisher's task, before the message is queued for
  anyone. (autogen-core runs them later, when its loop takes the message off its one queue; a
  runtime with a mailbox per agent has no such moment, and running them up front is what lets a
  drop cost nothing afterwards: nothing was counted, so `stop_when_idle` has nothing to wait for.
  autogen-core 0.7.5 never marks a dropped message done, and `stop_when_idle` hangs.)
* **In order, chained.** Each handler is given what the one before it returned, as autogen-core's
  docstring describes. (Its 0.7.5 code hands every handler the original message and keeps only the
  last one's result.) A handler that returns None is warned about (`RuntimeWarning`, as there) and
  counts as "no change", as that docstring says.
* **Drop.** A handler that returns `DropMessage` ends it: nobody receives the message, and each
  agent it would have reached has a dead letter ([`MessageDroppedError`][aun_runtime.MessageDroppedError], naming
  the handler), so a drop is never silent.
* **Failure.** A handler that raises is logged, as on autogen-core, and the message is dropped the
  same way, with the exception as the dead letters' reason. The publisher is not interrupted:
  nothing it did was wrong.
* **Only** `on_publish`. `on_send` and `on_response` are the hooks of `send_message`, which an
  AUN runtime refuses, so they can never run: a handler that has no `on_publish` of its own is
  refused when the runtime is made ([`InterventionHandlerError`][aun_runtime.InterventionHandlerError]), rather than
  accepted and never called.
* **Traced**, when the runtime traces: one `autogen intercept <handler class>` span per handler,
  linked to the publish's `autogen create` span, as autogen-core makes them.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from autogen_core import DefaultInterventionHandler, DropMessage, InterventionHandler, MessageContext, TopicId
from opentelemetry import context as otel_context

from ..base._autogen_internals import EnvelopeMetadata, TraceHelper, get_telemetry_envelope_metadata
from ..base._errors import InterventionHandlerError, MessageDroppedError

__all__ = ["PublishInterventions", "begin_publish", "detached"]

logger = logging.getLogger("aun_runtime")

#: The hooks that never run here, and the bodies that count as not implementing a hook.
_SEND_SIDE = ("on_send", "on_response")
_INHERITED = {
    name: {getattr(DefaultInterventionHandler, name), getattr(InterventionHandler, name)}
    for name in ("on_publish", *_SEND_SIDE)
}


def _implements(handler: object, hook: str) -> bool:
    """`handler`'s class has a `hook` of its own (not the protocol's, nor the default no-op)."""
    method = getattr(type(handler), hook, None)
    return callable(method) and method not in _INHERITED[hook]


def _checked(handler: object) -> InterventionHandler:
    if _implements(handler, "on_publish"):
        return handler  # type: ignore[return-value]  # it has the one hook that runs
    name = type(handler).__name__
    send_side = [hook for hook in _SEND_SIDE if _implements(handler, hook)]
    has = f"implements only {' and '.join(send_side)}" if send_side else "implements no hook of its own"
    raise InterventionHandlerError(
        f"intervention handler {name} {has}: on an AUN runtime only on_publish runs. on_send and "
        "on_response intercept send_message and its response, and send_message is refused (a receiver "
        "has no obligation to respond), so they could never run. Implement on_publish(message, *, "
        "message_context) to observe, change or drop (return DropMessage) what is published"
    )


@contextlib.contextmanager
def detached() -> Iterator[None]:
    """Run the block with no current span: a span started in it is the root of a trace of its own,
    as autogen-core's are when its loop (which runs in no span) starts them."""
    token = otel_context.attach(otel_context.Context())
    try:
        yield
    finally:
        otel_context.detach(token)


class PublishInterventions:
    """A runtime's intervention handlers, checked once, applied to each publish.

    Args:
        handlers: autogen-core `InterventionHandler` objects, in the order they run.

    Raises:
        InterventionHandlerError: a handler has no `on_publish` of its own.
    """

    def __init__(self, handlers: Sequence[InterventionHandler]) -> None:
        self.handlers: tuple[InterventionHandler, ...] = tuple(_checked(handler) for handler in handlers)

    async def apply(
        self,
        message: Any,
        ctx: MessageContext,
        *,
        tracer: TraceHelper[Any, Any, Any] | None = None,
        created: EnvelopeMetadata | None = None,
    ) -> Any:
        """What the handlers make of `message`: the message to deliver, or a
        [`MessageDroppedError`][aun_runtime.MessageDroppedError] saying who dropped it and why.

        `tracer` and `created` (the publish's `create` span) make one `intercept` span each.
        """
        for handler in self.handlers:
            name = type(handler).__name__
            spans = contextlib.ExitStack()
            if tracer is not None:
                spans.enter_context(detached())
                spans.enter_context(tracer.trace_block("intercept", name, parent=created))
            with spans:
                try:
                    result = await handler.on_publish(message, message_context=ctx)
                except Exception as exc:
                    logger.error(
                        "intervention handler %s raised on a %s published on %s; it is dropped",
                        name, type(message).__name__, ctx.topic_id, exc_info=True,
                    )
                    return MessageDroppedError(
                        f"intervention handler {name} raised: {type(exc).__name__}: {exc}"
                    )
            if result is DropMessage or isinstance(result, DropMessage):
                return MessageDroppedError(
                    f"intervention handler {name} dropped it (on_publish returned DropMessage)"
                )
            if result is None:
                warnings.warn(
                    f"intervention handler {name}.on_publish returned None; taken as no change. Return the "
                    "message (changed or not) or DropMessage",
                    RuntimeWarning,
                    stacklevel=2,
                )
                continue
            message = result
        return message


async def begin_publish(
    message: Any,
    topic_id: TopicId,
    ctx: MessageContext,
    interventions: PublishInterventions | None,
    tracer: TraceHelper[Any, Any, Any] | None,
) -> tuple[Any, EnvelopeMetadata | None]:
    """The start of a publish that is traced, or goes through intervention handlers, or both, on any
    core: autogen-core's `create` span, then the handlers (each in its `intercept` span).

    Returns:
        The message to deliver, or a [`MessageDroppedError`][aun_runtime.MessageDroppedError] if a handler dropped
        it; and the `create` span's metadata, for the spans that follow to link to (None untraced).
    """
    created = None
    if tracer is not None:
        kind = {"message_type": type(message).__name__}
        with tracer.trace_block("create", topic_id, parent=None, extraAttributes=kind):
            created = get_telemetry_envelope_metadata()
    if interventions is not None:
        message = await interventions.apply(message, ctx, tracer=tracer, created=created)
    return message, created
