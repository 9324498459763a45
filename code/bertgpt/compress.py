"""Making a fine-tuned model cheaper to train and to serve: measure, distil, quantize.

Three measurements and two remedies, each a small function::

    saved_activation_bytes(lambda: loss_fn(model, batch)[0])  # what backward must keep
    with checkpointing(model): ...                            # keep only each block's input
    median_seconds(lambda: classifier(batch), repeats=7)
    student = shrink(bertgpt.pretrained("bert-mini"), layers=(0, 2))
    clf, result = distill(teacher, student, task, FinetuneConfig(lr=3e-4))
    small = quantize(clf); size_on_disk(small) / size_on_disk(clf)

Distillation follows Hinton et al. (2015) as DistilBERT used it (Sanh et al., 2019): the student
learns the teacher's class probabilities softened by a temperature T, with the loss
T²·KL(p_teacher,T ‖ p_student,T) (the T² keeps its gradients on the scale of the hard loss), mixed
with the ordinary cross-entropy on the labels as (1 − ``alpha``). DistilBERT initialised its
student from every other layer of its teacher; :func:`shrink` does the same for any list of blocks.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import statistics
import time
import warnings

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint as _checkpoint

from .checkpoint import Checkpoint
from .config import FinetuneConfig
from .device import default_device, device_of, eval_mode, to_device
from .finetune import Classifier, fine_tuning_run, predict
from .inputs import Batch
from .stats import accuracy
from .tasks import Example, Task

# --- Measuring --------------------------------------------------------------------------------------


def saved_activation_bytes(step) -> int:
    """Bytes of the tensors that autograd saves for the backward pass while ``step()`` runs.

    ``step`` computes a loss; it is called once, and no backward pass is run.
    Each storage counts once, whatever the views on it; parameters, which exist anyway, do not count.
    This is the memory that grows with the batch and that activation checkpointing trades for time.
    """
    seen, total = set(), 0

    def pack(t):
        nonlocal total
        if not isinstance(t, nn.Parameter):
            key = t.untyped_storage().data_ptr()
            if key not in seen:
                seen.add(key)
                total += t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        step()
    return total


@contextlib.contextmanager
def checkpointing(model):
    """Activation checkpointing of every block of ``model`` (a GPT, a BERT or a
    :class:`~bertgpt.finetune.Classifier`).

    Inside the context, each block's forward runs without keeping its intermediate tensors; backward
    runs it again to get them. What is kept per block is its input alone. The caching path used in
    generation (``cache``) is left as it is.
    """
    backbone = model.model.backbone if isinstance(model, Classifier) else model.backbone
    originals = [block.forward for block in backbone.blocks]

    def wrap(forward):
        def run(x, *, mask=None, cache=None, need_weights=False):
            if cache is not None or need_weights or not torch.is_grad_enabled():
                return forward(x, mask=mask, cache=cache, need_weights=need_weights)
            return _checkpoint(lambda h: forward(h, mask=mask)[0], x, use_reentrant=True), None
        return run

    for block, forward in zip(backbone.blocks, originals):
        block.forward = wrap(forward)
    try:
        yield model
    finally:
        for block in backbone.blocks:
            del block.forward  # the class's forward again


def median_seconds(fn, repeats: int = 5, warmup: int = 1) -> float:
    """The median wall time of ``fn()`` over ``repeats`` calls, after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        tic = time.perf_counter()
        fn()
        times.append(time.perf_counter() - tic)
    return statistics.median(times)


def classify_seconds(classifier: Classifier, examples: list[Example], repeats: int = 7) -> float:
    """The median wall time (:func:`median_seconds`) of classifying ``examples`` as one batch, without
    gradients, on the classifier's device: a model's serving cost, measured once and read by every
    comparison that needs it."""
    batch = to_device(classifier.collate(classifier.pack(examples)), device_of(classifier))

    def run():
        with torch.no_grad(), eval_mode(classifier):
            classifier(batch)
            if batch["input_ids"].is_cuda:
                torch.cuda.synchronize()

    return median_seconds(run, repeats=repeats)


def size_on_disk(module: nn.Module) -> int:
    """Bytes of ``module``'s state dict as ``torch.save`` writes it (tied weights once)."""
    buffer = io.BytesIO()
    torch.save(module.state_dict(), buffer)
    return buffer.getbuffer().nbytes


# --- Distillation -------------------------------------------------------------------------------------


