"""One Transformer skeleton, two 2018 models.

The backbone (token + position (+ segment) embeddings, ``n_layer`` blocks) is the same for GPT and
BERT. The one switch is ``config.causal``: with it, position i attends to positions <= i only, and
the model can be trained to predict the next token; without it, every position sees every other,
and the model must be trained on corrupted inputs (masked LM) instead.

- :class:`GPT`: backbone + a language-model head tied to the token embedding.
- :class:`BERT`: backbone + a masked-LM head (transform, tied decoder, output bias) and a
  next-sentence head on the pooled ``[CLS]`` state.
"""

from __future__ import annotations

import math

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

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        if layer < len(self.layers):
            past_k, past_v = self.layers[layer]
            k, v = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)  # (B, nh, S, hs)
            self.layers[layer] = (k, v)
        else:
            self.layers.append((k, v))
        return k, v


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig, layer: int):
        super().__init__()
        self.n_head, self.layer, self.dropout = cfg.n_head, layer, cfg.dropout
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x, mask=None, is_causal=False, cache=None, need_weights=False):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        shape = (B, T, self.n_head, C // self.n_head)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hs)
        if cache is not None:
            k, v = cache.update(self.layer, k, v)  # (B, nh, S, hs), S = positions so far
        weights = None
        if need_weights:  # the same computation written out, to keep the (B, nh, T, S) weights for plots
            scores = q @ k.transpose(-2, -1) / math.sqrt(k.size(-1))
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = scores.softmax(dim=-1)
            y = self.drop(weights) @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal,
                                               dropout_p=self.dropout if self.training else 0.0)
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

    def forward(self, x, mask, is_causal, cache, need_weights):
        if self.pre_norm:  # GPT-2 onward: normalise the branch's input, keep the residual path clean
            a, weights = self.attn(self.ln1(x), mask, is_causal, cache, need_weights)
            x = x + a
            x = x + self.mlp(self.ln2(x))
        else:  # both 2018 papers, as the original Transformer: normalise after each residual add
            a, weights = self.attn(x, mask, is_causal, cache, need_weights)
            x = self.ln1(x + a)
            x = self.ln2(x + self.mlp(x))
        return x, weights


class Backbone(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.config = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.context, cfg.d_model)
        self.seg_emb = nn.Embedding(cfg.segments, cfg.d_model) if cfg.segments else None
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg, i) for i in range(cfg.n_layer))
        self.norm = nn.LayerNorm(cfg.d_model) if cfg.norm == "pre" else nn.Identity()

    def _mask(self, T, start, pad_mask, device, explicit):
        """A boolean (B|1, 1, T, S) mask, True where attention is allowed, or None with is_causal."""
        causal = self.config.causal
        if causal and pad_mask is None and start == 0 and not explicit:
            return None, True  # the fused kernel builds the triangle itself
        mask = None
        if causal:  # query i (absolute position start + i) may see keys 0 .. start + i
            keys = torch.arange(start + T, device=device)
            mask = (keys[None, :] <= torch.arange(start, start + T, device=device)[:, None])[None, None]
        if pad_mask is not None:  # padding is never attended to
            pad = pad_mask.bool()[:, None, None, :]
            mask = pad if mask is None else mask & pad
        return mask, False

    def embed(self, idx, segments=None, start: int = 0):
        """Token + position (+ segment) embeddings (B, T, d) of ids (B, T) starting at position ``start``."""
        T = idx.size(1)
        if start + T > self.config.context:
            raise ValueError(f"a sequence of {start + T} tokens is longer than the model's context of "
                             f"{self.config.context}: truncate it (or build a model with a larger context)")
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(start, start + T, device=idx.device))
        if self.seg_emb is not None:
            x = x + self.seg_emb(segments if segments is not None else torch.zeros_like(idx))
        return x

    def layer_states(self, idx, segments=None, pad_mask=None) -> list[torch.Tensor]:
        """What each depth of the stack holds: the embeddings, then every block's output (before the
        final norm of pre-LN models), ``n_layer + 1`` tensors (B, T, d). For probes; no dropout."""
        x = self.embed(idx, segments)
        mask, is_causal = self._mask(idx.size(1), 0, pad_mask, idx.device, explicit=False)
        states = [x]
        for block in self.blocks:
            x, _ = block(x, mask, is_causal, None, False)
            states.append(x)
        return states

    def forward(self, idx, segments=None, pad_mask=None, cache=None, return_attention=False):
        """Hidden states (B, T, d) of token ids ``idx`` (B, T).

        ``segments`` (B, T) holds 0 for sentence A and 1 for B; ``pad_mask`` (B, S) is 1 for real
        tokens and 0 for padding; ``cache`` is a :class:`KVCache` for incremental decoding. With
        ``return_attention`` the per-layer attention weights (B, n_head, T, S) come back too.
        """
        T = idx.size(1)
        start = len(cache) if cache is not None else 0
        x = self.drop(self.embed(idx, segments, start))
        mask, is_causal = self._mask(T, start, pad_mask, idx.device, explicit=return_attention)
        attention = []
        for block in self.blocks:
            x, weights = block(x, mask, is_causal, cache, return_attention)
            attention.append(weights)
        x = self.norm(x)
        return (x, attention) if return_attention else x


