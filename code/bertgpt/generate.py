"""Using a pretrained model directly: GPT continues text, BERT fills in blanks, and both score text.

- :func:`generate` (GPT): sampling one token at a time, with greedy decoding, temperature, top-k,
  top-p (nucleus) and a repetition penalty. Each step feeds only the newest token through the model,
  reusing the keys and values of earlier positions from a :class:`~bertgpt.model.KVCache`.
- :func:`fill_mask` (BERT): the most probable tokens for each ``[MASK]`` in a text.
- :func:`log_likelihood` (GPT) and :func:`pseudo_log_likelihood` (BERT): how probable a text is
  under each model. A GPT factorises p(text) left to right, so its score is a true log-probability; a
  BERT has no such factorisation, and the pseudo-log-likelihood (Salazar et al., 2020) masks one
  position at a time instead, which is not a probability of the text but ranks texts in the same spirit.

The sampling filters are small pure functions over logits, so they can be tested and drawn::

    top_k_filter(torch.tensor([1.0, 3.0, 2.0]), 2)    # tensor([-inf, 3., 2.])
"""

from __future__ import annotations

import contextlib
import math
import warnings
from dataclasses import dataclass

import torch

from .model import KVCache
from .tokenizer import Tokenizer

# --- Sampling filters: logits (..., V) in, logits (..., V) out, -inf where a token is ruled out ---

def top_k_filter(logits: torch.Tensor, k: int | None) -> torch.Tensor:
    """Keep the ``k`` highest logits of each row (exactly k, ties broken by index); ``None`` keeps all."""
    if k is None or k >= logits.size(-1):
        return logits
    if k < 1:
        raise ValueError(f"top_k must be a positive integer (or None for no filter), not {k}")
    values, indices = logits.topk(k, dim=-1)
    return torch.full_like(logits, float("-inf")).scatter(-1, indices, values)


def top_p_filter(logits: torch.Tensor, p: float | None) -> torch.Tensor:
    """Keep the smallest set of most probable tokens whose probabilities sum to at least ``p``.

    The most probable token is always kept, so the set is never empty; ``None`` or ``p=1`` keeps all.
    """
    if p is None or p >= 1:
        return logits
    if not 0 < p:
        raise ValueError(f"top_p must lie in (0, 1], not {p}")
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    probs = sorted_logits.softmax(dim=-1)
    before = probs.cumsum(dim=-1) - probs  # mass of the tokens ranked above each one
    sorted_logits = sorted_logits.masked_fill(before >= p, float("-inf"))
    return torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)


def repetition_penalty_filter(logits: torch.Tensor, previous, penalty: float) -> torch.Tensor:
    """CTRL's repetition penalty (Keskar et al., 2019) on the tokens in ``previous``.

    A present token's positive logit is divided by ``penalty`` and a negative one multiplied by it,
    so with ``penalty > 1`` every repeated token becomes less probable. ``logits`` is (V,).
    """
    if penalty <= 0:
        raise ValueError(f"repetition_penalty must be positive (1.0 for none), not {penalty}")
    if penalty == 1.0 or len(previous) == 0:
        return logits
    seen = torch.as_tensor(list(set(int(i) for i in previous)), device=logits.device)
    scores = logits[seen]
    logits = logits.clone()
    logits[seen] = torch.where(scores > 0, scores / penalty, scores * penalty)
    return logits


def sample_next(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                top_p: float | None = None, generator: torch.Generator | None = None,
                greedy: bool = False) -> int:
    """One token id from next-token logits (V,): the argmax when greedy or at temperature 0."""
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 means greedy), not {temperature}")
    if greedy or temperature == 0:
        return int(logits.argmax())
    logits = top_p_filter(top_k_filter(logits.float() / temperature, top_k), top_p)
    probs = logits.softmax(dim=-1).cpu()  # sampled on the CPU: one seeded stream on every device
    return int(torch.multinomial(probs, 1, generator=generator))


# --- Generation -----------------------------------------------------------------------------------

