"""Build the Colab edition: colab/NN_x.ipynb, a plain-Jupyter notebook, from each chapters/NN_x.ipynb.

    python scripts/colab_edition.py            # write colab/ for every chapter
    python scripts/colab_edition.py --check    # exit 1 if colab/ is not what the chapters give now
    python scripts/colab_edition.py --language zh-TW   # the Traditional Chinese edition, colab/zh-TW/

Colab renders CommonMark, not MyST, and has no MyST-NB, so a chapter opened there as it is shows its
roles and directives raw and none of its glued values. The edition keeps every code cell as it is
(outputs cleared: the learner's run makes its own; a citation in a string reads as in the prose) and
rewrites the Markdown into what the book shows:

- ``{glue:text}`` becomes the value of the book's executed run, read from the chapter's stored glue
  outputs and formatted as MyST-NB formats it; a note at the top says the learner's run prints its own;
- ``{numref}``, ``{ref}`` and ``{doc}`` read as the book numbers and names them ("Figure 5.2") and link
  to the book's page; ``{cite:p}``/``{cite:t}`` read "(Devlin et al., 2019)" and link to the
  bibliography; ``{term}`` links to the glossary;
- a ``{glue:figure}`` becomes its number and caption (the cell that glues the figure shows it in a
  plain kernel, see ``bertgpt.widgets.glue``), and a widget's caption, kept in its cell's metadata
  for the book, becomes a Markdown cell after it;
- an exercise becomes a heading, its solution a folded ``<details>`` block; a solution that runs code
  (``solution-start`` to ``solution-end``) folds its prose, and its code cells run folded, as Colab
  folds a cell titled ``# @title`` with ``cellView: form`` (its code shows when opened);
- admonitions become quoted blocks.

A role or directive the script does not know stops it with the chapter's name rather than reach a
learner raw. The output depends only on the sources, so a rerun over unchanged chapters writes the
same bytes; ``tests/test_colab_edition.py`` fails when colab/ is out of date.

The zh-TW edition (``colab/zh-TW/``) is made the same way from the zh-TW book's chapters, which
``scripts/translations.py`` assembles from the English ones and the stored translations; its links
lead to the zh-TW book, and what the edition writes itself (a figure's place, an exercise's name, the
note at the top) is in Chinese (:data:`WORDS`).
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import posixpath
import re
import sys
import tempfile
import unicodedata
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import nbformat
import yaml
from myst_nb.core.variables import format_plain_text  # how {glue:text} prints a value
from pybtex.backends.plaintext import Backend
from pybtex.database import parse_file

from bertgpt.registry import WIDGET_MODES

ROOT = Path(__file__).resolve().parent.parent
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))


def site_url(config: dict) -> str:
    """The published book's address: ``html.baseurl`` where set, else the GitHub Pages address of
    ``repository.url`` (the Pages workflow publishes there), so it changes with the repository."""
    base = (config.get("html") or {}).get("baseurl")
    if base:
        return base.rstrip("/") + "/"
    repository = config["repository"]["url"]
    owner, name = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+?)/?", repository).groups()
    return f"https://{owner.lower()}.github.io/{name}/"


SITE = site_url(CONFIG)
BIBLIOGRAPHY = "book/bibliography"
GLOSSARY = "book/glossary"

# ---------------------------------------------------------------------------------------------------
# Reading MyST Markdown: fenced blocks, directives, targets and the prose between them.

FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,}|:{3,})(?P<info>.*)$")
DIRECTIVE = re.compile(r"^\{(?P<name>[\w:.-]+)\}\s*(?P<argument>.*)$")
OPTION = re.compile(r"^:(?P<key>[\w-]+):\s*(?P<value>.*)$")
TARGET = re.compile(r"^\((?P<label>[\w.:-]+)\)=\s*$")
HEADING = re.compile(r"^(?P<hashes>#{1,6})\s+(?P<title>.+?)\s*#*\s*$")
# a code span, or a role (a code span right after `{name}`): matching spans left to right keeps roles
# written inside code (`` `{term}` ``) as code
CITE = re.compile(r"\{(?P<role>cite:[pt])\}`(?P<body>[^`]+)`")
SPAN = re.compile(r"(?:\{(?P<role>[\w:.-]+)\})?(?P<ticks>`+)(?P<body>.+?)(?<!`)(?P=ticks)(?!`)", re.S)


@dataclass
class Directive:
    name: str
    argument: str
    options: dict[str, str]
    body: str


@dataclass
class Code:
    text: str  # a fenced code block, fences included, copied as it is


@dataclass
class Target:
    label: str  # `(label)=`: the book's anchor for the heading after it


def blocks(text: str) -> list[str | Directive | Code | Target]:
    """Split Markdown into prose (str), fenced directives, fenced code and targets, in order.

    A fence closes at a line of the same character at least as long as the opening (CommonMark's rule,
    which MyST keeps), so a four-backtick directive may hold three-backtick code.
    """
    lines, out, prose, i = text.split("\n"), [], [], 0

    def flush():
        if prose:
            out.append("\n".join(prose))
            prose.clear()

    while i < len(lines):
        fence, target = FENCE.match(lines[i]), TARGET.match(lines[i])
        directive = fence and DIRECTIVE.match(fence["info"].strip())
        if fence and (directive or fence["fence"][0] != ":"):
            flush()
            mark = fence["fence"]
            close = re.compile(rf"^ {{0,3}}{re.escape(mark[0])}{{{len(mark)},}}\s*$")
            end = next((j for j in range(i + 1, len(lines)) if close.match(lines[j])), len(lines))
            if directive:
                body, options = lines[i + 1:end], {}
                while body and (option := OPTION.match(body[0])):
                    options[option["key"]] = option["value"].strip()
                    body = body[1:]
                out.append(Directive(directive["name"], directive["argument"].strip(), options,
                                     "\n".join(body).strip("\n")))
            else:
                out.append(Code("\n".join(lines[i:end + 1])))
            i = end + 1
        elif target:
            flush()
            out.append(Target(target["label"]))
            i += 1
        else:
            prose.append(lines[i])
            i += 1
    flush()
    return out


def walk(text: str):
    """Every block of ``text``, directives' bodies included, in reading order."""
    for block in blocks(text):
        yield block
        if isinstance(block, Directive):
            yield from walk(block.body)


