"""The bottom floor: how texts become model inputs, shared by pretraining, fine-tuning and evaluation.

Nothing here knows a model or a tokenizer class; a tokenizer is anything with the special tokens'
ids as attributes (``cls_id``, ``sep_id``, ``start_id``, ``delim_id``, ``extract_id``)::

    bert_inputs(tok, a, b)     # ([CLS] a [SEP] b [SEP], segments 0 … 0 1 … 1)
    gpt_inputs(tok, a, b)      # [START] a [DELIM] b [EXTRACT]
    truncate_pair(a, b, 125)   # one rule for every pair: keep the junction between A and B
    pad(rows, tok.pad_id)      # (B, T), padded on the right
    pack_examples(tok, "bert", 128, examples)   # a task's examples as (ids, segments, label) rows
    collate(rows, tok)         # those rows as one padded Batch

:class:`Batch` names the keys of every batch dict the package builds or reads, once.
"""

from __future__ import annotations

import hashlib
import re
from typing import TypedDict

import torch

IGNORE = -100  #: the one ignore index of every loss — padding and unchosen positions never count


class Batch(TypedDict, total=False):
    """The keys of a batch, (B, T) tensors unless said: what fine-tuning, probes and pretraining
    build and read. A plain dict at run time (``Batch(input_ids=...)`` makes one)."""

    input_ids: torch.Tensor  #: token ids, padded on the right with the tokenizer's ``pad_id``
    segments: torch.Tensor   #: BERT's segment ids, 0 for text A and 1 for text B (0 on padding)
    pad_mask: torch.Tensor   #: 1 on real tokens, 0 on padding
    label: torch.Tensor      #: a task's label (B,), or a tag per position (B, T), ``IGNORE`` unscored
    lm_labels: torch.Tensor  #: for GPT fine-tuning's auxiliary loss, the next text token, else ``IGNORE``
    labels: torch.Tensor     #: the masked LM's targets, the original token where chosen, else ``IGNORE``
    is_next: torch.Tensor    #: 1 where text B follows text A, else 0 (B,), for next-sentence prediction
    teacher: torch.Tensor    #: distillation's soft targets (B, n_classes)


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


def pack_examples(tokenizer, family: str, context: int, examples: list) -> list[tuple]:
    """Each example as ``(ids, segments, label)`` in ``family``'s task format, cut to ``context``.

    GPT: ``[START] a [EXTRACT]`` or ``[START] a [DELIM] b [EXTRACT]`` (segments None).
    BERT: ``[CLS] a [SEP]`` or ``[CLS] a [SEP] b [SEP]`` with segment ids.
    An example is a :class:`~bertgpt.tasks.Example` (``text``, ``text_b``, ``label``) or a token-level
    :class:`~bertgpt.tasks.Tagged` (``words``, ``tags``), whose label is a list, one tag per position:
    a word's tag at its last token, ``IGNORE`` everywhere else.
    """
    tok = tokenizer
    if examples and hasattr(examples[0], "tags"):  # Tagged
        return [_pack_tagged(tok, family, context, e) for e in examples]
    texts_a = tok.encode_batch([e.text for e in examples])
    texts_b = iter(tok.encode_batch([e.text_b for e in examples if e.text_b is not None]))
    rows = []
    for e, a in zip(examples, texts_a):
        b = next(texts_b) if e.text_b is not None else None
        a, b = truncate_pair(a, b, context - (2 if b is None else 3))  # room for the special tokens
        if family == "gpt":
            rows.append((gpt_inputs(tok, a, b), None, e.label))
        else:
            rows.append((*bert_inputs(tok, a, b), e.label))
    return rows


def _pack_tagged(tok, family: str, context: int, example):
    """One token-level example: ids in ``family``'s format and a tag per position (see pack_examples)."""
    encoding = tok.hf.encode(list(example.words), is_pretokenized=True, add_special_tokens=False)
    words = encoding.word_ids
    tags = [example.tags[w] if i + 1 == len(words) or words[i + 1] != w else IGNORE
            for i, w in enumerate(words)]  # a word's tag sits on its last token
    ids, tags = encoding.ids[:context - 2], tags[:context - 2]
    if family == "gpt":
        return gpt_inputs(tok, ids), None, [IGNORE, *tags, IGNORE]
    return (*bert_inputs(tok, ids), [IGNORE, *tags, IGNORE])


def collate(rows: list[tuple], tokenizer) -> Batch:
    """A :class:`Batch` from packed rows, padded on the right.

    ``input_ids`` (B, T), ``pad_mask`` (B, T), ``label`` (B,), or (B, T) for a token-level task;
    BERT adds ``segments`` (B, T); GPT adds
    ``lm_labels`` (B, T): the next token of the text at each position, IGNORE where the next token
    is padding or a special token.
    """
    ids = pad([r[0] for r in rows], tokenizer.pad_id)
    labels = [r[2] for r in rows]
    batch = Batch(input_ids=ids, pad_mask=(ids != tokenizer.pad_id).long(),
                  label=pad(labels, IGNORE) if isinstance(labels[0], list) else torch.tensor(labels))
    if rows[0][1] is not None:
        batch["segments"] = pad([r[1] for r in rows], 0)
    else:
        following = ids[:, 1:]
        lm_labels = torch.where(following >= tokenizer.n_special, following, IGNORE)
        batch["lm_labels"] = torch.cat([lm_labels, torch.full_like(ids[:, :1], IGNORE)], dim=1)
    return batch
