"""What the benchmarks that compare the pretrained mini models share: quiet, seeded set-up."""

import os

import torch

import bertgpt


def load_minis(families, threads: int | None = None):
    """The corpus and ``{family: pretrained mini checkpoint}``, with progress bars off.

    ``threads`` sets torch's CPU threads (1 lets two benchmarks share two cores).
    """
    os.environ.setdefault("BERTGPT_QUIET", "1")
    if threads:
        torch.set_num_threads(threads)
    corpus = bertgpt.load_corpus()
    return corpus, {f: bertgpt.pretrained(f"{f}-mini", corpus=corpus, progress=False) for f in families}
