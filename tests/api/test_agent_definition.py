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


def test_a_handler_without_type_hints_says_how_to_annotate_it() -> None:
    with pytest.raises(HandlerDefinitionError, match=r"Bare\.on_text: .*`message` has none") as caught:

        class Bare(AUNAgent):
            @event
            async def on_text(self, message, ctx) -> None: ...  # type: ignore[no-untyped-def]

    assert "message: AUNMessage, ctx: MessageContext) -> None" in str(caught.value)


def test_a_handler_without_a_return_type_is_refused_the_same_way() -> None:
    with pytest.raises(HandlerDefinitionError, match=r"NoReturnType\.on_text: .*the return type has none"):

        class NoReturnType(AUNAgent):
            @event(match=lambda message, ctx: True)
            async def on_text(self, message: AUNMessage, ctx: MessageContext): ...  # type: ignore[no-untyped-def]


def test_a_handler_whose_annotations_do_not_resolve_names_the_missing_name() -> None:
    namespace: dict[str, object] = {}
    source = (
        "from __future__ import annotations\n"
        "from aun_runtime import AUNAgent, MessageContext, event\n"
        "class Later(AUNAgent):\n"
        "    @event\n"
        "    async def on_order(self, message: Order, ctx: MessageContext) -> None: ...\n"
    )
    with pytest.raises(HandlerDefinitionError, match=r"Later\.on_order: .*do not resolve \(name 'Order'") as caught:
        exec(compile(source, "<app>", "exec"), namespace)
    assert "before the class" in str(caught.value)


def test_overriding_an_event_handler_without_decorating_it_is_refused() -> None:
    class Base(AUNAgent):
        @event
        async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None: ...

    with pytest.raises(HandlerDefinitionError, match=r"Child\.on_text overrides the @event handler Base\.on_text") as caught:

        class Child(Base):
            async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None: ...

    assert "decorate the override with @event too" in str(caught.value)


def test_an_override_decorated_again_and_unrelated_methods_are_fine() -> None:
    class Base(AUNAgent):
        @event
        async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None: ...

    class Child(Base):
        @event
        async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None: ...

        async def helper(self) -> None: ...

    class Grandchild(Child):
        async def helper(self) -> None: ...

    assert Grandchild.mode == "autonomous"
