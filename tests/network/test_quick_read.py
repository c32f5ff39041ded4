"""The gateway agent's quick frame read agrees with the AUN client's strict parser wherever it answers,
and answers for the frames that carry messages."""

from __future__ import annotations

import json
from typing import Any

import pytest

from aun_runtime.network._frame_guard import quick_read

# What the client's parser says of a text: the object, or the refusal (any exception).
_REFUSED = object()


def client_reads(text: str) -> Any:
    from aun_core.transport import RPCTransport

    try:
        return RPCTransport._decode_message(text)
    except Exception:
        return _REFUSED


def sealed_push() -> str:
    """A push as the gateway sends it: an end-to-end encrypted envelope made by the client's own code."""
    from aun_core.v2.e2ee.encrypt_p2p import encrypt_p2p_message
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    def keys() -> tuple[bytes, bytes]:
        key = ec.generate_private_key(ec.SECP256R1())
        der = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        return key.private_numbers().private_value.to_bytes(32, "big"), der

    (sender_key, sender_der), (_, peer_der), (_, prekey_der) = keys(), keys(), keys()
    envelope = encrypt_p2p_message(
        {"aid": "alice.aun.localhost", "device_id": "d1", "ik_priv": sender_key, "ik_pub_der": sender_der},
        {"targets": [{"aid": "bobby.aun.localhost", "device_id": "d2", "role": "peer", "key_source": "peer_device_prekey",
                      "ik_pk_der": peer_der, "spk_pk_der": prekey_der, "spk_id": "spk-1"}]},
        {"type": "text", "text": "héllo ✓ " * 20},
    )
    params = {"message_id": "m-1", "from": "alice.aun.localhost", "to": "bobby.aun.localhost", "seq": 12,
              "prev_peer_seq": 11, "t_server": 1_700_000_000_000, "encrypted": True, "payload": envelope}
    return json.dumps({"jsonrpc": "2.0", "method": "event/message.received", "params": params}, ensure_ascii=False)


COMMON = [
    sealed_push(),
    '{"jsonrpc":"2.0","id":"7","result":{"message_id":"m-2","seq":3,"status":"sent","t_server":1700000000000}}',
    '{"jsonrpc":"2.0","id":"8","result":{"ok":true,"acked":[1,2,3],"ratio":0.25,"none":null,"neg":-9007199254740991}}',
    '{"jsonrpc":"2.0","id":"9","error":{"code":-32602,"message":"bad \\"params\\" \\u00e9","data":{"n":1.5e3}}}',
]

EDGES = [
    '{"a":1,"a":2}',                               # a key twice
    '{"a":{"b":1,"b":1}}',
    '{"a":9007199254740992}',                      # one past the safe range
    '{"a":-9007199254740992}',
    '{"a":1e400}',                                 # infinity
    '{"a":1e300}',
    '{"a":9007199254740993.0}',
    '{"a":2.0000000000000001e15}',                 # a fraction a double cannot hold
    '{"a":NaN}',
    '{"a":-Infinity}',
    '{"a":"\\ud800"}',                             # a lone surrogate half, escaped
    '{"\\udfff":1}',
    '{"a":"\ud800"}',                              # a surrogate half in the text itself
    '{"a":',                                       # not JSON
    '{"a":[' * 5000 + ']' * 5000 + '}',            # deeper than a parser goes
]

# What the client reads but the quick read leaves to it: it vouches only for what it is sure of.
ASIDE = [
    '{"a":"\\ud83d\\ude00"}',                          # a whole pair, escaped
    '{"a":"\\\\ud800"}',                               # an escaped backslash before plain text
    '[1,2]',                                           # not an object (the client's caller refuses it)
    '"frame"',
]


@pytest.mark.parametrize("text", COMMON + EDGES + ASIDE)
def test_agrees_with_the_client_wherever_it_answers(text: str) -> None:
    quick = quick_read(text)
    if quick is not None:
        assert client_reads(text) == quick


@pytest.mark.parametrize("text", COMMON)
def test_answers_for_the_frames_that_carry_messages(text: str) -> None:
    assert quick_read(text) is not None


@pytest.mark.parametrize("text", EDGES)
def test_steps_aside_where_the_client_refuses(text: str) -> None:
    assert client_reads(text) is _REFUSED
    assert quick_read(text) is None


@pytest.mark.parametrize("text", ASIDE)
def test_leaves_the_rest_to_the_client(text: str) -> None:
    assert client_reads(text) is not _REFUSED
    assert quick_read(text) is None
