"""scripts/execute_notebooks.py's bookkeeping: a learner's first run (--cold) is kept beside the last run, and
the README's table of chapter times comes from it."""

import importlib.util
import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("execute_notebooks", ROOT / "scripts" / "execute_notebooks.py")
execute_notebooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(execute_notebooks)
CHAPTER = sorted((ROOT / "chapters").glob("*.ipynb"))[0]
README = "intro\n<!-- cold-times:start -->\nold table\n<!-- cold-times:end -->\nrest\n"


@pytest.fixture
def script(tmp_path, monkeypatch):
    """The script with its outputs in ``tmp_path`` and a fake notebook run: 605 s from an empty cache,
    125 s otherwise. Returns ``tmp_path`` and the caches the runs saw."""
    monkeypatch.setattr(execute_notebooks, "STATUS_JSON", tmp_path / "status.json")
    monkeypatch.setattr(execute_notebooks, "STATUS_MD", tmp_path / "status.md")
    monkeypatch.setattr(execute_notebooks, "README", tmp_path / "README.md")
    monkeypatch.delenv("BERTGPT_CACHE", raising=False)
    (tmp_path / "README.md").write_text(README, encoding="utf-8")
    (tmp_path / "README.zh-TW.md").write_text(README.replace("intro", "簡介"), encoding="utf-8")
    caches = []

    def run(path):
        cache = os.environ.get("BERTGPT_CACHE")
        caches.append(cache)
        cold = cache is not None and not any(Path(cache).iterdir())
        return dict(title="A chapter", executed="now", seconds=605.0 if cold else 125.0, result="ok",
                    machine="two cores")

    monkeypatch.setattr(execute_notebooks, "run", run)
    return tmp_path, caches


def test_a_cold_run_uses_an_empty_cache_of_its_own_and_writes_the_readme_table(script):
    tmp, caches = script
    assert execute_notebooks.main(["--cold", str(CHAPTER)]) == 0
    assert caches[0] is not None and not Path(caches[0]).exists()  # its own, removed afterwards
    record = json.loads((tmp / "status.json").read_text())[CHAPTER.relative_to(ROOT).as_posix()]
    assert record["cold"]["seconds"] == 605.0
    readme = (tmp / "README.md").read_text()
    assert "old table" not in readme and "| A chapter" not in readme
    assert f"[A chapter]({CHAPTER.relative_to(ROOT).as_posix()}) | 10 |" in readme
    assert readme.startswith("intro\n") and readme.endswith("<!-- cold-times:end -->\nrest\n")
    assert (tmp / "README.zh-TW.md").read_text() == readme.replace("intro", "簡介")  # the same table


def test_the_readme_table_names_the_machine_of_each_time_when_they_differ():
    def record(title, seconds, machine):
        return dict(title=title, cold=dict(seconds=seconds, machine=machine, executed="today"))

    one = execute_notebooks.cold_times_markdown({"a.ipynb": record("A", 120, "fp32 box")})
    assert "| Machine |" not in one and one.endswith("Measured on fp32 box.\n")
    both = execute_notebooks.cold_times_markdown({"a.ipynb": record("A", 120, "fp32 box"),
                                                  "b.ipynb": record("B", 600, "bf16 box")})
    assert "| [A](a.ipynb) | 2 | B |" in both and "| [B](b.ipynb) | 10 | A |" in both
    assert both.endswith("- A: bf16 box.\n- B: fp32 box.\n")


def test_a_warm_run_keeps_the_last_cold_time_and_leaves_the_readme(script):
    tmp, _ = script
    execute_notebooks.main(["--cold", str(CHAPTER)])
    readme = (tmp / "README.md").read_text()
    execute_notebooks.main([str(CHAPTER)])
    record = json.loads((tmp / "status.json").read_text())[CHAPTER.relative_to(ROOT).as_posix()]
    assert record["seconds"] == 125.0 and record["cold"]["seconds"] == 605.0
    assert (tmp / "README.md").read_text() == readme
    assert "| 125 | ok | 605 |" in (tmp / "status.md").read_text()


def test_an_interrupted_run_keeps_the_chapters_it_finished(script, monkeypatch):
    tmp, _ = script
    first, second = sorted((ROOT / "chapters").glob("*.ipynb"))[:2]
    finished = execute_notebooks.run

    def run(path):
        if path == second:
            raise KeyboardInterrupt  # the learner stops the run during the second chapter
        return finished(path)

    monkeypatch.setattr(execute_notebooks, "run", run)
    with pytest.raises(KeyboardInterrupt):
        execute_notebooks.main(["--cold", str(first), str(second)])
    records = json.loads((tmp / "status.json").read_text())
    assert records[first.relative_to(ROOT).as_posix()]["cold"]["seconds"] == 605.0
    assert second.relative_to(ROOT).as_posix() not in records
    assert f"({first.relative_to(ROOT).as_posix()}) | 10 |" in (tmp / "README.md").read_text()


def test_a_failing_chapter_is_left_as_it_was_and_its_error_is_printed(tmp_path, capsys):
    import nbformat

    path = tmp_path / "failing.ipynb"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Failing"),
                                         nbformat.v4.new_code_cell("gap = 0.3\nassert gap < 0.1, gap")])
    nbformat.write(nb, path)
    before = path.read_text(encoding="utf-8")
    record = execute_notebooks.run(path)
    assert record["result"] == "error: AssertionError" and record["title"] == "Failing"
    assert path.read_text(encoding="utf-8") == before  # no partial outputs written back
    err = capsys.readouterr().err
    assert "assert gap < 0.1, gap" in err and "AssertionError: 0.3" in err  # which assertion, with its value
