"""Re-execute chapter notebooks in place and record how long each took.

    python scripts/execute_notebooks.py                      # every notebook in chapters/
    python scripts/execute_notebooks.py chapters/02_*.ipynb  # some of them
    python scripts/execute_notebooks.py --cold               # each from an empty model cache

Each notebook runs top to bottom in a fresh kernel, from chapters/, with BERTGPT_STATIC=1 so that
widgets are drawn as static figures, and BERTGPT_BOOK=1 so that glued values go to the book, hidden.
A notebook that runs without error is written back with its new outputs; one that fails is left as
it was and the script exits with status 1. The run time and result
of every run go to book/_static/execution-status.json, from which book/status.md is regenerated; the
slowest cells of each run are printed, to show where a chapter's time goes.

With --cold, each notebook runs with a model cache of its own, empty (a temporary BERTGPT_CACHE), as a
learner's first run does: it trains everything it needs that does not ship. Those times, the ones a
learner meets first, also go to the README's table of chapter times (between its cold-times markers).
Run the script alone for them: two runs at once share the cores and each takes longer.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = ROOT / "chapters"
README = ROOT / "README.md"
STATUS_JSON = ROOT / "book" / "_static" / "execution-status.json"
STATUS_MD = ROOT / "book" / "status.md"
CELL_TIMEOUT_S = 3600
SLOWEST = 6  # cells reported after each run: where a chapter's time goes
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def machine() -> str:
    """A short description of where the notebooks ran, for the status table."""
    import torch

    from bertgpt.trainer import resolve_precision

    accelerator = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    threads = os.environ.get("BERTGPT_THREADS")  # how many of the cores the chapter's training used
    accelerator += f", training on {threads} thread{'s' * (threads != '1')}" if threads else ""
    # the CPU's vector units and the number format they train in decide most of a chapter's time
    vectors = torch.backends.cpu.get_cpu_capability()
    return (
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPU cores ({vectors}, trains in "
        f"{resolve_precision('cpu')}), {accelerator}; "
        f"Python {platform.python_version()}, torch {torch.__version__}"
    )


def title(nb: nbformat.NotebookNode, path: Path) -> str:
    """The notebook's first Markdown heading, or its file name."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return path.stem


def write_atomically(path: Path, text: str) -> None:
    """Write to a temporary file next to ``path`` and rename it over ``path``."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def execute(path: Path, cold: bool = False) -> dict:
    """Run one notebook (:func:`run`); with ``cold``, under a model cache of its own, empty, removed
    afterwards, and the record keeps that run's time as its ``cold`` one."""
    if not cold:
        return run(path)
    with tempfile.TemporaryDirectory(prefix="bertgpt-cold-") as cache:
        os.environ["BERTGPT_CACHE"] = cache  # the kernel inherits it
        try:
            record = run(path)
        finally:
            os.environ.pop("BERTGPT_CACHE")
    if record["result"] != "ok":
        return record
    return {**record, "cold": {k: record[k] for k in ("seconds", "executed", "machine")}}


def run(path: Path) -> dict:
    """Run one notebook; write it back only if every cell succeeded. Returns its status record."""
    nb = nbformat.read(path, as_version=4)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata.pop("widgets", None)
    started, cells = {}, []  # (seconds, index, first line) of every code cell, for the slowest-cells report

    def on_start(cell, cell_index):
        started[cell_index] = time.perf_counter()

    def on_executed(cell, cell_index, execute_reply):
        first = next((line for line in cell.source.splitlines() if line.strip()), "")
        cells.append((time.perf_counter() - started[cell_index], cell_index, first[:60]))

    client = NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        record_timing=False,  # no per-cell timestamps in the committed files
        resources={"metadata": {"path": str(CHAPTERS)}},
        on_cell_start=on_start,
        on_cell_executed=on_executed,
    )
    start = time.perf_counter()
    try:
        client.execute()
        result = "ok"
    except Exception as error:  # CellExecutionError, DeadKernelError, CellTimeoutError, ...
        result = f"error: {getattr(error, 'ename', None) or type(error).__name__}"
        # the failing cell and its traceback (a CellExecutionError's text), so that a long run that
        # fails is not run again only to learn which assertion it was
        print(re.sub(r"\x1b\[[0-9;]*m", "", str(error))[-4000:], file=sys.stderr, flush=True)  # no colours
    seconds = time.perf_counter() - start
    for seconds_, index, first in sorted(cells, reverse=True)[:SLOWEST]:
        print(f"  {seconds_:6.0f} s  cell {index}: {first}", flush=True)
    if result == "ok":
        nb.metadata["kernelspec"] = dict(KERNELSPEC)
        write_atomically(path, nbformat.writes(nb) + "\n")
    return {
        "title": title(nb, path),
        "executed": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "seconds": round(seconds, 1),
        "result": result,
        "machine": machine(),
    }