# ---------------------------------------------------------------------------------------------------
# What the book knows: the chapters' numbers, every label's number and page, the bibliography and the
# glossary.


class EditionError(Exception):
    """Something in a chapter that the edition cannot write in plain Markdown, or cannot find."""


@dataclass(frozen=True)
class Label:
    text: str  # what a reference reads: "Figure 5.2", "Exercise 2.1", a section's title
    page: str  # the page that holds it, without suffix: "chapters/05_verdict"
    number: str = ""  # "5.2" for what Sphinx numbers (figures, exercises), "" for a section
    title: str = ""  # an exercise's own title


@dataclass(frozen=True)
class Book:
    """The book an edition is made from: the English one (the repository), or the zh-TW one, whose
    chapters ``scripts/translations.py`` assembles into ``root``; and where its edition goes."""

    language: str  # "en" or "zh-TW": the words the edition writes itself (WORDS)
    root: Path  # the book's sources: chapters/, book/, _toc.yml and _config.yml
    out: Path  # the edition's folder
    site: str  # the book's address, where the edition's links lead

    @property
    def words(self) -> dict:
        return WORDS[self.language]


ENGLISH = Book("en", ROOT, ROOT / "colab", SITE)


def chinese(root: Path) -> Book:
    """The zh-TW book whose sources ``translations.book_tree`` wrote into ``root``."""
    return Book("zh-TW", root, ROOT / "colab" / "zh-TW", f"{SITE}zh-TW/")


