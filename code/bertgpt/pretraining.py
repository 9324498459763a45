"""Pretraining runs for both families: data, objective and loop put together.

The data (GPT's windows, BERT's masked sentence pairs) lives in :mod:`bertgpt.data` and the losses
in :mod:`bertgpt.objectives`; both are re-exported here, where the chapters import them.
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
import platform
import shutil
import sys
import warnings
from pathlib import Path

import torch

from .cache import same_recipe
from .checkpoint import Checkpoint, CheckpointError, load, load_training_state, read_info, save
from .config import ModelConfig, PretrainConfig, TrainConfig, pretraining_model, train_config
from .corpus import Corpus, Document
from .data import (  # noqa: F401  the data of pretraining, re-exported: chapters import it from here
    FATES,
    VAL_MASK_RATE,
    bert_batches,
    bert_collate,
    document_sentences,
    gpt_batches,
    gpt_eval_batches,
    mask_fates,
    mask_tokens,
    nsp_pairs,
    pretraining_data,
    token_stream,
)
from .device import default_device, device_of, is_main
from .model import BERT, GPT, LSTMLM, build, count_parameters, dropout_rate
from .objectives import (  # noqa: F401 (re-exported)
    ReplacedTokenDetection,
    clm_loss,
    mlm_nsp_loss,
    pretraining_loss,
    rtd_loss,
)
from .registry import DEFAULT_TOKENIZER
from .tokenizer import Tokenizer, coverage, tokenizer_for
from .trainer import History, train, validate

# --- Putting it together --------------------------------------------------------------------------


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
    if ck.info.get("objective") == "rtd":  # ELECTRA's: the whole pair is in the training state
        pair = ReplacedTokenDetection(ck.model.config, ck.info["width"]).to(device or default_device())
        pair.load_state_dict(state.pop("pair"))
        return _train_electra(pair, ck.tokenizer, corpus, train_cfg, options, directory)
    history = _train(ck.model, ck.tokenizer, corpus, train_cfg, options, directory)
    return ck.model, ck.tokenizer, history


def pretraining_run(corpus: Corpus, cfg: ModelConfig | None, train_cfg: PretrainConfig | None, out, *,
                    work=None, tokenizer: str | None = None, device=None, progress: bool = True,
                    until: int | None = None, on_snapshot=None, width: float | None = None,
                    **record) -> tuple[Checkpoint, History]:
    """Start a pretraining run, or go on with an interrupted one: how the command line and the cache
    (:func:`bertgpt.hub.pretrained`) both run one.

    The run keeps a resumable checkpoint in ``work`` (default ``out``) at every evaluation. When
    ``work`` holds an interrupted run, it goes on from there (:func:`resume`); a damaged one starts
    again, with a warning. Otherwise it starts (:func:`pretrain`) with ``cfg`` and ``train_cfg``; None
    for both means only an interrupted run may be continued. A ``work`` that holds a finished model,
    or an interrupted run of another recipe than ``cfg`` and ``train_cfg``, is refused, never
    overwritten. Unless stopped at ``until``, the main process saves the finished model in ``out``
    with its :class:`RunRecord` (``record``: the record's optional fields, e.g. ``name``) and removes
    ``work`` if it is another directory. Returns (the checkpoint, its info the record; the history).
    A ``width`` makes it ELECTRA's run (:func:`pretrain_electra`, a generator that wide), which
    resumes in the same way; the finished model is the discriminator.
    """
    work = Path(work or out)
    if width is not None and train_cfg is not None:
        train_cfg = dataclasses.replace(train_cfg, nsp=False)  # ELECTRA's recipe has no NSP
    going_on = _interrupted(work, cfg, train_cfg, width)
    if going_on:
        model, tok, history = resume(work, corpus, device=device, progress=progress, until=until,
                                     on_snapshot=on_snapshot)
        train_cfg = PretrainConfig(**read_info(work)["train"])
    elif cfg is None or train_cfg is None:
        raise CheckpointError(f"{str(work)!r} holds no interrupted run: nothing to resume")
    elif width is not None:
        model, tok, history = pretrain_electra(corpus, cfg, train_cfg, width=width, tokenizer=tokenizer,
                                               device=device, progress=progress, until=until, out=work)
    else:
        model, tok, history = pretrain(corpus, cfg, train_cfg, tokenizer=tokenizer, device=device,
                                       progress=progress, out=work, until=until, on_snapshot=on_snapshot)
    if until is not None or not is_main():
        return Checkpoint(model, tok, {}), history
    run = save_run(out, model, tok, history, corpus, dataclasses.asdict(train_cfg), **record)
    if work != Path(out):
        shutil.rmtree(work, ignore_errors=True)
    return Checkpoint(model, tok, dataclasses.asdict(run)), history


def _interrupted(work: Path, cfg: ModelConfig | None, train_cfg: PretrainConfig | None,
                 width: float | None = None) -> bool:
    """Whether ``work`` holds an interrupted run to go on from: of the recipe ``cfg`` and ``train_cfg``
    (and ELECTRA's generator ``width``) where they are given. A directory with a finished model, or a
    run of another recipe, is refused; a damaged run is not one (it starts again, with a warning)."""
    if not work.exists():
        return False
    if not (work / "training.pt").exists():
        if (work / "config.json").exists() and cfg is not None:
            raise CheckpointError(f"{str(work)!r} holds a finished model: write the new run elsewhere, or "
                                  "delete it first")
        return False
    try:
        info = load(work).info
    except CheckpointError as exc:
        warnings.warn(f"training {work.name} again from the start: {exc}", stacklevel=3)
        return False
    if cfg is not None and train_cfg is not None:
        if not same_recipe(info, pretraining_model(cfg, train_cfg), train_cfg) or info.get("width") != width:
            raise CheckpointError(f"{str(work)!r} holds an interrupted run of another recipe: go on with it "
                                  "(pretrain --resume) or write the new run elsewhere")
    return True


def pretrain_electra(corpus: Corpus, cfg: ModelConfig, train_cfg: PretrainConfig, *, width: float = 0.5,
                     tokenizer: str | None = None, device=None, progress: bool = True,
                     until: int | None = None, out=None):
    """Pretrain a BERT of ``cfg`` as ELECTRA's discriminator (Clark et al., 2020): replaced-token
    detection with a generator ``width`` times as wide (:class:`~bertgpt.objectives.ReplacedTokenDetection`),
    on BERT's masked inputs at ``train_cfg.mask_rate``, without NSP. Returns ``(discriminator,
    tokenizer, history)``, as :func:`pretrain` does (``until`` too); the discriminator fine-tunes as
    any BERT, and the generator and the detection head are dropped. With ``out``, a checkpoint is
    saved there at every evaluation, the discriminator as its model and the whole pair in its
    training state, and :func:`resume` goes on from it."""
    tok, cfg = prepare(corpus, cfg, tokenizer, progress)
    train_cfg = dataclasses.replace(train_cfg, nsp=False)
    torch.manual_seed(train_cfg.seed)
    pair = ReplacedTokenDetection(cfg, width).to(device or default_device())
    return _train_electra(pair, tok, corpus, train_cfg, dict(progress=progress, until=until), out)


def _train_electra(pair: ReplacedTokenDetection, tok: Tokenizer, corpus: Corpus, train_cfg: PretrainConfig,
                   options: dict, out) -> tuple:
    """The run :func:`pretrain_electra` and :func:`resume` share, as :func:`_train` is the language
    models'."""
    train_batches, val_batches = pretraining_data(corpus, tok, pair.discriminator.config, train_cfg, "bert")

    def evaluate(run):
        metrics = validate(pair, rtd_loss, val_batches)
        if out is not None:  # the discriminator is the model; the whole pair goes in the training state
            _keep_resumable(out, run, metrics, pair.discriminator, tok, corpus, train_cfg,
                            dict(pair=pair.state_dict()), objective="rtd", width=pair.width)
        return metrics

    sizes = count_parameters(pair.discriminator), count_parameters(pair.generator)
    label = f"pretrain ELECTRA ({sizes[0]:,} + {sizes[1]:,} params)"
    with dropout_rate(pair, train_cfg.dropout):
        history = train(pair, rtd_loss, train_batches, train_cfg, evaluate=evaluate,
                        progress=label if options["progress"] else False, resume=options.get("resume"),
                        until=options.get("until"))
    return pair.discriminator.eval(), tok, history


def as_masked_lm(checkpoint: Checkpoint, seed: int = 0) -> Checkpoint:
    """A left-to-right Transformer rebuilt as a masked language model with the same weights, to go on
    with BERT's objective: "causal, then masked" (e.g. bert-mini-ltr, trained left to right on
    WordPiece tokens). Attention reads both sides; a table of two segment embeddings starts at zero,
    so it adds nothing until trained; the masked-LM head's transform starts from a seeded random
    initialisation, its output layer tied to the token embedding as before; no NSP head. The info
    keeps the recipe, without next-sentence prediction, so :func:`continue_pretraining` trains the
    masked LM alone."""
    model, tok = checkpoint.model, checkpoint.tokenizer
    if not isinstance(model, GPT) or model.config.arch != "transformer":
        raise CheckpointError(f"as_masked_lm rebuilds a left-to-right Transformer (a GPT), not a "
                              f"{type(model).__name__}")
    cfg = dataclasses.replace(model.config, causal=False, segments=2, nsp_head=False)
    torch.manual_seed(seed)
    masked = build(cfg, "bert")
    missing, unexpected = masked.load_state_dict(model.state_dict(), strict=False)
    assert unexpected == ["lm_head.weight"], unexpected  # tied to the token embedding, which is kept
    assert all(k.startswith(("mlm_", "backbone.seg_emb")) for k in missing), missing
    torch.nn.init.zeros_(masked.backbone.seg_emb.weight)
    train = {**checkpoint.info.get("train", {}), "nsp": False}
    return Checkpoint(masked.to(device_of(model)).eval(), tok, {**checkpoint.info, "train": train,
                                                                "family": "bert", "rebuilt_from": "causal"})


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
        if out is not None:
            _keep_resumable(out, run, metrics, model, tok, corpus, train_cfg)
        return metrics

    label = f"pretrain {model.family} ({count_parameters(model):,} params)"
    with dropout_rate(model, train_cfg.dropout):  # the saved model keeps its own rate for fine-tuning
        return train(model, loss_fn, train_batches, train_cfg, evaluate=evaluate, eval_at=train_cfg.snapshots,
                     progress=label if options["progress"] else False, resume=options.get("resume"),
                     until=options.get("until"))


def _keep_resumable(out, run, metrics: dict, model, tok: Tokenizer, corpus: Corpus, train_cfg: PretrainConfig,
                    extra_state: dict | None = None, **info) -> None:
    """Save in ``out`` a checkpoint to resume from, with this evaluation in its history: ``model``,
    the run's state (and ``extra_state``), the corpus and the recipe. Every process gathers its state
    (under torchrun, their random states); the main one writes."""
    state = dict(run.state_dict(), **(extra_state or {}))
    state["history"]["val"].append(dict(step=run.step, **metrics))
    if is_main():
        save(out, model, tok, training_state=state, corpus=corpus.name, corpus_fingerprint=corpus.fingerprint,
             train=dataclasses.asdict(train_cfg), **info)


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


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """What a finished pretraining run writes beside its weights (the checkpoint's ``info``), whoever
    ran it: the command line (``bertgpt pretrain``) or the cache (:func:`bertgpt.hub.pretrained`)."""

    corpus: str               # its name
    corpus_fingerprint: str   # a hash of its content: what resume and the cache check
    train: dict               # the PretrainConfig, as a dict: the recipe
    metrics: dict             # summary(): final losses, size, speed and the seconds it took
    history: dict             # every training and validation record, and the tokens read by each
    machine: str              # where it ran: system, processor, threads, torch
    name: str = ""            # the named model it is (the cache), or "" (a run of the command line)
    changes: dict = dataclasses.field(default_factory=dict)  # its changes to that name's recipe
    init: str = ""            # a continued run's start: the checkpoint or cache entry, or ""
    base: str = ""            # the corpus that start was pretrained on, or ""
    start: dict = dataclasses.field(default_factory=dict)  # its validation figures here, before updating
    coverage: dict = dataclasses.field(default_factory=dict)  # its tokenizer's fit here and to base
    step: int = 0             # the updates it made
    tokenizer_kind: str = ""  # bertgpt.tokenizer.KINDS


def save_run(out, model, tok: Tokenizer, history: History, corpus: Corpus, train: dict,
             **fields) -> RunRecord:
    """Save a finished run's model and tokenizer in ``out`` with its :class:`RunRecord` (``fields``: the
    record's optional ones), no training state; returns the record."""
    metrics = summary(model, history)
    machine = (f"{platform.system()} {platform.machine()}, {torch.get_num_threads()} threads, "
               f"torch {torch.__version__}")
    record = RunRecord(corpus=corpus.name, corpus_fingerprint=corpus.fingerprint, train=train,
                       metrics=metrics, machine=machine,
                       history=dict(train=history.train, val=history.val, tokens=history.tokens),
                       step=metrics["steps"], tokenizer_kind=tok.kind, **fields)
    save(out, model.cpu(), tok, **dataclasses.asdict(record))
    return record
