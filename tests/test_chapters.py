"""Every chapter, run whole as a learner runs it in Colab, and validated with nbval.

Colab gives a kernel with torch already installed and no ``myst_nb``, and the book's Colab button
opens the chapter's Colab edition (``colab/``, written by ``scripts/colab_edition.py``), alone, in an
empty folder. So each test here builds a virtual environment with only torch, ipykernel and
ipywidgets, copies the edition into an empty folder, points its first cell (``scripts/first_cell.py``)
at a git snapshot of this working tree instead of the public repository, and runs the notebook
through nbval in that environment's kernel. The first cell must install the package and everything
the chapter needs, and leave torch alone; and the learner must see at least as many images as the
book shows figures for that chapter (a display hook counts them).

A new chapter is covered without change: every ``chapters/*.ipynb`` is a test. Each has a time limit
(``BERTGPT_NOTEBOOK_LIMIT`` seconds, default 3000: from an empty cache chapters 4 to 9 train variants
or their subject and fine-tune many times, 5 to 11 minutes each alone, one thread each, two at once);
a chapter that runs past it fails with its name. The chapters run longest first, so that neither
worker ends the run alone with a long one. The course models and every snapshot the chapters read
ship with the package; what a chapter trains goes through the shared model cache
(``$BERTGPT_CACHE``), trained at most once under its lock, so two chapters can run at once
(``pytest -n 2``).
"""

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("colab_edition", ROOT / "scripts" / "colab_edition.py")
colab_edition = importlib.util.module_from_spec(_spec)
sys.modules["colab_edition"] = colab_edition  # its dataclasses look their module up here
_spec.loader.exec_module(colab_edition)
# Injected after the first cell: counts every PNG the kernel displays, glued, inline or in a widget.
COUNT_IMAGES = """_shown_images = []
_publish = get_ipython().display_pub.publish
def _count(data, *args, **kwargs):
    _shown_images.extend(["image/png"] if "image/png" in data else [])
    return _publish(data, *args, **kwargs)
get_ipython().display_pub.publish = _count"""
# Seconds each chapter took from an empty model cache, as the execution script last recorded them
# (python scripts/execute_notebooks.py --cold; book/status.md). Longest first, so that the two workers
# finish together. A chapter with no cold time recorded goes first.
_STATUS = json.loads((ROOT / "book" / "_static" / "execution-status.json").read_text(encoding="utf-8"))
COLD_SECONDS = {Path(name).stem: r["cold"]["seconds"] for name, r in _STATUS.items() if "cold" in r}
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"), key=lambda p: -COLD_SECONDS.get(p.stem, 10**6))
FIRST_CELL = (ROOT / "scripts" / "first_cell.py").read_text(encoding="utf-8")
PUBLIC = re.search(r'REPOSITORY = "([^"]+)"', FIRST_CELL).group(1)  # what a learner installs from
KERNEL = "bertgpt-colab"
LIMIT = int(os.environ.get("BERTGPT_NOTEBOOK_LIMIT", "3000"))
ENVIRON = dict(os.environ)  # as the session started, before conftest points BERTGPT_CACHE elsewhere

pytestmark = pytest.mark.notebook


def _snapshot(tree: Path) -> Path:
    """The working tree as it is (tracked and untracked-but-not-ignored files), committed in a new repo."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tree / name)
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@localhost"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "snapshot"]):
        subprocess.run(git + args, cwd=tree, check=True)
    return tree


def _torch_stamp(venv: Path):
    """What pip would change if it reinstalled torch: its dist-info directory and that directory's inode."""
    (info,) = venv.glob("lib/python*/site-packages/torch-*.dist-info")
    return info.name, info.stat().st_ino, info.stat().st_mtime_ns


@pytest.fixture(scope="session")
def colab(tmp_path_factory):
    """A Colab-like kernel (torch, ipykernel, ipywidgets; nothing of the course) and a snapshot to install
    from.

    One per pytest-xdist worker, so that two chapters' first cells never pip-install into one
    environment at the same time.
    """
    base = tmp_path_factory.mktemp("colab")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    version = torch.__version__.split("+")[0]  # the build this machine has; Colab brings its own
    subprocess.run([str(python), "-m", "pip", "install", "-q", f"torch=={version}", "ipykernel",
                    "ipywidgets"], check=True)
    subprocess.run([str(python), "-m", "ipykernel", "install", "--prefix", str(venv), "--name", KERNEL],
                   check=True, capture_output=True)
    repo = _snapshot(base / "repo")
    return dict(venv=venv, url=f"file://localhost{repo}")  # pip wants a host in a git+file URL


