"""The distributed package's modules depend one way and use each other's public names only.

Every import counts, also those under ``if TYPE_CHECKING:`` and inside functions. autogen-ext's own
private parts are the subclasses' business (the worker's and the host servicer's) and are not
checked here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import aun_runtime.distributed

PACKAGE = Path(aun_runtime.distributed.__file__).parent
NAME = "aun_runtime.distributed"


def _modules() -> dict[str, ast.Module]:
    return {
        NAME if path.stem == "__init__" else f"{NAME}.{path.stem}": ast.parse(path.read_text())
        for path in sorted(PACKAGE.glob("*.py"))
    }


def _imported(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".") if module == NAME else module.split(".")[:-1]
    parts = parts[: len(parts) - node.level + 1]
    return ".".join([*parts, *([node.module] if node.module else [])])


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_import_cycle() -> None:
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, tree in modules.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                target = _imported(name, node)
                for alias in node.names:
                    graph[name].add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in modules else target)
    for name in modules:
        seen: set[str] = set()
        todo = [name]
        while todo:
            for dependency in graph.get(todo.pop(), set()) & modules.keys():
                if dependency not in seen:
                    seen.add(dependency)
                    todo.append(dependency)
        assert name not in seen, f"{name} imports itself through its dependencies"


def test_no_private_name_of_another_module() -> None:
    found: list[str] = []
    for name, tree in _modules().items():
        defined = {
            target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign | ast.AnnAssign)
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        }
        defined |= {
            node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and _imported(name, node).startswith("aun_runtime"):
                found += [f"{name}: from {_imported(name, node)} import {a.name}" for a in node.names if _private(a.name)]
            elif isinstance(node, ast.Attribute) and _private(node.attr) and node.attr not in defined:
                owner = node.value
                if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                    continue
                if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
                    continue
                found.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    assert not found