def status_markdown(records: dict[str, dict]) -> str:
    """The execution-status page: one row per notebook, between markers that how-to-run includes."""
    lines = [
        "# Execution status",
        "",
        "Every chapter notebook is executed by `python scripts/execute_notebooks.py`, which records",
        "when it last ran, how long it took and whether every cell succeeded, and how long its last run",
        "from an empty model cache took (`--cold`): a learner's first run, which trains what does not",
        "ship. This page is rewritten by that script; do not edit it by hand.",
        "",
        "<!-- run-times:start -->",
    ]
    if records:
        lines += [
            "| Chapter | Last executed | Run time (s) | Result | From an empty cache (s) | Machine |",
            "|---|---|---:|---|---:|---|",
        ]
        for name, r in sorted(records.items()):
            cells = [
                f"[{r['title']}](../{name})",
                r["executed"],
                f"{r['seconds']:.0f}",
                r["result"],
                f"{r['cold']['seconds']:.0f}" if "cold" in r else "—",
                r["machine"],
            ]
            lines.append("| " + " | ".join(cells) + " |")
    else:
        lines.append("No chapter has been executed yet.")
    lines += ["", "<!-- run-times:end -->", ""]
    lines += [  # the benchmark's own figures, kept in one place: bench/README.md
        "## Pretraining the minis",
        "",
        "The time-to-quality benchmark (`bench/time_to_quality.py`), as `bench/README.md` last records it:",
        "",
        "```{include} ../bench/README.md",
        ":start-after: <!-- time-to-quality:start -->",
        ":end-before: <!-- time-to-quality:end -->",
        "```",
        "",
    ]
    return "\n".join(lines)


def cold_times_markdown(records: dict[str, dict]) -> str:
    """The README's table: each chapter's last run from an empty model cache, in minutes."""
    cold = {name: {**r["cold"], "title": r["title"]} for name, r in sorted(records.items()) if "cold" in r}
    if not cold:
        return "No chapter has been timed from an empty cache yet.\n"
    machines = sorted({r["machine"] for r in cold.values()})
    # times from different machines (one that trains in bf16 is the faster): a letter says which measured each
    letter = {m: chr(ord("A") + i) for i, m in enumerate(machines)}
    several = len(machines) > 1
    lines = ["| Chapter | First run (minutes) |" + " Machine |" * several, "|---|---:|" + ":---:|" * several]
    lines += [f"| [{r['title']}]({name}) | {r['seconds'] / 60:.0f} |" + f" {letter[r['machine']]} |" * several
              for name, r in cold.items()]
    legend = [f"- {letter[m]}: {m}." for m in machines] if several else [f"Measured on {machines[0]}."]
    return "\n".join(lines + [""] + legend) + "\n"


def replace_between(text: str, start: str, end: str, body: str) -> str:
    """``text`` with what lies between the marker lines ``start`` and ``end`` replaced by ``body``."""
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{body}{end}{tail}"


def record_status(name: str, record: dict, cold: bool) -> None:
    """Write one chapter's record into the status files (and, for a cold run, the README's table).

    The records are read just before writing, so that two runs at once (two chapters, two cores)
    keep both rows; a warm run keeps the chapter's last time from an empty cache."""
    records = json.loads(STATUS_JSON.read_text()) if STATUS_JSON.exists() else {}
    if "cold" not in record and "cold" in records.get(name, {}):
        record = {**record, "cold": records[name]["cold"]}
    records = {n: r for n, r in {**records, name: record}.items() if (ROOT / n).exists()}
    STATUS_JSON.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(STATUS_JSON, json.dumps(records, indent=2, sort_keys=True) + "\n")
    write_atomically(STATUS_MD, status_markdown(records))
    if cold:  # the table of both READMEs: the zh-TW one takes it as it is (scripts/translations.py)
        table = cold_times_markdown(records)
        for readme in (README, README.with_name("README.zh-TW.md")):
            if readme.exists():
                text = replace_between(readme.read_text(encoding="utf-8"), "<!-- cold-times:start -->",
                                       "<!-- cold-times:end -->", table)
                write_atomically(readme, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, help="notebooks to run (default: all in chapters/)")
    parser.add_argument("--cold", action="store_true", help="run each notebook from an empty model cache")
    args = parser.parse_args(argv)
    paths = [p.resolve() for p in args.paths] or sorted(CHAPTERS.glob("*.ipynb"))

    os.environ["BERTGPT_STATIC"] = "1"  # the kernel inherits it: widgets become static figures
    os.environ["BERTGPT_BOOK"] = "1"  # and glue hands values to the book hidden, not shown in the cell
    os.environ["BERTGPT_QUIET"] = "1"  # and no progress bars in the pages' stored outputs
    failed = []
    for path in paths:
        name = path.relative_to(ROOT).as_posix()
        print(f"executing {name} ...", flush=True)
        record = execute(path, cold=args.cold)
        print(f"  {record['result']} in {record['seconds']:.0f} s", flush=True)
        record_status(name, record, cold=args.cold)  # now: an interrupted run keeps what it finished
        if record["result"] != "ok":
            failed.append(name)
    if failed:
        print("failed (outputs left unchanged): " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
