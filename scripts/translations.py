"""The Traditional Chinese (Taiwan) edition's translations: where they live, when one is stale, and
what a translation must keep of its source (issue 51).

A translation is keyed by the English it was made from. For a chapter, each markdown cell is a unit,
keyed by the cell's id; a front-matter page is one unit, ``page``. The store holds, per source file,
``i18n/zh-TW/<path>.json``::

    {"<cell id or 'page'>": {"en_sha": "...", "en": "<the English it translates>", "zh": "..."}}

``en`` is kept so that a stale translation shows what changed in English since (:func:`stale_diff`).
The checks, each a function returning a list of problems in words:

- :func:`stale_diff`: the English changed after the translation was made;
- :func:`structure_problems`: a role, label, reference, citation, glued value or equation of the
  source is missing from the translation, or added to it (the text of a ``{term}`` role is
  translated; its target is not);
- :func:`script_problems`: OpenCC's Simplified-to-Taiwan conversion (``s2twp``) would change the
  text: a Simplified character or a mainland usage slipped in (the phrases of :data:`SCRIPT_ALLOW`
  excepted);
- :func:`term_problems`: an English term of ``i18n/zh-TW/TERMS.md`` appears in the source but its
  Chinese form from the table does not appear in the translation;
- :func:`emphasis_problems`: bold that CommonMark would leave as asterisks, as it does after
  full-width punctuation (``**問題：**哪``).

    python scripts/translations.py            # every unit: current, stale or missing, per file
    python scripts/translations.py --stale    # the stale ones, with the English diff
    python scripts/translations.py --store book/preface.md page preface.zh.md   # record a translation
    python scripts/translations.py --assemble DIR   # the zh-TW chapters and pages, written into DIR
    python scripts/translations.py --build          # the zh-TW book, into _build/html/zh-TW
    python scripts/translations.py --readme         # README.zh-TW.md, from README.md's translation

:func:`assemble` builds the edition from the English files: the same code cells and stored outputs
(nothing is executed again, so every glued number and figure is the English run's), with each
markdown cell or page replaced by its current translation, and left in English where none is.

What a contributor does when they change an English cell is in CONTRIBUTING.md.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import hashlib
import json
import re
import shutil
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STORE = ROOT / "i18n" / "zh-TW"
TERMS = STORE / "TERMS.md"
# The pages of front matter the edition translates, beside every chapter.
FRONT = ("book/preface.md", "book/how-to-run.md", "book/try.md", "book/running-bigger.md", "book/notation.md",
         "book/glossary.md", "book/exercises.md", "book/status.md", "book/bibliography.md", "_toc.yml",
         "README.md")
# The README's edition, beside it: what GitHub shows a Chinese reader (:func:`readme`, ``--readme``).
README_ZH = ROOT / "README.zh-TW.md"
# What the zh-TW book takes from the English one as it is: extensions, static files, the
# bibliography, the API reference (not translated: it is the package's docstrings), the Colab edition
# and the benchmarks' README, which the status page includes.
SHARED = ("book/_ext", "book/_static", "book/references.bib", "book/api.md", "colab", "bench/README.md")
# The zh-TW book's own settings, over the English _config.yml.
TITLE = "2018 年的預訓練典範：GPT-1 對上 BERT"
# The footer's and the author line's words in Chinese (the links stay the English footer's).
FOOTER = {"Text and figures:": "文字與圖：", "Code:": "程式碼：",
          "To cite the course, see": "引用本課程，請見", "The bertgpt authors": "bertgpt 作者群"}
# Phrases that are Taiwan usage although OpenCC's phrase table proposes another: 國情咨文 is the
# official name of the State of the Union address (咨文 an address), 函數 the mathematical function
# (函式 is code's), 文本 the text of natural-language processing, 殘差連接 the residual connection,
# 參數 a model's parameters (OpenCC's 引數 is a function's argument), 分布 the Ministry of Education's
# form, 項目 an item (OpenCC's 專案 is a project), 局部 local, 映射 a mapping and 綁定 tying, as
# Taiwan's mathematics and computing write them, and 變更執行階段類型 Colab's own menu item.
SCRIPT_ALLOW = ("國情咨文", "咨文", "函數", "文本", "殘差連接", "參數", "分布", "項目", "局部", "映射",
                "綁定", "變更執行階段類型")

# What a translation keeps verbatim: roles with their argument (a {term}'s target only), labels and
# names, directive names, inline and display math.
_ROLE = re.compile(r"\{([\w:-]+)\}`([^`]*)`")
_LABEL = re.compile(r"^\(([\w-]+)\)=$|^:(?:label|name): *(\S+)$", re.M)
_DIRECTIVE = re.compile(r"^`{3,}\{([\w-]+)\}", re.M)
_MATH = re.compile(r"\$\$.+?\$\$|\$[^$\n]+\$", re.S)
# Code: a fenced block that is not a directive (```python, not ```{note}), a fence line, an inline span.
_CODE_BLOCK = re.compile(r"^(`{3,}|~{3,})(?!\{)[^\n]*\n.*?^\1[ \t]*$", re.S | re.M)
_FENCE_LINE = re.compile(r"^(?:`{3,}|~{3,}).*$|^:[\w-]+:.*$", re.M)  # and a directive's option lines
_CODE_SPAN = re.compile(r"`[^`]*`")
# Regions a script rewrites, between the lines <!-- NAME:start --> and <!-- NAME:end --> (the status
# page's run times, the README's first-run times), are not translated: a unit leaves their content
# out, and the edition takes it from the English as it is at assembly.
_GENERATED = re.compile(r"^(<!-- ([\w-]+):start -->\n).*?^(<!-- \2:end -->)$", re.S | re.M)


def sources() -> list[Path]:
    """Every file the edition translates: the chapters, then the front matter."""
    return sorted((ROOT / "chapters").glob("*.ipynb")) + [ROOT / p for p in FRONT]


def units(path: Path) -> dict[str, str]:
    """The English units of ``path``: a notebook's markdown cells by id, or a page whole (``page``)."""
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        return {c["id"]: "".join(c["source"]) for c in cells if c["cell_type"] == "markdown"}
    return {"page": _GENERATED.sub(r"\1\3", path.read_text(encoding="utf-8"))}