fill, write, attend = (WIDGET_MODES[m] for m in ("fill-mask", "next-words", "attention"))
# What the edition writes itself, in each book's language. "try": what each part of the {try-models}
# widget runs (bertgpt.registry.WIDGET_MODES), for its plain form.
WORDS = {
    "en": dict(
        exercise="Exercise", titled="{} ({})", solution="Solution to {}", continued=", continued",
        placed="**{label}** ({where}). {caption}", above="above", below="below", chapter="chapter {}",
        note="**The Colab edition of {chapter} of *{title}*.** It is generated from the book's notebook for "
             "plain Jupyter and Colab, and its links lead to the book's pages. The numbers in the text are "
             "those of the book's own run. Your run prints its own under their names (`name = value`) and "
             "draws each figure under the cell that makes it; they can differ a little from the text.",
        widget="**In the book, try it yourself.** The book's page holds a widget here that runs {what} in "
               "your browser, on any sentence you type: {link}.", widget_link="Try the models",
        admonitions={"note": "Note", "tip": "Tip", "hint": "Hint", "important": "Important",
                     "warning": "Warning", "caution": "Caution", "attention": "Attention", "danger": "Danger",
                     "error": "Error", "seealso": "See also", "admonition": ""},
        **{"try": {"fill-mask": "{} filling a blank beside {}'s next word".format(*fill),
                   "next-words": "{} writing on from your text".format(*write),
                   "attention": "the attention maps of {} and {}".format(*attend),
                   "all": "the course models"}}),
    "zh-TW": dict(
        exercise="習題", titled="{}（{}）", solution="{}的解答", continued="（續）",
        placed="**{label}**（{where}）。{caption}", above="上方", below="下方", chapter="第 {} 章",
        note="**《{title}》{chapter}的 Colab 版。** 它由本書的筆記本產生，供一般的 Jupyter 與 Colab 使用，"
             "其中的連結通往本書的頁面。文字中的數字來自本書自己的執行結果。你的執行會在各自的名稱下印出"
             "自己的數字（`name = value`），並在產生每張圖的儲存格下方畫出該圖；它們可能與文字中的略有"
             "不同。程式碼與模型的輸出是英文的：模型只讀寫英文。",
        widget="**在書中親手試試。** 書的這一頁在這裡有一個元件，會在你的瀏覽器中，對你輸入的任何句子執行"
               "{what}：{link}。", widget_link="試用模型",
        admonitions={"note": "注意", "tip": "提示", "hint": "提示", "important": "重要", "warning": "警告",
                     "caution": "小心", "attention": "注意", "danger": "危險", "error": "錯誤",
                     "seealso": "另見", "admonition": ""},
        **{"try": {"fill-mask": "{} 的填空，並列 {} 的下一個詞".format(*fill),
                   "next-words": "{} 接著你的文字寫下去".format(*write),
                   "attention": "{} 與 {} 的注意力圖".format(*attend),
                   "all": "課程模型"}}),
}


def page_url(book: Book, page: str, anchor: str = "") -> str:
    return f"{book.site}{page}.html" + (f"#{anchor}" if anchor else "")


def chapter_numbers(toc: dict) -> dict[str, int]:
    """The chapter number of every page in a numbered part of _toc.yml: counted on across parts, as
    jupyter-book's continuous numbering (``use_multitoc_numbering``) does."""
    numbers, n = {}, 0
    for part in toc.get("parts", []):
        if part.get("numbered"):
            for chapter in part.get("chapters", []):
                n += 1
                numbers[chapter["file"]] = n
    return numbers


@cache
def numbers(book: Book) -> dict[str, int]:
    return chapter_numbers(yaml.safe_load((book.root / "_toc.yml").read_text(encoding="utf-8")))


@cache
def config(book: Book) -> dict:
    """The book's ``_config.yml``: the zh-TW one has its own title and figure label."""
    return yaml.safe_load((book.root / "_config.yml").read_text(encoding="utf-8"))


def figure_format(book: Book) -> str:
    """What a reference to a figure reads. The book's own label is Sphinx's `numfig_format` ("Fig. %s"
    unless _config.yml sets one); the edition spells it out unless the book's configuration says otherwise."""
    sphinx = config(book).get("sphinx", {}).get("config", {})
    return sphinx.get("numfig_format", {}).get("figure", "Figure %s")


def first_line(text: str) -> str:
    return text.strip().split("\n", 1)[0]


def page_of(path: Path, book: Book = ENGLISH) -> str:
    return path.relative_to(book.root).with_suffix("").as_posix()


