"""Text helpers shared by the contracts' one-line summaries."""

from __future__ import annotations

__all__ = ["snip"]


def snip(text: str, width: int = 60) -> str:
    """`text` on one line, cut to `width` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
