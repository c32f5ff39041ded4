"""`Cassette`: recorded model answers, keyed by request content, kept in a JSON file.

A cassette is what makes the patterns run offline and identically every time: each entry holds one
request (in full, so a reader can see what was asked) and the answer the model gave to it. Entries
are looked up by the request's content key ([`ModelRequest`][aun_runtime.models.ModelRequest]), never by
call order, and they are written sorted by key, so a cassette recorded by agents that called the model
concurrently is byte-identical from one recording to the next.

File format (`format: aun-cassette/1`):

```text
{
  "format": "aun-cassette/1",
  "model_info": {...},          # the recording model's capabilities, replayed as they were
  "entries": [
    {"key": "<sha256>", "request": {...}, "response": {<CreateResult>}, "chunks": ["..", ".."]}
  ]
}
```

`chunks` is present when the answer was streamed, so a replayed stream splits where the recorded
one did. On load each entry's key is checked against its request: an entry whose request was edited
by hand is refused with the entry named (an answer may be edited freely).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autogen_core.models import CreateResult, ModelInfo

from ._errors import CassetteFileError
from ._request import ModelRequest, request_key

__all__ = ["CASSETTE_FORMAT", "Cassette", "CassetteEntry"]

CASSETTE_FORMAT = "aun-cassette/1"

#: What a replaying client claims it can do when the cassette does not say: agents read
#: ``model_info`` to decide how to ask (JSON mode, tools), so this must match the recording.
DEFAULT_MODEL_INFO: ModelInfo = {
    "vision": False,
    "function_calling": True,
    "json_output": True,
    "structured_output": False,
    "family": "unknown",
    "multiple_system_messages": True,
}


@dataclass(frozen=True)
class CassetteEntry:
    """One recorded answer: the request (canonical data), the result, and the stream's chunks if any."""

    key: str
    request: dict[str, Any]
    result: CreateResult
    chunks: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "key": self.key,
            "request": self.request,
            "response": self.result.model_dump(mode="json", exclude={"cached", "logprobs"}),
        }
        if self.chunks is not None:
            out["chunks"] = list(self.chunks)
        return out


class Cassette:
    """Recorded answers keyed by request content.

    Args:
        path: the JSON file it is loaded from and saved to; `None` keeps it in memory only.
        model_info: capabilities of the model the answers come from (stored in the file).

    Example:
        >>> from autogen_core.models import UserMessage
        >>> cassette = Cassette()
        >>> entry = cassette.add([UserMessage(content="2+2?", source="user")], "4")
        >>> cassette.get(entry.key).result.content
        '4'
    """

    def __init__(self, path: str | Path | None = None, *, model_info: ModelInfo | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self.model_info: ModelInfo = dict(model_info or DEFAULT_MODEL_INFO)  # type: ignore[assignment]
        self._entries: dict[str, CassetteEntry] = {}

    # -- files -------------------------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | Path, *, missing_ok: bool = False) -> Cassette:
        """Read a cassette file.

        Args:
            path: the file.
            missing_ok: return an empty cassette bound to `path` if the file does not exist
                (for recording); otherwise a missing file is an error.

        Raises:
            CassetteFileError: the file is missing (and `missing_ok` is false), not JSON, of another
                format, or holds an entry whose key does not match its request.
        """
        file = Path(path)
        if not file.exists():
            if missing_ok:
                return cls(file)
            raise CassetteFileError(
                f"cassette {file} does not exist. Record it by running with a real model and "
                "AUN_MODEL_RECORD=1 (see aun_runtime.models), or pass the right path"
            )
        try:
            raw = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CassetteFileError(f"cassette {file} cannot be read as JSON: {exc}") from None
        if not isinstance(raw, dict) or raw.get("format") != CASSETTE_FORMAT:
            found = raw.get("format") if isinstance(raw, dict) else type(raw).__name__
            raise CassetteFileError(
                f"{file} is not a cassette of format {CASSETTE_FORMAT!r} (found {found!r})"
            )
        cassette = cls(file, model_info=raw.get("model_info") or None)
        for n, item in enumerate(raw.get("entries", [])):
            cassette._insert(_entry_from_json(item, file, n))
        return cassette

    def save(self, path: str | Path | None = None) -> Path:
        """Write the cassette (entries sorted by key) atomically: a reader never sees half a file."""
        target = Path(path) if path is not None else self.path
        if target is None:
            raise CassetteFileError("this cassette has no file: pass save(path)")
        target.parent.mkdir(parents=True, exist_ok=True)
        text = self.dumps()
        fd, tmp = tempfile.mkstemp(prefix=target.name, suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
            os.chmod(tmp, 0o644)  # mkstemp makes it private; a cassette is an ordinary project file
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return target

    def dumps(self) -> str:
        """The file's text: stable for equal contents, whatever order the entries were added in."""
        data = {
            "format": CASSETTE_FORMAT,
            "model_info": dict(self.model_info),
            "entries": [self._entries[key].to_json() for key in sorted(self._entries)],
        }
        return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"

    # -- entries -----------------------------------------------------------------------------------

    def get(self, key: str) -> CassetteEntry | None:
        """The entry recorded for a request key, if any."""
        return self._entries.get(key)

    def put(
        self, request: ModelRequest, result: CreateResult, chunks: list[str] | None = None
    ) -> CassetteEntry:
        """Record the answer to `request` (replacing an earlier one)."""
        entry = CassetteEntry(
            request.key,
            request.data,
            result.model_copy(update={"cached": False, "logprobs": None}),
            tuple(chunks) if chunks is not None else None,
        )
        self._insert(entry)
        return entry

    def add(self, messages: Any, answer: str, **request: Any) -> CassetteEntry:
        """Record a text `answer` for `messages` (and `create` keyword arguments), by hand."""
        built = ModelRequest.build(messages, **request)
        usage = {"prompt_tokens": 0, "completion_tokens": 0}
        return self.put(built, CreateResult(finish_reason="stop", content=answer, usage=usage, cached=False))

    def closest(self, request: ModelRequest) -> tuple[CassetteEntry, int] | None:
        """The recorded entry sharing the longest run of leading messages with `request`, and that
        run's length. Used to say *where* an unrecorded request departs from what was recorded."""
        wanted = request.data["messages"]
        best: tuple[CassetteEntry, int] | None = None
        for entry in self._entries.values():
            recorded = entry.request.get("messages", [])
            same = 0
            for a, b in zip(recorded, wanted, strict=False):
                if a != b:
                    break
                same += 1
            if best is None or same > best[1]:
                best = (entry, same)
        return best

    def _insert(self, entry: CassetteEntry) -> None:
        self._entries[entry.key] = entry

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[CassetteEntry]:
        return iter(self._entries[key] for key in sorted(self._entries))


def _entry_from_json(item: Mapping[str, Any], file: Path, n: int) -> CassetteEntry:
    try:
        request = dict(item["request"])
        key = str(item["key"])
        result = CreateResult.model_validate({**item["response"], "cached": True})
        chunks = item.get("chunks")
    except (KeyError, TypeError, ValueError) as exc:
        raise CassetteFileError(f"{file}: entry {n} is malformed: {exc}") from None
    if request_key(request) != key:
        raise CassetteFileError(
            f"{file}: entry {n} (key {key[:16]}…) does not match its request: the request was edited "
            "after recording. Re-record it (AUN_MODEL_RECORD=1) or restore the request; answers may be "
            "edited, requests may not"
        )
    return CassetteEntry(key, request, result, tuple(str(c) for c in chunks) if chunks is not None else None)
