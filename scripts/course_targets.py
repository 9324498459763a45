"""Print how each chapter stands against the course's targets (issue "The course a learner recommends").

    python scripts/course_targets.py

For every chapter: the words of its main text (at most 4,000), how often "standard error" appears
there (at most twice), whether it opens with its question and a "you will learn" list and closes with
its takeaways, and its last cold run (at most 8 minutes alone, on one thread), as
``scripts/execute_notebooks.py --cold`` recorded it.

Main text is the markdown outside folded material: ``exercise`` and ``solution`` blocks, the
``dropdown`` and ``toggle`` directives, and any directive with ``:class: dropdown``. A word is a run of
letters; display math, inline math, glue roles and code do not count.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_WORDS, MAX_SE, MAX_COLD = 4000, 2, 8 * 60
FENCE = re.compile(r"^(`{3,}|:{3,})\{([\w-]+)\}")
FOLDED = {"exercise", "solution", "dropdown", "toggle"}


def main_text(markdown: str) -> str:
    """``markdown`` without its folded blocks, display math, code, glue roles and inline math."""
    kept, stack, folded_solution = [], [], False
    lines = markdown.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("````{solution-start}"):
            folded_solution = True
        if line.startswith("````{solution-end}"):  # its closing fence follows, as any directive's
            folded_solution = False
        opened = FENCE.match(line)
        if opened:
            name = opened.group(2)
            options = "\n".join(lines[i + 1:i + 4])
            stack.append((opened.group(1), name in FOLDED or ":class: dropdown" in options
                          or name in ("math", "code-cell") or name.startswith("glue")))
            continue
        if stack and line.strip() == stack[-1][0]:
            stack.pop()
            continue
        if line.startswith("```"):  # a plain code fence
            stack.append(("```", True))
            continue
        if folded_solution or any(hidden for _, hidden in stack):
            continue
        kept.append(line)
    text = "\n".join(kept)
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.S)
    text = re.sub(r"\{glue:\w+\}`[^`]*`", " ", text)
    text = re.sub(r"\$[^$\n]+\$", " ", text)
    text = re.sub(r"`[^`]*`", " ", text)
    text = re.sub(r"^:\w+:.*$", " ", text, flags=re.M)  # directive options
    return text


def chapter_report(path: Path) -> dict:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    markdown = ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    main = main_text("\n".join(markdown))  # a solution's body may span cells, code between them
    opening = markdown[0] if markdown else ""
    return dict(
        words=len(re.findall(r"[A-Za-z]+", main)),
        standard_errors=len(re.findall(r"standard errors?", main, flags=re.I)),
        question="?" in opening,
        learn=bool(re.search(r"you will (learn|be able)", opening, flags=re.I)),
        takeaways=any(re.search(r"^#+ .*(takeaways|what to remember)", m, flags=re.I | re.M)
                      for m in markdown),
    )


def cold_seconds() -> dict[str, float]:
    status = json.loads((ROOT / "book" / "_static" / "execution-status.json").read_text(encoding="utf-8"))
    return {Path(name).stem: r["cold"]["seconds"] for name, r in status.items() if "cold" in r}


def main() -> int:
    cold = cold_seconds()
    rows, misses = [], 0  # chapters listed, targets missed
    print(f"{'chapter':22} {'words':>6} {'std err':>7} {'question':>8} {'learn':>6} {'takeaways':>9} "
          f"{'cold (s)':>8}")
    for path in sorted((ROOT / "chapters").glob("*.ipynb")):
        r = chapter_report(path)
        seconds = cold.get(path.stem)
        ok = [r["words"] <= MAX_WORDS, r["standard_errors"] <= MAX_SE, r["question"], r["learn"],
              r["takeaways"], seconds is not None and seconds <= MAX_COLD]
        misses += ok.count(False)
        marks = ["" if good else " ✗" for good in ok]
        rows.append(path.stem)
        yes = ["yes" if r[k] else "no" for k in ("question", "learn", "takeaways")]
        shown = seconds if seconds is not None else "—"
        print(f"{path.stem:22} {r['words']:>4}{marks[0]:2} {r['standard_errors']:>5}{marks[1]:2} "
              f"{yes[0]:>6}{marks[2]:2} {yes[1]:>4}{marks[3]:2} {yes[2]:>7}{marks[4]:2} "
              f"{shown:>6}{marks[5]:2}")
    total = sum(cold.get(name, 0) for name in rows)
    print(f"\nwhole book cold: {total / 60:.0f} min (target 45); targets: words ≤ {MAX_WORDS}, "
          f"'standard error' ≤ {MAX_SE}, cold ≤ {MAX_COLD // 60} min; {misses} missed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
