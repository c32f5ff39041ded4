"""The client's key store derives its master key once per seed, not at every key it stores or reads."""

from __future__ import annotations

import pytest
from aun_core.keystore import _utils

from aun_runtime.network._identity import share_master_key


def test_each_seed_is_derived_once_and_keys_still_round_trip(monkeypatch: pytest.MonkeyPatch) -> None:
    derived: list[bytes] = []
    real = _utils.derive_master_key

    def counting(seed_bytes: bytes) -> bytes:
        derived.append(seed_bytes)
        return real(seed_bytes)

    monkeypatch.setattr(_utils, "derive_master_key", counting)
    share_master_key()
    share_master_key()  # idempotent: not wrapped twice
    record = _utils.protect_field(b"seed-a", "alice.aun.localhost", "identity/private_key", b"secret")
    assert _utils.reveal_field(b"seed-a", "alice.aun.localhost", "identity/private_key", record) == b"secret"
    assert _utils.reveal_field(b"seed-b", "alice.aun.localhost", "identity/private_key", record) is None
    assert derived == [b"seed-a", b"seed-b"]  # a wrong seed still gets its own key, and fails
    assert _utils.derive_master_key(b"seed-a") == real(b"seed-a")
