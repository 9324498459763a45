"""Fine-tuning, each paper's way: a pretrained GPT or BERT plus one linear layer, trained end to end.

GPT-1 turns every task into one token sequence, ``[START] text [DELIM] text_b [EXTRACT]``, and reads
a linear classifier off the last block's state at the ``[EXTRACT]`` token; it keeps the language
model's own loss as an auxiliary objective, L = L_task + λ·L_LM (λ = ``lm_coef``, 0.5 in the paper).
BERT packs ``[CLS] text [SEP] text_b [SEP]`` with segment ids 0 and 1 and classifies the pooled
``[CLS]`` state; it has no auxiliary loss. Both put dropout 0.1 in front of the classifier::

    clf, result = finetune("gpt-mini", load_task("era").subsample(300))
    result["test_accuracy"], result["majority_baseline"]
    clf, result = finetune("bert-mini", task, from_scratch=True)   # same architecture, random init

Training goes through :func:`bertgpt.trainer.train`, one call per epoch, so that validation
accuracy after each epoch can stop the run (``patience``) and the best epoch's weights are kept.
Each call starts a fresh AdamW; the learning rate warms up over the first epoch's first steps and
then decays linearly from epoch to epoch.
"""

from __future__ import annotations

import copy
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_model
from torch import nn

from .checkpoint import CheckpointError, read_info, save, verify
from .config import ModelConfig, TrainConfig
from .evaluate import accuracy
from .hub import resolve
from .model import _init_weights, build
from .pretraining import IGNORE, bert_inputs, pad
from .tasks import Example, Task
from .tokenizer import Tokenizer
from .trainer import default_device, to_device, train

# --- Input transformations ---------------------------------------------------------------------------


