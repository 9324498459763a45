"""The package's shape, as CONTRIBUTING.md states it: short functions, and the command line on top.

import-linter (run by scripts/test.sh) checks which module may import which; this checks the rest."""

import ast
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LONGEST = 60  # lines of a function, its docstring included


def test_no_function_of_the_package_is_longer_than_sixty_lines():
    long = []
    for path in sorted((ROOT / "code" / "bertgpt").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > LONGEST:
                    long.append(f"{path.name}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, f"split these into named steps: {', '.join(long)}"


def test_no_chapter_or_benchmark_imports_the_command_line():
    sources = {p.name: p.read_text(encoding="utf-8") for p in sorted((ROOT / "bench").glob("*.py"))}
    for chapter in sorted((ROOT / "chapters").glob("*.ipynb")):
        cells = json.loads(chapter.read_text(encoding="utf-8"))["cells"]
        sources[chapter.name] = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    users = [name for name, text in sources.items()
             if "bertgpt.cli" in text or "from bertgpt import cli" in text]
    assert not users, f"the command line is the top floor; import what it calls instead: {', '.join(users)}"