def _prose(text: str) -> str:
    """``text`` without its code (blocks, fence and option lines, inline spans): what is read as prose."""
    return _CODE_SPAN.sub(" ", _FENCE_LINE.sub(" ", _CODE_BLOCK.sub(" ", text)))


def regenerated(chinese: str, english: str) -> str:
    """``chinese`` with each generated region filled as ``english`` has it now."""
    filled = {m.group(2): m.group(0) for m in _GENERATED.finditer(english)}
    return _GENERATED.sub(lambda m: filled.get(m.group(2), m.group(0)), chinese)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def store_path(path: Path) -> Path:
    return STORE / (str(path.relative_to(ROOT)) + ".json")


def load_store(path: Path) -> dict[str, dict]:
    """The stored translations of source ``path`` ({} when none is stored yet)."""
    stored = store_path(path)
    return json.loads(stored.read_text(encoding="utf-8")) if stored.is_file() else {}


def status(path: Path) -> dict[str, str]:
    """Each unit of ``path``: "current", "stale" (its English changed) or "missing"."""
    stored = load_store(path)
    return {key: "missing" if key not in stored else
            "current" if stored[key]["en_sha"] == digest(english) else "stale"
            for key, english in units(path).items()}


def stale_diff(entry: dict, english: str, where: str) -> str:
    """The English diff since translation ``entry`` was made, headed by ``where`` (file and unit)."""
    return "".join(difflib.unified_diff(entry["en"].splitlines(True), english.splitlines(True),
                                        f"{where} (translated)", f"{where} (now)"))


def _kept(text: str) -> Counter:
    kept = Counter()
    for role, arg in _ROLE.findall(text):
        arg = " ".join(arg.split())
        if role in ("term", "ref", "doc"):  # the text is translated; what it links to is not
            target = re.search(r"<([^>]+)>$", arg)
            target = target.group(1) if target else arg
            kept[f"{{{role}}} → {target.lower() if role == 'term' else target}"] += 1
        else:
            kept[f"{{{role}}}`{arg}`"] += 1
    kept.update(f"label {a or b}" for a, b in _LABEL.findall(text))
    kept.update(f"directive {d}" for d in _DIRECTIVE.findall(text))
    kept.update(f"math {' '.join(m.split())}" for m in _MATH.findall(_prose(text)))
    kept.update(f"generated region {name}" for _, name, _ in _GENERATED.findall(text))
    return kept


