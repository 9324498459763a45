"""Fine-tuning, each paper's way: a pretrained GPT or BERT plus one linear layer, trained end to end.

GPT-1 turns every task into one token sequence, ``[START] text [DELIM] text_b [EXTRACT]``, and reads
a linear classifier off the last block's state at the ``[EXTRACT]`` token; it keeps the language
model's own loss as an auxiliary objective, L = L_task + λ·L_LM (λ = ``lm_coef``, 0.5 in the paper).
BERT packs ``[CLS] text [SEP] text_b [SEP]`` with segment ids 0 and 1 and classifies the pooled
``[CLS]`` state; it has no auxiliary loss. Both put dropout 0.1 in front of the classifier. On a
two-class pair task a GPT decides by default through its own language model instead
(:class:`GainClassifier`): GPT-1's new head stayed at chance there, where the model's likelihood
already knew the answer (the measurement is in :class:`~bertgpt.config.FinetuneConfig`)::

    clf, result = finetune(pretrained("gpt-mini"), load_task("era").subsample(300))
    result["test_accuracy"], result["majority_baseline"]
    clf, result = finetune(untrained("bert-mini"), task, FinetuneConfig(lr=1e-3), from_scratch=True)

A run is one call of :func:`bertgpt.trainer.train`, as both papers fine-tune: one AdamW and one
schedule (linear warm-up, then linear decay to zero at the last epoch). Validation accuracy after
each epoch keeps the best weights and stops the run after ``patience`` epochs without improvement.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from .cache import digest, kept
from .checkpoint import Checkpoint, load, save
from .config import FINETUNE_LR, FinetuneConfig, ModelConfig, TrainConfig
from .device import default_device, device_of, eval_mode, to_device, training_threads
from .inputs import IGNORE, Batch, collate, pack_examples, pad  # the packing lives on the bottom floor
from .model import build, init_weights, pooler
from .stats import accuracy, best_threshold, f1
from .tasks import Example, Tagged, Task
from .tokenizer import Tokenizer
from .trainer import KeepBest, train

# --- The classifier ------------------------------------------------------------------------------------

#: What the classifier reads. "summary" is each paper's own (GPT-1 reads the state at ``[EXTRACT]``,
#: BERT the pooled ``[CLS]`` state); "mean" averages the last layer's states over real tokens; "gain",
#: for a GPT on a two-class pair task, is its own language model's log p(B | A) - log p(B)
#: (:class:`GainClassifier`).
READOUTS = ("summary", "mean", "gain")


def last_token_states(hidden: torch.Tensor, pad_mask: torch.Tensor) -> torch.Tensor:
    """(B, d): each row's state at its last real token (``pad_mask`` (B, T) is 1 there and 0 on the
    padding after it), GPT-1's ``[EXTRACT]``."""
    return hidden[torch.arange(hidden.size(0), device=hidden.device), pad_mask.sum(1) - 1]