def shrink(checkpoint: Checkpoint, layers) -> Checkpoint:
    """A copy of ``checkpoint`` that keeps only the blocks numbered in ``layers``, in that order,
    with the embeddings, final norm and heads: a student initialised from its teacher."""
    layers = list(layers)
    model = copy.deepcopy(checkpoint.model)
    blocks = model.backbone.blocks
    if not layers or any(not 0 <= i < len(blocks) for i in layers):
        raise ValueError(f"layers must name some of the model's {len(blocks)} blocks, not {layers}")
    model.backbone.blocks = nn.ModuleList(blocks[i] for i in layers)
    config = dataclasses.replace(model.config, n_layer=len(layers))
    model.config = model.backbone.config = config
    return Checkpoint(model, checkpoint.tokenizer, {**checkpoint.info, "kept_blocks": layers})


@torch.no_grad()
def soft_targets(teacher: Classifier, examples: list[Example], temperature: float = 1.0,
                 batch_size: int = 64) -> torch.Tensor:
    """The teacher's class probabilities (N, n_classes) at ``temperature``, in the order given."""
    rows = teacher.pack(examples)
    device = next(teacher.parameters()).device
    out = []
    with eval_mode(teacher):
        for s in range(0, len(rows), batch_size):
            logits = teacher(to_device(teacher.collate(rows[s:s + batch_size]), device))
            out.append((logits.float() / temperature).softmax(-1).cpu())
    return torch.cat(out)


def distillation_loss(student_logits, teacher_probs, labels, temperature: float, alpha: float):
    """alpha·T²·KL(teacher ‖ student at T) + (1 − alpha)·cross-entropy(labels)."""
    log_p = F.log_softmax(student_logits.float() / temperature, -1)
    soft = F.kl_div(log_p, teacher_probs, reduction="batchmean") * temperature ** 2
    if alpha == 1:
        return soft
    return alpha * soft + (1 - alpha) * F.cross_entropy(student_logits.float(), labels)


def distill(teacher: Classifier, student: Checkpoint, task: Task, cfg: FinetuneConfig | None = None, *,
            temperature: float = 2.0, alpha: float = 1.0, device=None, progress: bool = True):
    """Train ``student`` (a pretrained or :func:`shrink`-ed checkpoint) to imitate ``teacher`` on the
    texts of ``task.train``: the recipe of :func:`bertgpt.finetune.finetune` (one AdamW, warm-up then
    linear decay, early stopping on ``task.val`` accuracy, best epoch kept), with
    :func:`distillation_loss` in place of the task loss. With ``alpha`` = 1 (the default) the
    labels of ``task.train`` are never read: the teacher's soft labels are the whole signal.

    Returns ``(classifier, result)`` like ``finetune``: ``val_accuracy``, ``test_accuracy``,
    ``history``, ``seconds``. ``progress`` shows a bar (``BERTGPT_QUIET=1`` hides every bar).
    """
    cfg = cfg or FinetuneConfig()
    tic = time.perf_counter()
    device = torch.device(device or default_device())
    torch.manual_seed(cfg.seed)
    model = copy.deepcopy(student.model)
    classifier = Classifier(model, student.tokenizer, task.labels, lm_coef=0.0).to(device)
    targets = soft_targets(teacher, task.train, temperature)

    def loss_fn(net, batch: Batch):
        logits = net(batch)
        loss = distillation_loss(logits, batch["teacher"], batch["label"], temperature, alpha)
        return loss, dict(accuracy=(logits.argmax(-1) == batch["label"]).float().mean())

    run = fine_tuning_run(classifier, task, cfg, cfg.seed, loss_fn=loss_fn,
                          extra=lambda chunk: Batch(teacher=targets[chunk]),
                          progress=progress and f"distill into {student.model.family} on {task.name}")
    test = accuracy([e.label for e in task.test], predict(classifier, task.test)) if task.test else None
    return classifier, dict(task=task.name, family=student.model.family, **run, test_accuracy=test,
                            temperature=temperature, alpha=alpha, seed=cfg.seed,
                            seconds=round(time.perf_counter() - tic, 1))


# --- Quantization -------------------------------------------------------------------------------------


def quantize(model: nn.Module) -> nn.Module:
    """A copy of ``model`` whose ``nn.Linear`` layers hold int8 weights (dynamic quantization, CPU).

    Weights are quantized once, per tensor; activations are quantized on the fly at each call, and
    embeddings, LayerNorms and everything else stay in fp32. This is PyTorch's eager-mode tool,
    ``torch.ao.quantization.quantize_dynamic``: deprecated since PyTorch 2.10 in favour of the
    separate ``torchao`` package, and still working in 2.13; its deprecation warnings are silenced
    here. A weight shared with an embedding (BERT's tied MLM decoder) is quantized as a copy in the
    linear layer and kept in fp32 in the embedding.
    """
    model = copy.deepcopy(model).cpu().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*quantize_per_tensor.*")
        return torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
