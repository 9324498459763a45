"""The zh-TW edition's translations (scripts/translations.py): every stored translation is current
and keeps its source's structure, script and terms; each check fails on the mistake it exists for."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("translations", ROOT / "scripts" / "translations.py")
translations = importlib.util.module_from_spec(_spec)
sys.modules["translations"] = translations
_spec.loader.exec_module(translations)


@pytest.mark.parametrize("path", translations.sources(), ids=lambda p: p.name)
def test_every_stored_translation_is_current_and_keeps_its_source(path):
    problems = translations.problems(path)
    assert not problems, "\n".join(problems)


def test_the_store_holds_only_files_the_edition_translates():
    known = {translations.store_path(p) for p in translations.sources()}
    stored = set(translations.STORE.rglob("*.json"))
    assert stored <= known, f"translations of no source: {sorted(map(str, stored - known))}"


def test_a_changed_english_unit_is_stale_and_its_diff_is_shown(tmp_path, monkeypatch):
    page = tmp_path / "book" / "page.md"
    page.parent.mkdir()
    page.write_text("Pretraining helps.\n", encoding="utf-8")
    monkeypatch.setattr(translations, "ROOT", tmp_path)
    monkeypatch.setattr(translations, "STORE", tmp_path / "i18n")
    translations.store(page, "page", "預訓練有幫助。\n")
    assert translations.status(page) == {"page": "current"}
    page.write_text("Pretraining helps a lot.\n", encoding="utf-8")
    assert translations.status(page) == {"page": "stale"}
    [problem] = translations.problems(page)
    assert problem.startswith("book/page.md, page: stale")
    assert "-Pretraining helps.\n" in problem and "+Pretraining helps a lot.\n" in problem


def test_a_notebook_is_keyed_by_cell_id_and_the_edition_keeps_code_and_outputs(tmp_path, monkeypatch):
    chapter = tmp_path / "chapters" / "01_x.ipynb"
    chapter.parent.mkdir()
    code = {"cell_type": "code", "id": "c1", "source": ["print(1)"], "metadata": {}, "execution_count": 1,
            "outputs": [{"output_type": "stream", "name": "stdout", "text": ["1\n"]}]}
    cells = [{"cell_type": "markdown", "id": "m1", "source": ["# Pretraining\n"], "metadata": {}}, code,
             {"cell_type": "markdown", "id": "m2", "source": ["Not yet translated.\n"], "metadata": {}}]
    chapter.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    monkeypatch.setattr(translations, "ROOT", tmp_path)
    monkeypatch.setattr(translations, "STORE", tmp_path / "i18n")
    monkeypatch.setattr(translations, "FRONT", ())
    translations.store(chapter, "m1", "# 預訓練\n")
    assert translations.status(chapter) == {"m1": "current", "m2": "missing"}
    assert translations.assemble(tmp_path / "zh") == {"chapters/01_x.ipynb": 1}
    out = json.loads((tmp_path / "zh" / "chapters" / "01_x.ipynb").read_text(encoding="utf-8"))["cells"]
    assert "".join(out[0]["source"]) == "# 預訓練\n"
    assert out[1] == code  # the same code and the English run's outputs
    assert "".join(out[2]["source"]) == "Not yet translated.\n"  # English until translated


@pytest.mark.parametrize("chinese,words", [
    ("預訓練 {cite:p}`radford2018gpt`。", "lacks {numref}`fig-thesis`"),
    ("見 {numref}`fig-thesis` 與 {numref}`fig-other`，{cite:p}`radford2018gpt`。",
     "adds {numref}`fig-other`"),
    ("{term}`提前停止` {numref}`fig-thesis` {cite:p}`radford2018gpt`", "lacks {term} → early stopping"),
    ("{term}`提前停止 <early stopping>` {numref}`fig-thesis` {cite:p}`radford2018gpt`，$x_i$",
     "adds math $x_i$"),
])
def test_a_translation_that_drops_or_adds_a_role_fails_and_says_which(chinese, words):
    english = "See {numref}`fig-thesis` and {term}`early stopping` {cite:p}`radford2018gpt`."
    problems = translations.structure_problems(english, chinese)
    assert any(words in p for p in problems), problems
    good = "見 {numref}`fig-thesis` 與 {term}`提前停止 <early stopping>` {cite:p}`radford2018gpt`。"
    assert translations.structure_problems(english, good) == []


def test_simplified_characters_and_mainland_usage_are_caught_outside_code_and_allowed_phrases():
    assert translations.script_problems("預訓練的網路與軟體，見國情咨文。`print(\"软件\")`") == []
    found = translations.script_problems("预训练的软件")
    assert any("预" in p for p in found) and any("软件" in p or "软" in p for p in found), found
    # Traditional characters in mainland usage: Taiwan writes 軟體 and 資訊
    assert translations.script_problems("這個軟件處理信息") != []


def test_a_listed_term_must_take_the_tables_form():
    table = {"pretraining": "預訓練", "fine-tuning": "微調"}
    assert translations.term_problems("Pretraining, then fine-tuning.", "預訓練，然後微調。", table) == []
    assert translations.term_problems("Pretraining, then fine-tuning.", "預先訓練，然後微調。", table) == [
        "“pretraining” should be 預訓練"]
    assert translations.terms()["fine-tuning"] == "微調"  # the shipped table parses


def test_bold_that_would_print_its_asterisks_is_caught():
    assert translations.emphasis_problems("**問題：** 哪一種目標函數比較好？") == []
    assert translations.emphasis_problems("`**kwargs` 與程式碼無關。") == []
    [problem] = translations.emphasis_problems("**問題：**哪一種目標函數比較好？")
    assert "put a space after the closing **" in problem


def test_a_generated_region_is_not_translated_and_the_edition_takes_the_english_one(tmp_path, monkeypatch):
    page = tmp_path / "book" / "status.md"
    page.parent.mkdir()
    table = "| Chapter | Run time (s) |\n|---|---:|\n| One | 12 |\n"
    page.write_text(f"# Status\n\n<!-- run-times:start -->\n{table}<!-- run-times:end -->\n",
                    encoding="utf-8")
    monkeypatch.setattr(translations, "ROOT", tmp_path)
    monkeypatch.setattr(translations, "STORE", tmp_path / "i18n")
    monkeypatch.setattr(translations, "FRONT", ("book/status.md",))
    assert "| One |" not in translations.units(page)["page"]  # the unit leaves the table out
    translations.store(page, "page", "# 狀態\n\n<!-- run-times:start -->\n<!-- run-times:end -->\n")
    page.write_text(page.read_text(encoding="utf-8").replace("| 12 |", "| 9 |"), encoding="utf-8")
    assert translations.status(page) == {"page": "current"}  # a new table does not make it stale
    translations.assemble(tmp_path / "zh")
    assert (tmp_path / "zh" / "book" / "status.md").read_text(encoding="utf-8") == (
        f"# 狀態\n\n<!-- run-times:start -->\n{table.replace('| 12 |', '| 9 |')}<!-- run-times:end -->\n")
    assert translations.structure_problems(translations.units(page)["page"], "# 狀態\n") == [
        "lacks generated region run-times"]


def test_the_chinese_readme_is_the_one_the_store_makes():
    made = translations.readme()
    assert translations.README_ZH.read_text(encoding="utf-8") == made, (
        "README.zh-TW.md is not what the store makes: python scripts/translations.py --readme")


def test_the_chinese_code_toggle_names_what_the_chapters_fold():
    """The zh-TW book's MyST-NB toggle says 顯示程式碼 ("show the code"): right while the chapters fold
    only a code cell's source. A chapter that folds outputs or whole cells needs other words there."""
    folding = {tag for path in sorted((ROOT / "chapters").glob("*.ipynb"))
               for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]
               for tag in cell.get("metadata", {}).get("tags", []) if tag.startswith("hide-")}
    assert folding <= {"hide-input"}, f"the zh-TW toggle (scripts/translations.py) says 顯示程式碼: {folding}"
