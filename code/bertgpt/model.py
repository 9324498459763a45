"""One Transformer skeleton, two 2018 models.

The backbone (token + position (+ segment) embeddings, ``n_layer`` blocks) is the same for GPT and
BERT. The one switch is ``config.causal``, read where attention is computed (:class:`Attention`):
with it, position i attends to positions <= i only, and the model can be trained to predict the
next token; without it, every position sees every other, and the model must be trained on
corrupted inputs (masked LM) instead.

- :class:`GPT`: backbone + a language-model head tied to the token embedding.
- :class:`BERT`: backbone + a masked-LM head (transform, tied decoder, output bias) and, where
  its recipe has next-sentence prediction (``config.nsp_head``), a pooler and a next-sentence head
  on the ``[CLS]`` state.

Each class has the same keyword-only ``forward`` (``segments``, ``pad_mask``, ``cache``,
``predict``, ``states``, ``attention``; BERT adds ``nsp``) that returns an :class:`Output`; a model
refuses, with the reason, what it cannot read, and decides itself whether a padding mask is needed.
Every caller goes through it::

    gpt(idx).logits                                    # (B, T, V) next-token logits
    bert(idx, segments=s, pad_mask=m, predict=labels != IGNORE).logits   # (N, V) where masked
    bert(idx).nsp_logits, bert(idx, predict=False, states=True).states   # heads, every layer
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelConfig


class KVCache:
    """Keys and values of the positions processed so far, per layer, so a new token costs one position."""

    def __init__(self):
        self.layers: list[tuple[torch.Tensor, torch.Tensor]] = []

    def __len__(self) -> int:
        return self.layers[0][0].size(2) if self.layers else 0

    def seen(self, layer: int) -> int:
        """Positions already cached for ``layer`` (the first one of this call comes next)."""
        return self.layers[layer][0].size(2) if layer < len(self.layers) else 0

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        if layer < len(self.layers):
            past_k, past_v = self.layers[layer]
            k, v = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)  # (B, nh, S, hs)
            self.layers[layer] = (k, v)
        else:
            self.layers.append((k, v))
        return k, v


def rotate(t: torch.Tensor, start: int = 0) -> torch.Tensor:
    """Rotary positions (Su et al. 2021; in neither 2018 paper): each pair of coordinates of a query
    or key (B, nh, T, hs) at position ``start + i`` turns by (start + i) times its own frequency, so
    that a query-key product depends on the two positions only through their distance."""
    T, hs = t.size(-2), t.size(-1)
    freq = 10000.0 ** (-torch.arange(0, hs, 2, device=t.device, dtype=torch.float32) / hs)
    angle = torch.arange(start, start + T, device=t.device, dtype=torch.float32)[:, None] * freq
    cos, sin = angle.cos().to(t.dtype), angle.sin().to(t.dtype)  # (T, hs/2)
    x, y = t[..., 0::2], t[..., 1::2]
    return torch.stack((x * cos - y * sin, x * sin + y * cos), dim=-1).flatten(-2)


def causal_mask(T: int, S: int | None = None, device=None) -> torch.Tensor:
    """(T, S) booleans, True where a query may read a key: query i, at absolute position S - T + i
    (the last T of S positions), reads the keys at or before it. S defaults to T."""
    S = T if S is None else S
    return torch.ones(T, S, dtype=torch.bool, device=device).tril(diagonal=S - T)


class Attention(nn.Module):
    """Multi-head self-attention; with ``config.causal`` each query reads only keys at or before it."""

    def __init__(self, cfg: ModelConfig, layer: int):
        super().__init__()
        self.n_head, self.layer = cfg.n_head, layer
        self.causal = cfg.causal  # the one switch between the two 2018 models
        self.rotary = cfg.positions == "rotary"
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x, *, mask=None, cache=None, need_weights=False):
        """``mask`` (broadcastable to (B, nh, T, S)) is True where a query may read a key: padding,
        or any pattern of a demonstration; the causal triangle is added here, from the config."""
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        shape = (B, T, self.n_head, C // self.n_head)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hs)
        if self.rotary:
            start = cache.seen(self.layer) if cache is not None else 0
            q, k = rotate(q, start), rotate(k, start)
        if cache is not None:
            k, v = cache.update(self.layer, k, v)  # (B, nh, S, hs), S = positions so far
        S = k.size(2)
        fused_causal = self.causal and mask is None and S == T and not need_weights
        if self.causal and not fused_causal:  # query i (absolute position S - T + i) reads keys <= it
            triangle = causal_mask(T, S, x.device)
            mask = triangle if mask is None else mask & triangle
        weights = None
        if need_weights:  # the same computation written out, to keep the (B, nh, T, S) weights for plots
            scores = q @ k.transpose(-2, -1) / math.sqrt(k.size(-1))
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = scores.softmax(dim=-1)
            y = self.drop(weights) @ v
        else:  # fused_causal: the kernel builds the triangle itself
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=fused_causal,
                                               dropout_p=self.drop.p if self.training else 0.0)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, d)
        return self.drop(self.proj(y)), weights


class Block(nn.Module):
    """Self-attention and a feed-forward network, each wrapped in a residual add and a LayerNorm."""

    def __init__(self, cfg: ModelConfig, layer: int):
        super().__init__()
        self.pre_norm = cfg.norm == "pre"
        self.attn = Attention(cfg, layer)
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(nn.Linear(cfg.d_model, cfg.d_ff), nn.GELU(),
                                 nn.Linear(cfg.d_ff, cfg.d_model), nn.Dropout(cfg.dropout))
        self.ln2 = nn.LayerNorm(cfg.d_model)

    def forward(self, x, *, mask=None, cache=None, need_weights=False):
        """(output (B, T, d), attention weights (B, nh, T, S) or None); see :class:`Attention`."""
        if self.pre_norm:  # GPT-2 onward: normalise the branch's input, keep the residual path clean
            a, weights = self.attn(self.ln1(x), mask=mask, cache=cache, need_weights=need_weights)
            x = x + a
            x = x + self.mlp(self.ln2(x))
        else:  # both 2018 papers, as the original Transformer: normalise after each residual add
            a, weights = self.attn(x, mask=mask, cache=cache, need_weights=need_weights)
            x = self.ln1(x + a)
            x = self.ln2(x + self.mlp(x))
        return x, weights


@dataclass
class Output:
    """What a forward pass returns; the optional parts are None unless asked for."""

    hidden: torch.Tensor                         #: (B, T, d) — the last layer, as the heads read it
    logits: torch.Tensor | None = None           #: vocabulary logits (B, T, V), or (N, V) at ``predict``
    states: list[torch.Tensor] | None = None     #: ``states=True`` — embeddings, then every block (B, T, d)
    attention: list[torch.Tensor] | None = None  #: ``attention=True`` — per layer (B, n_head, T, S)
    pooled: torch.Tensor | None = None           #: BERT — the ``[CLS]`` summary (B, d)
    nsp_logits: torch.Tensor | None = None       #: BERT — (B, 2); class 1 means "B follows A"


class Backbone(nn.Module):
    """What GPT and BERT share: token, position (and segment) embeddings, then ``n_layer`` blocks."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.config = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.context, cfg.d_model) if cfg.positions == "learned" else None
        self.seg_emb = nn.Embedding(cfg.segments, cfg.d_model) if cfg.segments else None
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg, i) for i in range(cfg.n_layer))
        self.norm = nn.LayerNorm(cfg.d_model) if cfg.norm == "pre" else nn.Identity()

    def embed(self, idx, segments=None, start: int = 0):
        """Token + position (+ segment) embeddings (B, T, d) of ids (B, T) starting at position ``start``
        (the position table only with learned positions: rotary ones enter in attention)."""
        T = idx.size(1)
        if start + T > self.config.context:
            raise ValueError(f"a sequence of {start + T} tokens is longer than the model's context of "
                             f"{self.config.context}: truncate it (or build a model with a larger context)")
        x = self.tok_emb(idx)
        if self.pos_emb is not None:  # rotary positions enter in attention instead
            x = x + self.pos_emb(torch.arange(start, start + T, device=idx.device))
        if self.seg_emb is not None:
            x = x + self.seg_emb(segments if segments is not None else torch.zeros_like(idx))
        return x

    def forward(self, idx, *, segments=None, pad_mask=None, mask=None, cache=None, states=False,
                attention=False) -> Output:
        """The stack on token ids ``idx`` (B, T): an :class:`Output` with ``hidden`` (B, T, d).

        ``segments`` (B, T) holds 0 for sentence A and 1 for B; ``pad_mask`` (B, S) is 1 for real
        tokens and 0 for padding, which is never attended to; ``mask`` is any other boolean pattern
        (True where a query may read a key), for demonstrations; ``cache`` is a :class:`KVCache` for
        incremental decoding. ``states`` keeps what each depth holds, the embeddings then every
        block's output (the last one after the final LayerNorm of pre-LN models, as the heads read
        it); ``attention`` keeps every layer's attention weights.
        """
        pad_mask = self._inputs(segments, pad_mask, cache)
        start = len(cache) if cache is not None else 0
        x = self.drop(self.embed(idx, segments, start))
        if pad_mask is not None:
            pad = pad_mask.bool()[:, None, None, :]  # (B, 1, 1, S)
            mask = pad if mask is None else mask & pad
        kept, weights = [x], []
        for block in self.blocks:
            x, w = block(x, mask=mask, cache=cache, need_weights=attention)
            kept.append(x)
            weights.append(w)
        x = self.norm(x)
        kept[-1] = x
        return Output(hidden=x, states=kept if states else None, attention=weights if attention else None)

    def _inputs(self, segments, pad_mask, cache):
        """The one rule for every model's inputs: refuse what this model cannot read, and return the
        padding mask attention needs. A causal stack drops a mask of padding on the right: no real
        position can read a later one, so the mask changes nothing there and would keep attention
        off the fused causal kernel."""
        if segments is not None and self.seg_emb is None:
            raise ValueError("this model has no segment embeddings (GPT marks a second text with "
                             "[DELIM] instead): call it without segments")
        if cache is not None and not self.config.causal:
            raise ValueError("a key/value cache serves left-to-right decoding: a bidirectional model "
                             "reads the whole text at once; call it without cache")
        if pad_mask is not None and self.config.causal and cache is None and right_padded(pad_mask):
            return None
        return pad_mask


