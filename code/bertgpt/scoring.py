"""Scoring text: how probable it is under each model.

:func:`log_likelihood` (GPT) and :func:`pseudo_log_likelihood` (BERT) score a text; a GPT factorises
p(text) left to right, so its score is a true log-probability; a BERT has no such factorisation,
and the pseudo-log-likelihood (Salazar et al., 2020) masks one position at a time instead, which is
not a probability of the text but ranks texts in the same spirit. :func:`token_log_probs` is the
per-token view, in sliding windows, that perplexity is computed from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .device import device_of, eval_mode
from .inputs import bert_whole, pad
from .model import require_family
from .tokenizer import Tokenizer


@dataclass(frozen=True)
class Score:
    """A text's total log-probability (natural log) and the number of tokens it sums over."""

    log_prob: float
    n_tokens: int

    @property
    def mean(self) -> float:
        """Mean log-probability per token."""
        return self.log_prob / self.n_tokens

    @property
    def perplexity(self) -> float:
        """The exponential of the mean negative log-likelihood.

        For a GPT this is the usual perplexity; for a BERT's pseudo-log-likelihood, the pseudo-perplexity.
        """
        return math.exp(-self.mean)


@torch.no_grad()
def token_log_probs(model, ids, stride: int | None = None, batch_size: int = 16) -> torch.Tensor:
    """log p(ids[t] | ids[<t]) for t = 1 .. n-1 under a GPT: a (n-1,) tensor.

    A sequence longer than the context is read in windows of ``context`` tokens that start
    ``stride`` apart (default ``context // 2``); each token is scored once, in the first window
    where it has at least ``context - stride`` tokens of left context (the first window's tokens
    have whatever precedes them).
    """
    require_family(model, "gpt", "log-likelihood")
    ids = torch.as_tensor(ids, dtype=torch.long).flatten()
    n, context = len(ids), model.config.context
    stride = context // 2 if stride is None else stride
    if not 1 <= stride <= context - 1:
        raise ValueError(f"stride must lie in [1, {context - 1}], not {stride}")
    if n < 2:
        return torch.zeros(0)
    windows, spans = [], []  # each window's start, and the targets [lo, hi) it scores
    start, done = 0, 1
    while done < n:
        end = min(start + context, n)
        windows.append(start)
        spans.append((done, end))
        done, start = end, start + stride
    out = []
    device = device_of(model)
    with eval_mode(model):
        for b in range(0, len(windows), batch_size):
            starts = windows[b:b + batch_size]
            width = min(context, n - starts[0])
            # right-padding is harmless to a causal model: no position sees what follows it
            x = pad([ids[s:s + width].tolist() for s in starts], 0)  # (B, T): the first window is the widest
            logp = model(x.to(device)).logits.float().log_softmax(-1)  # (B, T, V)
            for row, s, (lo, hi) in zip(logp, starts, spans[b:b + batch_size]):
                positions = torch.arange(lo - 1 - s, hi - 1 - s, device=device)  # row j predicts s+j+1
                targets = ids[lo:hi].to(device)
                out.append(row[positions, targets])
    return torch.cat(out).cpu()


def _text_ids(model, tokenizer: Tokenizer, text: str, family: str, what: str) -> list[int]:
    """The ids of ``text``, refused when empty or when ``model`` is not of ``family`` (``what`` needs it)."""
    require_family(model, family, what)
    ids = tokenizer.encode(text)
    if not ids:
        raise ValueError("the text is empty: there is nothing to score")
    return ids


def log_likelihood(model, tokenizer: Tokenizer, text: str, after: str = "") -> Score:
    """The sum of log p(x_i | x_<i) over every token of ``text`` under a GPT.

    The first token is conditioned on ``[SEP]``, the document boundary of pretraining, so every
    token of the text counts. With ``after`` (a prompt), ``text`` is scored as its continuation: the
    prompt's tokens come between ``[SEP]`` and the text and are read, not counted. Texts longer than
    the context are scored in sliding windows.
    """
    ids = _text_ids(model, tokenizer, text, "gpt", "log-likelihood")
    logp = token_log_probs(model, [tokenizer.sep_id, *tokenizer.encode(after), *ids])
    return Score(float(logp[-len(ids):].sum()), len(ids))


@torch.no_grad()
def pseudo_log_likelihood(model, tokenizer: Tokenizer, text: str, batch_size: int = 32) -> Score:
    """Salazar et al. (2020): mask each token of ``text`` in turn and sum BERT's log p of the true token.

    The n masked copies of ``[CLS] text [SEP]`` are run in batches of ``batch_size``.
    """
    ids = _text_ids(model, tokenizer, text, "bert", "pseudo-log-likelihood")
    full = torch.tensor(bert_whole(tokenizer, ids, model.config.context))  # (T,)
    n = len(ids)
    positions = torch.arange(1, n + 1)  # the text's tokens, after [CLS]
    total = 0.0
    device = device_of(model)
    with eval_mode(model):
        for b in range(0, n, batch_size):
            where = positions[b:b + batch_size]  # (B,)
            x = full.repeat(len(where), 1)  # (B, T): one copy per masked position
            x[torch.arange(len(where)), where] = tokenizer.mask_id
            chosen = torch.zeros_like(x, dtype=torch.bool)
            chosen[torch.arange(len(where)), where] = True  # one position per row, in row order
            logp = model(x.to(device), predict=chosen.to(device)).logits.float().log_softmax(-1)  # (B, V)
            total += float(logp.gather(-1, full[where].to(device)[:, None]).sum())
    return Score(total, n)
