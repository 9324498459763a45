"""The package's shape, as CONTRIBUTING.md states it: short functions, and the command line on top.

import-linter (run by scripts/test.sh) checks which module may import which; this checks the rest."""

import ast
import json
import re
import sys
from pathlib import Path

import tomllib

from bertgpt.registry import NAMES, WIDGET_MODES

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


def test_contributing_draws_the_floors_that_pyproject_enforces():
    contract = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    enforced = [{m.strip().removeprefix("bertgpt.") for m in floor.split("|")}
                for floor in contract["contracts"][0]["layers"]]
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    start = text.index("```\n__main__") + 4
    drawing = text[start:text.index("```", start)]
    floors = [re.split(r"\s{2,}", line)[0] for line in drawing.splitlines() if line[:1].strip()]
    drawn = [{m.strip() for m in floor.split("|")} for floor in floors]  # the modules, not what follows
    assert drawn == enforced, "CONTRIBUTING.md's floors differ from pyproject.toml's [tool.importlinter]"


def test_the_widgets_javascript_names_no_model_and_its_manifest_carries_the_registrys():
    script = (ROOT / "book" / "web" / "src" / "try.js").read_text(encoding="utf-8")
    named = [name for name in NAMES if f'"{name}"' in script or f"'{name}'" in script]
    assert not named, f"try.js names {named}: it should read them from its manifest's modes"
    assert "(await manifest()).modes" in script
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    import try_models

    assert {m: try_models.MODES[m] for m in WIDGET_MODES} == WIDGET_MODES
    assert set(try_models.MODES["all"]) == {n for models in WIDGET_MODES.values() for n in models}