def _init_weights(module: nn.Module) -> None:
    """Both papers: weights from N(0, 0.02), biases zero, LayerNorm the identity."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


class GPT(nn.Module):
    """A causal Transformer language model: logits for the next token at every position."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        if not cfg.causal:
            raise ValueError("GPT needs a causal config: use model_config(preset, 'gpt')")
        self.config = cfg
        self.backbone = Backbone(cfg)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.apply(_init_weights)
        self.lm_head.weight = self.backbone.tok_emb.weight  # tied: one matrix reads and writes tokens

    def forward(self, idx, pad_mask=None, cache=None):
        """Logits (B, T, V): row t scores the token that follows ``idx[:, t]``."""
        return self.lm_head(self.backbone(idx, pad_mask=pad_mask, cache=cache))


class BERT(nn.Module):
    """A bidirectional Transformer with BERT's two pretraining heads: masked LM and next sentence."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        if cfg.causal:
            raise ValueError("BERT needs a bidirectional config: use model_config(preset, 'bert')")
        self.config = cfg
        self.backbone = Backbone(cfg)
        self.mlm_transform = nn.Sequential(nn.Linear(cfg.d_model, cfg.d_model), nn.GELU(),
                                           nn.LayerNorm(cfg.d_model))
        self.mlm_decoder = nn.Linear(cfg.d_model, cfg.vocab_size)  # its bias is the output bias
        self.pooler = nn.Sequential(nn.Linear(cfg.d_model, cfg.d_model), nn.Tanh())
        self.nsp_head = nn.Linear(cfg.d_model, 2)
        self.apply(_init_weights)
        self.mlm_decoder.weight = self.backbone.tok_emb.weight  # tied to the token embedding

    def mlm_logits(self, hidden):
        """Vocabulary logits for hidden states of any shape (..., d)."""
        return self.mlm_decoder(self.mlm_transform(hidden))

    def pooled(self, hidden):
        """The [CLS] summary: position 0's state through a dense layer and tanh."""
        return self.pooler(hidden[:, 0])

    def forward(self, idx, segments=None, pad_mask=None):
        """(MLM logits (B, T, V), NSP logits (B, 2)); NSP class 1 means "B follows A"."""
        h = self.backbone(idx, segments=segments, pad_mask=pad_mask)
        return self.mlm_logits(h), self.nsp_head(self.pooled(h))


def build(cfg: ModelConfig) -> GPT | BERT:
    """The model a config describes: GPT when causal, BERT otherwise."""
    return GPT(cfg) if cfg.causal else BERT(cfg)


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters; a tied matrix counts once."""
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