def read(path: Path) -> nbformat.NotebookNode:
    """A notebook whose cells all have ids: one an editor left without gets one from its position, where
    nbformat would make up a random one at every read and the edition would never be the same twice."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    for index, cell in enumerate(raw["cells"]):
        cell.setdefault("id", f"cell-{index}")
    return nbformat.reads(json.dumps(raw), as_version=4)


def figures(nb: nbformat.NotebookNode) -> list[tuple[str, str]]:
    """Every numbered figure of a chapter, in the book's order, as ``(label, how)``.

    ``how`` is ``"glue"`` for a figure that a code cell glues and a ``{glue:figure}`` directive places
    (the edition shows it as an image output of that cell) and ``"explore"`` for a widget's figure,
    captioned in its code cell's metadata (a live kernel draws it inside the widget). Sphinx numbers
    only figures with a label, so those without one are left out, as the book leaves them unnumbered.
    """
    found = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            name = cell.metadata.get("mystnb", {}).get("figure", {}).get("name")
            if name:
                found.append((name, "explore"))
        elif cell.cell_type == "markdown":
            found += [(b.options["name"], "glue") for b in walk(cell.source)
                      if isinstance(b, Directive) and b.name == "glue:figure" and "name" in b.options]
    return found


@cache
def labels(book: Book = ENGLISH) -> dict[str, Label]:
    """Every label the chapters declare: figures and exercises numbered per chapter as Sphinx numbers
    them (``chapter.index``, figures and exercises counted apart), sections by their titles."""
    found = {}
    for path in sorted((book.root / "chapters").glob("*.ipynb")):
        page, nb = page_of(path, book), read(path)
        number = numbers(book).get(page)
        if number is None:
            continue
        for k, (name, _) in enumerate(figures(nb), 1):
            found[name] = Label(figure_format(book) % f"{number}.{k}", page, f"{number}.{k}")
        exercises = 0
        for cell in nb.cells:
            if cell.cell_type != "markdown":
                continue
            pending = None  # a target waits for the heading after it
            for block in walk(cell.source):
                if isinstance(block, Target):
                    pending = block.label
                elif isinstance(block, Directive) and block.name == "exercise":
                    if "nonumber" in block.options:
                        continue
                    exercises += 1
                    if "label" in block.options:
                        name = f"{book.words['exercise']} {number}.{exercises}"
                        found[block.options["label"]] = Label(name, page, f"{number}.{exercises}",
                                                              block.argument)
                elif isinstance(block, str) and pending and (heading := HEADING.match(first_line(block))):
                    found[pending] = Label(heading["title"], page)
                    pending = None
    return found


@cache
def page_title(book: Book, page: str) -> str:
    """A page's first level-1 heading, as ``{doc}`` shows it."""
    path = next(p for p in (book.root / f"{page}.ipynb", book.root / f"{page}.md") if p.exists())
    text = (path.read_text(encoding="utf-8") if path.suffix == ".md"
            else "\n".join(c.source for c in read(path).cells if c.cell_type == "markdown"))
    return next(m["title"] for line in text.splitlines() if (m := HEADING.match(line)) and m["hashes"] == "#")


@cache
def bibliography() -> dict[str, tuple[str, str]]:
    """``key -> (authors, year)`` as sphinxcontrib-bibtex's ``author_year`` style names them: last
    names, "A and B" for two authors, "A et al." for three or more."""
    text = Backend()  # one plain-text renderer: looking one up per name costs seconds

    def last(person) -> str:
        return " ".join(part.render(text) for part in person.rich_prelast_names + person.rich_last_names)

    entries = {}
    for key, entry in parse_file(str(ROOT / "book" / "references.bib")).entries.items():
        people = entry.persons.get("author") or entry.persons.get("editor") or []
        authors = (" and ".join(map(last, people)) if len(people) <= 2 else f"{last(people[0])} et al.")
        entries[key] = (authors, entry.fields.get("year", "n.d."))
    return entries


@cache
def glossary(book: Book = ENGLISH) -> dict[str, str]:
    """Each glossary term, lower-cased, mapped to its spelling on the glossary page (its anchor keeps the
    case). The terms are the unindented lines of the page's glossary block."""
    text = (book.root / f"{GLOSSARY}.md").read_text(encoding="utf-8")
    block = text.split("```{glossary}", 1)[1].split("\n```", 1)[0]
    return {line.strip().lower(): line.strip() for line in block.splitlines()
            if line.strip() and not line[0].isspace()}


