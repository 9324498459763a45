"""Held-out figures of a pretrained model, on the corpus's test documents: what a model card reports.

No test document is seen in pretraining (the split is by document, :mod:`bertgpt.corpus`), and
validation during training uses the validation documents, so these figures are scored on text
that chose nothing::

    heldout_metrics(bertgpt.pretrained("gpt-mini"))   # {"test_loss": ...}
    heldout_metrics(bertgpt.pretrained("bert-mini"))  # MLM two ways, NSP, the cloze

BERT's masked-token accuracy is given two ways, because they differ a great deal for a weak model:

- ``mlm_accuracy`` — every chosen token replaced by ``[MASK]``
  (:func:`~bertgpt.evaluate.masked_token_accuracy`): the model must restore what it cannot see.
- ``mlm_accuracy_80_10_10`` — BERT's own metric: the chosen tokens under the 80/10/10 rule, so the
  10% left unchanged are answered by copying the input, and count.
"""

from __future__ import annotations

import functools
import re

import torch

from .config import PretrainConfig
from .corpus import Corpus, load_corpus
from .data import bert_collate, document_sentences, gpt_eval_batches, nsp_pairs, token_stream
from .evaluate import FUNCTION_WORDS, masked_token_accuracy
from .generate import fill_mask
from .inputs import split_sentences
from .objectives import clm_loss, mlm_nsp_loss
from .trainer import validate

SEED = 1234  #: one draw of masks, pairs and cloze items for every model


def content_cloze_items(tokenizer, corpus: Corpus, n: int = 300, seed: int = SEED, max_tokens: int = 100):
    """``n`` (sentence with one ``[MASK]``, hidden word) pairs from the test documents.

    The hidden word has five letters or more, is not one of :data:`bertgpt.evaluate.FUNCTION_WORDS` and
    is one token of ``tokenizer``, so a single ``[MASK]`` stands for all of it; sentences and words are
    drawn at random.
    """
    g = torch.Generator().manual_seed(seed)
    sentences = [s for d in corpus.test for p in d.paragraphs for s in split_sentences(p)
                 if 8 <= len(s.split()) and len(tokenizer.encode(s)) <= max_tokens]
    items = []
    for i in torch.randperm(len(sentences), generator=g).tolist():
        words = sentences[i].split(" ")
        spots = [j for j, w in enumerate(words) if re.fullmatch(r"[A-Za-z]{5,}", w)
                 and w.lower() not in FUNCTION_WORDS and len(tokenizer.encode(w)) == 1]
        if spots:
            j = spots[int(torch.randint(len(spots), (1,), generator=g))]
            items.append((" ".join([*words[:j], "[MASK]", *words[j + 1:]]), words[j].lower()))
        if len(items) == n:
            break
    return items


def content_cloze(model, tokenizer, corpus: Corpus, n: int = 300, k: int = 5) -> float:
    """How often the hidden content word is among a BERT's ``k`` best candidates
    (:func:`~bertgpt.generate.fill_mask`)."""
    items = content_cloze_items(tokenizer, corpus, n)
    hits = sum(word in [t for t, _ in fill_mask(model, tokenizer, text, top_k=k)[0]] for text, word in items)
    return hits / len(items)


def test_pairs(tokenizer, corpus: Corpus, context: int, n: int = 2000, seed: int = SEED):
    """Up to ``n`` NSP pairs (A, B, is_next) drawn from the test documents as pretraining draws them."""
    g = torch.Generator().manual_seed(seed)
    return nsp_pairs(document_sentences(tokenizer, corpus.test), context - 3, g)[:n]


def heldout_metrics(checkpoint, corpus: Corpus | None = None, n_pairs: int = 2000) -> dict:
    """The card's figures for ``checkpoint`` on ``corpus``'s test documents (default: the addresses)."""
    corpus = corpus or load_corpus("sotu")
    model, tok = checkpoint.model, checkpoint.tokenizer
    context = model.config.context
    if model.family == "gpt":
        batches = gpt_eval_batches(token_stream(tok, corpus.test), context, 32, 10**6)
        out = validate(model, clm_loss, batches)
        return dict(test_loss=round(out["loss"], 4), test_tokens=sum(x.numel() for x, _ in batches))
    recipe = checkpoint.info.get("train")  # the rate its validation masked: the paper's 15%
    rate = PretrainConfig(**(recipe or {})).val_mask_rate
    pairs = test_pairs(tok, corpus, context, n_pairs)
    g = torch.Generator().manual_seed(SEED)
    batches = [bert_collate(pairs[i:i + 32], tok, rate, g) for i in range(0, len(pairs), 32)]
    own = validate(model, functools.partial(mlm_nsp_loss, nsp=model.config.nsp_head), batches)
    paragraphs = [p for d in corpus.test for p in d.paragraphs]
    has_head = model.config.nsp_head  # a BERT pretrained without NSP has no NSP figure
    nsp = dict(nsp_accuracy=round(own["nsp_accuracy"], 4), nsp_pairs=len(pairs)) if has_head else {}
    return dict(
        mlm_accuracy=round(masked_token_accuracy(model, tok, paragraphs, rate=rate, seed=SEED), 4),
        mlm_accuracy_80_10_10=round(own["mlm_accuracy"], 4), mlm_loss_80_10_10=round(own["mlm_loss"], 4),
        **nsp, content_top5=round(content_cloze(model, tok, corpus), 4), test_paragraphs=len(paragraphs))
