"""Re-execute chapter notebooks in place and record how long each took.

    python scripts/execute_notebooks.py                      # every notebook in chapters/
    python scripts/execute_notebooks.py chapters/02_*.ipynb  # some of them

Each notebook runs top to bottom in a fresh kernel, from chapters/, with BERTGPT_STATIC=1 so that
widgets are drawn as static figures. A notebook that runs without error is written back with its new
outputs; one that fails is left as it was and the script exits with status 1. The run time and result
of every run go to book/_static/execution-status.json, from which book/status.md is regenerated; the
slowest cells of each run are printed, to show where a chapter's time goes.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = ROOT / "chapters"
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


def execute(path: Path) -> dict:
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
        "when it last ran, how long it took and whether every cell succeeded. This page is rewritten by",
        "that script; do not edit it by hand.",
        "",
        "<!-- run-times:start -->",
    ]
    if records:
        lines += [
            "| Chapter | Last executed | Run time (s) | Result | Machine |",
            "|---|---|---:|---|---|",
        ]
        for name, r in sorted(records.items()):
            cells = [
                f"[{r['title']}](../{name})",
                r["executed"],
                f"{r['seconds']:.0f}",
                r["result"],
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, help="notebooks to run (default: all in chapters/)")
    args = parser.parse_args(argv)
    paths = [p.resolve() for p in args.paths] or sorted(CHAPTERS.glob("*.ipynb"))

    os.environ["BERTGPT_STATIC"] = "1"  # the kernel inherits it: widgets become static figures
    os.environ["BERTGPT_QUIET"] = "1"  # and no progress bars in the pages' stored outputs
    ran, failed = {}, []
    for path in paths:
        name = path.relative_to(ROOT).as_posix()
        print(f"executing {name} ...", flush=True)
        record = execute(path)
        print(f"  {record['result']} in {record['seconds']:.0f} s", flush=True)
        ran[name] = record
        if record["result"] != "ok":
            failed.append(name)

    # read the records only now, so that two runs at once (two chapters, two cores) keep both rows
    records = json.loads(STATUS_JSON.read_text()) if STATUS_JSON.exists() else {}
    records = {name: r for name, r in {**records, **ran}.items() if (ROOT / name).exists()}
    STATUS_JSON.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(STATUS_JSON, json.dumps(records, indent=2, sort_keys=True) + "\n")
    write_atomically(STATUS_MD, status_markdown(records))
    if failed:
        print("failed (outputs left unchanged): " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
