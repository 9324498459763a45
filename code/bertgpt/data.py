"""Pretraining data for both families, as plain functions of explicit generators: token streams and
GPT's windows, BERT's sentence pairs for next-sentence prediction, its masking and the fates of the
masked positions, and the batches that collate them::

    train, val = pretraining_data(corpus, tok, cfg, train_cfg)   # a family's endless batches and
                                                                 # its fixed validation batches
    inputs, labels = mask_tokens(ids, tok, rate=0.15, generator=g)

GPT (causal LM): contiguous windows over the tokenized training text; the target is the window
shifted by one. BERT (masked LM + next sentence): sentence pairs, half of them true continuations
and half with a second segment from another document, with 15% of positions chosen for
prediction (``mask_rate``; bert-mini departs from the paper with 40%), of which 80% become
``[MASK]``, 10% a random token and 10% stay as they are (``mask_split``; ``(1, 0, 0)`` is the
"always [MASK]" rule of the paper's appendix ablation). ``nsp=False`` is the "No NSP" row of its
Table 5: pairs whose B always follows A. ``short_fraction`` of the updates come first, on
sequences of ``short_length`` tokens, as BERT trained 90% of its steps at 128 of 512.

Masking is *dynamic* by default, as in RoBERTa (Liu et al., 2019): every pass over the documents
draws new pairs and new masks. BERT's own recipe is *static*: ``create_pretraining_data.py`` draws
``dupe_factor`` (10) masked copies of the data once, and training repeats them;
``bert_batches(..., dupe_factor=10)`` does the same, for comparison. Validation masks the paper's
15% (``PretrainConfig.val_mask_rate``) whatever the training rate, so that accuracies compare.
"""

from __future__ import annotations

import itertools
import warnings

import torch

from .config import ModelConfig, PretrainConfig
from .corpus import Corpus, Document
from .inputs import IGNORE, Batch, bert_inputs, pad, split_sentences, truncate_pair
from .tokenizer import Tokenizer

# --- GPT: a causal language model over a stream of tokens ---------------------------------------

def token_stream(tok: Tokenizer, documents: list[Document]) -> torch.Tensor:
    """All documents' tokens in one 1-D tensor, each document closed by ``[SEP]``."""
    ids = []
    for doc in documents:
        for para in tok.encode_batch(doc.paragraphs):
            ids.extend(para)
        ids.append(tok.sep_id)
    return torch.tensor(ids, dtype=torch.long)


def gpt_batches(stream: torch.Tensor, context: int, batch_size: int, generator: torch.Generator):
    """Endless random windows: inputs (B, T) and next-token targets (B, T)."""
    if len(stream) <= context + 1:
        raise ValueError(f"the text has {len(stream)} tokens, too few for windows of {context}: "
                         "use more text or a smaller context")
    offsets = torch.arange(context + 1)
    while True:
        starts = torch.randint(len(stream) - context - 1, (batch_size,), generator=generator)
        window = stream[starts[:, None] + offsets]  # (B, T + 1)
        yield window[:, :-1], window[:, 1:]