def _fit(a: list[int], b: list[int] | None, budget: int):
    """Cut a text (or pair) to ``budget`` tokens: a single text loses its end; a pair loses the end of
    B and the start of A, the longer one first, so the junction between them is kept."""
    if b is None:
        return a[:budget], None
    la = min(len(a), max(budget // 2, budget - len(b)))
    return a[len(a) - la:], b[:budget - la]


def encode(tokenizer: Tokenizer, config: ModelConfig, examples: list[Example]):
    """Each example as ``(ids, segments, label)``, in its family's input format, cut to the context.

    GPT: ``[START] a [EXTRACT]`` or ``[START] a [DELIM] b [EXTRACT]`` (segments None).
    BERT: ``[CLS] a [SEP]`` or ``[CLS] a [SEP] b [SEP]`` with segment ids.
    """
    tok = tokenizer
    texts_a = tok.encode_batch([e.text for e in examples])
    pairs = [e.text_b is not None for e in examples]
    texts_b = iter(tok.encode_batch([e.text_b for e in examples if e.text_b is not None]))
    rows = []
    for e, a, is_pair in zip(examples, texts_a, pairs):
        b = next(texts_b) if is_pair else None
        a, b = _fit(a, b, config.context - (3 if is_pair else 2))  # room for the special tokens
        if config.causal:
            ids = [tok.start_id, *a, *([tok.delim_id, *b] if is_pair else []), tok.extract_id]
            rows.append((ids, None, e.label))
        else:
            ids, segments = bert_inputs(tok, a, b)
            rows.append((ids, segments, e.label))
    return rows


def collate(rows, tokenizer: Tokenizer) -> dict:
    """A batch dict from encoded rows, padded on the right.

    ``input_ids`` (B, T), ``pad_mask`` (B, T), ``label`` (B,); BERT adds ``segments`` (B, T); GPT adds
    ``lm_labels`` (B, T): the next token of the text at each position, IGNORE where the next token
    is padding or a special token.
    """
    ids = pad([r[0] for r in rows], tokenizer.pad_id)
    batch = dict(input_ids=ids, pad_mask=(ids != tokenizer.pad_id).long(),
                 label=torch.tensor([r[2] for r in rows], dtype=torch.long))
    if rows[0][1] is not None:
        batch["segments"] = pad([r[1] for r in rows], 0)
    else:
        following = ids[:, 1:]
        lm_labels = torch.where(following >= tokenizer.n_special, following, IGNORE)
        batch["lm_labels"] = torch.cat([lm_labels, torch.full_like(ids[:, :1], IGNORE)], dim=1)
    return batch


# --- The classifier ------------------------------------------------------------------------------------


class Classifier(nn.Module):
    """A pretrained GPT or BERT with a linear classifier on its sequence summary.

    GPT: the last block's state at the ``[EXTRACT]`` token (the last real token of each row).
    BERT: the pooled ``[CLS]`` state. ``lm_coef`` (λ) weights GPT's auxiliary LM loss; 0 removes it.
    """

    def __init__(self, model, tokenizer: Tokenizer, labels, lm_coef: float = 0.5, dropout: float = 0.1):
        super().__init__()
        if not model.config.causal and lm_coef:
            raise ValueError("BERT fine-tunes without an auxiliary language-model loss: use lm_coef=0")
        self.model, self.tokenizer = model, tokenizer
        self.labels = tuple(labels)
        self.lm_coef = float(lm_coef)
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(model.config.d_model, len(self.labels))
        _init_weights(self.head)

    @property
    def config(self) -> ModelConfig:
        return self.model.config

    def encode(self, examples: list[Example]):
        return encode(self.tokenizer, self.config, examples)

    def collate(self, rows) -> dict:
        return collate(rows, self.tokenizer)

    def features(self, batch):
        """(summary (B, d), hidden states (B, T, d))."""
        if self.config.causal:
            # Padding is on the right and attention is causal: no real position can see a pad, so
            # the fused causal kernel needs no padding mask.
            h = self.model.backbone(batch["input_ids"])  # (B, T, d)
            extract = batch["pad_mask"].sum(1) - 1       # (B,) index of [EXTRACT], each row's last real token
            return h[torch.arange(h.size(0), device=h.device), extract], h
        h = self.model.backbone(batch["input_ids"], batch["segments"], batch["pad_mask"])
        return self.model.pooled(h), h

    def forward(self, batch):
        """Class logits (B, n_classes)."""
        return self.head(self.drop(self.features(batch)[0]))

    def loss(self, batch):
        """L_task (+ λ·L_LM for GPT when λ > 0), and the batch's accuracy."""
        summary, h = self.features(batch)
        logits = self.head(self.drop(summary)).float()
        task = F.cross_entropy(logits, batch["label"])
        metrics = dict(task_loss=task.detach(), accuracy=(logits.argmax(-1) == batch["label"]).float().mean())
        if not self.lm_coef:
            return task, metrics
        lm_labels = batch["lm_labels"]
        chosen = lm_labels != IGNORE
        lm = F.cross_entropy(self.model.lm_head(h[chosen]).float(), lm_labels[chosen])
        metrics["lm_loss"] = lm.detach()
        return task + self.lm_coef * lm, metrics


def classifier_loss(classifier: Classifier, batch):
    """The loss function handed to the trainer."""
    return classifier.loss(batch)


@torch.no_grad()
def predict(classifier: Classifier, examples: list[Example], batch_size: int = 64) -> list[int]:
    """The predicted label of each example (eval mode; batches of similar length, original order back)."""
    rows = classifier.encode(examples)
    order = sorted(range(len(rows)), key=lambda i: len(rows[i][0]))
    device = next(classifier.parameters()).device
    was_training = classifier.training
    classifier.eval()
    out = [0] * len(rows)
    for s in range(0, len(order), batch_size):
        chunk = order[s:s + batch_size]
        logits = classifier(to_device(classifier.collate([rows[i] for i in chunk]), device))
        for i, p in zip(chunk, logits.argmax(-1).tolist()):
            out[i] = p
    classifier.train(was_training)
    return out


def _accuracy(classifier: Classifier, examples: list[Example]) -> float:
    return accuracy([e.label for e in examples], predict(classifier, examples))


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


def _epoch_batches(rows, classifier: Classifier, batch_size: int, generator: torch.Generator):
    """Endless batches: one fresh permutation of ``rows`` per epoch."""
    while True:
        order = torch.randperm(len(rows), generator=generator).tolist()
        for s in range(0, len(order), batch_size):
            yield classifier.collate([rows[i] for i in order[s:s + batch_size]])


def finetune(checkpoint, task: Task, epochs: int = 3, lr: float = 5e-4, batch_size: int = 16,
             lm_coef: float = 0.5, freeze: int = 0, from_scratch: bool = False, seed: int = 0,
             device=None, patience: int = 2, warmup: float = 0.1, restarts: int = 1,
             progress: bool = False):
    """Fine-tune a pretrained model on ``task``.

    ``checkpoint`` is a :class:`~bertgpt.checkpoint.Checkpoint`, its directory or a pretrained name.

    ``lm_coef`` is λ of GPT's auxiliary LM loss (ignored for BERT, which has none); ``freeze`` keeps
    the embeddings and the lower ``freeze`` blocks fixed; ``from_scratch`` trains the same architecture
    from a random initialisation (the baseline); ``warmup`` is the fraction of all updates spent
    warming up; training stops after ``patience`` epochs without a better validation accuracy, and
    the best epoch's weights are kept.

    ``restarts`` > 1 is the remedy Devlin et al. (2019, section 4.1) used when fine-tuning BERT-LARGE
    on small datasets was unstable: the run is repeated with other fine-tuning seeds (``seed + 1000 * i``:
    the classifier's initialisation, dropout, batch order, and the weights when ``from_scratch``), and
    the run with the best validation accuracy is kept. The first run is the one ``restarts=1`` gives.

    Returns ``(classifier, result)``; ``result`` holds ``val_accuracy`` (best epoch), ``test_accuracy``,
    ``majority_baseline``, ``epochs_run``, ``best_epoch``, ``train_examples``, ``seconds`` (all runs)
    and the per-epoch ``history``; with restarts, ``run_seed`` (the kept run's) and every run's
    ``restart_val_accuracies``.
    """
    if not task.val:
        raise ValueError(f"task {task.name!r} has no validation examples, which early stopping needs: "
                         "give the CSV a split column with some 'val' rows")
    if epochs < 1 or batch_size < 1 or restarts < 1:
        raise ValueError(f"epochs, batch_size and restarts must be positive, not {epochs}, {batch_size} "
                         f"and {restarts}")
    tic = time.perf_counter()
    ck = resolve(checkpoint)
    settings = dict(epochs=epochs, lr=lr, batch_size=batch_size, lm_coef=lm_coef, freeze=freeze,
                    from_scratch=from_scratch, device=device, patience=patience, warmup=warmup,
                    progress=progress)
    best, vals = None, []
    for i in range(restarts):  # keep one model at a time: the best so far, the first of equals
        run = _finetune_once(ck, task, seed=seed + 1000 * i, **settings)
        vals.append(run[1]["val_accuracy"])
        if best is None or vals[-1] > best[1]["val_accuracy"]:
            best = run
    classifier, result = best
    if restarts > 1:
        result.update(restarts=restarts, run_seed=result["seed"], seed=seed, restart_val_accuracies=vals)
    result.update(test_accuracy=_accuracy(classifier, task.test) if task.test else None,
                  majority_baseline=task.majority_baseline() if task.test else None,
                  seconds=round(time.perf_counter() - tic, 1))
    return classifier, result


def _finetune_once(ck, task: Task, epochs, lr, batch_size, lm_coef, freeze, from_scratch, seed, device,
                   patience, warmup, progress):
    """One fine-tuning run of :func:`finetune`, with one seed; the result has no test figures yet."""
    family = ck.config.family
    lm_coef = lm_coef if family == "gpt" else 0.0
    torch.manual_seed(seed)
    model = build(ck.config) if from_scratch else copy.deepcopy(ck.model)  # never alter the caller's model
    freeze_layers(model, freeze)
    classifier = Classifier(model, ck.tokenizer, task.labels, lm_coef)
    device = torch.device(device or default_device())
    classifier.to(device)

    rows = classifier.encode(task.train)
    steps = math.ceil(len(rows) / batch_size)
    warmup_steps = max(1, round(warmup * steps * epochs)) if warmup else 0
    batches = _epoch_batches(rows, classifier, batch_size, torch.Generator().manual_seed(seed))
    history, best, best_state, best_epoch = [], -1.0, None, 0
    for epoch in range(epochs):
        cfg = TrainConfig(steps=steps, batch_size=batch_size, lr=lr * (1 - epoch / epochs),
                          warmup=min(warmup_steps, steps) if epoch == 0 else 0, decay="constant",
                          eval_every=steps, seed=seed * 1000 + epoch)
        h = train(classifier, classifier_loss, batches, cfg, device=device, progress=progress,
                  desc=f"finetune {family} on {task.name}, epoch {epoch + 1}")
        val = _accuracy(classifier, task.val)
        history.append(dict(epoch=epoch + 1, train_loss=h.train[-1]["loss"], val_accuracy=val))
        if val > best:
            best, best_epoch = val, epoch + 1
            best_state = {k: v.detach().clone() for k, v in classifier.state_dict().items()}
        elif epoch + 1 - best_epoch >= patience:
            break
    classifier.load_state_dict(best_state)
    classifier.eval()
    result = dict(task=task.name, family=family, val_accuracy=best, epochs_run=len(history),
                  best_epoch=best_epoch, train_examples=len(task.train), lm_coef=lm_coef, freeze=freeze,
                  from_scratch=from_scratch, seed=seed, lr=lr, batch_size=batch_size, history=history)
    return classifier, result


# --- Saving and loading ----------------------------------------------------------------------------------


def save_classifier(directory: str | Path, classifier: Classifier, **info) -> Path:
    """Write a fine-tuned classifier (weights, config, tokenizer, labels) atomically, like a checkpoint."""
    return save(directory, classifier, classifier.tokenizer, kind="classifier",
                labels=list(classifier.labels), lm_coef=classifier.lm_coef, **info)


def load_classifier(directory: str | Path, device="cpu") -> Classifier:
    """Load what :func:`save_classifier` wrote, after checking the weights' hash."""
    directory = Path(directory)
    info = read_info(directory)
    if info.get("kind") != "classifier":
        raise CheckpointError(f"{str(directory)!r} holds a pretrained model, not a fine-tuned classifier: "
                              "load it with bertgpt.load, or fine-tune it with `python -m bertgpt finetune`")
    verify(directory, info)
    model = build(ModelConfig(**info["config"]))
    classifier = Classifier(model, Tokenizer.load(directory / "tokenizer.json"), info["labels"],
                            info.get("lm_coef", 0.0))
    load_model(classifier, str(directory / "model.safetensors"), device=str(device))
    return classifier.to(device).eval()

