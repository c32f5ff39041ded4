"""An AUN agent class with a handler that could answer an RPC is refused when it is defined."""

from __future__ import annotations

import pytest
from autogen_core import message_handler, rpc

from aun_runtime import AUNAgent, AUNMessage, HandlerDefinitionError, MessageContext, event


def test_rpc_handler_is_refused_naming_class_and_method() -> None:
    with pytest.raises(HandlerDefinitionError, match=r"Asker\.ask: only @event handlers"):

        class Asker(AUNAgent):
            @rpc
            async def ask(self, message: AUNMessage, ctx: MessageContext) -> AUNMessage:
                return message


def test_message_handler_is_refused_too() -> None:
    with pytest.raises(TypeError, match=r"Both\.either"):

        class Both(AUNAgent):
            @message_handler
            async def either(self, message: AUNMessage, ctx: MessageContext) -> None: ...


def test_an_rpc_handler_inherited_from_a_mixin_is_found() -> None:
    class Mixin:
        @rpc
        async def sneaky(self, message: AUNMessage, ctx: MessageContext) -> AUNMessage:
            return message

    with pytest.raises(HandlerDefinitionError, match=r"Sneaky\.sneaky"):

        class Sneaky(Mixin, AUNAgent):
            pass


def test_event_handlers_are_fine() -> None:
    class Fine(AUNAgent):
        @event
        async def on_any(self, message: AUNMessage, ctx: MessageContext) -> None: ...

        @event(match=lambda message, ctx: True)
        async def on_matched(self, message: AUNMessage, ctx: MessageContext) -> None: ...

    assert Fine.mode == "autonomous"


def test_a_handler_named_on_message_is_refused_because_it_would_skip_the_mailbox() -> None:
    # autogen-core calls on_message for every delivery: a handler of that name replaces the entry
    # point, so messages would reach it with no mailbox, channel or inbound message.
    with pytest.raises(HandlerDefinitionError, match=r"Shadow\.on_message: .*another name"):

        class Shadow(AUNAgent):
            @event
            async def on_message(self, message: AUNMessage, ctx: MessageContext) -> None: ...
