"""The bottom floor: how texts become model inputs, shared by pretraining, fine-tuning and evaluation.

Nothing here knows a model or a tokenizer class; a tokenizer is anything with the special tokens'
ids as attributes (``cls_id``, ``sep_id``, ``start_id``, ``delim_id``, ``extract_id``)::

    bert_inputs(tok, a, b)     # ([CLS] a [SEP] b [SEP], segments 0 … 0 1 … 1)
    gpt_inputs(tok, a, b)      # [START] a [DELIM] b [EXTRACT]
    truncate_pair(a, b, 125)   # one rule for every pair: keep the junction between A and B
    pad(rows, tok.pad_id)      # (B, T), padded on the right
"""

from __future__ import annotations

import hashlib
import re

import torch

IGNORE = -100  #: the one ignore index of every loss — padding and unchosen positions never count

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")


def split_sentences(paragraph: str) -> list[str]:
    """A paragraph cut after each ``.``, ``!`` or ``?`` that a capital, digit or quote follows."""
    return [s for s in _SENTENCE_END.split(paragraph) if s.strip()]


def hash_split(key: str) -> str:
    """'train', 'val' or 'test' (about 80/10/10) by a hash of ``key``: the same key, the same split."""
    bucket = int(hashlib.sha1(key.encode()).hexdigest()[:8], 16) % 10
    return "test" if bucket == 0 else "val" if bucket == 1 else "train"


def truncate_pair(a: list[int], b: list[int] | None, budget: int):
    """Cut a text, or a pair of texts, to ``budget`` tokens in all.

    A single text loses its end. A pair loses tokens from the longer side first, A from its front
    and B from its back, so the junction between them, which pair tasks are about, is kept; when
    both are long, A keeps ``ceil(budget / 2)`` tokens.
    """
    if b is None:
        return a[:budget], None
    keep_a = min(len(a), max(budget - budget // 2, budget - len(b)))
    return a[len(a) - keep_a:], b[:budget - keep_a]


def bert_inputs(tok, a: list[int], b: list[int] | None = None):
    """``[CLS] A [SEP]`` or ``[CLS] A [SEP] B [SEP]``: (ids, segments)."""
    ids = [tok.cls_id, *a, tok.sep_id]
    segments = [0] * len(ids)
    if b is not None:
        ids += [*b, tok.sep_id]
        segments += [1] * (len(b) + 1)
    return ids, segments


def bert_whole(tok, ids: list[int], context: int) -> list[int]:
    """``[CLS] ids [SEP]``, refused (not truncated, which could drop a ``[MASK]``) when over ``context``."""
    if len(ids) + 2 > context:
        raise ValueError(f"the text has {len(ids)} tokens; with [CLS] and [SEP] that exceeds the model's "
                         f"context of {context}: shorten it to at most {context - 2} tokens")
    return bert_inputs(tok, ids)[0]


def gpt_inputs(tok, a: list[int], b: list[int] | None = None) -> list[int]:
    """GPT-1's task format: ``[START] A [EXTRACT]`` or ``[START] A [DELIM] B [EXTRACT]``."""
    return [tok.start_id, *a, *([tok.delim_id, *b] if b is not None else []), tok.extract_id]


def pad(rows: list[list[int]], value: int) -> torch.Tensor:
    """Right-pad lists of ints to the longest: a (B, T) tensor."""
    width = max(len(r) for r in rows)
    return torch.tensor([r + [value] * (width - len(r)) for r in rows], dtype=torch.long)
