"""Compute accounting: the tokens and FLOPs of a pretraining recipe, following BERT's two lengths."""

import dataclasses

import pytest
import torch

import bertgpt
from bertgpt.compute import flops_per_token, pretraining_compute


def test_pretraining_compute_follows_the_short_then_long_schedule():
    cfg = bertgpt.model_config("mini", "bert")
    train = dict(steps=100, batch_size=4, short_fraction=0.5, short_length=64)
    half = pretraining_compute(cfg, train, step=50)  # every update so far was short
    assert half["tokens"] == 50 * 4 * 64
    short_cfg = dataclasses.replace(cfg, context=64)
    assert half["flops"] == pytest.approx(half["tokens"] * flops_per_token(short_cfg))
    full = pretraining_compute(cfg, train)
    assert full["tokens"] == 50 * 4 * 64 + 50 * 4 * 128
    assert full["flops"] > 2 * half["flops"]  # the long half costs more per token
    gpt = pretraining_compute(bertgpt.model_config("mini", "gpt"), dict(steps=10, batch_size=2))
    assert gpt["tokens"] == 10 * 2 * 128 and pretraining_compute(cfg, train, step=0)["flops"] == 0
    with pytest.raises(ValueError, match="between 0"):
        pretraining_compute(cfg, train, step=101)



def test_flops_per_token_leaves_out_only_a_table_the_model_has():
    learned = bertgpt.model_config("mini", "bert")
    rotary = dataclasses.replace(learned, positions="rotary")  # no table: the same multiplications
    assert flops_per_token(rotary) == flops_per_token(learned)
    lstm = dataclasses.replace(bertgpt.model_config("mini", "gpt"), arch="lstm", n_layer=1, d_ff=376)
    with torch.device("meta"):
        n = bertgpt.count_parameters(bertgpt.build(lstm))
    assert flops_per_token(lstm) == 6 * n  # every weight, no position table and no attention