class Classifier(nn.Module):
    """A pretrained GPT or BERT with a linear classifier on its sequence summary, or on every token.

    GPT: the last block's state at the ``[EXTRACT]`` token (the last real token of each row).
    BERT: the pooled ``[CLS]`` state. ``lm_coef`` (λ) weights GPT's auxiliary LM loss; 0 removes it.
    ``per_token``: the same linear layer on the last block's state at every position (BERT's head
    for token-level tasks, section 4.3; for GPT each position has read only what precedes it).
    """

    starts_trained = False  #: whether the classifier decides before its first update (GainClassifier)

    def __init__(self, model, tokenizer: Tokenizer, labels, lm_coef: float = 0.5, dropout: float = 0.1,
                 per_token: bool = False, readout: str = "summary"):
        super().__init__()
        if model.family == "bert" and lm_coef:
            raise ValueError("BERT fine-tunes without an auxiliary language-model loss: use lm_coef=0")
        if readout not in ("summary", "mean"):
            hint = " (the gain readout is GainClassifier's; classifier_for picks the class)" \
                if readout == "gain" else ""
            raise ValueError(f"readout must be one of {', '.join(READOUTS)}, not {readout!r}{hint}")
        self.model, self.tokenizer = model, tokenizer
        self.labels = tuple(labels)
        self.lm_coef = float(lm_coef)
        self.per_token = per_token
        self.readout = readout
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(model.config.d_model, len(self.labels))
        init_weights(self.head)
        # BERT summarises [CLS] through its pooler; one pretrained without NSP has none, and gets a new one
        self.pooler = None
        if model.family == "bert" and not model.config.nsp_head:
            self.pooler = pooler(model.config.d_model)
            init_weights(self.pooler[0])

    @property
    def config(self) -> ModelConfig:
        return self.model.config

    @property
    def family(self) -> str:
        return self.model.family

    def pack(self, examples: list[Example]):
        return pack_examples(self.tokenizer, self.family, self.config.context, examples)

    def collate(self, rows) -> Batch:
        return collate(rows, self.tokenizer)

    def _forward(self, batch: Batch, predict):
        """(class logits (B, n_classes) or (B, T, n_classes), the model's output with LM logits where
        ``predict``)."""
        out = self.model(batch["input_ids"], segments=batch.get("segments"), pad_mask=batch["pad_mask"],
                         predict=predict)
        if self.readout == "mean":  # every real token's state, averaged
            keep = batch["pad_mask"].unsqueeze(-1).to(out.hidden.dtype)
            summary = (out.hidden * keep).sum(1) / keep.sum(1)  # (B, d)
        elif self.family == "gpt":  # the state at [EXTRACT], each row's last real token
            summary = last_token_states(out.hidden, batch["pad_mask"])  # (B, d)
        else:
            summary = out.pooled if self.pooler is None else self.pooler(out.hidden[:, 0])
        return self.head(self.drop(out.hidden if self.per_token else summary)), out

    def forward(self, batch: Batch, with_loss: bool = False):
        """Class logits (B, n_classes), or (B, T, n_classes) ``per_token``; with ``with_loss``,
        :meth:`loss`'s (loss, metrics) instead, so that the trainer's wrapped module computes it."""
        return self.loss(batch) if with_loss else self._forward(batch, predict=False)[0]

    def loss(self, batch: Batch):
        """L_task (+ λ·L_LM for GPT when λ > 0), and the batch's accuracy (of the scored tokens)."""
        chosen = batch["lm_labels"] != IGNORE if self.lm_coef else False
        logits, out = self._forward(batch, predict=chosen)
        logits, labels = logits.float(), batch["label"]
        if self.per_token:
            scored = labels != IGNORE
            logits, labels = logits[scored], labels[scored]
        task = F.cross_entropy(logits, labels)
        metrics = dict(task_loss=task.detach(), accuracy=(logits.argmax(-1) == labels).float().mean())
        if not self.lm_coef:
            return task, metrics
        lm = F.cross_entropy(out.logits.float(), batch["lm_labels"][chosen])
        metrics["lm_loss"] = lm.detach()
        return task + self.lm_coef * lm, metrics


