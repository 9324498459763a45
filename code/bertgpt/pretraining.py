"""Pretraining data and objectives for both families, as plain functions with explicit generators.

GPT (causal LM): contiguous windows over the tokenized training text; the target is the window
shifted by one. BERT (masked LM + next sentence): sentence pairs, half of them true continuations
and half with a second segment from another document, with 15% of positions chosen for
prediction (``mask_rate``; bert-mini departs from the paper with 40%), of which 80% become
``[MASK]``, 10% a random token and 10% stay as they are (``mask_split``; ``(1, 0, 0)`` is the
"always [MASK]" rule of the paper's appendix ablation). ``nsp=False`` is the "No NSP" row of its
Table 5: the MLM loss alone, on pairs whose B always follows A. ``short_fraction`` of the updates
come first, on sequences of ``short_length`` tokens, as BERT trained 90% of its steps at 128 of 512.

Masking is *dynamic* by default, as in RoBERTa (Liu et al., 2019): every pass over the documents
draws new pairs and new masks. BERT's own recipe is *static*: ``create_pretraining_data.py`` draws
``dupe_factor`` (10) masked copies of the data once, and training repeats them;
``bert_batches(..., dupe_factor=10)`` does the same, for comparison.

The losses and the masking live in :mod:`bertgpt.objectives` (re-exported here).
:func:`pretrain` puts the pieces together: corpus → tokenizer → model → :func:`bertgpt.trainer.train`;
with ``out``, it saves a checkpoint with the training state at every evaluation, and :func:`resume`
continues an interrupted run from it. :func:`continue_pretraining` starts from a pretrained checkpoint
instead of random weights and trains it further, with its family's objective and its own tokenizer,
on another corpus: ULMFiT's middle stage (Howard and Ruder, 2018), the "domain-adaptive pretraining"
of Gururangan et al. (2020). The weights at the updates ``PretrainConfig.snapshots`` names are
kept in the history (``history.snapshots``); :func:`bertgpt.hub.pretrained` saves them with the model.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import sys
import warnings

import torch

from .checkpoint import Checkpoint, CheckpointError, load, load_training_state, save
from .config import ModelConfig, PretrainConfig, TrainConfig, pretraining_model, train_config
from .corpus import Corpus, Document
from .device import default_device
from .inputs import Batch, bert_inputs, pad, split_sentences, truncate_pair
from .model import BERT, GPT, LSTMLM, build, count_parameters, dropout_rate
from .objectives import clm_loss, mask_tokens, mlm_nsp_loss, pretraining_loss  # noqa: F401 (re-exported)
from .tokenizer import Tokenizer, coverage, tokenizer_for
from .trainer import History, is_main, train, validate

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
    ``p_next`` go to :func:`~bertgpt.objectives.mask_tokens` and :func:`nsp_pairs`.
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


# --- Putting it together --------------------------------------------------------------------------

DEFAULT_TOKENIZER = {"gpt": "bpe", "bert": "wordpiece"}
VAL_MASK_RATE = 0.15  # validation masks the paper's rate, whatever the training rate, so accuracies compare


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
    val = [bert_collate(val_pairs[i:i + train_cfg.batch_size], tok, VAL_MASK_RATE, val_gen)
           for i in range(0, len(val_pairs), train_cfg.batch_size)]
    return train, val


def prepare(corpus: Corpus, cfg: ModelConfig, tokenizer: str | None = None, progress: bool = True):
    """(tokenizer, config): the family's tokenizer (trained on ``corpus`` once, then cached, with a bar
    while it trains where ``progress``) and ``cfg`` with the tokenizer's real vocabulary size. All a
    model needs before its weights."""
    tok = tokenizer_for(corpus, tokenizer or DEFAULT_TOKENIZER[cfg.default_family], cfg.vocab_size, progress)
    return tok, dataclasses.replace(cfg, vocab_size=tok.vocab_size)


def pretrain(corpus: Corpus, cfg: ModelConfig, train_cfg: PretrainConfig, *, tokenizer: str | None = None,
             device=None, progress: bool = True, out=None, until: int | None = None, on_snapshot=None):
    """Train a tokenizer (cached) and a model of ``cfg`` on ``corpus``.

    Returns ``(model, tokenizer, history)``; the model's vocabulary is the tokenizer's real size.
    With ``out`` (a directory), a checkpoint with the training state is saved there at every
    evaluation; :func:`resume` continues from it. ``until`` stops after that many of the recipe's
    updates (:func:`bertgpt.trainer.train`). ``on_snapshot(step, model, tokenizer)``, when given, is
    called at each of ``train_cfg.snapshots`` instead of keeping the weights in ``history.snapshots``
    (so that they can be written at once, and outlive an interruption).
    """
    tok, cfg = prepare(corpus, cfg, tokenizer, progress)
    cfg = pretraining_model(cfg, train_cfg)  # BERT's NSP head only where its recipe trains it
    torch.manual_seed(train_cfg.seed)
    model = build(cfg).to(device or default_device())
    options = dict(progress=progress, until=until, on_snapshot=on_snapshot)
    return model, tok, _train(model, tok, corpus, train_cfg, options, out)


def resume(directory, corpus: Corpus, *, device=None, progress: bool = True, until: int | None = None,
           on_snapshot=None):
    """Continue the interrupted :func:`pretrain` run saved in ``directory``, on the same ``corpus``.

    Returns what :func:`pretrain` returns; the weights are those the uninterrupted run reaches.
    ``until`` and ``on_snapshot`` are :func:`pretrain`'s.
    """
    ck = load(directory, device=device or default_device())
    state = load_training_state(directory)
    if ck.info.get("corpus_fingerprint") != corpus.fingerprint:
        raise CheckpointError(f"{str(directory)!r} was pretrained on another corpus than {corpus.name!r}: "
                              "resume it with the same --corpus")
    train_cfg = PretrainConfig(**ck.info["train"])
    options = dict(progress=progress, resume=state, until=until, on_snapshot=on_snapshot)
    history = _train(ck.model, ck.tokenizer, corpus, train_cfg, options, directory)
    return ck.model, ck.tokenizer, history


def continuation_config(checkpoint: Checkpoint, steps: int, **changes) -> PretrainConfig:
    """The training config for continuing ``checkpoint``: its own pretraining recipe (learning rate,
    batches, masking) where its info records one, else the mini recipe of its family; ``steps``
    updates, no snapshots, and ``changes`` (field -> value) on top."""
    recipe = checkpoint.info.get("train") or dataclasses.asdict(train_config("mini", checkpoint.model.family))
    cfg = PretrainConfig(**{**recipe, "snapshots": (), "steps": steps})
    cfg = dataclasses.replace(cfg, **changes)
    return dataclasses.replace(cfg, eval_every=min(cfg.eval_every, cfg.steps),
                               warmup=min(cfg.warmup, cfg.steps))


def continue_pretraining(checkpoint: Checkpoint, corpus: Corpus, train_cfg: PretrainConfig, *,
                         reference: Corpus | None = None, device=None, progress: bool = True, out=None):
    """Keep pretraining ``checkpoint`` on ``corpus``: same objective, same tokenizer, same config.

    The model starts from the checkpoint's weights (a copy: the checkpoint is left as it was) and
    trains for ``train_cfg.steps`` updates with its family's loss (GPT: next token; BERT: MLM + NSP).
    The vocabulary cannot change without new embeddings, so before training this measures how well
    the tokenizer covers the new text (:func:`~bertgpt.tokenizer.coverage`, beside the same figures
    on ``reference``, the corpus it was trained on, if given), prints it when ``progress`` is on,
    and warns when the tokenizer reads the text as unknowns or fragments. Returns what
    :func:`pretrain` returns; ``history.setup["coverage"]`` holds the measurement. With ``out``, the
    run is saved and resumable as :func:`pretrain`'s is.
    """
    model = checkpoint.model
    if not isinstance(model, (GPT, BERT, LSTMLM)):
        raise CheckpointError(f"continued pretraining needs a pretrained GPT or BERT, not a "
                              f"{type(model).__name__}: give the checkpoint it was fine-tuned from")
    if checkpoint.tokenizer.vocab_size != model.config.vocab_size:
        raise CheckpointError(f"the checkpoint's tokenizer has {checkpoint.tokenizer.vocab_size} tokens but "
                              f"its model {model.config.vocab_size}: they do not belong together")
    fit = tokenizer_fit(checkpoint.tokenizer, corpus, reference)
    if progress:
        print(describe_fit(fit, corpus.name), file=sys.stderr)
    model = copy.deepcopy(model).to(device or default_device())
    torch.manual_seed(train_cfg.seed)
    history = _train(model, checkpoint.tokenizer, corpus, train_cfg, dict(progress=progress), out)
    history.setup["coverage"] = fit
    return model, checkpoint.tokenizer, history


#: A tokenizer fits a corpus it was not trained on when it leaves at most this share of tokens unknown
#: and cuts at most this share of words into three pieces or more (the mini tokenizers of the
#: addresses cut 5% of the addresses' words so, and 10-12% of the King James Bible's).
FIT_LIMITS = dict(unknown_rate=0.005, split_words=0.15)


def tokenizer_fit(tok: Tokenizer, corpus: Corpus, reference: Corpus | None = None) -> dict:
    """:func:`~bertgpt.tokenizer.coverage` of ``corpus``'s training text (and ``reference``'s), warning
    when it passes :data:`FIT_LIMITS`."""
    fit = coverage(tok, _texts(corpus.train or corpus.documents))
    if reference is not None:
        fit["reference"] = dict(corpus=reference.name, **coverage(tok, _texts(reference.train)))
    poor = [f"{k} {fit[k]:.3g} > {limit}" for k, limit in FIT_LIMITS.items() if fit[k] > limit]
    if poor:
        warnings.warn(f"the tokenizer fits {corpus.name!r} poorly ({', '.join(poor)}): the model reads much "
                      "of it as unknowns or fragments; a model pretrained on it, with its own tokenizer "
                      "(pretrain --model ... --corpus), may serve better", stacklevel=3)
    return fit


def describe_fit(fit: dict, name: str) -> str:
    """One line for a person: tokens per word, unknown tokens, words in three pieces or more."""
    def line(f):
        return (f"{f['tokens_per_word']:.2f} tokens per word, {100 * f['unknown_rate']:.2f}% unknown, "
                f"{100 * f['split_words']:.1f}% of words in 3+ pieces")
    ref = fit.get("reference")
    return f"tokenizer on {name!r}: {line(fit)}" + (f" (on {ref['corpus']!r}: {line(ref)})" if ref else "")


def _texts(documents: list[Document]) -> list[str]:
    return [p for d in documents for p in d.paragraphs]


def _train(model, tok: Tokenizer, corpus: Corpus, train_cfg: PretrainConfig, options: dict, out) -> History:
    """The run :func:`pretrain`, :func:`resume` and :func:`continue_pretraining` share; ``options`` go
    to :func:`~bertgpt.trainer.train`."""
    train_batches, val_batches = pretraining_data(corpus, tok, model.config, train_cfg, model.family)
    loss_fn = pretraining_loss(model.family, train_cfg)

    def evaluate(run):
        metrics = validate(model, loss_fn, val_batches)
        if run.step in train_cfg.snapshots and options.get("on_snapshot"):
            options["on_snapshot"](run.step, model, tok)
        elif run.step in train_cfg.snapshots:  # in memory: a resumed run has only those after the restart
            weights = model.state_dict()
            run.history.snapshots[run.step] = {k: v.detach().cpu().clone() for k, v in weights.items()}
        if out is not None:  # a checkpoint to resume from, with this evaluation in its history
            state = run.state_dict()  # in every process (under torchrun it gathers their random states)
            state["history"]["val"].append(dict(step=run.step, **metrics))
            if is_main():  # one writer
                save(out, model, tok, training_state=state, corpus=corpus.name,
                     corpus_fingerprint=corpus.fingerprint, train=dataclasses.asdict(train_cfg))
        return metrics

    label = f"pretrain {model.family} ({count_parameters(model):,} params)"
    with dropout_rate(model, train_cfg.dropout):  # the saved model keeps its own rate for fine-tuning
        return train(model, loss_fn, train_batches, train_cfg, evaluate=evaluate, eval_at=train_cfg.snapshots,
                     progress=label if options["progress"] else False, resume=options.get("resume"),
                     until=options.get("until"))


def lm_training_speed(cfg: ModelConfig, stream: torch.Tensor, steps: int = 6, batch_size: int = 16,
                      seed: int = 0) -> float:
    """Tokens per second of ``steps`` language-model updates of a fresh model of ``cfg`` (GPT or LSTM)
    on windows of ``stream``, without dropout, on this machine now: for comparing architectures."""
    torch.manual_seed(seed)
    model = build(cfg).to(default_device())
    batches = gpt_batches(stream, cfg.context, batch_size, torch.Generator().manual_seed(seed))
    run = TrainConfig(steps=steps, batch_size=batch_size, warmup=1, seed=seed)
    with dropout_rate(model, 0.0):
        return train(model, clm_loss, batches, run, progress=False).tokens_per_second


def summary(model, history: History) -> dict:
    """The figures a pretraining run reports: final losses, size, speed, and BERT's accuracies."""
    last = history.val[-1] if history.val else {}
    out = dict(train_loss=history.train[-1]["loss"] if history.train else None,
               val_loss=last.get("loss"), steps=history.train[-1]["step"] if history.train else 0,
               params=count_parameters(model), tokens_per_second=round(history.tokens_per_second, 1),
               seconds=round(history.seconds, 1))
    for key in ("mlm_accuracy", "nsp_accuracy", "mlm_loss", "nsp_loss"):
        if key in last:
            out[key] = last[key]
    return out