def structure_problems(english: str, chinese: str) -> list[str]:
    """What of the source's roles, labels, directives and math the translation lacks or adds. A
    ``{term}`` keeps its glossary entry: ``{term}`early stopping``` becomes ``{term}`提前停止 <early
    stopping>```."""
    source, target = _kept(english), _kept(chinese)
    return ([f"lacks {k}" for k in sorted((source - target).elements())]
            + [f"adds {k}" for k in sorted((target - source).elements())])


@functools.cache
def _taiwan():
    import opencc

    return opencc.OpenCC("s2twp")


def script_problems(chinese: str, allow: tuple[str, ...] = SCRIPT_ALLOW) -> list[str]:
    """Where OpenCC's Simplified-to-Taiwan conversion (``s2twp``) would change the text, outside
    math, code, roles and the ``allow`` phrases: each as "found → proposed"."""
    plain = _MATH.sub(" ", _prose(_ROLE.sub(" ", chinese)))
    for phrase in allow:
        plain = plain.replace(phrase, " ")
    converted = _taiwan().convert(plain)
    problems = []
    matcher = difflib.SequenceMatcher(None, plain, converted, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op != "equal":
            around = plain[max(0, i1 - 8):i2 + 8].strip()
            problems.append(f"{plain[i1:i2]} → {converted[j1:j2]} (in «{around}»)")
    return problems


def emphasis_problems(chinese: str) -> list[str]:
    """Where ``**`` would show as text: CommonMark does not close bold after full-width punctuation
    when a character follows (``**問題：**哪``), so the page would print the asterisks."""
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark").render(_FENCE_LINE.sub("", _CODE_BLOCK.sub("", chinese)))
    text = re.sub(r"<code>.*?</code>", " ", html, flags=re.S)
    return [f"bold not rendered in «{m.group(0)}»: put a space after the closing **"
            for m in re.finditer(r".{0,12}\*\*.{0,12}", text)]


def terms() -> dict[str, str]:
    """The terminology table: English term (lower case) -> its Taiwan Chinese form."""
    rows = [line.split("|")[1:3] for line in TERMS.read_text(encoding="utf-8").splitlines()
            if line.startswith("|") and not line.startswith(("| English", "|---"))]
    return {en.strip().lower(): zh.strip() for en, zh in rows}


def term_problems(english: str, chinese: str, table: dict[str, str] | None = None) -> list[str]:
    """The table's terms whose English appears in the source's prose (not in a role's argument or in
    code) while their Chinese form does not appear in the translation."""
    table = terms() if table is None else table
    lowered = _prose(_ROLE.sub(" ", english)).lower()  # not in labels or code
    return [f"“{en}” should be {zh}" for en, zh in table.items()
            if re.search(rf"\b{re.escape(en)}\b", lowered) and zh not in chinese]


def problems(path: Path) -> list[str]:
    """Every problem of the stored translations of ``path``: stale units (with their diff), then the
    structure, script and terminology of the current ones. Missing units are not problems here."""
    found, stored = [], load_store(path)
    name = str(path.relative_to(ROOT))
    for key, english in units(path).items():
        entry = stored.get(key)
        if entry is None:
            continue
        where = f"{name}, {key}"
        if entry["en_sha"] != digest(english):
            found.append(f"{where}: stale, the English changed:\n{stale_diff(entry, english, where)}")
            continue
        for check in (structure_problems(english, entry["zh"]), script_problems(entry["zh"]),
                      term_problems(english, entry["zh"]), emphasis_problems(entry["zh"])):
            found += [f"{where}: {p}" for p in check]
    found += [f"{name}: translation of unit {k!r}, which the source no longer has" for k in stored
              if k not in units(path)]
    return found


def store(path: Path, key: str, chinese: str) -> None:
    """Record ``chinese`` as the translation of unit ``key`` of ``path``, made from its English now."""
    english = units(path)[key]
    stored = {**load_store(path), key: dict(en_sha=digest(english), en=english, zh=chinese)}
    out = store_path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(dict(sorted(stored.items())), ensure_ascii=False, indent=1) + "\n",
                   encoding="utf-8")


def translated(path: Path) -> dict[str, str]:
    """The current translations of ``path``'s units (stale and missing ones left out)."""
    stored = load_store(path)
    return {k: stored[k]["zh"] for k, state in status(path).items() if state == "current"}


