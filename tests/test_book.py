"""Cheap checks of the book's sources that the strict build does not make on its own."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))


def markdown(chapter: Path) -> str:
    cells = json.loads(chapter.read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def glossary_terms() -> set[str]:
    """The terms of book/glossary.md: the unindented lines of its glossary block."""
    text = (ROOT / "book" / "glossary.md").read_text(encoding="utf-8")
    block = text.split("```{glossary}", 1)[1].split("\n```", 1)[0]
    return {line.strip().lower() for line in block.splitlines() if line.strip() and not line[0].isspace()}


def test_every_exercise_is_listed_on_the_exercises_page():
    listed = (ROOT / "book" / "exercises.md").read_text(encoding="utf-8")
    for chapter in CHAPTERS:
        for label in re.findall(r":label: (ex-[\w-]+)", markdown(chapter)):
            assert f"`{label}`" in listed, f"{chapter.name}: {label} missing from book/exercises.md"


def test_every_exercise_has_a_folded_solution():
    for chapter in CHAPTERS:
        text = markdown(chapter)
        for label in re.findall(r":label: (ex-[\w-]+)", text):
            solution = re.search(r"\{solution(?:-start)?\} " + label + r"\n:class: dropdown", text)
            assert solution, f"{chapter.name}: {label} has no solution folded with :class: dropdown"


def test_terms_link_to_the_glossary():
    terms = glossary_terms()
    for chapter in CHAPTERS:
        for role in re.findall(r"\{term\}`([^`]+)`", markdown(chapter)):
            target = re.search(r"<([^>]+)>$", role.replace("\n", " "))
            term = (target.group(1) if target else role).replace("\n", " ").strip().lower()
            assert term in terms, f"{chapter.name}: {{term}}`{role}` is not in book/glossary.md"


def test_every_chapter_was_executed_on_the_shipped_course_models():
    """One book, one pair of models: each chapter's first output names the models it ran on."""
    import bertgpt

    for chapter in CHAPTERS:
        cells = json.loads(chapter.read_text(encoding="utf-8"))["cells"]
        first = next(c for c in cells if c["cell_type"] == "code")
        printed = "".join("".join(o.get("text", "")) for o in first.get("outputs", []))
        assert bertgpt.course_models() in printed, (
            f"{chapter.name} was not executed on the shipped course models: re-execute it "
            "(python scripts/execute_notebooks.py)")


def test_the_install_cell_is_folded_in_every_chapter():
    for chapter in CHAPTERS:
        cells = json.loads(chapter.read_text(encoding="utf-8"))["cells"]
        first = next(c for c in cells if c["cell_type"] == "code")
        assert "hide-input" in first["metadata"].get("tags", []), f"{chapter.name}: tag it hide-input"


def test_no_code_cell_is_longer_than_forty_lines():
    """A cell a reader can hold in view; helpers longer than that belong in the package."""
    for chapter in CHAPTERS:
        cells = json.loads(chapter.read_text(encoding="utf-8"))["cells"]
        for i, cell in enumerate(cells):
            lines = "".join(cell["source"]).splitlines()
            assert cell["cell_type"] != "code" or len(lines) <= 40, (
                f"{chapter.name}, cell {i}: {len(lines)} lines; move helpers into bertgpt or split it")


def test_no_paragraph_holds_more_than_eight_glued_numbers_outside_a_table():
    """More numbers than that read as a wall: put them in a table and say the one thing it shows."""
    for chapter in CHAPTERS:
        cells = json.loads(chapter.read_text(encoding="utf-8"))["cells"]
        texts = ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
        for paragraph in (p for text in texts for p in re.split(r"\n\s*\n", text)):
            if paragraph.lstrip().startswith("|"):
                continue
            glued = len(re.findall(r"\{glue(?::text)?\}", paragraph))
            assert glued <= 8, f"{chapter.name}: {glued} glued numbers in «{paragraph[:60]}…»; use a table"


def _targets():
    """scripts/course_targets.py, which prints the chapters against the course's targets."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("course_targets", ROOT / "scripts" / "course_targets.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_chapter_opens_with_its_question_and_closes_on_at_most_five_takeaways():
    for chapter in CHAPTERS:
        cells = json.loads(chapter.read_text(encoding="utf-8"))["cells"]
        opening = "".join(cells[0]["source"])
        assert "**The question:**" in opening and "**You will be able to:**" in opening, chapter.name
        learn = opening.split("**You will be able to:**", 1)[1].split("\n\n", 2)[1]
        items = learn.count("\n- ") + learn.startswith("- ")
        assert 3 <= items <= 5, f"{chapter.name}: {items} things to learn, not 3 to 5"
        text = markdown(chapter)
        assert "## What to remember\n" in text, f"{chapter.name}: no takeaways"
        takeaways = text.split("## What to remember\n", 1)[1].split("\n## ", 1)[0]
        bullets = re.findall(r"^- ", takeaways, flags=re.M)
        assert 1 <= len(bullets) <= 5, f"{chapter.name}: {len(bullets)} takeaways, at most five"


def test_statistics_stay_folded_under_the_claims():
    """'Standard error' at most twice in a chapter's main text; the rest sits in folded boxes."""
    targets = _targets()
    for chapter in CHAPTERS:
        report = targets.chapter_report(chapter)
        assert report["standard_errors"] <= targets.MAX_SE, (
            f"{chapter.name}: 'standard error' {report['standard_errors']} times in the main text; fold "
            "the statistics into a 'How sure are we?' dropdown under the claim")


def test_the_main_text_leaves_out_a_solution_whose_body_spans_cells(tmp_path):
    cells = [dict(cell_type="markdown", source=text) for text in (
        "Shown words.", "````{solution-start} ex-01-x\n:class: dropdown\n````", "Folded words here.")]
    cells += [dict(cell_type="code", source="print(1)"),
              dict(cell_type="markdown", source="````{solution-end}\n````\n\nShown again.")]
    notebook = tmp_path / "99_x.ipynb"
    notebook.write_text(json.dumps(dict(cells=cells)), encoding="utf-8")
    assert _targets().chapter_report(notebook)["words"] == 4
