"""Measuring the models: perplexity, masked-token and cloze accuracy, words by kind, generated text.

The cloze test is the course's experiment on what each objective buys. A token is hidden at a random
position of a sentence; a GPT must predict it from the left context alone, a BERT sees both sides,
and the same BERT with the right side cut off shows how much of its advantage comes from the right::

    cloze_accuracy(gpt, gpt_tok, sentences, n=500)                  # left context (the only choice)
    cloze_accuracy(bert, bert_tok, sentences, n=500)                # both sides
    cloze_accuracy(bert, bert_tok, sentences, n=500, sides="left")  # BERT, left side only

Positions are tokens of each model's own vocabulary: with the same tokenizer (``pretrain(...,
tokenizer="wordpiece")`` for a GPT) and the same seed, both models are tested on the same tokens.
With two vocabularies (GPT's BPE, BERT's WordPiece), :func:`shared_words` finds the words both keep
whole, and :func:`cloze_ranks` tests the two models on those same words of the same texts.

Across tokenizers, loss per token is no common unit: a character model predicts five or six tokens
where a BPE model predicts one. :func:`bits_per_character` divides a text's whole log-likelihood by
its length in characters, so models with any vocabulary are scored on the same text in one unit.

The classification metrics and the statistics that judge every gap against its noise
(:func:`~bertgpt.stats.standard_error`, :func:`~bertgpt.stats.z_score`, :func:`~bertgpt.stats.sem`,
:func:`~bertgpt.stats.seed_band`) live in :mod:`bertgpt.stats`; this module re-exports them, as the
chapters import them from here::

    z_score(0.69, 0.52, n=300)   # two accuracies on 300 test items each, in standard errors (4.3)
"""

from __future__ import annotations

import math

import torch

from .config import PretrainConfig
from .device import device_of, eval_mode
from .inputs import pad
from .model import require_family
from .scoring import token_log_probs
from .stats import (  # noqa: F401  the metrics and the noise of a measurement, re-exported
    accuracy,
    bands_apart,
    best_threshold,
    confusion_matrix,
    f1,
    seed_band,
    sem,
    standard_error,
    z_score,
)
from .tokenizer import Tokenizer


def perplexity(model, tokenizer: Tokenizer, texts, stride: int | None = None) -> float:
    """A GPT's perplexity, exp(mean negative log-likelihood per token).

    ``texts`` is a list of strings, each scored from a ``[SEP]`` (the document boundary) and pooled
    over all their tokens, or a 1-D tensor of token ids (a stream such as
    ``data.token_stream``), whose tokens after the first are scored in sliding windows.
    """
    require_family(model, "gpt", "perplexity")
    if isinstance(texts, str):
        raise ValueError("perplexity takes a list of texts or a tensor of token ids, not one string: "
                         "wrap it in a list")
    if isinstance(texts, torch.Tensor):
        logp = token_log_probs(model, texts, stride)
    else:
        rows = [token_log_probs(model, [tokenizer.sep_id, *ids], stride)
                for ids in tokenizer.encode_batch(texts) if ids]
        logp = torch.cat(rows) if rows else torch.zeros(0)
    if len(logp) == 0:
        raise ValueError("no tokens to score: give non-empty texts")
    return math.exp(-float(logp.mean()))


def bits_per_character(model, tokenizer: Tokenizer, texts: list[str], stride: int | None = None) -> float:
    """A GPT's negative log-likelihood of ``texts`` in bits per character of the texts as given.

    Each text is scored from a ``[SEP]`` (as :func:`perplexity` does); the nats of all its tokens are
    summed, converted to bits and divided by the texts' total number of characters. A tokenizer that
    lower-cases (BPE and WordPiece here) predicts a little less than a character tokenizer that keeps
    the case; one that maps characters to ``[UNK]`` predicts the unknown token, not the character.
    """
    require_family(model, "gpt", "bits per character")
    texts = [t for t in texts if t.strip()]
    if not texts:
        raise ValueError("no text to score: give non-empty texts")
    nats = sum(-float(token_log_probs(model, [tokenizer.sep_id, *ids], stride).sum())
               for ids in tokenizer.encode_batch(texts))
    return nats / math.log(2) / sum(len(t) for t in texts)


