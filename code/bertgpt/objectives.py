"""The pretraining objectives, apart from the data that feeds them: the losses and BERT's masking.

GPT's causal LM, -log p(x_i | x_<i) (:func:`clm_loss`); BERT's masked LM plus next-sentence prediction
(:func:`mlm_nsp_loss`) on inputs corrupted by :func:`mask_tokens`, the 80/10/10 rule of Devlin et al.
(2019) as a pure function of a ``torch.Generator``. :func:`pretraining_loss` picks a family's.
:mod:`bertgpt.pretraining` builds the batches and runs the training, and re-exports these names.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from .config import PretrainConfig
from .inputs import IGNORE, Batch
from .tokenizer import Tokenizer


def clm_loss(model, batch: tuple[torch.Tensor, torch.Tensor]):
    """Mean cross-entropy of each next token: -log p(x_i | x_<i)."""
    x, y = batch
    logits = model(x).logits
    return F.cross_entropy(logits.flatten(0, 1).float(), y.flatten(), ignore_index=IGNORE)


def mask_tokens(ids: torch.Tensor, tok: Tokenizer, rate: float = 0.15, generator=None,
                split: tuple[float, float, float] = (0.8, 0.1, 0.1)):
    """BERT's corruption: (inputs, labels) for token ids (B, T).

    In each row ``round(rate * n)`` of its n ordinary tokens are chosen (at least one); special tokens
    and padding never are. A chosen token becomes ``[MASK]`` with probability ``split[0]`` (0.8), a
    random ordinary token with ``split[1]`` (0.1), and stays itself with ``split[2]`` (0.1). Labels
    hold the original token where chosen and ``IGNORE`` elsewhere.
    """
    if not 0 < rate < 1:
        raise ValueError(f"mask rate must lie strictly between 0 and 1, not {rate}")
    maskable = ids >= tok.n_special
    scores = torch.rand(ids.shape, generator=generator).masked_fill(~maskable, 2.0)
    n_chosen = (maskable.sum(1) * rate).round().clamp(min=1)
    rank = scores.argsort(1).argsort(1)  # each position's place in its row's random order
    chosen = (rank < n_chosen[:, None]) & maskable
    labels = torch.where(chosen, ids, IGNORE)
    action = torch.rand(ids.shape, generator=generator)
    inputs = ids.clone()
    to_mask, to_random = split[0], split[0] + split[1]
    inputs[chosen & (action < to_mask)] = tok.mask_id
    randomized = chosen & (action >= to_mask) & (action < to_random)
    inputs[randomized] = torch.randint(tok.n_special, tok.vocab_size, (int(randomized.sum()),),
                                       generator=generator)
    return inputs, labels


FATES = ("not chosen", "[MASK]", "random", "kept")  #: what :func:`mask_tokens` does at a position


def mask_fates(ids: torch.Tensor, inputs: torch.Tensor, labels: torch.Tensor,
               tok: Tokenizer) -> list[list[str]]:
    """Each position's fate under :func:`mask_tokens`, one of :data:`FATES`, for ids (B, T) and the
    ``(inputs, labels)`` it returned. A random replacement that drew the original token back reads
    as kept, since the model sees the same input either way."""
    chosen = labels != IGNORE
    fate = torch.where(inputs == tok.mask_id, 1, torch.where(inputs == ids, 3, 2))
    fate = torch.where(chosen, fate, 0)
    return [[FATES[int(f)] for f in row] for row in fate]


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
