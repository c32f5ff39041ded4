"""Typed behaviour contracts: message classes with unique, namespaced wire names.

A contract class is the agreement between agents about what a message means. It travels inside an
AUN message as a `json` payload whose `kind` is the class's wire name, so any AUN client can read
it, and a runtime turns it back into the class on arrival.

Wire names are unique across the process: two classes that share a `__name__` (say `Task` in two
modules) get different wire names, and declaring the same wire name twice raises
`ContractNameCollisionError` when the second class is defined.

Example:
    >>> class Greeting(AUNContract, wire_name="example.Greeting"):
    ...     who: str
    >>> payload = Greeting(who="bob").to_payload()
    >>> payload.kind
    'example.Greeting'
    >>> decode_contract(payload)
    Greeting(who='bob')
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from .aun import JsonPayload, Payload
from .errors import ContractNameCollisionError, InvalidMessageError

__all__ = ["AUNContract", "contract_class", "contract_classes", "decode_contract"]

_REGISTRY: dict[str, type[AUNContract]] = {}


class AUNContract(BaseModel):
    """Base class of typed contract messages.

    Subclasses name themselves on the wire with the `wire_name` class keyword; without it the name
    is `<module>.<qualified class name>`, which is unique but changes if the class moves.
    `summary()` gives the text a plain AUN client shows (the payload's `fallback_text`).
    """

    model_config = ConfigDict(frozen=True)
    wire_name: ClassVar[str]

    def __init_subclass__(cls, *, wire_name: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        name = wire_name or f"{cls.__module__}.{cls.__qualname__}"
        existing = _REGISTRY.get(name)
        if existing is not None and _origin(existing) != _origin(cls):
            raise ContractNameCollisionError(
                f"contract wire name {name!r} is already used by {_origin(existing)}; "
                f"give {cls.__qualname__} its own wire_name=... in its class statement"
            )
        cls.wire_name = name
        _REGISTRY[name] = cls

    def summary(self) -> str:
        """One line a human reads in a client that does not know this contract. Override freely."""
        return f"[{self.wire_name}]"

    def to_payload(self) -> JsonPayload:
        """This contract message as an AUN `json` payload."""
        return JsonPayload(
            kind=self.wire_name, data=self.model_dump(mode="json"), fallback_text=self.summary()
        )


def _origin(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def contract_class(wire_name: str) -> type[AUNContract] | None:
    """The contract class registered under `wire_name`, if any."""
    return _REGISTRY.get(wire_name)


def contract_classes() -> list[type[AUNContract]]:
    """Every contract class defined so far in this process (import a module to define its classes)."""
    return list(_REGISTRY.values())


def decode_contract(payload: Payload) -> AUNContract | None:
    """Turn a `json` payload back into its contract class, or `None` if it is not a known contract.

    Raises:
        InvalidMessageError: the payload names a known contract but its data does not fit the class.
    """
    if not isinstance(payload, JsonPayload):
        return None
    cls = _REGISTRY.get(payload.kind)
    if cls is None:
        return None
    try:
        return cls.model_validate(payload.data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ()))
        raise InvalidMessageError(
            f"payload of kind {payload.kind!r} does not fit {cls.__qualname__}: {where}: {first.get('msg')}",
            field=f"payload.data.{where}" if where else "payload.data",
        ) from None
