"""The bottom floor's progress bar: one rule for every operation a person waits on.

A bar shows where ``progress`` is on (the default of :func:`~bertgpt.pretraining.pretrain`,
:func:`~bertgpt.finetune.finetune`, :func:`~bertgpt.probes.probe`, tokenizer training) and never when
the environment sets ``BERTGPT_QUIET=1``, as the book's execution does::

    for batch in progress_bar(batches, "features", enabled=progress):
        ...
"""

from __future__ import annotations

import os

from tqdm.auto import tqdm


def quiet() -> bool:
    """True when ``BERTGPT_QUIET`` is set: no bar anywhere."""
    return bool(os.environ.get("BERTGPT_QUIET"))


def progress_bar(iterable=None, label: str | bool = True, *, total: int | None = None, enabled=True,
                 **options) -> tqdm:
    """A tqdm bar over ``iterable`` (or of ``total`` steps), labelled ``label`` when it is a string,
    shown only when ``enabled`` and not :func:`quiet`; it refreshes at most once a second and
    leaves no line behind."""
    return tqdm(iterable, total=total, desc=label if isinstance(label, str) else None,
                disable=not enabled or quiet(), mininterval=1.0, leave=False, **options)