def gpt_eval_batches(stream: torch.Tensor, context: int, batch_size: int, n_batches: int):
    """Fixed, non-overlapping windows from the start of ``stream``: the same every evaluation."""
    n = min(n_batches * batch_size, (len(stream) - 1) // context)
    if n < 1:
        raise ValueError(f"the validation text has {len(stream)} tokens, too few for one window of {context}")
    window = stream[: n * context + 1]
    x, y = window[:-1].view(n, context), window[1:].view(n, context)
    return [(x[i:i + batch_size], y[i:i + batch_size]) for i in range(0, n, batch_size)]


# --- BERT: masked LM and next-sentence prediction ------------------------------------------------

def document_sentences(tok: Tokenizer, documents: list[Document]) -> list[list[list[int]]]:
    """Each document as a list of tokenized sentences (empty ones dropped)."""
    out = []
    for doc in documents:
        sentences = [s for p in doc.paragraphs for s in split_sentences(p)]
        out.append([ids for ids in tok.encode_batch(sentences) if ids])
    return out


def nsp_pairs(docs: list[list[list[int]]], max_tokens: int, generator: torch.Generator,
              p_next: float = 0.5):
    """Sentence pairs (A, B, is_next) for next-sentence prediction, in the spirit of BERT's recipe.

    A is a run of consecutive sentences; with probability ``p_next`` (1/2), B is what follows it in the same
    document (is_next=1), otherwise a run starting at a random sentence of another document
    (is_next=0). Pairs are trimmed to ``max_tokens``: A from its front, B from its back, so the
    junction between them, which the label is about, is kept.
    """
    if sum(1 for d in docs if d) < 2:
        raise ValueError("next-sentence pairs need at least two documents with text")

    def rand(n):
        return int(torch.randint(n, (1,), generator=generator))

    def run(sentences, start, budget):
        out, i = [], start
        while i < len(sentences) and len(out) < budget:
            out.extend(sentences[i])
            i += 1
        return out, i

    nonempty = [j for j, sentences in enumerate(docs) if sentences]
    pairs = []
    for d, sentences in enumerate(docs):
        i = 0
        while i < len(sentences) - 1:
            n_a, a_end, a = 1 + rand(3), i, []  # A: one to three sentences, leaving one for B
            while a_end < len(sentences) - 1 and a_end - i < n_a and len(a) < max_tokens // 2:
                a.extend(sentences[a_end])
                a_end += 1
            if float(torch.rand(1, generator=generator)) < p_next:
                b, i = run(sentences, a_end, max_tokens - len(a))
                is_next = 1
            else:
                other = d
                while other == d:  # any document but this one
                    other = nonempty[rand(len(nonempty))]
                b, _ = run(docs[other], rand(len(docs[other])), max_tokens - len(a))
                is_next, i = 0, a_end  # B's sentences of this document stay for later pairs
            a, b = truncate_pair(a, b, max_tokens)
            if a and b:
                pairs.append((a, b, is_next))
    return pairs


def bert_collate(pairs, tok: Tokenizer, rate: float, generator, split=(0.8, 0.1, 0.1)) -> Batch:
    """A batch dict from NSP pairs, with a fresh mask drawn for it."""
    encoded = [bert_inputs(tok, a, b) for a, b, _ in pairs]
    ids = pad([e[0] for e in encoded], tok.pad_id)
    inputs, labels = mask_tokens(ids, tok, rate, generator, split)
    return Batch(input_ids=inputs, segments=pad([e[1] for e in encoded], 0),
                 pad_mask=(ids != tok.pad_id).long(), labels=labels,
                 is_next=torch.tensor([p[2] for p in pairs], dtype=torch.long))


def bert_batches(docs, tok: Tokenizer, context: int, batch_size: int, rate: float, generator,
                 dupe_factor: int = 0, split=(0.8, 0.1, 0.1), p_next: float = 0.5):
    """Endless batches of NSP pairs with masks.

    Dynamic masking (``dupe_factor=0``, RoBERTa's): every pass draws new pairs, a new order and new
    masks. Static masking (``dupe_factor`` N, BERT's): N passes are drawn once and then repeated,
    the same pairs with the same masks, in a new order of batches each round. ``split`` and
    ``p_next`` go to :func:`mask_tokens` and :func:`nsp_pairs`.
    """
    def one_pass():
        pairs = nsp_pairs(docs, context - 3, generator, p_next)
        if len(pairs) < batch_size:
            raise ValueError(f"only {len(pairs)} sentence pairs for batches of {batch_size}: "
                             "use more text or a smaller batch_size")
        order = torch.randperm(len(pairs), generator=generator).tolist()
        for s in range(0, len(order) - batch_size + 1, batch_size):
            yield bert_collate([pairs[i] for i in order[s:s + batch_size]], tok, rate, generator, split)

    if not dupe_factor:
        while True:
            yield from one_pass()
    drawn = [batch for _ in range(dupe_factor) for batch in one_pass()]
    while True:
        for i in torch.randperm(len(drawn), generator=generator).tolist():
            yield drawn[i]


def mask_tokens(ids: torch.Tensor, tok: Tokenizer, rate: float, generator=None,
                split: tuple[float, float, float] = (0.8, 0.1, 0.1)):
    """BERT's corruption: (inputs, labels) for token ids (B, T).

    In each row ``round(rate * n)`` of its n ordinary tokens are chosen (at least one); special tokens
    and padding never are. A chosen token becomes ``[MASK]`` with probability ``split[0]`` (0.8), a
    random ordinary token with ``split[1]`` (0.1), and stays itself with ``split[2]`` (0.1). Labels
    hold the original token where chosen and ``IGNORE`` elsewhere.
    """
    if not 0 < rate < 1:
        raise ValueError(f"mask rate must lie strictly between 0 and 1, not {rate}")
    maskable = ids >= tok.n_special
    scores = torch.rand(ids.shape, generator=generator).masked_fill(~maskable, 2.0)
    n_chosen = (maskable.sum(1) * rate).round().clamp(min=1)
    rank = scores.argsort(1).argsort(1)  # each position's place in its row's random order
    chosen = (rank < n_chosen[:, None]) & maskable
    labels = torch.where(chosen, ids, IGNORE)
    action = torch.rand(ids.shape, generator=generator)
    inputs = ids.clone()
    to_mask, to_random = split[0], split[0] + split[1]
    inputs[chosen & (action < to_mask)] = tok.mask_id
    randomized = chosen & (action >= to_mask) & (action < to_random)
    inputs[randomized] = torch.randint(tok.n_special, tok.vocab_size, (int(randomized.sum()),),
                                       generator=generator)
    return inputs, labels


FATES = ("not chosen", "[MASK]", "random", "kept")  #: what :func:`mask_tokens` does at a position


def mask_fates(ids: torch.Tensor, inputs: torch.Tensor, labels: torch.Tensor,
               tok: Tokenizer) -> list[list[str]]:
    """Each position's fate under :func:`mask_tokens`, one of :data:`FATES`, for ids (B, T) and the
    ``(inputs, labels)`` it returned. A random replacement that drew the original token back reads
    as kept, since the model sees the same input either way."""
    chosen = labels != IGNORE
    fate = torch.where(inputs == tok.mask_id, 1, torch.where(inputs == ids, 3, 2))
    fate = torch.where(chosen, fate, 0)
    return [[FATES[int(f)] for f in row] for row in fate]


# --- Both families -------------------------------------------------------------------------------

#: The rate that validation and the held-out figures mask, the paper's 15%, whatever the training rate.
VAL_MASK_RATE = PretrainConfig.val_mask_rate


def pretraining_data(corpus: Corpus, tok: Tokenizer, cfg: ModelConfig, train_cfg: PretrainConfig,
                     family: str | None = None):
    """(training batches, validation batches) for a model of ``family`` (default: the one ``cfg``
    builds) and shape ``cfg``; seeded by ``train_cfg.seed``."""
    g = torch.Generator().manual_seed(train_cfg.seed)
    if not corpus.train:
        raise ValueError(f"corpus {corpus.name!r} has no training document: its {len(corpus.documents)} "
                         "documents all fall in the validation or test split; give more documents")
    val_docs = corpus.val
    if not val_docs:
        warnings.warn(f"corpus {corpus.name!r} has no validation document; validating on training text",
                      stacklevel=2)
        val_docs = corpus.train
    if (family or cfg.default_family) == "gpt":
        train = gpt_batches(token_stream(tok, corpus.train), cfg.context, train_cfg.batch_size, g)
        val = gpt_eval_batches(token_stream(tok, val_docs), cfg.context, train_cfg.batch_size,
                               train_cfg.eval_batches)
        return train, val
    docs = document_sentences(tok, corpus.train)
    short = round(train_cfg.short_fraction * train_cfg.steps * train_cfg.accumulate)  # micro-batches
    recipe = dict(split=train_cfg.mask_split, p_next=0.5 if train_cfg.nsp else 1.0)
    train = itertools.chain(  # short sequences first, then the model's full context (BERT's schedule)
        itertools.islice(bert_batches(docs, tok, min(train_cfg.short_length, cfg.context),
                                      train_cfg.batch_size, train_cfg.mask_rate, g, **recipe), short),
        bert_batches(docs, tok, cfg.context, train_cfg.batch_size, train_cfg.mask_rate, g, **recipe))
    val_gen = torch.Generator().manual_seed(10_000 + train_cfg.seed)  # fixed pairs and masks
    val_pairs = nsp_pairs(document_sentences(tok, val_docs), cfg.context - 3, val_gen)
    val_pairs = val_pairs[: train_cfg.eval_batches * train_cfg.batch_size]
    val = [bert_collate(val_pairs[i:i + train_cfg.batch_size], tok, train_cfg.val_mask_rate, val_gen)
           for i in range(0, len(val_pairs), train_cfg.batch_size)]
    return train, val
