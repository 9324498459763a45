"""The pretraining objectives, apart from the data that feeds them: the losses.

GPT's causal LM, -log p(x_i | x_<i) (:func:`clm_loss`); BERT's masked LM plus next-sentence prediction
(:func:`mlm_nsp_loss`) on inputs corrupted by :func:`bertgpt.data.mask_tokens`; ELECTRA's
replaced-token detection (:class:`ReplacedTokenDetection`, :func:`rtd_loss`), on the same inputs.
:func:`pretraining_loss` picks a family's. :mod:`bertgpt.data` builds the batches (and masks them),
:mod:`bertgpt.pretraining` runs the training and re-exports these names.
"""

from __future__ import annotations

import dataclasses
import functools

import torch
import torch.nn.functional as F
from torch import nn

from .config import PretrainConfig
from .data import FATES, mask_fates, mask_tokens  # noqa: F401  moved to bertgpt.data, re-exported
from .inputs import IGNORE, Batch
from .model import build


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


#: ELECTRA's weight on the discriminator's loss against the generator's (Clark et al., 2020, λ = 50).
RTD_WEIGHT = 50.0


def generator_config(cfg, width: float = 0.5):
    """The generator of an ELECTRA pair whose discriminator is ``cfg``: the same depth at ``width``
    times the width (Clark et al. found generators 1/4 to 1/2 the discriminator's size best)."""
    d = max(16, int(cfg.d_model * width))
    return dataclasses.replace(cfg, d_model=d, d_ff=4 * d, n_head=max(1, cfg.n_head * d // cfg.d_model),
                               nsp_head=False)


class ReplacedTokenDetection(nn.Module):
    """ELECTRA's pretraining pair (Clark et al., 2020). A small masked LM, the generator, fills the
    chosen positions with tokens it samples; the discriminator, a BERT without NSP, reads the result
    and says at every position whether its token is the original (:func:`rtd_loss`). A sampled token
    that happens to be the original counts as original. Only the discriminator is kept."""

    def __init__(self, cfg, width: float = 0.5):
        super().__init__()
        self.discriminator = build(dataclasses.replace(cfg, nsp_head=False), "bert")
        self.generator = build(generator_config(cfg, width), "bert")
        self.head = nn.Linear(cfg.d_model, 1)  # one logit per position: "this token was replaced"
        self.width = width


def rtd_targets(original: torch.Tensor, corrupted: torch.Tensor, pad_mask: torch.Tensor) -> torch.Tensor:
    """ELECTRA's targets (B, T): 1.0 where ``corrupted`` differs from ``original`` (a generator's sample
    that drew the original back counts as original), 0.0 where it does not, -1.0 at padding, which the
    loss skips."""
    return (corrupted != original).float().masked_fill(pad_mask == 0, -1.0)


def rtd_loss(model: ReplacedTokenDetection, batch: Batch, weight: float = RTD_WEIGHT):
    """The generator's MLM loss plus ``weight`` times the discriminator's, a binary cross-entropy over
    every real position (not only the chosen 15%: where ELECTRA's efficiency comes from), and the
    accuracies. No gradient flows from the discriminator into the generator through the sample."""
    ids, labels, pad = batch["input_ids"], batch["labels"], batch["pad_mask"]
    chosen = labels != IGNORE
    segments = batch["segments"]
    gen = model.generator(ids, segments=segments, pad_mask=pad, predict=chosen, nsp=False).logits.float()
    mlm = F.cross_entropy(gen, labels[chosen])
    original = ids.clone()
    original[chosen] = labels[chosen]
    corrupted = original.clone()
    with torch.no_grad():
        corrupted[chosen] = torch.distributions.Categorical(logits=gen).sample()
    targets = rtd_targets(original, corrupted, pad)
    hidden = model.discriminator(corrupted, segments=segments, pad_mask=pad, predict=False, nsp=False).hidden
    logits = model.head(hidden).squeeze(-1).float()
    real = targets >= 0
    rtd = F.binary_cross_entropy_with_logits(logits[real], targets[real])
    metrics = dict(mlm_loss=mlm.detach(), mlm_accuracy=(gen.argmax(-1) == labels[chosen]).float().mean(),
                   rtd_loss=rtd.detach(), replaced=targets[real].mean(),
                   rtd_accuracy=((logits[real] > 0).float() == targets[real]).float().mean())
    return mlm + weight * rtd, metrics
