import dataclasses

import pytest
import torch

import bertgpt
from bertgpt.finetune import freeze_layers
from conftest import tiny


@pytest.mark.parametrize("family", ["gpt", "bert"])
def test_later_tokens_change_earlier_outputs_only_without_the_causal_mask(family):
    model = tiny(family).eval()
    idx = torch.randint(8, 512, (1, 16))
    changed = idx.clone()
    changed[0, 10:] = torch.randint(8, 512, (6,))
    h1, h2 = model(idx).hidden, model(changed).hidden
    same_prefix = torch.allclose(h1[0, :10], h2[0, :10], atol=1e-6)
    assert same_prefix == (family == "gpt")


@pytest.mark.parametrize("cls", [bertgpt.GPT, bertgpt.BERT])
@pytest.mark.parametrize("causal", [True, False])
def test_either_class_takes_either_setting_of_the_one_switch(cls, causal):
    cfg = bertgpt.model_config("tiny", "bert", dropout=0.0)
    model = cls(dataclasses.replace(cfg, causal=causal)).eval()
    idx = torch.randint(8, 512, (1, 12))
    changed = idx.clone()
    changed[0, 8] = 9
    moved = (model(idx).logits - model(changed).logits).abs().amax(-1)[0] > 1e-6
    assert moved[:8].any() != causal and moved[8:].all()


def test_gradient_of_a_causal_output_wrt_later_inputs_is_zero():
    model = tiny("gpt").eval()
    x = model.backbone.tok_emb(torch.randint(8, 512, (1, 12))).detach().requires_grad_()
    # run the blocks on embeddings we hold, so the gradient reaches each input position
    h = x + model.backbone.pos_emb(torch.arange(12))
    for block in model.backbone.blocks:
        h, _ = block(h)
    (h[0, 5] * torch.randn(h.size(-1))).sum().backward()  # a LayerNorm output's plain sum is constant
    assert x.grad[0, 6:].abs().max() == 0
    assert x.grad[0, :6].abs().max() > 0


@pytest.mark.parametrize("family", ["gpt", "bert"])
def test_attention_weights_match_the_fused_kernel_and_respect_the_mask(family):
    model = tiny(family).eval()
    idx = torch.randint(8, 512, (2, 10))
    fused = model(idx)
    explicit = model(idx, attention=True)
    attention = explicit.attention
    assert fused.attention is None and torch.allclose(fused.logits, explicit.logits, atol=1e-5)
    assert len(attention) == 2 and attention[0].shape == (2, 2, 10, 10)
    future = torch.triu(torch.ones(10, 10, dtype=torch.bool), diagonal=1)
    assert (attention[0][..., future].abs().max() == 0) == (family == "gpt")


@pytest.mark.parametrize("family", ["gpt", "bert"])
def test_one_forward_gives_states_heads_and_logits_where_asked(family):
    model = tiny(family).eval()
    idx = torch.randint(8, 512, (2, 10))
    chosen = torch.zeros(2, 10, dtype=torch.bool)
    chosen[0, 3] = chosen[1, 5] = chosen[1, 7] = True
    full = model(idx, states=True)
    assert len(full.states) == model.config.n_layer + 1 and full.states[-1] is full.hidden
    assert torch.allclose(model(idx, predict=chosen).logits, full.logits[chosen], atol=1e-5)  # (3, V)
    assert model(idx, predict=False).logits is None
    assert (full.nsp_logits is None) == (family == "gpt")
    if family == "bert":
        assert full.nsp_logits.shape == (2, 2) and full.pooled.shape == (2, model.config.d_model)


@pytest.mark.parametrize("family", ["gpt", "bert"])
def test_output_layer_is_tied_to_the_token_embedding(family):
    model = tiny(family)
    head = model.lm_head if family == "gpt" else model.mlm_decoder
    assert head.weight is model.backbone.tok_emb.weight
    assert bertgpt.count_parameters(model) == sum(p.numel() for p in set(model.parameters()))


def test_padding_is_never_attended_to():
    model = tiny("bert").eval()
    ids = torch.randint(8, 512, (1, 7))
    padded = torch.cat([ids, torch.zeros(1, 5, dtype=torch.long)], 1)
    mask = torch.cat([torch.ones(1, 7), torch.zeros(1, 5)], 1).long()
    assert torch.allclose(model(ids).hidden, model(padded, pad_mask=mask).hidden[:, :7], atol=1e-5)


def test_a_sequence_longer_than_the_context_is_refused_with_the_fix():
    model = tiny("gpt")
    with pytest.raises(ValueError, match="longer than the model's context of 32: truncate"):
        model(torch.zeros(1, 33, dtype=torch.long))


@pytest.mark.parametrize("name,paper", [("gpt1", 117e6), ("bert-base", 110e6), ("bert-large", 340e6)])
def test_paper_presets_have_the_papers_parameter_counts(name, paper):
    with torch.device("meta"):
        model = bertgpt.build(bertgpt.model_config(name))
    assert abs(bertgpt.count_parameters(model) - paper) / paper < 0.02


def test_kv_cache_gives_the_same_logits_as_the_full_sequence():
    model = tiny("gpt").eval()
    idx = torch.randint(8, 512, (2, 12))
    full = model(idx).logits
    cache = bertgpt.KVCache()
    steps = [model(idx[:, :5], cache=cache).logits]
    steps += [model(idx[:, t:t + 1], cache=cache).logits for t in range(5, 12)]
    assert torch.allclose(full, torch.cat(steps, 1), atol=1e-5)


