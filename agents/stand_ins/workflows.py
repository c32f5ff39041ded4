"""Stand-in models for the sequential workflow, concurrent agents and mixture of agents."""

from __future__ import annotations

import re

from aun_runtime.models import ModelRequest, ScriptedChatCompletionClient

__all__ = ["concurrent_workers", "mixture_of_agents", "sequential_workflow"]


def _sequential(request: ModelRequest) -> str:
    text = request.last_text
    system = request.system.lower()
    if system.startswith("you extract"):
        features = [
            part.strip(" .") for part in re.split(r",| and |\. ", text.split(":", 1)[-1]) if part.strip(" .")
        ]
        return "Key concepts:\n" + "\n".join(f"- {feature}" for feature in features[:5])
    if system.startswith("you write"):
        points = [line[2:] for line in text.splitlines() if line.startswith("- ")]
        body = "; ".join(points[:-1]) + (f" and {points[-1]}" if len(points) > 1 else "".join(points))
        return f"Meet the bottle that keeps up with you: {body}. Grab yours today!"
    if system.startswith("you proofread"):
        polished = re.sub(r"\s+", " ", text).strip()
        return f"**Stay refreshed, anywhere.**\n\n{polished}"
    return text


def sequential_workflow() -> ScriptedChatCompletionClient:
    """The stand-in for the sequential workflow notebook."""
    return ScriptedChatCompletionClient(_sequential)


def _concurrent(request: ModelRequest) -> str:
    text = request.last_text
    system = request.system.lower()
    if "summar" in system:
        return text.split(". ")[0].rstrip(".") + "."
    if "count" in system:
        return f"{len(text.split())} words, {len(re.findall(r'[.!?]', text))} sentences"
    if "keyword" in system:
        words = sorted({w.lower() for w in re.findall(r"[A-Za-z]{6,}", text)})
        return ", ".join(words[:5])
    return "done"


def concurrent_workers() -> ScriptedChatCompletionClient:
    """The stand-in for the concurrent agents notebook."""
    return ScriptedChatCompletionClient(_concurrent)


def _split(text: str) -> tuple[int, list[int], list[str]]:
    total = int(re.search(r"(\d+) cookies", text).group(1))  # type: ignore[union-attr]
    ratio = [int(part) for part in re.search(r"(\d+(?::\d+)+)", text).group(1).split(":")]  # type: ignore[union-attr]
    names = re.findall(r"between ([A-Z]\w+), ([A-Z]\w+),? and ([A-Z]\w+)", text)[0]
    return total, ratio, list(names)


def _mixture(request: ModelRequest) -> str:
    text = request.last_text
    total, ratio, names = _split(text)
    shares = [total * part // sum(ratio) for part in ratio]
    correct = ", ".join(f"{name} gets {share}" for name, share in zip(names, shares, strict=True))
    if request.system.startswith("You combine"):
        return f"Split {total} in the ratio {':'.join(map(str, ratio))}: {correct}."
    previous = "Answers from the previous layer:" in text
    if "hasty" in request.system and not previous:
        even = total // len(names)
        return ", ".join(f"{name} gets {even}" for name in names) + " (an even split)."
    checked = " Checked against the other answers." if previous else ""
    return f"{sum(ratio)} parts of {total // sum(ratio)} cookies each: {correct}.{checked}"


def mixture_of_agents() -> ScriptedChatCompletionClient:
    """The stand-in for the mixture of agents notebook."""
    return ScriptedChatCompletionClient(_mixture)
