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

A probe of a frozen model gives the same answer every time, so :func:`cached_probe` keeps it in the
cache, keyed by the model's weights, the task's examples and the probe's settings: two chapters that
read the same layers of the same model probe it once::

    cached_probe(pretrained("gpt-mini"), load_task("next"), max_examples=300)
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile

import torch
import torch.nn.functional as F

from .checkpoint import Checkpoint
from .device import device_of, eval_mode, to_device
from .inputs import collate, pack_examples
from .progress import progress_bar
from .tasks import Example, Task
from .tokenizer import cache_dir

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
          l2: float = 1e-3, steps: int = 300, seed: int = 0, progress: bool = True,
          layers: list[int] | None = None) -> dict:
    """Per-layer linear-probe accuracy on the test split of ``task``, for a frozen pretrained model.

    ``checkpoint`` is a :class:`~bertgpt.checkpoint.Checkpoint` (on the device to run on);
    ``max_examples`` caps the training split (a stratified subsample). Returns ``accuracy``
    ({layer: accuracy}, layer 0 = embeddings), ``train_accuracy`` (same keys), ``majority_baseline``
    and the sizes. ``layers`` fits only those depths (default: every one); each layer's fit is seeded
    alone, so a layer scores the same with or without the others. ``progress`` shows bars for the
    feature extraction and the fitting (``BERTGPT_QUIET=1`` hides every bar).
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
    depths = range(x_train.size(0)) if layers is None else sorted(layers)
    for layer in progress_bar(depths, f"{label}: fit each layer", enabled=progress):
        mean, std = x_train[layer].mean(0), x_train[layer].std(0) + 1e-6  # standardise with train statistics
        linear = fit_linear((x_train[layer] - mean) / std, y_train, task.n_classes, l2, steps, seed)
        with torch.no_grad():
            for x, y, acc in ((x_train, y_train, train_accuracy), (x_test, y_test, accuracy)):
                acc[layer] = (linear((x[layer] - mean) / std).argmax(-1) == y).float().mean().item()
    return dict(task=task.name, family=ck.model.family, pool=pool, accuracy=accuracy,
                train_accuracy=train_accuracy, majority_baseline=task.majority_baseline(),
                train_examples=len(task.train), test_examples=len(task.test))


def _probe_key(checkpoint: Checkpoint, task: Task, options: dict) -> str | None:
    """The cache key of a probe: the weights' hash, the task's examples and the settings; ``None``
    for a model with no saved hash (built in memory), which is never cached."""
    weights = checkpoint.info.get("weights_sha256")
    if not weights:
        return None
    blob = json.dumps([weights, task.name, repr(task.train), repr(task.test), sorted(options.items())],
                      default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def cached_probe(checkpoint: Checkpoint, task: Task, **options) -> dict:
    """:func:`probe` with ``options``, kept in ``$BERTGPT_CACHE/probes``: the second call with the same
    weights, examples and settings reads the first one's result instead of probing again.

    A model without a saved weights hash (one built in memory) is probed every time. ``progress``
    is not part of the key.
    """
    progress = options.pop("progress", False)
    key = _probe_key(checkpoint, task, options)
    path = cache_dir() / "probes" / f"{task.name}-{key}.json"
    if key and path.is_file():
        out = json.loads(path.read_text(encoding="utf-8"))
        for name in ("accuracy", "train_accuracy"):
            out[name] = {int(layer): a for layer, a in out[name].items()}
        return out
    out = probe(checkpoint, task, progress=progress, **options)
    if key:  # written whole, then renamed: a reader never sees half a file
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as f:
            json.dump(out, f)
        os.replace(f.name, path)
    return out
