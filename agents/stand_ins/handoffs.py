"""Stand-in model for handoffs: a triage agent that routes, a repairs agent that looks an order up
with its tool and escalates to a person when asked."""

from __future__ import annotations

import json
import re

from autogen_core import FunctionCall
from autogen_core.models import CreateResult, FunctionExecutionResultMessage, RequestUsage, UserMessage

from aun_runtime.models import ModelRequest, ScriptedChatCompletionClient

__all__ = ["handoffs"]


def _call(name: str, call_id: str, **arguments: str) -> CreateResult:
    call = FunctionCall(id=call_id, name=name, arguments=json.dumps(arguments, sort_keys=True))
    return CreateResult(
        finish_reason="function_calls", content=[call], usage=RequestUsage(0, 0), cached=False
    )


def _respond(request: ModelRequest) -> str | CreateResult:
    last = request.messages[-1]
    customer = [m.content for m in request.messages if isinstance(m, UserMessage)]
    said = str(customer[-1]).lower() if customer else ""
    if request.system.startswith("You are the triage agent"):
        if "broken" in said or "refund" in said or "repair" in said:
            return _call("transfer_to_repairs", "call-triage", reason="damaged item")
        if "buy" in said or "price" in said:
            return _call("transfer_to_sales", "call-triage", reason="wants to buy")
        return "Hello! Are you looking to buy something, or do you need help with an order?"
    if request.system.startswith("You are the repairs agent"):
        if isinstance(last, FunctionExecutionResultMessage):
            found = last.content[0].content
            return f"I found it: {found}. I have started a refund; it will reach you within 5 days."
        if "person" in said or "human" in said:
            return _call("transfer_to_human", "call-human", reason="customer asked for a person")
        order = re.search(r"#?(\d{3,})", said)
        if order:
            return _call("look_up_order", f"call-{order.group(1)}", order_id=order.group(1))
        return "Which order number is it?"
    return "How can I help?"


def handoffs() -> ScriptedChatCompletionClient:
    """The stand-in for the handoffs notebook."""
    return ScriptedChatCompletionClient(_respond)
