"""Using a pretrained model to produce text: GPT continues it, BERT fills in its blanks.

- :func:`generate` (GPT): sampling one token at a time, with greedy decoding, temperature, top-k,
  top-p (nucleus) and a repetition penalty (a :class:`Sampling`). Each step feeds only the newest
  token through the model, reusing the keys and values of earlier positions from a
  :class:`~bertgpt.model.KVCache`.
- :func:`fill_mask` (BERT): the most probable tokens for each ``[MASK]`` in a text.
- :func:`generate_by_masking` (BERT): text written by filling appended blanks one at a time, left
  to right or most confident first — how far a masked LM can be pushed into generation.

Scoring text (how probable it is under each model) lives in :mod:`bertgpt.scoring`.

The sampling filters are small pure functions over logits, so they can be tested and drawn::

    top_k_filter(torch.tensor([1.0, 3.0, 2.0]), 2)    # tensor([-inf, 3., 2.])
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch

from .device import device_of, eval_mode
from .inputs import bert_whole
from .model import KVCache, require_family
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


@dataclass(frozen=True)
class Sampling:
    """How the next token is chosen from the model's distribution."""

    temperature: float = 1.0         #: divides the logits; 0 means greedy
    top_k: int | None = None         #: sample among the k most probable tokens; None — all
    top_p: float | None = None       #: sample among the most probable tokens holding mass p; None — all
    repetition_penalty: float = 1.0  #: CTRL's penalty on tokens in the window; 1 — none
    greedy: bool = False             #: always take the most probable token

    def __post_init__(self):
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 means greedy), not {self.temperature}")


def sample_next(logits: torch.Tensor, sampling: Sampling = Sampling(),
                generator: torch.Generator | None = None) -> int:
    """One token id from next-token logits (V,): the argmax when greedy or at temperature 0."""
    if sampling.greedy or sampling.temperature == 0:
        return int(logits.argmax())
    logits = top_p_filter(top_k_filter(logits.float() / sampling.temperature, sampling.top_k), sampling.top_p)
    probs = logits.softmax(dim=-1).cpu()  # sampled on the CPU: one seeded stream on every device
    return int(torch.multinomial(probs, 1, generator=generator))


# --- Generation -----------------------------------------------------------------------------------

def _fit_prompt(ids: list[int], context: int, stacklevel: int) -> list[int]:
    """The last ``context`` ids, with a warning (pointing at the caller's line) when that cuts any."""
    if len(ids) > context:
        warnings.warn(f"the prompt has {len(ids)} tokens, more than the model's context of {context}: "
                      f"keeping its last {context} tokens (the prompt was truncated from the left)",
                      stacklevel=stacklevel)
    return ids[-context:]


def generate_ids(model, prompt_ids: list[int], max_new_tokens: int = 50, sampling: Sampling = Sampling(),
                 generator: torch.Generator | None = None, use_cache: bool = True) -> list[int]:
    """The ids of ``max_new_tokens`` tokens sampled after ``prompt_ids``.

    The model always conditions on the last ``context`` tokens. A prompt longer than the context is
    cut from the left, with a warning. With ``use_cache``, each new token costs one position until
    the context is full; past it, the window slides and every step re-encodes the last ``context``
    tokens, exactly as without the cache, so both ways choose the same tokens. The repetition
    penalty applies to every token in that window, the prompt's included. An LSTM has no key/value
    cache: it re-encodes the window at every step, whatever ``use_cache`` says.
    """
    require_family(model, "gpt", "generation")
    use_cache = use_cache and model.kv_cache
    if not prompt_ids:
        raise ValueError("the prompt is empty: give at least one token (generate() starts from [SEP])")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, not {max_new_tokens}")
    context, device = model.config.context, device_of(model)
    ids = _fit_prompt([int(i) for i in prompt_ids], context, stacklevel=3)
    new, cache = [], None
    x = torch.tensor([ids], device=device)  # (1, T): the positions the next forward pass encodes
    with eval_mode(model), torch.no_grad():
        for _ in range(max_new_tokens):
            if use_cache and cache is None:
                cache = KVCache()
            logits = model(x, cache=cache).logits[0, -1]  # (V,): the distribution of the next token
            logits = repetition_penalty_filter(logits, ids[-context:], sampling.repetition_penalty)
            token = sample_next(logits, sampling, generator)
            ids.append(token)
            new.append(token)
            if use_cache and len(cache) < context:
                x = torch.tensor([[token]], device=device)  # (1, 1): the cache holds the rest
            else:  # no cache, or a full one: re-encode the sliding window from scratch
                cache = None
                x = torch.tensor([ids[-context:]], device=device)
    return new