def sphinx_id(text: str) -> str:
    """The HTML id Sphinx makes of ``text`` (``sphinx.util.nodes._make_id``, which keeps capitals)."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"^[-0-9._]+|-+$", "", re.sub(r"[^a-zA-Z0-9._]+", "-", " ".join(ascii_text.split())))


def stored_glue(nb: nbformat.NotebookNode) -> dict[str, tuple[str, int]]:
    """``name -> (text/plain value, index of the cell that glued it)`` from the executed notebook.

    ``myst_nb.glue`` stores a value as a display output whose metadata names it (``scrapbook.name``)
    and whose mime types carry a prefix when it is hidden (``application/papermill.record/``)."""
    found = {}
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            meta = output.get("metadata", {}).get("scrapbook")
            if meta:
                plain = output.get("data", {}).get(meta.get("mime_prefix", "") + "text/plain")
                found[meta["name"]] = (plain, index)
    return found


# ---------------------------------------------------------------------------------------------------
# Writing plain Markdown.

def link(text: str, url: str) -> str:
    text = " ".join(text.split()).replace("[", r"\[").replace("]", r"\]")
    return f"[{text}]({url})"


def details(summary: str, text: str) -> str:
    """A block folded until opened; the blank lines let Markdown inside it render."""
    return f"<details>\n<summary>{summary}</summary>\n\n{text}\n\n</details>"


def quote(text: str) -> str:
    return "\n".join(f"> {line}" if line.strip() else ">" for line in text.split("\n"))


def split_target(body: str) -> tuple[str | None, str]:
    """``text <target>`` -> (text, target); a bare ``target`` -> (None, target)."""
    m = re.fullmatch(r"(?P<text>.*?)\s*<(?P<target>[^<>]+)>", body.strip(), re.S)
    return (m["text"], m["target"].strip()) if m else (None, body.strip())


class Chapter:
    """The conversion of one chapter: its number, stored glue and the state that spans its cells."""

    def __init__(self, path: Path, book: Book = ENGLISH):
        self.path, self.nb, self.book = path, read(path), book
        self.page, self.words = page_of(path, book), book.words
        if self.page not in numbers(book):
            raise EditionError(f"{path.name}: in no numbered part of _toc.yml, so it has no chapter number")
        self.number = numbers(book)[self.page]
        self.glue = stored_glue(self.nb)
        self.cell = 0  # index of the cell being converted
        self.level = 1  # level of the last heading read, for the exercises' headings
        self.solution: str | None = None  # the exercise whose code-running solution is open
        self.folds: dict[str, int] = {}  # folded blocks written so far for each such solution

    def fail(self, message: str):
        raise EditionError(f"{self.path.name}, cell {self.cell}: {message}")

    # inline roles ----------------------------------------------------------------------------------

    def roles(self, text: str) -> str:
        for line in text.splitlines():
            if heading := HEADING.match(line):
                self.level = len(heading["hashes"])
        return SPAN.sub(lambda m: self.role(m["role"], m["body"]) if m["role"] else m[0], text)

    def role(self, name: str, body: str) -> str:
        if name == "glue:text":
            key, _, spec = body.rpartition(":") if ":" in body else (body, "", "s")
            if key not in self.glue or self.glue[key][0] is None:
                self.fail(f"{{glue:text}}`{body}`: no stored text value named {key!r}; execute the chapter")
            return format_plain_text(self.glue[key][0], spec)
        if name in ("cite:p", "cite:t"):
            cited = []
            for key in (k.strip() for k in body.split(",")):
                if key not in bibliography():
                    self.fail(f"{{{name}}}`{body}`: {key!r} is not in book/references.bib")
                authors, year = bibliography()[key]
                text = f"{authors}, {year}" if name == "cite:p" else f"{authors} ({year})"
                cited.append(link(text, page_url(self.book, BIBLIOGRAPHY)))
            return f"({'; '.join(cited)})" if name == "cite:p" else ", ".join(cited)
        if name == "term":
            text, term = split_target(body)
            spelling = glossary(self.book).get(" ".join(term.split()).lower())
            if spelling is None:
                self.fail(f"{{term}}`{body}`: not a term of {GLOSSARY}.md")
            return link(text or term, page_url(self.book, GLOSSARY, sphinx_id(f"term-{spelling}")))
        if name in ("numref", "ref"):
            text, label = split_target(body)
            target = labels(self.book).get(label)
            if target is None:
                self.fail(f"{{{name}}}`{body}`: no chapter declares the label {label!r}")
            if name == "numref":
                if not target.number:
                    self.fail(f"{{numref}}`{body}`: {label!r} is not numbered")
                text = text and text.replace("%s", target.number).replace("{number}", target.number)
            return link(text or target.text, page_url(self.book, target.page, label))
        if name == "doc":
            text, target = split_target(body)
            page = posixpath.normpath(target.lstrip("/") if target.startswith("/")
                                      else posixpath.join(posixpath.dirname(self.page), target))
            return link(text or page_title(self.book, page), page_url(self.book, page))
        self.fail(f"the role {{{name}}} has no plain-Markdown form in scripts/colab_edition.py")

    # blocks ----------------------------------------------------------------------------------------

    def convert(self, text: str) -> str:
        """Markdown (a cell's, or a directive's body) in plain Markdown."""
        return "\n".join(self.convert_block(block) for block in blocks(text))

    def convert_block(self, block: str | Directive | Code | Target) -> str:
        if isinstance(block, Target):
            return ""  # the book's anchor; the edition's links point at the book
        if isinstance(block, Code):
            return block.text
        if isinstance(block, str):
            return self.roles(block)
        if block.name in ("solution-start", "solution-end"):
            self.fail(f"{{{block.name}}} inside another directive")
        return self.directive(block)

    def markdown_cell(self, text: str) -> str:
        """A Markdown cell in plain Markdown. A code-running solution spans cells from its
        ``solution-start`` to its ``solution-end``; its prose in each cell is folded into a ``<details>``
        block, and its code cells stay as they are, to run."""
        pieces: list[tuple[str, str | None]] = []  # (text, the open solution's exercise label or None)
        for block in blocks(text):
            if isinstance(block, Directive) and block.name == "solution-start":
                self.solution = block.argument
            elif isinstance(block, Directive) and block.name == "solution-end":
                self.solution = None
            else:
                pieces.append((self.convert_block(block), self.solution))
        out = []
        for label, run in itertools.groupby(pieces, key=lambda piece: piece[1]):
            text = "\n".join(t for t, _ in run).strip("\n")
            if label and text.strip():
                self.folds[label] = self.folds.get(label, 0) + 1
                more = self.words["continued"] if self.folds[label] > 1 else ""
                text = details(self.words["solution"].format(self.exercise_name(label)) + more, text)
            out.append(text)
        return re.sub(r"\n{3,}", "\n\n", "\n\n".join(out)).strip("\n")

    def exercise_name(self, label: str) -> str:
        """"Exercise 2.1 (Its title)", as sphinx-exercise names an exercise in a solution's title."""
        target = labels(self.book).get(label)
        if target is None:
            self.fail(f"a solution names {label!r}, which no exercise declares")
        return self.words["titled"].format(target.text, target.title) if target.title else target.text

    def directive(self, d: Directive) -> str:
        body = self.convert(d.body)
        if d.name == "glue:figure":
            if d.argument not in self.glue:
                self.fail(f"{{glue:figure}} {d.argument}: no stored figure of that name; execute the chapter")
            where = self.words["above" if self.glue[d.argument][1] < self.cell else "below"]
            label = labels(self.book).get(d.options.get("name", ""))
            return self.words["placed"].format(label=label.text if label else figure_format(self.book) % "",
                                               where=where, caption=body)
        if d.name == "exercise":
            target = labels(self.book).get(d.options.get("label", ""))
            heading = target.text if target else self.words["exercise"]
            heading = self.words["titled"].format(heading, d.argument) if d.argument else heading
            return f"{'#' * min(self.level + 1, 6)} {heading}\n\n{body}"
        if d.name == "solution":
            return details(self.words["solution"].format(self.exercise_name(d.argument)), body)
        if d.name == "try-models":  # the book's in-page widget runs in a browser, not in a kernel
            what = self.words["try"].get(d.argument or "all", self.words["try"]["all"])
            page = link(self.words["widget_link"], page_url(self.book, "book/try"))
            return quote(self.words["widget"].format(what=what, link=page))
        if d.name in self.words["admonitions"]:
            title = d.argument if d.name == "admonition" else self.words["admonitions"][d.name]
            return quote(f"**{title}**\n\n{body}" if title else body)
        self.fail(f"the directive {{{d.name}}} has no plain-Markdown form in scripts/colab_edition.py")

    # the notebook ----------------------------------------------------------------------------------

    def note(self) -> str:
        chapter = link(self.words["chapter"].format(self.number), page_url(self.book, self.page))
        return quote(self.words["note"].format(chapter=chapter, title=config(self.book)["title"]))

    def citations_in_code(self, source: str) -> str:
        """A citation written in a code cell's string, for a table the cell displays as Markdown, read
        as the prose reads it: the book's MyST renders the role, a plain kernel would show it raw."""
        def cite(match: re.Match) -> str:
            text = self.role(match["role"], match["body"])
            if any(c in text for c in "\"'\\\n"):
                self.fail(f"a citation in code reads {text!r}, which a string literal cannot hold as it is")
            return text
        return CITE.sub(cite, source)

    def edition(self) -> nbformat.NotebookNode:
        cells = []
        for index, cell in enumerate(self.nb.cells):
            self.cell = index
            if cell.cell_type == "code":
                source, metadata = self.citations_in_code(cell.source), cell.metadata
                if self.solution:  # a worked solution's code: folded as in the book, Colab's way
                    title = self.words["solution"].format(self.exercise_name(self.solution))
                    source = f"# @title {title}\n{source}"
                    metadata = {**metadata, "cellView": "form"}
                cells.append(nbformat.v4.new_code_cell(source, id=cell.id, metadata=metadata))
                figure = cell.metadata.get("mystnb", {}).get("figure", {})
                if figure.get("name"):  # a widget's caption, which the book reads from the metadata
                    caption = self.roles(figure.get("caption", ""))
                    text = self.words["placed"].format(label=labels(self.book)[figure["name"]].text,
                                                       where=self.words["above"], caption=caption)
                    cells.append(nbformat.v4.new_markdown_cell(text, id=f"{cell.id}-caption"))
            elif cell.cell_type == "markdown":
                text = self.markdown_cell(cell.source)
                if not cells:  # the note goes under the chapter's title
                    title, _, rest = text.partition("\n") if text.startswith("# ") else ("", "", text)
                    text = f"{title}\n\n{self.note()}\n\n{rest.lstrip()}".strip()
                cells.append(nbformat.v4.new_markdown_cell(text, id=cell.id, metadata=cell.metadata))
            else:
                cells.append(cell)
        if self.solution:
            self.fail(f"the solution of {self.solution!r} is never closed by a solution-end")
        return nbformat.v4.new_notebook(cells=cells, metadata=self.nb.metadata,
                                        nbformat=self.nb.nbformat, nbformat_minor=self.nb.nbformat_minor)