@contextlib.contextmanager
def dropout_rate(model: nn.Module, p: float | None):
    """Every dropout of ``model`` at rate ``p`` inside the block (``None``: unchanged), then as built.

    Pretraining the minis without dropout leaves the saved model's own rate, which fine-tuning uses.
    """
    layers = [m for m in model.modules() if isinstance(m, nn.Dropout)]
    built = [m.p for m in layers]
    if p is not None:
        for m in layers:
            m.p = p
    try:
        yield model
    finally:
        for m, rate in zip(layers, built):
            m.p = rate


def init_weights(module: nn.Module) -> None:
    """Both papers: weights from N(0, 0.02), biases zero, LayerNorm the identity (PyTorch's default)."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


def right_padded(pad_mask: torch.Tensor) -> bool:
    """Whether every row of ``pad_mask`` (B, T; 1 real, 0 padding) has its padding at the end only."""
    keep = pad_mask.bool()
    return bool((keep[:, 1:] <= keep[:, :-1]).all())


def _at(hidden, predict):
    """The states the vocabulary head scores: all (B, T, d), those where ``predict`` (B, T) is True
    (N, d), or none."""
    if predict is True:
        return hidden
    return None if predict is False else hidden[predict]


class GPT(nn.Module):
    """A Transformer language model: logits for the next token at every position.

    Causal with a GPT config; with ``causal=False`` every position sees the token it must predict
    (the leak of chapter 2).
    """

    family = "gpt"
    kv_cache = True  #: generation may keep keys and values (a causal stack; the backbone checks)

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.config = cfg
        self.backbone = Backbone(cfg)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.apply(init_weights)
        self.lm_head.weight = self.backbone.tok_emb.weight  # tied: one matrix reads and writes tokens

    def forward(self, idx, *, segments=None, pad_mask=None, cache=None, predict=True, states=False,
                attention=False) -> Output:
        """``logits`` (B, T, V): row t scores the token that follows ``idx[:, t]``.

        ``predict`` chooses where the vocabulary is scored: everywhere (True), nowhere (False, for
        callers that need only states) or where a boolean (B, T) is True, giving (N, V). The other
        keywords are the :class:`Backbone`'s, which refuses what the model cannot read (segments
        without segment embeddings) and drops a padding mask that changes nothing (right padding).
        """
        out = self.backbone(idx, segments=segments, pad_mask=pad_mask, cache=cache, states=states,
                            attention=attention)
        h = _at(out.hidden, predict)
        out.logits = None if h is None else self.lm_head(h)
        return out


def pooler(d_model: int) -> nn.Sequential:
    """BERT's pooler: the ``[CLS]`` state through a dense layer and tanh (initialise it with
    :func:`init_weights`)."""
    return nn.Sequential(nn.Linear(d_model, d_model), nn.Tanh())


class BERT(nn.Module):
    """A Transformer with BERT's pretraining heads: masked LM, and next sentence where
    ``config.nsp_head`` (a model pretrained without NSP has no pooler and no NSP head, as Hugging
    Face's masked-LM model has no pooling layer; fine-tuning adds its own pooler).

    Bidirectional with a BERT config; ``causal=True`` gives the same heads over a causal stack.
    """

    family = "bert"

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.config = cfg
        self.backbone = Backbone(cfg)
        self.mlm_transform = nn.Sequential(nn.Linear(cfg.d_model, cfg.d_model), nn.GELU(),
                                           nn.LayerNorm(cfg.d_model))
        self.mlm_decoder = nn.Linear(cfg.d_model, cfg.vocab_size)  # its bias is the output bias
        heads = pooler(cfg.d_model), nn.Linear(cfg.d_model, 2)  # built in every case, so that the weights
        if cfg.nsp_head:  # above draw the same random numbers with the heads as without them
            self.pooler, self.nsp_head = heads
        self.apply(init_weights)
        self.mlm_decoder.weight = self.backbone.tok_emb.weight  # tied to the token embedding

    def forward(self, idx, *, segments=None, pad_mask=None, cache=None, predict=True, states=False,
                attention=False, nsp=True) -> Output:
        """MLM ``logits`` (B, T, V), or (N, V) at the ``predict`` positions (see :meth:`GPT.forward`);
        where the model has the heads and ``nsp`` is left True, the ``pooled`` [CLS] state (B, d) and
        ``nsp_logits`` (B, 2) too. A ``cache`` is refused unless the stack is causal."""
        out = self.backbone(idx, segments=segments, pad_mask=pad_mask, cache=cache, states=states,
                            attention=attention)
        h = _at(out.hidden, predict)
        out.logits = None if h is None else self.mlm_decoder(self.mlm_transform(h))
        if nsp and self.config.nsp_head:
            out.pooled = self.pooler(out.hidden[:, 0])  # position 0's state through a dense layer and tanh
            out.nsp_logits = self.nsp_head(out.pooled)
        return out


class LSTMLM(nn.Module):
    """The recurrent language model GPT-1's ablation put in the Transformer's place (``arch="lstm"``).

    Token embeddings (no positions: the recurrence knows the order) feed ``n_layer`` LSTM layers of
    ``d_ff`` units, projected back to ``d_model`` for the tied output layer. Same objective, same
    inputs and outputs as :class:`GPT`, so training, scoring and fine-tuning take either; the state
    at position t has read tokens 0..t one step at a time, which is the difference being measured.
    """

    family = "gpt"
    kv_cache = False  #: generation re-encodes the window at every step

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.config = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.lstm = nn.LSTM(cfg.d_model, cfg.d_ff, cfg.n_layer, batch_first=True,
                            dropout=cfg.dropout if cfg.n_layer > 1 else 0.0)
        self.proj = nn.Linear(cfg.d_ff, cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        init_weights(self.tok_emb)
        init_weights(self.proj)
        self.lm_head.weight = self.tok_emb.weight

    def forward(self, idx, *, segments=None, pad_mask=None, cache=None, predict=True, states=False,
                attention=False) -> Output:
        """``logits`` (B, T, V) as :meth:`GPT.forward`; ``hidden`` is the projected state (B, T, d)."""
        if cache is not None or attention:
            raise ValueError("an LSTM has no attention and no key/value cache: call it without "
                             "attention=True (generation re-encodes the window for an LSTM)")
        if segments is not None:
            raise ValueError("an LSTM has no segment embeddings: call it without segments")
        if pad_mask is not None and not right_padded(pad_mask):
            raise ValueError("an LSTM reads padding only at the end of a row: pad on the right")
        if idx.size(1) > self.config.context:  # not a limit of the LSTM: kept so that both compare alike
            raise ValueError(f"a sequence of {idx.size(1)} tokens is longer than the context of "
                             f"{self.config.context}: truncate it")
        x = self.drop(self.tok_emb(idx))
        h, _ = self.lstm(x)  # padding is on the right: no real position reads it
        hidden = self.proj(self.drop(h))
        out = Output(hidden=hidden, states=[x, hidden] if states else None)
        h = _at(hidden, predict)
        out.logits = None if h is None else self.lm_head(h)
        return out


def build(cfg: ModelConfig, family: str | None = None) -> GPT | BERT | LSTMLM:
    """The model of ``family`` ("gpt" or "bert"; default: the config's, GPT when causal), or the
    LSTM language model when ``cfg.arch`` is "lstm"."""
    family = family or cfg.default_family
    if family not in ("gpt", "bert"):
        raise ValueError(f"family must be 'gpt' or 'bert', not {family!r}")
    if cfg.arch == "lstm":
        if family != "gpt":
            raise ValueError("an LSTM is built as a left-to-right language model: use family 'gpt'")
        return LSTMLM(cfg)
    return GPT(cfg) if family == "gpt" else BERT(cfg)


def require_family(model: nn.Module, family: str, use: str) -> None:
    """Refuse, with the alternative, a model of the other family for ``use``."""
    if model.family == family:
        return
    if family == "gpt":
        raise ValueError(f"{use} needs a GPT model; this is a BERT model, which cannot continue text: "
                         "use fill_mask to predict masked tokens")
    raise ValueError(f"{use} needs a BERT model; this is a GPT model: use generate to continue text, or "
                     "log_likelihood to score it")


def count_parameters(model: nn.Module) -> int:
    """All parameters, trainable or frozen; a tied matrix counts once."""
    return sum(p.numel() for p in model.parameters())


def parameter_breakdown(model: nn.Module) -> dict[str, int]:
    """Where the parameters live: embeddings, attention, feed-forward, LayerNorms, heads."""
    parts = dict(embeddings=0, attention=0, feed_forward=0, layer_norms=0, heads=0)
    seen = set()
    for name, p in model.named_parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        if "_emb" in name:
            part = "embeddings"
        elif ".attn." in name:
            part = "attention"
        elif ".mlp." in name:
            part = "feed_forward"
        elif "backbone" in name:
            part = "layer_norms"
        else:
            part = "heads"
        parts[part] += p.numel()
    return parts