def _predictions(model, tokenizer: Tokenizer, rows: list[list[int]], where: list[list[int]], batch_size: int):
    """A BERT's top prediction at positions ``where[i]`` of each row of ids ``rows[i]``, in order."""
    device = device_of(model)
    out = []
    with eval_mode(model):
        for b in range(0, len(rows), batch_size):
            x = pad(rows[b:b + batch_size], tokenizer.pad_id).to(device)  # (B, T)
            chosen = torch.zeros_like(x, dtype=torch.bool)
            for i, positions in enumerate(where[b:b + batch_size]):
                chosen[i, positions] = True
            logits = model(x, pad_mask=(x != tokenizer.pad_id).long(), predict=chosen).logits  # (N, V)
            out.extend(logits.argmax(-1).tolist())
    return out


@torch.no_grad()
def masked_token_accuracy(model, tokenizer: Tokenizer, texts: list[str],
                          rate: float = PretrainConfig.val_mask_rate, seed: int = 0,
                          batch_size: int = 32) -> float:
    """How often a BERT's top prediction restores a masked token.

    In each text (``[CLS] text [SEP]``, cut to the context), ``round(rate * n)`` of its n tokens (at
    least one) are replaced by ``[MASK]`` — all of them, none kept or randomised as in training — and
    the accuracy is over all masked positions of all texts.
    """
    require_family(model, "bert", "masked-token accuracy")
    rows = masked_rows(tokenizer, texts, rate, seed, model.config.context - 2)
    predicted = _predictions(model, tokenizer, [r for r, _, _ in rows], [w for _, w, _ in rows], batch_size)
    truth = [t for _, _, truths in rows for t in truths]
    return sum(p == t for p, t in zip(predicted, truth)) / len(truth)


def masked_rows(tokenizer: Tokenizer, texts: list[str], rate: float, seed: int, limit: int):
    """The inputs :func:`masked_token_accuracy` scores: for each non-empty text (cut to ``limit``
    tokens), ``(ids of [CLS] text [SEP] with the chosen tokens masked, their positions, their ids)``."""
    if not 0 < rate < 1:
        raise ValueError(f"rate must lie strictly between 0 and 1, not {rate}")
    g = torch.Generator().manual_seed(seed)
    rows = []
    for ids in tokenizer.encode_batch(texts):
        ids = ids[:limit]
        if not ids:
            continue
        k = max(1, round(rate * len(ids)))
        chosen = (torch.randperm(len(ids), generator=g)[:k] + 1).sort().values  # (k,) +1 for [CLS], in order
        row = torch.tensor([tokenizer.cls_id, *ids, tokenizer.sep_id])
        truth = row[chosen].tolist()
        row[chosen] = tokenizer.mask_id
        rows.append((row.tolist(), chosen.tolist(), truth))
    if not rows:
        raise ValueError("no tokens to mask: give non-empty texts")
    return rows


def cloze_items(tokenizer: Tokenizer, texts: list[str], n: int, seed: int, context: int):
    """``n`` random (ids, position) pairs, uniform over the texts' tokens (each cut to ``context - 2``)."""
    encoded = [ids[:context - 2] for ids in tokenizer.encode_batch(texts)]
    everywhere = [(i, t) for i, ids in enumerate(encoded) for t in range(len(ids))]
    if not everywhere:
        raise ValueError("no tokens to hide: give non-empty texts")
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(everywhere), generator=g)[:n].tolist()
    return [(encoded[everywhere[j][0]], everywhere[j][1]) for j in order]