def test_pre_and_post_norm_both_build_and_differ():
    post, pre = tiny("gpt", norm="post"), tiny("gpt", norm="pre")
    idx = torch.randint(8, 512, (1, 8))
    assert not torch.allclose(post.eval()(idx).logits, pre.eval()(idx).logits)
    assert isinstance(pre.backbone.norm, torch.nn.LayerNorm)


def test_the_lstm_language_model_is_left_to_right_and_matches_gpt_minis_size():
    lstm_cfg, _ = bertgpt.hub.pretrained_configs("lstm-mini")
    gpt_cfg, _ = bertgpt.hub.pretrained_configs("gpt-mini")
    lstm, gpt = bertgpt.build(lstm_cfg), bertgpt.build(gpt_cfg)
    assert isinstance(lstm, bertgpt.model.LSTMLM) and lstm.family == "gpt"
    assert abs(bertgpt.count_parameters(lstm) / bertgpt.count_parameters(gpt) - 1) < 0.01
    lstm.eval()
    x = torch.randint(8, lstm_cfg.vocab_size, (1, 12))
    changed = x.clone()
    changed[0, 6] += 1
    with torch.no_grad():
        moved = (lstm(x).logits - lstm(changed).logits).abs().amax(-1)[0] > 0
    assert not moved[:6].any() and moved[6:].all()  # position 6 is read by itself and what follows only
    with pytest.raises(ValueError, match="no key/value cache"):
        lstm(x, cache=bertgpt.KVCache())
    with pytest.raises(ValueError, match="use family 'gpt'"):
        bertgpt.build(lstm_cfg, "bert")


def rotary(family):
    cfg = bertgpt.model_config("tiny", family, dropout=0.0, positions="rotary")
    torch.manual_seed(0)
    return bertgpt.build(cfg).eval()


def test_rotary_positions_make_attention_scores_depend_on_distance_only():
    q, k = torch.randn(1, 1, 1, 16), torch.randn(1, 1, 1, 16)
    rot = bertgpt.model.rotate
    near = (rot(q, 3) * rot(k, 1)).sum()  # query at 3, key at 1
    far = (rot(q, 12) * rot(k, 10)).sum()  # the same distance, later
    assert torch.allclose(near, far, atol=1e-5)
    assert not torch.allclose(near, (rot(q, 12) * rot(k, 1)).sum(), atol=1e-3)
    assert torch.allclose(rot(q, 0), q)  # position 0 is not turned


@pytest.mark.parametrize("family", ["gpt", "bert"])
def test_a_rotary_model_has_no_position_table_and_still_tells_order_apart(family):
    model = rotary(family)
    assert model.backbone.pos_emb is None
    idx = torch.randint(8, 512, (1, 10))
    swapped = idx[:, [1, 0, *range(2, 10)]]
    # without positions a bidirectional model would give the two orders the same last state
    assert not torch.allclose(model(idx).hidden[0, -1], model(swapped).hidden[0, -1], atol=1e-5)
    frozen = rotary(family)
    freeze_layers(frozen, 1)  # no table to freeze is no error


def test_kv_cache_gives_the_same_logits_as_the_full_sequence_with_rotary_positions():
    model = rotary("gpt")
    idx = torch.randint(8, 512, (1, 12))
    full = model(idx).logits
    cache = bertgpt.KVCache()
    first = model(idx[:, :7], cache=cache).logits
    steps = [model(idx[:, t : t + 1], cache=cache).logits for t in range(7, 12)]
    assert torch.allclose(torch.cat([first, *steps], 1), full, atol=1e-5)


def test_an_unknown_position_scheme_or_an_odd_head_is_refused():
    with pytest.raises(ValueError, match="learned' or 'rotary"):
        bertgpt.model_config("tiny", "gpt", positions="sinusoid")
    with pytest.raises(ValueError, match="must be even"):
        bertgpt.model_config("tiny", "gpt", positions="rotary", d_model=30, n_head=2)


def test_every_model_takes_one_signature_and_refuses_what_it_cannot_read():
    gpt, bert = tiny("gpt", dropout=0.0).eval(), tiny("bert", dropout=0.0).eval()
    lstm = bertgpt.build(bertgpt.model_config("tiny", "gpt", arch="lstm", dropout=0.0)).eval()
    x = torch.randint(8, 100, (2, 6))
    right = torch.tensor([[1] * 6, [1] * 4 + [0] * 2])
    for model in (gpt, bert, lstm):  # the same keywords everywhere
        model(x, segments=None, pad_mask=right, cache=None, predict=True, states=False)
    with pytest.raises(ValueError, match="no segment embeddings"):
        gpt(x, segments=torch.zeros_like(x))
    with pytest.raises(ValueError, match="no segment embeddings"):
        lstm(x, segments=torch.zeros_like(x))
    with pytest.raises(ValueError, match="bidirectional model reads the whole text"):
        bert(x, cache=bertgpt.model.KVCache())
    with pytest.raises(ValueError, match="pad on the right"):
        lstm(x, pad_mask=right.flip(1))
    # the model decides whether a mask is needed: right padding changes nothing a causal model reads
    with torch.no_grad():
        assert torch.equal(gpt(x, pad_mask=right).logits, gpt(x).logits)
        left = right.flip(1)  # padding first: real tokens would read it, so the mask is applied
        assert not torch.allclose(gpt(x, pad_mask=left).logits[1, -1], gpt(x).logits[1, -1])
