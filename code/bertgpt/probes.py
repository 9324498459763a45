"""Linear probes: how much of a task can a linear classifier read off each layer of a frozen model?

This is the book's experiment, not GPT-1's: GPT-1 varied how many pretrained layers were
transferred before fine-tuning. Here nothing is fine-tuned. Each example is packed as for
fine-tuning (:func:`bertgpt.inputs.pack_examples`), the frozen model is run once, and the sequence's
feature is taken at every depth: layer 0 is the embedding output, layer i the residual stream after
block i. A logistic regression (L2-regularised, trained with torch on standardised features) is
fitted on the training split and scored on the test split, one per layer::

    out = probe(pretrained("bert-mini"), load_task("era"))
    out["accuracy"]            # {0: ..., 1: ..., ..., n_layer: ...}
    out["majority_baseline"]

The feature of a sequence is the mean over its real tokens, by default, for both families: one rule
for both models keeps the comparison fair, and it needs no token the model was not pretrained to
summarise with (GPT never saw ``[EXTRACT]`` in pretraining; BERT's ``[CLS]`` learned only next-sentence
prediction). ``pool="token"`` takes each family's own summary position instead: the last real token
for GPT (the only position whose causal view covers the whole input), ``[CLS]`` for BERT.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .checkpoint import Checkpoint
from .device import device_of, eval_mode, to_device
from .inputs import collate, pack_examples
from .progress import progress_bar
from .tasks import Example, Task

POOLS = ("mean", "token")


@torch.no_grad()
def layer_features(model, tokenizer, examples: list[Example], pool: str = "mean",
                   batch_size: int = 64, progress: bool | str = False) -> torch.Tensor:
    """Features (n_layer + 1, N, d) of ``examples`` at every depth of the frozen ``model``.

    Each layer's states pass through a LayerNorm without weights before pooling, so that every depth
    is on the same scale (pre-LN residual streams grow with depth; post-LN ones are normalised already).
    ``progress`` shows a bar over the batches (a string labels it).
    """
    if pool not in POOLS:
        raise ValueError(f"pool must be one of {POOLS}, not {pool!r}")
    device = device_of(model)
    rows = pack_examples(tokenizer, model.family, model.config.context, examples)
    out = []
    with eval_mode(model):
        for s in progress_bar(range(0, len(rows), batch_size), progress, enabled=progress):
            batch = to_device(collate(rows[s:s + batch_size], tokenizer), device)
            ids, keep = batch["input_ids"], batch["pad_mask"]
            B = ids.size(0)
            states = model(ids, segments=batch.get("segments"), pad_mask=keep, predict=False,
                           states=True).states
            h = F.layer_norm(torch.stack(states), (states[0].size(-1),))  # (L + 1, B, T, d)
            if pool == "mean":
                w = keep[None, :, :, None].to(h.dtype)
                out.append((h * w).sum(2) / w.sum(2))
            elif model.family == "gpt":  # the last real token
                out.append(h[:, torch.arange(B, device=device), keep.sum(1) - 1])
            else:  # [CLS]
                out.append(h[:, :, 0])
    return torch.cat(out, dim=1).float().cpu()


def fit_linear(x: torch.Tensor, y: torch.Tensor, n_classes: int, l2: float = 1e-3, steps: int = 300,
               seed: int = 0) -> torch.nn.Linear:
    """Multinomial logistic regression on features ``x`` (N, d), full-batch Adam, L2 penalty ``l2``."""
    torch.manual_seed(seed)
    linear = torch.nn.Linear(x.size(1), n_classes)
    opt = torch.optim.Adam(linear.parameters(), lr=0.05)
    for _ in range(steps):
        loss = F.cross_entropy(linear(x), y) + l2 * linear.weight.pow(2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return linear


def probe(checkpoint: Checkpoint, task: Task, max_examples: int | None = 1000, pool: str = "mean",
          l2: float = 1e-3, steps: int = 300, seed: int = 0, progress: bool = True) -> dict:
    """Per-layer linear-probe accuracy on the test split of ``task``, for a frozen pretrained model.

    ``checkpoint`` is a :class:`~bertgpt.checkpoint.Checkpoint` (on the device to run on);
    ``max_examples`` caps the training split (a stratified subsample). Returns ``accuracy``
    ({layer: accuracy}, layer 0 = embeddings), ``train_accuracy`` (same keys), ``majority_baseline``
    and the sizes. ``progress`` shows bars for the feature extraction and the fitting
    (``BERTGPT_QUIET=1`` hides every bar).
    """
    if not task.test:
        raise ValueError(f"task {task.name!r} has no test examples to score the probes on")
    ck = checkpoint
    if max_examples is not None:
        task = task.subsample(max_examples, seed=seed)
    label = f"probe {ck.model.family} on {task.name}"
    x_train, x_test = (layer_features(ck.model, ck.tokenizer, split, pool,  # (L + 1, N, d)
                                      progress=progress and f"{label}: {name} features")
                       for name, split in (("train", task.train), ("test", task.test)))
    y_train = torch.tensor([e.label for e in task.train])
    y_test = torch.tensor([e.label for e in task.test])
    accuracy, train_accuracy = {}, {}
    for layer in progress_bar(range(x_train.size(0)), f"{label}: fit each layer", enabled=progress):
        mean, std = x_train[layer].mean(0), x_train[layer].std(0) + 1e-6  # standardise with train statistics
        linear = fit_linear((x_train[layer] - mean) / std, y_train, task.n_classes, l2, steps, seed)
        with torch.no_grad():
            for x, y, acc in ((x_train, y_train, train_accuracy), (x_test, y_test, accuracy)):
                acc[layer] = (linear((x[layer] - mean) / std).argmax(-1) == y).float().mean().item()
    return dict(task=task.name, family=ck.model.family, pool=pool, accuracy=accuracy,
                train_accuracy=train_accuracy, majority_baseline=task.majority_baseline(),
                train_examples=len(task.train), test_examples=len(task.test))
