"""The Colab edition (colab/, written by scripts/colab_edition.py): what the chapters give now, in plain
Markdown.

The book's Colab buttons open the committed edition, so a chapter edited or re-executed without
regenerating it would send learners an older text; and Colab shows any MyST left in it as raw markup.
Regenerating in memory reads the notebooks and runs none of them: a few seconds.
"""

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
REGENERATE = "run python scripts/colab_edition.py"


def load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


colab_edition = load("colab_edition", ROOT / "scripts" / "colab_edition.py")

MYST = {
    "role": re.compile(r"\{[\w:.-]+\}`"),
    "directive": re.compile(r"^ {0,3}(`{3,}|~{3,}|:{3,})\{[\w:.-]+\}", re.M),
    "target": re.compile(r"^\([\w.:-]+\)=\s*$", re.M),
}


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_the_edition_is_what_the_chapter_gives_now(chapter):
    committed = ROOT / "colab" / chapter.name
    assert committed.exists(), f"colab/{chapter.name} is missing: {REGENERATE}"
    assert committed.read_text(encoding="utf-8") == colab_edition.edition(chapter), (
        f"colab/{chapter.name} is out of date with chapters/{chapter.name}: {REGENERATE}")


def test_every_edition_has_its_chapter():
    editions = {p.name for p in (ROOT / "colab").glob("*.ipynb")}
    assert editions == {p.name for p in CHAPTERS}, "delete the edition of a chapter that is gone"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_the_edition_holds_no_myst(chapter):
    for index, cell in enumerate(cells(ROOT / "colab" / chapter.name)):
        if cell["cell_type"] == "markdown":
            text = "".join(cell["source"])
            for kind, pattern in MYST.items():
                found = pattern.search(text)
                assert not found, f"colab/{chapter.name}, cell {index}: a MyST {kind}: " + repr(
                    text[max(0, found.start() - 60):found.end() + 60])


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_code_cells_are_the_chapters_own_without_outputs(chapter):
    source = ["".join(c["source"]) for c in cells(chapter) if c["cell_type"] == "code"]
    edition = [c for c in cells(ROOT / "colab" / chapter.name) if c["cell_type"] == "code"]
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in edition)
    edition_source = ["".join(c["source"]) for c in edition]
    # a citation in a string (a table the cell displays) reads as in the prose, never as a raw role
    assert not any("{cite:" in code for code in edition_source)
    # a worked solution's code is the chapter's under a Colab form title, which folds it
    folded = [c["metadata"].get("cellView") == "form" for c in edition]
    unfolded = [re.sub(r"\A# @title Solution to Exercise [^\n]*\n", "", code) if fold else code
                for code, fold in zip(edition_source, folded)]
    assert all(code.startswith("# @title Solution to Exercise") for code, fold in zip(edition_source, folded)
               if fold)
    assert list(map(without_citations, unfolded)) == list(map(without_citations, source))


# a citation as the chapter writes it, or as the edition reads it: "([Devlin et al., 2019](URL); ...)"
CITATIONS = re.compile(r"\{cite:[pt]\}`[^`]+`|\((?:\[[^\]]+\]\([^)]*bibliography\.html\)(?:; )?)+\)")


def without_citations(code: str) -> str:
    return CITATIONS.sub("", code)


def test_figures_and_exercises_are_numbered_per_chapter_in_reading_order():
    labels = colab_edition.labels()
    nb = colab_edition.read(ROOT / "chapters" / "02_one_skeleton.ipynb")
    names = [name for name, _ in colab_edition.figures(nb)]
    assert [labels[name].text for name in names] == [f"Figure 2.{k}" for k in range(1, len(names) + 1)]
    assert labels["ex-02-bpe-merge"].text == "Exercise 2.1" and labels["ex-02-block"].text == "Exercise 2.6"
    assert labels["sec-05-measured"].page == "chapters/05_verdict" and not labels["sec-05-measured"].number


def test_citations_read_author_and_year():
    authors = colab_edition.bibliography()
    assert authors["devlin2019bert"] == ("Devlin et al.", "2019")
    assert authors["howard2018ulmfit"] == ("Howard and Ruder", "2018")
    assert authors["ruder2018imagenet"] == ("Ruder", "2018")


@pytest.mark.parametrize("language,edition", [(None, "colab"), ("zh_TW", "colab/zh-TW")])
def test_the_colab_button_opens_the_edition_in_the_books_language(language, edition):
    launch = load("colab_launch", ROOT / "book" / "_ext" / "colab_launch.py")
    page, repo = "chapters/02_one_skeleton", "https://colab.research.google.com/github/o/r/blob/main/"
    binder = "https://mybinder.org/v2/gh/o/r/main?urlpath=tree/" + f"{page}.ipynb"
    context = {"header_buttons": [{"label": "launch-buttons", "buttons": [
        {"text": "Binder", "url": binder}, {"text": "Colab", "url": repo + f"{page}.ipynb"}]}]}
    app = SimpleNamespace(srcdir=str(ROOT), config=SimpleNamespace(language=language))
    launch._colab_edition(app, page, "page.html", context, None)
    buttons = context["header_buttons"][0]["buttons"]
    assert buttons[1]["url"] == repo + f"{edition}/02_one_skeleton.ipynb"
    assert buttons[0]["url"] == binder  # the other buttons keep the source


@pytest.fixture(scope="module")
def chinese(tmp_path_factory):
    """The zh-TW book, assembled from the chapters and the stored translations (nothing executed)."""
    return colab_edition.assembled_chinese(tmp_path_factory.mktemp("zh") / "book")


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_the_chinese_edition_is_what_the_chapter_and_its_translation_give_now(chapter, chinese):
    committed = ROOT / "colab" / "zh-TW" / chapter.name
    assert committed.exists(), f"colab/zh-TW/{chapter.name} is missing: {REGENERATE} --language zh-TW"
    assert committed.read_text(encoding="utf-8") == colab_edition.edition(
        chinese.root / "chapters" / chapter.name, chinese), (
        f"colab/zh-TW/{chapter.name} is out of date: {REGENERATE} --language zh-TW")
    for index, cell in enumerate(cells(committed)):
        text = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            assert not any(p.search(text) for p in MYST.values()), f"colab/zh-TW/{chapter.name}, cell {index}"
    english = [c["source"] for c in cells(ROOT / "colab" / chapter.name) if c["cell_type"] == "code"]
    ours = [c["source"] for c in cells(committed) if c["cell_type"] == "code"]
    def plain(source):  # a folded solution's title and a citation's link are in the edition's language
        return CITATIONS.sub("", re.sub(r"^# @title .*\n", "", "".join(source)))

    assert [plain(s) for s in ours] == [plain(s) for s in english]


def test_the_chinese_edition_links_to_the_chinese_book_and_writes_its_own_words_in_chinese(chinese):
    text = "".join("".join(c["source"]) for c in cells(ROOT / "colab" / "zh-TW" / "02_one_skeleton.ipynb")
                   if c["cell_type"] == "markdown")
    assert f"{colab_edition.SITE}zh-TW/chapters/02_one_skeleton.html" in text
    assert f"{colab_edition.SITE}chapters/" not in text  # no link leads to the English book
    labels = colab_edition.labels(chinese)
    assert labels["ex-02-bpe-merge"].text == "習題 2.1" and labels["fig-pieces"].text == "圖 2.1"
    assert "的 Colab 版" in text and "的解答" in text