def test_every_chapter_starts_with_the_first_cell():
    for chapter in CHAPTERS:
        cells = json.loads(chapter.read_text(encoding="utf-8"))["cells"]
        first = next(c for c in cells if c["cell_type"] == "code")
        assert "".join(first["source"]).strip() == FIRST_CELL.strip(), (
            f"{chapter.name}: paste scripts/first_cell.py, unchanged, as the first code cell")


def _run_counting_images(chapter: Path, notebook: dict, folder: Path, kernel: str, env: dict) -> None:
    """Run ``notebook`` (an edition of ``chapter``) alone in ``folder`` through nbval in ``kernel``, and
    fail unless it ran whole and the learner saw at least as many images as the book shows figures."""
    cells = notebook["cells"]
    at = next(i for i, c in enumerate(cells) if c["cell_type"] == "code")
    shown = len(colab_edition.figures(colab_edition.read(chapter)))  # the figures the book shows
    code = dict(cell_type="code", metadata={}, outputs=[], execution_count=None)
    cells.insert(at + 1, {**code, "id": "count-images", "source": COUNT_IMAGES})
    cells.append({**code, "id": "check-images",
                  "source": f"assert len(_shown_images) >= {shown}, (len(_shown_images), {shown})"})
    folder.mkdir()
    (folder / chapter.name).write_text(json.dumps(notebook), encoding="utf-8")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
               "--nbval-kernel-name", kernel, f"--nbval-cell-timeout={LIMIT}", chapter.name]
    run = subprocess.Popen(command, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, start_new_session=True)
    try:
        output, _ = run.communicate(timeout=LIMIT)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)  # nbval and the kernel it started
        run.communicate()
        pytest.fail(f"{chapter.name} ran past its limit of {LIMIT} s (BERTGPT_NOTEBOOK_LIMIT)")
    report = "\n".join(line for line in output.splitlines() if "WARNING: Location" not in line)
    assert run.returncode == 0, f"{chapter.name} failed in kernel {kernel}:\n{report[:8000]}"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_runs_whole_as_in_colab(chapter, colab, tmp_path):
    _run_in_colab(chapter, ROOT / "colab" / chapter.name, colab, tmp_path)


def test_a_chinese_chapter_runs_whole_as_in_colab(colab, tmp_path):
    """The zh-TW edition (colab/zh-TW/) has the English code cells under translated text, so the cheapest
    chapter stands for all."""
    chapter = ROOT / "chapters" / f"{min(COLD_SECONDS, key=COLD_SECONDS.get)}.ipynb"
    _run_in_colab(chapter, ROOT / "colab" / "zh-TW" / chapter.name, colab, tmp_path)


def _run_in_colab(chapter: Path, edition: Path, colab: dict, tmp_path: Path) -> None:
    """Run ``edition`` (of ``chapter``) in the Colab-like kernel, its first cell installing this tree."""
    notebook = json.loads(edition.read_text(encoding="utf-8"))
    cells = notebook["cells"]
    at = next(i for i, c in enumerate(cells) if c["cell_type"] == "code")
    cells[at]["source"] = "".join(cells[at]["source"]).replace(PUBLIC, colab["url"])
    env = {k: v for k, v in ENVIRON.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    # two chapters at once share two cores: each, and each model it pretrains, on one thread
    env.update(JUPYTER_PATH=str(colab["venv"] / "share" / "jupyter"), PYTHONNOUSERSITE="1",
               BERTGPT_QUIET="1", OMP_NUM_THREADS="1", BERTGPT_THREADS="1")
    torch_before = _torch_stamp(colab["venv"])
    _run_counting_images(chapter, notebook, tmp_path / "content", KERNEL, env)
    assert _torch_stamp(colab["venv"]) == torch_before, f"{chapter.name}'s first cell reinstalled torch"


def test_a_chapter_shows_every_figure_on_the_readmes_local_route(tmp_path):
    """The README's local route: ``bash scripts/setup.sh``, then ``jupyter lab colab/``, in this environment,
    where MyST-NB is installed (the book's tools), so glue must show what only the book would place.
    The cheapest chapter stands for all: they share the first cell and glue."""
    chapter = ROOT / "chapters" / f"{min(COLD_SECONDS, key=COLD_SECONDS.get)}.ipynb"
    notebook = json.loads((ROOT / "colab" / chapter.name).read_text(encoding="utf-8"))
    env = {k: v for k, v in ENVIRON.items() if k not in ("BERTGPT_BOOK", "BERTGPT_STATIC")}
    env.update(OMP_NUM_THREADS="1", BERTGPT_THREADS="1")  # beside the other worker's chapter
    _run_counting_images(chapter, notebook, tmp_path / "local", "python3", env)
