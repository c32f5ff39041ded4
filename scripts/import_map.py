"""The project's import map, read from the source with ``ast`` (nothing is imported).

Rooms are the packages (``aun_runtime.distributed``, ``protocols``...; a package's ``__init__`` is its
public face, a room of its own, since it re-exports from the rooms below it). An arrow ``A -> B (n)``
says that ``n`` modules of room A import room B. Floors are counted from the bottom: a room on floor 0
imports no other room, a room on floor k imports only rooms below it. A circle is a set of rooms that
import one another (they share a floor); ``modules in circles`` lists module-level circles, which
tests/test_layout.py forbids inside the library.

    python scripts/import_map.py            # the map of the working tree
    python scripts/import_map.py --json     # the same, as one JSON object
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("protocols", "aun_runtime", "agents")


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            wanted = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                if path.name != "__init__.py":
                    base.pop()
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            wanted = [f"{target}.{alias.name}" for alias in node.names] or [target]
        else:
            continue
        for target in wanted:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                targets.add(target)
    return targets


def room_of(name: str, path: Path) -> str:
    if path.name == "__init__.py":
        return f"{name} (face)"
    package = name.rpartition(".")[0]
    return package or name


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    sys.setrecursionlimit(10_000)

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def import_map() -> dict[str, object]:
    known = modules()
    module_graph = {name: imports(name, path, known) for name, path in known.items()}
    rooms = {name: room_of(name, path) for name, path in known.items()}
    sizes: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for name, path in known.items():
        sizes[rooms[name]][0] += 1
        sizes[rooms[name]][1] += len(path.read_text().splitlines())
    arrows: dict[tuple[str, str], int] = defaultdict(int)
    for name, targets in module_graph.items():
        for room in {rooms[t] for t in targets} - {rooms[name]}:
            arrows[(rooms[name], room)] += 1
    room_graph: dict[str, set[str]] = {room: set() for room in sizes}
    for source, target in arrows:
        room_graph[source].add(target)
    groups = strongly_connected(room_graph)
    group_of = {room: tuple(group) for group in groups for room in group}
    floor: dict[tuple[str, ...], int] = {}
    for group in groups:  # Tarjan's order: a group comes after every group it imports
        below = {group_of[t] for room in group for t in room_graph[room]} - {tuple(group)}
        floor[tuple(group)] = 1 + max((floor[b] for b in below), default=-1)
    return {
        "rooms": {room: {"modules": m, "lines": n, "floor": floor[group_of[room]]} for room, (m, n) in sorted(sizes.items())},
        "arrows": [f"{a} -> {b} ({n})" for (a, b), n in sorted(arrows.items())],
        "circles": [group for group in groups if len(group) > 1],
        "modules in circles": [group for group in strongly_connected(module_graph) if len(group) > 1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    found = import_map()
    if parser.parse_args().json:
        print(json.dumps(found))
        return
    rooms = found["rooms"]
    assert isinstance(rooms, dict)
    print("rooms (floor, modules, lines):")
    for room, info in sorted(rooms.items(), key=lambda item: (-item[1]["floor"], item[0])):
        print(f"  {info['floor']:>2}  {room:<42} {info['modules']:>3} {info['lines']:>6}")
    for title in ("arrows", "circles", "modules in circles"):
        entries = found[title]
        assert isinstance(entries, list)
        print(f"{title} ({len(entries)}):")
        for entry in entries:
            print(f"  {entry if isinstance(entry, str) else ' <-> '.join(entry)}")


if __name__ == "__main__":
    main()
