"""Measure the size of the ``jupyter_agent`` package.

Prints total lines, docstring lines (module, class and function docstrings,
counted by their line spans) and their share, the number of modules, the
largest modules by lines of code, and the counts of ``__all__`` lists and
function-level imports.  Lines of code are a module's lines minus its
docstring lines minus blank and comment-only lines.

Usage: ``python tools/house_size.py [PACKAGE_DIR] [--top N]``.
"""

from __future__ import annotations

import argparse
import ast
from dataclasses import dataclass
from pathlib import Path

_DOC_OWNERS = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass
class ModuleSize:
    path: Path
    lines: int
    doc_lines: int
    blank_or_comment: int
    all_lists: int
    function_imports: int

    @property
    def code(self) -> int:
        return self.lines - self.doc_lines - self.blank_or_comment


def _docstring_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, _DOC_OWNERS) or not node.body:
            continue
        first = node.body[0]
        if (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)
        ):
            end = first.end_lineno or first.lineno
            lines.update(range(first.lineno, end + 1))
    return lines


def _all_lists(tree: ast.Module) -> int:
    count = 0
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        count += sum(isinstance(t, ast.Name) and t.id == "__all__" for t in targets)
    return count


def _function_imports(tree: ast.Module) -> int:
    count = 0
    for func in ast.walk(tree):
        if not isinstance(func, _FUNCTIONS):
            continue
        # Count imports in this function's own body, not in nested functions.
        stack: list[ast.AST] = list(func.body)
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                count += 1
            elif not isinstance(node, (*_FUNCTIONS, ast.ClassDef, ast.Lambda)):
                stack.extend(ast.iter_child_nodes(node))
    return count


def measure(path: Path) -> ModuleSize:
    text = path.read_text(encoding="utf-8")
    source_lines = text.splitlines()
    tree = ast.parse(text, filename=str(path))
    docs = _docstring_lines(tree)
    other = sum(
        1
        for number, line in enumerate(source_lines, start=1)
        if number not in docs and (not line.strip() or line.lstrip().startswith("#"))
    )
    return ModuleSize(
        path=path,
        lines=len(source_lines),
        doc_lines=len(docs),
        blank_or_comment=other,
        all_lists=_all_lists(tree),
        function_imports=_function_imports(tree),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package", nargs="?", default="jupyter_agent", type=Path)
    parser.add_argument("--top", type=int, default=10, help="largest modules to list")
    args = parser.parse_args(argv)
    root: Path = args.package
    sizes = [measure(p) for p in sorted(root.rglob("*.py"))]
    total = sum(s.lines for s in sizes)
    docs = sum(s.doc_lines for s in sizes)
    code = sum(s.code for s in sizes)
    share = docs / total if total else 0.0
    rows = [
        ("modules", f"{len(sizes)}"),
        ("total lines", f"{total}"),
        ("docstring lines", f"{docs}"),
        ("docstring share", f"{share:.1%}"),
        ("lines of code", f"{code}"),
        ("__all__ lists", f"{sum(s.all_lists for s in sizes)}"),
        ("function-level imports", f"{sum(s.function_imports for s in sizes)}"),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"{'measure':<{width}}  value")
    for name, value in rows:
        print(f"{name:<{width}}  {value:>6}")
    print()
    largest = sorted(sizes, key=lambda s: s.code, reverse=True)[: args.top]
    names = [str(s.path.relative_to(root.parent)) for s in largest]
    pw = max([len("module"), *map(len, names)])
    print(f"{'module':<{pw}}  {'code':>5}  {'lines':>5}  {'docs':>5}")
    for name, s in zip(names, largest, strict=True):
        print(f"{name:<{pw}}  {s.code:>5}  {s.lines:>5}  {s.doc_lines:>5}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
