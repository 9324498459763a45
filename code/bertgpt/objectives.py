"""The pretraining objectives, apart from the data that feeds them: the losses.

GPT's causal LM, -log p(x_i | x_<i) (:func:`clm_loss`); BERT's masked LM plus next-sentence prediction
(:func:`mlm_nsp_loss`) on inputs corrupted by :func:`bertgpt.data.mask_tokens`.
:func:`pretraining_loss` picks a family's. :mod:`bertgpt.data` builds the batches (and masks them),
:mod:`bertgpt.pretraining` runs the training and re-exports these names.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from .config import PretrainConfig
from .data import FATES, mask_fates, mask_tokens  # noqa: F401  moved to bertgpt.data, re-exported
from .inputs import IGNORE, Batch


def clm_loss(model, batch: tuple[torch.Tensor, torch.Tensor]):
    """Mean cross-entropy of each next token: -log p(x_i | x_<i)."""
    x, y = batch
    logits = model(x).logits
    return F.cross_entropy(logits.flatten(0, 1).float(), y.flatten(), ignore_index=IGNORE)


def mlm_nsp_loss(model, batch: Batch, nsp: bool = True):
    """BERT's pretraining loss, MLM + NSP (MLM alone when not ``nsp``, which never runs the NSP
    head), and the accuracies. MLM logits only where labelled."""
    labels = batch["labels"]
    chosen = labels != IGNORE
    out = model(batch["input_ids"], segments=batch["segments"], pad_mask=batch["pad_mask"], predict=chosen,
                nsp=nsp)
    mlm_logits = out.logits.float()
    mlm = F.cross_entropy(mlm_logits, labels[chosen])
    right = (mlm_logits.argmax(-1) == labels[chosen]).float()
    metrics = dict(mlm_loss=mlm.detach(), mlm_accuracy=right.mean())
    if not nsp:
        return mlm, metrics
    if out.nsp_logits is None:
        raise ValueError("this BERT has no next-sentence head (config nsp_head=False): "
                         "pretrain it with nsp=False")
    nsp_logits = out.nsp_logits.float()
    nsp_loss = F.cross_entropy(nsp_logits, batch["is_next"])
    metrics.update(nsp_loss=nsp_loss.detach(),
                   nsp_accuracy=(nsp_logits.argmax(-1) == batch["is_next"]).float().mean())
    return mlm + nsp_loss, metrics


def pretraining_loss(family: str, train_cfg: PretrainConfig):
    """The loss a ``family`` model pretrains with: GPT's next token, BERT's MLM (+ NSP if ``nsp``)."""
    return clm_loss if family == "gpt" else functools.partial(mlm_nsp_loss, nsp=train_cfg.nsp)