def generate(model, tokenizer: Tokenizer, prompt: str | list[int], max_new_tokens: int = 50,
             sampling: Sampling = Sampling(), seed: int | None = None, use_cache: bool = True) -> str:
    """Continue ``prompt`` (text or token ids) with a GPT; returns the continuation's text only.

    ``seed`` makes sampling repeat exactly; ``Sampling(greedy=True)`` (or ``temperature=0``) takes
    the most probable token each time. An empty prompt starts from ``[SEP]``, the document boundary the GPT
    was pretrained with, so the model begins a new document.
    """
    require_family(model, "gpt", "generation")
    ids = tokenizer.encode(prompt) if isinstance(prompt, str) else list(prompt)
    ids = _fit_prompt(ids, model.config.context, stacklevel=3)
    generator = torch.Generator().manual_seed(seed) if seed is not None else None
    new = generate_ids(model, ids or [tokenizer.sep_id], max_new_tokens, sampling, generator, use_cache)
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


@torch.no_grad()
def fill_mask(model, tokenizer: Tokenizer, text: str, top_k: int = 5) -> list[list[tuple[str, float]]]:
    """For each ``[MASK]`` in ``text``, left to right, the ``top_k`` (token, probability) candidates.

    The text is read as one segment, ``[CLS] text [SEP]``; all masks are predicted at once, each
    seeing the others as masks.
    """
    require_family(model, "bert", "fill-mask")
    ids = bert_whole(tokenizer, encode_masked(tokenizer, text), model.config.context)
    x = torch.tensor([ids], device=device_of(model))  # (1, T)
    with eval_mode(model):
        probs = model(x, predict=x == tokenizer.mask_id, nsp=False).logits.float().softmax(dim=-1)  # (M, V)
    values, indices = probs.topk(min(top_k, probs.size(-1)), dim=-1)
    return [[(tokenizer.id_to_token(i), float(p)) for p, i in zip(ps.tolist(), ix.tolist())]
            for ps, ix in zip(values, indices)]


ORDERS = ("left", "confident")  #: the orders in which :func:`generate_by_masking` fills its blanks


@torch.no_grad()
def generate_by_masking(model, tokenizer: Tokenizer, prompt: str, max_new_tokens: int = 20,
                        sampling: Sampling = Sampling(), order: str = "left", seed: int | None = None) -> str:
    """Make a BERT write: append ``max_new_tokens`` masks to ``prompt`` and fill them one at a time.

    Each step reads ``[CLS] prompt blanks [SEP]`` whole and replaces one ``[MASK]`` with a token
    drawn (by ``sampling``) from the model's distribution there: the leftmost mask with ``order=
    "left"``, or with ``order="confident"`` the mask whose most probable token is most probable.
    The number of new tokens is fixed in advance, and every blank sees the end of the text as
    ``[SEP]`` — two ways this differs from a GPT's :func:`generate`. Special tokens are never
    drawn. Returns the new text only.
    """
    require_family(model, "bert", "generation by masking")
    if order not in ORDERS:
        raise ValueError(f"unknown order {order!r}; choose one of {', '.join(ORDERS)}")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, not {max_new_tokens}")
    room = model.config.context - 2 - max_new_tokens  # [CLS] prompt blanks [SEP]
    if room < 1:
        raise ValueError(f"{max_new_tokens} new tokens leave no room for a prompt in a context of "
                         f"{model.config.context}: ask for at most {model.config.context - 3}")
    ids = _fit_prompt(tokenizer.encode(prompt), room, stacklevel=3)
    start = len(ids) + 1  # the first blank's position, after [CLS]
    masked = bert_whole(tokenizer, ids + [tokenizer.mask_id] * max_new_tokens, model.config.context)
    x = torch.tensor([masked], device=device_of(model))  # (1, T)
    generator = torch.Generator().manual_seed(seed) if seed is not None else None
    with eval_mode(model):
        for _ in range(max_new_tokens):
            blanks = (x[0] == tokenizer.mask_id).nonzero().flatten()  # (M,) positions still masked
            logits = model(x, predict=x == tokenizer.mask_id).logits.float()  # (M, V)
            logits[:, :tokenizer.n_special] = float("-inf")  # a blank takes a word piece, never [MASK]
            if order == "left":
                pick = 0
            else:
                pick = int(logits.softmax(dim=-1).amax(dim=-1).argmax())
            window = x[0, 1:-1].tolist()
            row = repetition_penalty_filter(logits[pick], window, sampling.repetition_penalty)
            x[0, blanks[pick]] = sample_next(row, sampling, generator)
    return tokenizer.decode(x[0, start:start + max_new_tokens].tolist())