@torch.no_grad()
def cloze_ranks(model, tokenizer: Tokenizer, items, sides: str | None = None,
                batch_size: int = 32) -> torch.Tensor:
    """The rank (0 = the top prediction) of the hidden token of each ``(ids, t)`` in ``items``.

    - a GPT (``sides="left"``, the only choice) reads ``[SEP] x_<t`` and predicts x_t as the next token;
    - a BERT with ``sides="both"`` (its default) reads ``[CLS] x_<t [MASK] x_>t [SEP]``;
    - a BERT with ``sides="left"`` reads ``[CLS] x_<t [MASK] [SEP]``: the right side removed.

    ``(ranks < k).float().mean()`` is the top-k accuracy.
    """
    sides = sides or ("left" if model.family == "gpt" else "both")
    if sides not in ("left", "both"):
        raise ValueError(f"sides must be 'left' or 'both', not {sides!r}")
    if model.family == "gpt" and sides == "both":
        raise ValueError("a GPT (causal model) sees only the left side: use sides='left', or a BERT")
    device, ranks = device_of(model), []
    with eval_mode(model):
        for b in range(0, len(items), batch_size):
            chunk = items[b:b + batch_size]
            truth = torch.tensor([ids[t] for ids, t in chunk], device=device)
            if model.family == "bert":  # [CLS] x_<t [MASK] (x_>t) [SEP]: predicted at the [MASK]
                rows = [[tokenizer.cls_id, *ids[:t], tokenizer.mask_id,
                         *(ids[t + 1:] if sides == "both" else []), tokenizer.sep_id] for ids, t in chunk]
                at = [t + 1 for _, t in chunk]
            else:  # [SEP] x_<t: the next token predicted where it ends, at index t
                rows, at = [[tokenizer.sep_id, *ids[:t]] for ids, t in chunk], [t for _, t in chunk]
            x = pad(rows, tokenizer.pad_id).to(device)
            chosen = torch.zeros_like(x, dtype=torch.bool)
            chosen[torch.arange(len(chunk)), torch.tensor(at)] = True
            logits = model(x, pad_mask=(x != tokenizer.pad_id).long(), predict=chosen).logits  # (B, V)
            target = logits.gather(1, truth[:, None])  # (B, 1)
            ranks.append((logits > target).sum(1).cpu())
    return torch.cat(ranks) if ranks else torch.zeros(0, dtype=torch.long)


@torch.no_grad()
def cloze_accuracy(model, tokenizer: Tokenizer, texts: list[str], n: int = 500, seed: int = 0,
                   sides: str | None = None, batch_size: int = 32) -> float:
    """Top-1 accuracy at predicting ``n`` hidden tokens picked at random (with ``seed``) in ``texts``,
    each read as :func:`cloze_ranks` says for the model's family and ``sides``."""
    items = cloze_items(tokenizer, texts, n, seed, model.config.context)
    hits = int((cloze_ranks(model, tokenizer, items, sides, batch_size) == 0).sum())
    return hits / len(items)  # an exact fraction, not float32's nearest


#: The function words, short and long (articles, prepositions, pronouns, auxiliaries, conjunctions and
#: the like). What :func:`word_kind` calls a function word, and, for its words of five letters or
#: more, what the held-out cloze never hides (:func:`bertgpt.heldout.content_cloze_items`).
FUNCTION_WORDS = frozenset("""a an the this that these those and or but nor so yet of in on at by for
with from to into onto upon over under about between through during before after above below against
without within among i you he she it we they me him her us them my your his its our their is are was
were be been being am has have had do does did will would shall should can could may might must not no
as than if then there here which who whom whose what when where why how all any each both such
across again along around because behind beneath beside besides beyond except since though throughout
toward towards unless until while whereas whether whatever whenever wherever however therefore either
neither every never other others another ought rather theirs itself themselves ourselves yourself
herself himself""".split())
#: The kinds :func:`word_kind` sorts a word into.
WORD_KINDS = ("first word", "function word", "content word", "punctuation, numbers")


