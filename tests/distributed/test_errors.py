"""The distributed package's errors are the runtime's: one class per failure, wherever it is raised."""

from __future__ import annotations

import aun_runtime.base._errors
import aun_runtime.distributed


def test_outbox_full_error_is_the_runtime_one() -> None:
    assert aun_runtime.distributed.OutboxFullError is aun_runtime.base._errors.OutboxFullError