class GainClassifier(Classifier):
    """A GPT on a two-class pair task that decides through its language model, not a new head.

    The score is what the zero-shot reading of ``next`` uses (:func:`bertgpt.zeroshot.context_gains`):
    how much text A raises the log-probability of text B's first tokens, log p(B | A) - log p(B),
    from two passes, ``[SEP] A B`` and ``[SEP] B``. Class 1's logit over class 0's is
    ``scale · (gain - shift)``; :meth:`start_from` sets the two from the training examples' gains
    before the first update, so that fine-tuning starts where the zero-shot reading stands, and
    then trains the whole language model to widen the gap. GPT-1's ``[EXTRACT]`` head instead
    starts from nothing and must learn from the labels alone to compare two likelihoods inside one
    state. λ's auxiliary loss reads the ``[SEP] A B`` pass.
    """

    SPAN = 60  #: tokens of A (its last) and of B (its first) that are read, as the zero-shot's
    starts_trained = True  #: :meth:`start_from` sets its decision before the first update

    def __init__(self, model, tokenizer: Tokenizer, labels, lm_coef: float = 0.5, dropout: float = 0.1,
                 per_token: bool = False, readout: str = "gain"):
        if model.family != "gpt" or len(labels) != 2 or per_token:
            raise ValueError("the gain readout serves a GPT on a two-class pair task (text, text_b): use "
                             "readout='summary' for other tasks and for BERT")
        super().__init__(model, tokenizer, labels, lm_coef, dropout)
        self.readout, self.head = "gain", None
        self.scale, self.shift = nn.Parameter(torch.ones(())), nn.Parameter(torch.zeros(()))

    def pack(self, examples: list[Example]):
        """``([SEP] A B, [SEP] B, label)`` rows, A cut to its last tokens and B to its first."""
        if any(e.text_b is None for e in examples):
            raise ValueError("the gain readout needs pairs: every example must have a text_b")
        tok, span = self.tokenizer, min(self.SPAN, (self.config.context - 1) // 2)
        texts_a = tok.encode_batch([e.text for e in examples])
        texts_b = tok.encode_batch([e.text_b for e in examples])
        return [([tok.sep_id, *a[-span:], *b[:span]], [tok.sep_id, *b[:span]], e.label)
                for e, a, b in zip(examples, texts_a, texts_b)]

    def collate(self, rows) -> Batch:
        """Both passes padded, with ``scored`` marking B's tokens in each."""
        batch = collate([(r[0], None, r[2]) for r in rows], self.tokenizer)  # lm_labels from [SEP] A B
        alone = pad([r[1] for r in rows], self.tokenizer.pad_id)
        n_b = [len(r[1]) - 1 for r in rows]
        at = torch.arange(batch["input_ids"].size(1))
        ends = torch.tensor([len(r[0]) for r in rows])[:, None]
        batch["scored"] = (at >= ends - torch.tensor(n_b)[:, None]) & (at < ends)
        batch["alone_ids"] = alone
        batch["alone_scored"] = (torch.arange(alone.size(1)) >= 1) & (alone != self.tokenizer.pad_id)
        return batch

    def gains(self, batch: Batch):
        """(log p(B | A) - log p(B) of each row (B,), the ``[SEP] A B`` pass's output)."""
        out = self.model(batch["input_ids"], pad_mask=batch["pad_mask"])
        alone = self.model(batch["alone_ids"], pad_mask=(batch["alone_ids"] != self.tokenizer.pad_id).long())
        with_a = _target_log_probs(out.logits, batch["input_ids"], batch["scored"])
        return with_a - _target_log_probs(alone.logits, batch["alone_ids"], batch["alone_scored"]), out

    def _forward(self, batch: Batch, predict):
        gain, out = self.gains(batch)
        logit = self.scale * (gain - self.shift)
        return torch.stack([torch.zeros_like(logit), logit], dim=-1), out

    def loss(self, batch: Batch):
        logits, out = self._forward(batch, predict=True)
        labels = batch["label"]
        task = F.cross_entropy(logits.float(), labels)
        metrics = dict(task_loss=task.detach(), accuracy=(logits.argmax(-1) == labels).float().mean())
        if not self.lm_coef:
            return task, metrics
        chosen = batch["lm_labels"] != IGNORE
        lm = F.cross_entropy(out.logits[chosen].float(), batch["lm_labels"][chosen])
        metrics["lm_loss"] = lm.detach()
        return task + self.lm_coef * lm, metrics

    @torch.no_grad()
    def start_from(self, examples: list[Example], batch_size: int = 64) -> None:
        """Set ``shift`` to the cut between the training examples' gains that best separates their
        labels, and ``scale`` so that one standard deviation of the gains is a logit of 2."""
        rows, gains = self.pack(examples), []
        with eval_mode(self):
            for s in range(0, len(rows), batch_size):
                batch = to_device(self.collate(rows[s:s + batch_size]), device_of(self))
                gains += self.gains(batch)[0].float().tolist()
        self.shift.fill_(best_threshold(gains, [e.label for e in examples]))
        self.scale.fill_(2.0 / max(float(torch.tensor(gains).std()), 1e-6))


def _target_log_probs(logits, ids, scored):
    """The summed log-probability (B,) a left-to-right model's ``logits`` (B, T, V) give to the
    tokens of ``ids`` (B, T) where ``scored`` is True (each predicted from the position before)."""
    logp = logits[:, :-1].float().log_softmax(-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    return (logp * scored[:, 1:]).sum(1)


def default_readout(family: str, task: Task) -> str:
    """What :class:`~bertgpt.config.FinetuneConfig`'s ``readout=None`` means for ``family`` on ``task``:
    "gain" for a GPT on a two-class pair task, else "summary" (the measurement is in its docstring)."""
    pair = bool(task.train) and not task.token_level and task.train[0].text_b is not None
    return "gain" if family == "gpt" and pair and task.n_classes == 2 else "summary"


def classifier_for(model, tokenizer: Tokenizer, labels, lm_coef: float = 0.5, per_token: bool = False,
                   readout: str = "summary") -> Classifier:
    """The classifier that ``readout`` names around ``model``."""
    kind = GainClassifier if readout == "gain" else Classifier
    return kind(model, tokenizer, labels, lm_coef, per_token=per_token, readout=readout)


def classifier_loss(net, batch: Batch):
    """The loss function handed to the trainer: ``net`` is the classifier, or what the trainer
    wrapped it in (DistributedDataParallel, ``torch.compile``), called as a module."""
    return net(batch, with_loss=True)


@torch.no_grad()
def predict(classifier: Classifier, examples: list[Example | Tagged], batch_size: int = 64) -> list:
    """The predicted label of each example, or of each word of a token-level example (eval mode;
    batches of similar length, original order back)."""
    rows = classifier.pack(examples)
    order = sorted(range(len(rows)), key=lambda i: len(rows[i][0]))
    device = device_of(classifier)
    out = [0] * len(rows)
    with eval_mode(classifier):
        for s in range(0, len(order), batch_size):
            chunk = order[s:s + batch_size]
            predicted = classifier(to_device(classifier.collate([rows[i] for i in chunk]), device)).argmax(-1)
            for i, p in zip(chunk, predicted.tolist()):
                out[i] = [t for t, tag in zip(p, rows[i][2]) if tag != IGNORE] if classifier.per_token else p
    return out


def _scored(classifier: Classifier, examples: list[Example | Tagged]) -> tuple[list[int], list[int]]:
    """(true labels, predicted labels) of every scored example, or every scored word."""
    predicted = predict(classifier, examples)
    if not classifier.per_token:
        return [e.label for e in examples], predicted
    truth = [t for e, p in zip(examples, predicted) for t in _tags_kept(e, len(p))]
    return truth, [t for p in predicted for t in p]


def _tags_kept(example: Tagged, n: int) -> list[int]:
    """The scored tags of ``example``'s first ``n`` scored words (the rest were cut to the context)."""
    return [t for t in example.tags if t != IGNORE][:n]


def _scores(classifier: Classifier, examples: list[Example | Tagged]) -> dict:
    """Accuracy; for a token-level task also the F1 of its positive tag (class 1), the task's score,
    which the constant answer (the far more frequent class 0 everywhere) gets 0 on."""
    truth, predicted = _scored(classifier, examples)
    scores = dict(accuracy=accuracy(truth, predicted))
    if classifier.per_token:
        scores["f1"] = f1(truth, predicted)
    return scores


def score_name(task: Task) -> str:
    """What fine-tuning on ``task`` selects on and reports first: "f1" for a token-level task, else
    "accuracy"."""
    return "f1" if task.token_level else "accuracy"


# --- Fine-tuning -------------------------------------------------------------------------------------


def freeze_layers(model, k: int) -> None:
    """Stop gradients into the embeddings and blocks 0..k-1 (``k`` = 0 freezes nothing)."""
    n = model.config.n_layer
    if not 0 <= k <= n:
        raise ValueError(f"freeze must lie between 0 and the model's {n} layers, not {k}")
    if k == 0:
        return
    bb = model.backbone
    for module in (bb.tok_emb, bb.pos_emb, bb.seg_emb, *bb.blocks[:k]):
        if module is not None:
            module.requires_grad_(False)


def finetune(checkpoint: Checkpoint, task: Task, cfg: FinetuneConfig | None = None, *,
             from_scratch: bool = False, device=None, progress: bool = True):
    """Fine-tune a pretrained model (a :class:`~bertgpt.checkpoint.Checkpoint`) on ``task``.

    ``cfg`` holds the recipe (default: :class:`~bertgpt.config.FinetuneConfig`'s defaults); its
    ``lm_coef`` applies to GPT only. ``from_scratch`` trains the same architecture from a random
    initialisation (the baseline): only the checkpoint's config and tokenizer are used, so
    ``bertgpt.untrained(name)`` serves. ``progress`` shows a bar for each run (``BERTGPT_QUIET=1``
    hides every bar, as the book's execution does).

    ``cfg.restarts`` > 1 is the remedy Devlin et al. (2019, section 4.1) used when fine-tuning
    BERT-LARGE on small datasets was unstable: the run is repeated with other fine-tuning seeds
    (``seed + 1000 * i``: the classifier's initialisation, dropout, batch order, and the weights when
    ``from_scratch``), and the run with the best validation accuracy is kept. The first run is the one
    ``restarts=1`` gives.

    Returns ``(classifier, result)``; ``result`` holds ``val_accuracy`` (best epoch), ``test_accuracy``,
    (for a token-level task, ``val_f1``, ``test_f1`` and ``test_token_accuracy``), ``majority_baseline``,
    ``epochs_run``, ``best_epoch`` (0: the start was kept), ``readout``, ``train_examples``, ``seconds``
    (all runs) and the per-epoch ``history``; with restarts, ``run_seed`` (the kept run's) and every run's
    ``restart_val_accuracies``.
    """
    if not task.val:
        raise ValueError(f"task {task.name!r} has no validation examples, which early stopping needs: "
                         "give the CSV a split column with some 'val' rows")
    cfg = cfg or FinetuneConfig()
    tic = time.perf_counter()
    device = torch.device(device or default_device())
    best, vals, key = None, [], f"val_{score_name(task)}"
    for i in range(cfg.restarts):  # keep one model at a time: the best so far, the first of equals
        with training_threads():
            run = _finetune_once(checkpoint, task, cfg, cfg.seed + 1000 * i, from_scratch, device, progress)
        vals.append(run[1][key])
        if best is None or vals[-1] > best[1][key]:
            best = run
    classifier, result = best
    if cfg.restarts > 1:
        result.update(restarts=cfg.restarts, run_seed=result["seed"], seed=cfg.seed,
                      restart_val_accuracies=vals)
    test = _scores(classifier, task.test) if task.test else {}
    result.update({f"test_{score_name(task)}": test.get(score_name(task))},
                  majority_baseline=task.majority_baseline() if task.test else None,
                  seconds=round(time.perf_counter() - tic, 1))
    if task.token_level:
        result["test_token_accuracy"] = test.get("accuracy")
    return classifier, result


def _epoch_batches(rows, classifier: Classifier, batch_size: int, generator: torch.Generator, extra=None):
    """Endless batches: one fresh permutation of ``rows`` per epoch; ``extra(chunk)`` adds entries to
    each batch from the indices of its rows."""
    while True:
        order = torch.randperm(len(rows), generator=generator).tolist()
        for s in range(0, len(order), batch_size):
            chunk = order[s:s + batch_size]
            yield {**classifier.collate([rows[i] for i in chunk]), **(extra(chunk) if extra else {})}


def fine_tuning_run(classifier: Classifier, task: Task, cfg: FinetuneConfig, seed: int, *,
                    loss_fn=classifier_loss, extra=None, progress: bool | str = False) -> dict:
    """The one fine-tuning recipe, which :func:`finetune` and :func:`bertgpt.compress.distill` share:
    ``cfg.epochs`` passes over ``task.train`` in shuffled batches (``extra``: see
    :func:`_epoch_batches`), one AdamW with warm-up and linear decay to zero, validation after each
    epoch, the best epoch's weights kept and ``cfg.patience`` epochs without improvement ending
    the run. Trains ``classifier`` in place (in eval mode after); returns the run's figures."""
    rows = classifier.pack(task.train)
    per_epoch = math.ceil(len(rows) / cfg.batch_size)
    steps = per_epoch * cfg.epochs
    lr = cfg.lr or FINETUNE_LR[classifier.family]
    train_cfg = TrainConfig(steps=steps, batch_size=cfg.batch_size, lr=lr, decay="linear",
                            warmup=round(cfg.warmup * steps), weight_decay=cfg.weight_decay,
                            eval_every=per_epoch, seed=seed)
    metric = score_name(task)
    keep = KeepBest(lambda run: _scores(classifier, task.val), metric, cfg.patience)
    start = {}
    if classifier.starts_trained:  # its start is a decision already: fine-tuning must beat it to replace it
        start[f"start_val_{metric}"] = keep.start(classifier, _scores(classifier, task.val))[metric]
    batches = _epoch_batches(rows, classifier, cfg.batch_size, torch.Generator().manual_seed(seed), extra)
    h = train(classifier, loss_fn, batches, train_cfg, evaluate=keep, progress=progress)
    keep.restore(classifier)
    classifier.eval()
    losses = {r["step"]: r["loss"] for r in h.train}
    history = [dict(epoch=r["step"] // per_epoch, train_loss=losses[r["step"]],
                    **{f"val_{metric}": r[metric]}) for r in h.val]
    return {f"val_{metric}": keep.best, **start, "epochs_run": len(history),
            "best_epoch": keep.best_step // per_epoch,
            "lr": lr, "batch_size": cfg.batch_size, "history": history}


def patience_stop(history: list[dict], patience: int, key: str = "val_accuracy") -> tuple[int, float]:
    """What a run with this ``patience`` would have done, replayed from a longer run's per-epoch
    ``history`` (as :func:`finetune` returns it): (the epoch after which it stops, the best ``key`` it
    keeps). As in the trainer, only a strictly better score resets the count; a run that never runs
    out of patience stops at the history's last epoch. A longer patience can only stop later and keep
    as much or more."""
    if patience < 1:
        raise ValueError(f"patience must be at least 1, not {patience}")
    best, waited = float("-inf"), 0
    for h in history:
        if h[key] > best:
            best, waited = h[key], 0
        else:
            waited += 1
            if waited == patience:
                return h["epoch"], best
    return history[-1]["epoch"], best


def label_curve(checkpoint: Checkpoint, task: Task, sizes, seeds=(0, 1, 2), *,
                from_scratch: bool = False) -> dict[int, list[float]]:
    """Test accuracy against the number of labelled examples: ``{size: [accuracy per seed]}``.

    Each seed draws its own stratified subsample of ``size`` training examples and fine-tunes with
    that seed, so the spread counts the draw of the labels as well as the run (with every label the
    draw is the whole split). One recipe for every model, so that only the start differs: no
    auxiliary loss (λ = 0), 8 epochs on 300 examples or fewer (a small set makes few updates per
    epoch) and 3 above, early stopping after 3 epochs without a better validation accuracy, and
    the family's learning rate, or 1e-3 ``from_scratch`` (random weights need the larger steps).

    Each run's test score is kept in the cache (``$BERTGPT_CACHE/finetunes``, :func:`run_key`), so a
    curve measured once, in the chapter that owns it, is read by any later one that draws it again."""
    curve = {}
    for n in sizes:
        curve[n] = []
        for seed in seeds:
            cfg = FinetuneConfig(epochs=8 if n <= 300 else 3, patience=3, lm_coef=0.0, seed=seed,
                                 lr=1e-3 if from_scratch else None)
            labelled = task.subsample(n, seed=seed)

            def run(labelled=labelled, cfg=cfg):
                _, result = finetune(checkpoint, labelled, cfg, from_scratch=from_scratch, progress=False)
                return result[f"test_{score_name(task)}"]

            key = run_key(checkpoint, labelled, cfg, from_scratch)
            curve[n].append(kept("finetunes", key and f"{task.name}-{key}", run))
    return curve


#: In every fine-tuning run's cache key. Bump it when fine-tuning changes in a way its config does not show.
FINETUNE_RECIPE = 1


def run_key(checkpoint: Checkpoint, task: Task, cfg: FinetuneConfig, from_scratch: bool = False):
    """The cache key of one run of ``finetune(checkpoint, task, cfg)``: where it starts (the weights'
    hash; from scratch, the architecture and the tokenizer's vocabulary), every example of the task,
    the recipe and :data:`FINETUNE_RECIPE`. ``None`` for weights built in memory, which have no hash:
    such a run is never kept."""
    if from_scratch:
        start = [checkpoint.model.family, dataclasses.asdict(checkpoint.config),
                 sorted(checkpoint.tokenizer.hf.get_vocab().items())]
    elif checkpoint.info.get("weights_sha256"):
        start = checkpoint.info["weights_sha256"]
    else:
        return None
    return digest([FINETUNE_RECIPE, start, task.name, task.labels, repr(task.train), repr(task.val),
                   repr(task.test), dataclasses.asdict(cfg)])


def _finetune_once(ck: Checkpoint, task: Task, cfg: FinetuneConfig, seed: int, from_scratch: bool, device,
                   progress: bool):
    """One fine-tuning run of :func:`finetune`, with one seed; the result has no test figures yet."""
    family = ck.model.family
    lm_coef = cfg.lm_coef if family == "gpt" else 0.0
    torch.manual_seed(seed)
    model = build(ck.config, family) if from_scratch else copy.deepcopy(ck.model)  # never alter the caller's
    freeze_layers(model, cfg.freeze)
    readout = cfg.readout or default_readout(family, task)
    classifier = classifier_for(model, ck.tokenizer, task.labels, lm_coef, task.token_level, readout)
    classifier.to(device)
    if readout == "gain":
        classifier.start_from(task.train)
    label = f"finetune {family} on {task.name}" + (" from scratch" if from_scratch else "")
    run = fine_tuning_run(classifier, task, cfg, seed, progress=progress and label)
    result = dict(task=task.name, family=family, **run, train_examples=len(task.train), lm_coef=lm_coef,
                  freeze=cfg.freeze, from_scratch=from_scratch, seed=seed, readout=readout)
    return classifier, result


def keep_layers(checkpoint: Checkpoint, k: int, seed: int = 0) -> Checkpoint:
    """A copy of ``checkpoint`` whose embeddings and lower ``k`` blocks keep their pretrained weights
    and whose other blocks start again from a random initialisation (seeded): the experiment of
    GPT-1's Figure 2 (left), which transferred 0 to 12 of its blocks."""
    model = copy.deepcopy(checkpoint.model)
    blocks = model.backbone.blocks
    if not 0 <= k <= len(blocks):
        raise ValueError(f"k must lie between 0 and the model's {len(blocks)} blocks, not {k}")
    torch.manual_seed(seed)
    for block in blocks[k:]:
        block.apply(init_weights)
        for m in block.modules():
            if isinstance(m, nn.LayerNorm):
                m.reset_parameters()
    return Checkpoint(model, checkpoint.tokenizer, {**checkpoint.info, "kept_layers": k})


# --- Saving and loading ----------------------------------------------------------------------------------


def save_classifier(directory: str | Path, classifier: Classifier, **info) -> Path:
    """Write a fine-tuned classifier (weights, config, tokenizer, labels, head kind) atomically, like a
    checkpoint."""
    return save(directory, classifier, classifier.tokenizer, kind="classifier",
                labels=list(classifier.labels), lm_coef=classifier.lm_coef, per_token=classifier.per_token,
                readout=classifier.readout, **info)


def load_classifier(directory: str | Path, device="cpu") -> Classifier:
    """Load what :func:`save_classifier` wrote, with every check of :func:`bertgpt.checkpoint.load`."""
    def wrap(model, tokenizer, info):
        return classifier_for(model, tokenizer, info["labels"], info.get("lm_coef", 0.0),
                              info.get("per_token", False), info.get("readout", "summary"))

    return load(directory, device=device, kind="classifier", wrap=wrap).model