def word_kind(index: int, word: str) -> str:
    """Which of :data:`WORD_KINDS` a word is, from its place in its sentence (``index``, 0 for the
    first) and its spelling: anything not purely alphabetic is punctuation or numbers; otherwise the
    first word of a sentence, a word of :data:`FUNCTION_WORDS`, or a content word."""
    if not word.isalpha():
        return "punctuation, numbers"
    if index == 0:
        return "first word"
    return "function word" if word.lower() in FUNCTION_WORDS else "content word"


def shared_words(tokenizer_a: Tokenizer, tokenizer_b: Tokenizer, texts: list[str], context: int = 128):
    """The words that both tokenizers keep as one token, at the same place of the same text.

    Returns ``(items_a, items_b, words)``: ``items_a[i]`` and ``items_b[i]`` are ``(ids, t)`` for
    :func:`cloze_ranks`, the same word of the same text seen through each vocabulary, and ``words[i]``
    is ``(text index, word index in its text, the word as written)``. Each text is cut to
    ``context - 2`` tokens. Two models with different tokenizers can so be tested on the same positions.
    """
    def whole_words(tok, text):
        enc = tok.hf.encode(text, add_special_tokens=False)
        ids, offsets, word_ids = enc.ids[:context - 2], enc.offsets, enc.word_ids
        counts = {}
        for w in word_ids[:len(ids)]:
            counts[w] = counts.get(w, 0) + 1
        spans = {offsets[t]: (t, w) for t, w in enumerate(word_ids[:len(ids)])
                 if w is not None and counts[w] == 1 and ids[t] != tok.unk_id}
        return ids, spans

    items_a, items_b, words = [], [], []
    for i, text in enumerate(texts):
        ids_a, spans_a = whole_words(tokenizer_a, text)
        ids_b, spans_b = whole_words(tokenizer_b, text)
        for span in sorted(spans_a.keys() & spans_b.keys()):
            (t_a, w), (t_b, _) = spans_a[span], spans_b[span]
            items_a.append((ids_a, t_a))
            items_b.append((ids_b, t_b))
            words.append((i, w, text[span[0]:span[1]]))
    return items_a, items_b, words


@torch.no_grad()
def loss_by_position(model, batches) -> torch.Tensor:
    """Mean next-token loss (nats) at each position of ``batches`` of (inputs, targets) windows, (T,):
    how much a left-to-right model gains from seeing more of the window."""
    require_family(model, "gpt", "loss by position")
    device, total, n = device_of(model), 0.0, 0
    with eval_mode(model):
        for x, y in batches:
            logits = model(x.to(device)).logits.float()
            loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), y.to(device), reduction="none")
            total, n = total + loss.sum(0).cpu(), n + len(x)
    return total / n

# --- Generated text ---------------------------------------------------------------------------------


def _ngrams(words: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]


def distinct_n(texts: list[str], n: int = 2) -> float:
    """Distinct-n (Li et al., 2016): distinct word n-grams over all n-grams of ``texts`` together;
    near 0 when the outputs repeat themselves and each other, 1 when no n-gram comes twice."""
    grams = [g for t in texts for g in _ngrams(t.split(), n)]
    return len(set(grams)) / len(grams) if grams else 0.0


def repetition_rate(text: str, n: int = 3) -> float:
    """Share of the word n-grams of ``text`` that already occurred earlier in it (0: no loop)."""
    grams = _ngrams(text.split(), n)
    seen, repeats = set(), 0
    for g in grams:
        repeats += g in seen
        seen.add(g)
    return repeats / len(grams) if grams else 0.0


def doubled_words(text: str) -> float:
    """Share of the words of ``text`` that repeat the word just before them ("of of"): a crude mark
    of word salad, such as an MLM head guessing frequent tokens at every blank."""
    words = text.lower().split()
    return sum(a == b for a, b in zip(words, words[1:])) / max(len(words), 1)