@contextlib.contextmanager
def _eval_mode(model):
    """Dropout off while generating or scoring, then the model's mode as it was."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


def _device(model) -> torch.device:
    return next(model.parameters()).device


def _need(model, causal: bool, use: str) -> None:
    if model.config.causal != causal:
        if causal:
            raise ValueError(f"{use} needs a causal (GPT) model; this is a BERT (bidirectional) model, "
                             "which cannot continue text: use fill_mask to predict masked tokens")
        raise ValueError(f"{use} needs a BERT (bidirectional) model; this is a GPT (causal) model: "
                         "use generate to continue text, or log_likelihood to score it")


def _fit_prompt(ids: list[int], context: int, stacklevel: int) -> list[int]:
    """The last ``context`` ids, with a warning (pointing at the caller's line) when that cuts any."""
    if len(ids) > context:
        warnings.warn(f"the prompt has {len(ids)} tokens, more than the model's context of {context}: "
                      f"keeping its last {context} tokens (the prompt was truncated from the left)",
                      stacklevel=stacklevel)
    return ids[-context:]


def generate_ids(model, prompt_ids: list[int], max_new_tokens: int = 50, temperature: float = 1.0,
                 top_k: int | None = None, top_p: float | None = None, repetition_penalty: float = 1.0,
                 generator: torch.Generator | None = None, greedy: bool = False,
                 use_cache: bool = True) -> list[int]:
    """The ids of ``max_new_tokens`` tokens sampled after ``prompt_ids``.

    The model always conditions on the last ``context`` tokens. A prompt longer than the context is
    cut from the left, with a warning. With ``use_cache``, each new token costs one position until
    the context is full; past it, the window slides and every step re-encodes the last ``context``
    tokens, exactly as without the cache, so both ways choose the same tokens. The repetition
    penalty applies to every token in that window, the prompt's included.
    """
    _need(model, True, "generation")
    if not prompt_ids:
        raise ValueError("the prompt is empty: give at least one token (generate() starts from [SEP])")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, not {max_new_tokens}")
    context, device = model.config.context, _device(model)
    ids = _fit_prompt([int(i) for i in prompt_ids], context, stacklevel=3)
    new, cache = [], None
    x = torch.tensor([ids], device=device)  # (1, T): the positions the next forward pass encodes
    with _eval_mode(model), torch.no_grad():
        for _ in range(max_new_tokens):
            if use_cache and cache is None:
                cache = KVCache()
            logits = model(x, cache=cache)[0, -1]  # (V,): the distribution of the next token
            logits = repetition_penalty_filter(logits, ids[-context:], repetition_penalty)
            token = sample_next(logits, temperature, top_k, top_p, generator, greedy)
            ids.append(token)
            new.append(token)
            if use_cache and len(cache) < context:
                x = torch.tensor([[token]], device=device)  # (1, 1): the cache holds the rest
            else:  # no cache, or a full one: re-encode the sliding window from scratch
                cache = None
                x = torch.tensor([ids[-context:]], device=device)
    return new


def generate(model, tokenizer: Tokenizer, prompt: str | list[int], max_new_tokens: int = 50,
             temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
             repetition_penalty: float = 1.0, seed: int | None = None, greedy: bool = False,
             use_cache: bool = True) -> str:
    """Continue ``prompt`` (text or token ids) with a GPT; returns the continuation's text only.

    ``seed`` makes sampling repeat exactly; ``greedy=True`` (or ``temperature=0``) takes the most
    probable token each time. An empty prompt starts from ``[SEP]``, the document boundary the GPT
    was pretrained with, so the model begins a new document.
    """
    _need(model, True, "generation")
    ids = tokenizer.encode(prompt) if isinstance(prompt, str) else list(prompt)
    ids = _fit_prompt(ids, model.config.context, stacklevel=3)
    generator = torch.Generator().manual_seed(seed) if seed is not None else None
    new = generate_ids(model, ids or [tokenizer.sep_id], max_new_tokens, temperature, top_k, top_p,
                       repetition_penalty, generator, greedy, use_cache)
    return tokenizer.decode(new)


# --- BERT: fill in the blanks ---------------------------------------------------------------------

def encode_masked(tokenizer: Tokenizer, text: str) -> list[int]:
    """Token ids of ``text`` with each literal ``[MASK]`` as the one mask token.

    Special tokens are matched before normalisation, so even a lower-casing tokenizer keeps
    ``[MASK]`` whole; should one not, the text is split at each ``[MASK]`` and the pieces encoded.
    """
    n = text.count("[MASK]")
    if n == 0:
        raise ValueError("the text has no [MASK]: write [MASK] where a token should be predicted, "
                         "e.g. 'the state of the [MASK] is strong'")
    ids = tokenizer.encode(text)
    if ids.count(tokenizer.mask_id) == n:
        return ids
    pieces = [tokenizer.encode(piece) for piece in text.split("[MASK]")]
    ids = pieces[0]
    for piece in pieces[1:]:
        ids = ids + [tokenizer.mask_id] + piece
    return ids


def _bert_ids(tokenizer: Tokenizer, ids: list[int], context: int) -> list[int]:
    """``[CLS] ids [SEP]``, refused (not truncated, which could drop a mask) when over the context."""
    if len(ids) + 2 > context:
        raise ValueError(f"the text has {len(ids)} tokens; with [CLS] and [SEP] that exceeds the model's "
                         f"context of {context}: shorten it to at most {context - 2} tokens")
    return [tokenizer.cls_id, *ids, tokenizer.sep_id]


@torch.no_grad()
def fill_mask(model, tokenizer: Tokenizer, text: str, top_k: int = 5) -> list[list[tuple[str, float]]]:
    """For each ``[MASK]`` in ``text``, left to right, the ``top_k`` (token, probability) candidates.

    The text is read as one segment, ``[CLS] text [SEP]``; all masks are predicted at once, each
    seeing the others as masks.
    """
    _need(model, False, "fill-mask")
    ids = _bert_ids(tokenizer, encode_masked(tokenizer, text), model.config.context)
    x = torch.tensor([ids], device=_device(model))  # (1, T)
    with _eval_mode(model):
        hidden = model.backbone(x)[0]  # (T, d)
        where = (x[0] == tokenizer.mask_id).nonzero().squeeze(-1)  # (M,)
        probs = model.mlm_logits(hidden[where]).float().softmax(dim=-1)  # (M, V)
    values, indices = probs.topk(min(top_k, probs.size(-1)), dim=-1)
    return [[(tokenizer.id_to_token(i), float(p)) for p, i in zip(ps.tolist(), ix.tolist())]
            for ps, ix in zip(values, indices)]


# --- Scoring text ---------------------------------------------------------------------------------

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
    _need(model, True, "log-likelihood")
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
    device = _device(model)
    with _eval_mode(model):
        for b in range(0, len(windows), batch_size):
            starts = windows[b:b + batch_size]
            width = min(context, n - starts[0])
            # right-padding is harmless to a causal model: no position sees what follows it
            rows = [torch.nn.functional.pad(ids[s:s + width], (0, width - len(ids[s:s + width])))
                    for s in starts]
            logp = model(torch.stack(rows).to(device)).float().log_softmax(-1)  # (B, T, V)
            for row, s, (lo, hi) in zip(logp, starts, spans[b:b + batch_size]):
                positions = torch.arange(lo - 1 - s, hi - 1 - s, device=device)  # row j predicts s+j+1
                targets = ids[lo:hi].to(device)
                out.append(row[positions, targets])
    return torch.cat(out).cpu()


def log_likelihood(model, tokenizer: Tokenizer, text: str) -> Score:
    """The sum of log p(x_i | x_<i) over every token of ``text`` under a GPT.

    The first token is conditioned on ``[SEP]``, the document boundary of pretraining, so every
    token of the text counts. Texts longer than the context are scored in sliding windows.
    """
    _need(model, True, "log-likelihood")
    ids = tokenizer.encode(text)
    if not ids:
        raise ValueError("the text is empty: there is nothing to score")
    logp = token_log_probs(model, [tokenizer.sep_id, *ids])
    return Score(float(logp.sum()), len(ids))


@torch.no_grad()
def pseudo_log_likelihood(model, tokenizer: Tokenizer, text: str, batch_size: int = 32) -> Score:
    """Salazar et al. (2020): mask each token of ``text`` in turn and sum BERT's log p of the true token.

    The n masked copies of ``[CLS] text [SEP]`` are run in batches of ``batch_size``.
    """
    _need(model, False, "pseudo-log-likelihood")
    ids = tokenizer.encode(text)
    if not ids:
        raise ValueError("the text is empty: there is nothing to score")
    full = torch.tensor(_bert_ids(tokenizer, ids, model.config.context))  # (T,)
    n = len(ids)
    positions = torch.arange(1, n + 1)  # the text's tokens, after [CLS]
    total = 0.0
    device = _device(model)
    with _eval_mode(model):
        for b in range(0, n, batch_size):
            where = positions[b:b + batch_size]  # (B,)
            x = full.repeat(len(where), 1)  # (B, T): one copy per masked position
            x[torch.arange(len(where)), where] = tokenizer.mask_id
            hidden = model.backbone(x.to(device))  # (B, T, d)
            h = hidden[torch.arange(len(where), device=device), where.to(device)]  # (B, d)
            logp = model.mlm_logits(h).float().log_softmax(-1)  # (B, V)
            total += float(logp.gather(-1, full[where].to(device)[:, None]).sum())
    return Score(total, n)