def assemble(out: Path) -> dict[str, int]:
    """Write the zh-TW edition of every source into ``out`` (same relative paths): notebooks keep
    their code cells and outputs and take the current translations of their markdown cells; pages
    take theirs whole. Returns how many units each file took in Chinese."""
    counts = {}
    for path in sources():
        zh, target = translated(path), out / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".ipynb":
            nb = json.loads(path.read_text(encoding="utf-8"))
            for cell in nb["cells"]:
                if cell["cell_type"] == "markdown" and cell["id"] in zh:
                    cell["source"] = zh[cell["id"]].splitlines(True)
            target.write_text(json.dumps(nb, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        else:
            english = path.read_text(encoding="utf-8")
            target.write_text(regenerated(zh["page"], english) if zh else english, encoding="utf-8")
        counts[str(path.relative_to(ROOT))] = len(zh)
    return counts


def readme() -> str:
    """The zh-TW README as the store makes it now: the translation, with the English's generated table."""
    english = ROOT / "README.md"
    if status(english) != {"page": "current"}:
        raise SystemExit("README.md's translation is missing or stale: python scripts/translations.py "
                         "--stale shows it")
    return regenerated(translated(english)["page"], english.read_text(encoding="utf-8"))


def book_tree(src: Path) -> None:
    """The zh-TW book's sources in ``src``: the assembled chapters and pages (:func:`assemble`), links
    to what it shares with the English book (:data:`SHARED`), and the English configuration with the
    title, the language (the theme's own strings in Chinese) and the figure numbers in Chinese."""
    import yaml

    shutil.rmtree(src, ignore_errors=True)
    assemble(src)
    for name in SHARED:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).symlink_to(ROOT / name)
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    config["title"] = TITLE
    for key, value in (("author", config), ("extra_footer", config["html"])):
        for english, chinese in FOOTER.items():
            value[key] = value[key].replace(english, chinese)
    sphinx = config["sphinx"]["config"]
    sphinx.update(language="zh_TW", numfig_format={"figure": "圖 %s"},
                  # MyST-NB's toggle; the chapters fold only code cells' source ("hide-input")
                  nb_code_prompt_show="顯示程式碼", nb_code_prompt_hide="隱藏程式碼")
    text = yaml.safe_dump(config, allow_unicode=True, sort_keys=False)
    (src / "_config.yml").write_text(text, encoding="utf-8")


def build(out: Path = ROOT / "_build" / "html" / "zh-TW") -> None:
    """Build the zh-TW book (warnings as errors, as the English one) and put its HTML in ``out``."""
    import subprocess
    import sys

    src = ROOT / "_build" / "zh-TW-src"
    book_tree(src)
    jupyter_book = shutil.which("jupyter-book") or str(Path(sys.executable).parent / "jupyter-book")
    subprocess.run([jupyter_book, "build", str(src), "--warningiserror", "--keep-going"], check=True)
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(src / "_build" / "html", out)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stale", action="store_true", help="print the stale units with their English diff")
    parser.add_argument("--store", nargs=3, metavar=("SOURCE", "KEY", "FILE"),
                        help="record FILE's text as the translation of unit KEY of SOURCE")
    parser.add_argument("--assemble", type=Path, metavar="DIR", help="write the zh-TW edition into DIR")
    parser.add_argument("--build", action="store_true", help="build the zh-TW book into _build/html/zh-TW")
    parser.add_argument("--readme", action="store_true", help=f"write {README_ZH.name} from the store")
    args = parser.parse_args(argv)
    if args.store:
        source, key, text = args.store
        store(ROOT / source, key, Path(text).read_text(encoding="utf-8"))
        return
    if args.assemble:
        print(json.dumps(assemble(args.assemble), indent=1))
        return
    if args.build:
        build()
        return
    if args.readme:
        README_ZH.write_text(readme(), encoding="utf-8")
        return
    for path in sources():
        counts = sorted(Counter(status(path).values()).items())
        print(f"{str(path.relative_to(ROOT)):34s} " + ", ".join(f"{n} {state}" for state, n in counts))
        if args.stale:
            for problem in problems(path):
                if ": stale" in problem:
                    print(problem)


if __name__ == "__main__":
    main()