def edition(chapter: Path, book: Book = ENGLISH) -> str:
    """The text of the edition of ``chapter`` (a chapter of ``book``) as the chapter gives it now."""
    return nbformat.writes(Chapter(chapter, book).edition()) + "\n"


def assembled_chinese(tree: Path) -> Book:
    """The zh-TW book, its sources assembled into ``tree`` (emptied first) by scripts/translations.py."""
    spec = importlib.util.spec_from_file_location("translations", ROOT / "scripts" / "translations.py")
    translations = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(translations)
    translations.book_tree(tree)
    return chinese(tree)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only report chapters whose edition is stale")
    parser.add_argument("--language", choices=sorted(WORDS), default="en", help="the book's language")
    parser.add_argument("chapters", nargs="*", type=Path, help="chapter notebooks (default: all)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tree:
        book = ENGLISH if args.language == "en" else assembled_chinese(Path(tree) / "book")
        chapters = sorted((book.root / "chapters").glob("*.ipynb"))
        if args.chapters:
            chapters = [c for c in chapters if c.name in {p.name for p in args.chapters}]
        return write_editions(book, chapters, args.check)


def write_editions(book: Book, chapters: list[Path], check: bool) -> int:
    """Write (or, with ``check``, only compare) the edition of each chapter into ``book.out``."""
    stale, failed = [], []
    for chapter in chapters:
        target = book.out / chapter.name
        try:
            text = edition(chapter, book)
        except EditionError as error:  # the others are still written; this one keeps its old edition
            failed.append(chapter.name)
            print(error, file=sys.stderr)
            continue
        if target.exists() and target.read_text(encoding="utf-8") == text:
            continue
        stale.append(target.relative_to(ROOT).as_posix())
        if not check:
            book.out.mkdir(exist_ok=True)
            target.write_text(text, encoding="utf-8")
    verb = "out of date" if check else "written"
    print(f"{verb}: {', '.join(stale) or 'none'}" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed or (check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
