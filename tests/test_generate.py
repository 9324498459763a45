import pytest
import torch

import bertgpt
from bertgpt.generate import (
    Sampling,
    fill_mask,
    generate,
    generate_by_masking,
    generate_ids,
    repetition_penalty_filter,
    sample_next,
    top_k_filter,
    top_p_filter,
)

SENTENCE = "the congress shall have power to lay and collect taxes"


@pytest.mark.parametrize("sampling", [dict(greedy=True), dict(temperature=0.9, top_k=50, top_p=0.95)])
def test_the_kv_cache_chooses_exactly_the_tokens_of_full_recomputation(gpt, wordpiece, sampling):
    prompt = wordpiece.encode(SENTENCE)  # 12 tokens + 40 new: past the context of 32, so the window slides
    sampling = Sampling(repetition_penalty=1.2, **sampling)
    runs = [generate_ids(gpt, prompt, 40, sampling, torch.Generator().manual_seed(3), use_cache=cache)
            for cache in (True, False)]
    assert len(runs[0]) == 40 and runs[0] == runs[1]


def test_an_lstm_generates_by_re_encoding_the_window_as_it_has_no_cache(wordpiece):
    from conftest import tiny
    lstm = tiny("gpt", arch="lstm", vocab_size=wordpiece.vocab_size).eval()
    prompt = wordpiece.encode(SENTENCE)
    runs = [generate_ids(lstm, prompt, 30, Sampling(greedy=True), use_cache=cache) for cache in (True, False)]
    assert len(runs[0]) == 30 and runs[0] == runs[1]


def test_one_cached_step_gives_the_logits_of_the_full_sequence(gpt):
    ids = torch.randint(8, 100, (1, 20))
    cache = bertgpt.KVCache()
    gpt(ids[:, :-1], cache=cache)
    step = gpt(ids[:, -1:], cache=cache).logits[0, -1]
    assert torch.allclose(step, gpt(ids).logits[0, -1], atol=1e-5)


def test_same_seed_same_text_and_another_seed_another(gpt, wordpiece):
    a, b, c = (generate(gpt, wordpiece, "the union", 20, seed=s) for s in (7, 7, 8))
    assert a == b and a != c
    greedy = generate(gpt, wordpiece, "the union", 5, Sampling(greedy=True))
    assert greedy == generate(gpt, wordpiece, "the union", 5, Sampling(temperature=0))


def test_top_k_and_top_p_keep_exactly_their_sets():
    logits = torch.tensor([1.0, 4.0, 3.0, 2.0, 0.0])
    assert torch.isfinite(top_k_filter(logits, 2)).tolist() == [False, True, True, False, False]
    assert torch.equal(top_k_filter(logits, None), logits)
    probs = logits.softmax(-1)  # 0.03, 0.64, 0.24, 0.09, 0.01
    assert torch.isfinite(top_p_filter(logits, 0.5)).tolist() == [False, True, False, False, False]
    assert torch.isfinite(top_p_filter(logits, 0.7)).tolist() == [False, True, True, False, False]
    assert torch.isfinite(top_p_filter(logits, float(probs[1] + probs[2]))).sum() == 2  # mass reached: stop
    kept = top_p_filter(logits, 0.7)
    assert torch.equal(kept[torch.isfinite(kept)], logits[[1, 2]])  # kept logits are unchanged


def test_sampling_never_leaves_the_filtered_set():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(50, generator=g)
    top5 = set(logits.topk(5).indices.tolist())
    assert {sample_next(logits, Sampling(temperature=2.0, top_k=5), g) for _ in range(500)} <= top5
    nucleus = set(torch.isfinite(top_p_filter(logits, 0.6)).nonzero().flatten().tolist())
    drawn = {sample_next(logits, Sampling(top_p=0.6), g) for _ in range(500)}
    assert drawn <= nucleus and len(drawn) > 1


def test_repetition_penalty_lowers_repeated_tokens_probability():
    logits = torch.tensor([2.0, -1.0, 0.5, 1.0])
    penalized = repetition_penalty_filter(logits, [0, 1, 1], 2.0)
    assert penalized.tolist() == [1.0, -2.0, 0.5, 1.0]  # positive divided, negative multiplied
    before, after = logits.softmax(-1), penalized.softmax(-1)
    assert (after[:2] < before[:2]).all() and (after[2:] > before[2:]).all()
    assert torch.equal(repetition_penalty_filter(logits, [0], 1.0), logits)


def test_a_long_prompt_is_cut_from_the_left_with_a_warning(gpt, wordpiece):
    prompt = wordpiece.encode(" ".join([SENTENCE] * 5))
    assert len(prompt) > gpt.config.context
    with pytest.warns(UserWarning, match="truncated from the left"):
        out = generate_ids(gpt, prompt, 5, Sampling(greedy=True))
    assert out == generate_ids(gpt, prompt[-gpt.config.context:], 5, Sampling(greedy=True))


def test_each_model_is_refused_the_other_ones_job(gpt, bert, wordpiece):
    with pytest.raises(ValueError, match="generation needs a GPT model.*use fill_mask"):
        generate(bert, wordpiece, "the union", 5)
    with pytest.raises(ValueError, match="fill-mask needs a BERT"):
        fill_mask(gpt, wordpiece, "the [MASK] is strong")
    with pytest.raises(ValueError, match="has no \\[MASK\\]"):
        fill_mask(bert, wordpiece, "the union is strong")


def test_fill_mask_gives_top_k_candidates_per_mask(bert, wordpiece):
    out = fill_mask(bert, wordpiece, "The [MASK] of the Union is [MASK].", top_k=4)
    assert len(out) == 2 and all(len(c) == 4 for c in out)
    for candidates in out:
        probs = [p for _, p in candidates]
        assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1


class Peaked(torch.nn.Module):
    """A stand-in BERT whose every blank is sure of one token, surest at the blank ``favourite``."""

    family = "bert"

    def __init__(self, config, favourite: int):
        super().__init__()
        self.config, self.favourite = config, favourite
        self.weight = torch.nn.Parameter(torch.zeros(1))

    def forward(self, x, predict):
        logits = torch.zeros(int(predict.sum()), self.config.vocab_size)
        blanks = predict[0].nonzero().flatten().tolist()
        for row, position in enumerate(blanks):
            logits[row, 100 + position] = 20.0 if position == self.favourite else 5.0
        return type("Out", (), {"logits": logits})()


def test_masking_generation_writes_exactly_the_blanks_it_was_given(bert, wordpiece):
    prompt = "the congress shall have power"
    for order in ("left", "confident"):
        text = generate_by_masking(bert, wordpiece, prompt, 6, order=order, seed=0)
        ids = wordpiece.encode(text)
        assert "[MASK]" not in text and all(i >= wordpiece.n_special for i in ids)
        assert text == generate_by_masking(bert, wordpiece, prompt, 6, order=order, seed=0)
    greedy = generate_by_masking(bert, wordpiece, prompt, 1, Sampling(greedy=True))
    candidates = [t for t, _ in fill_mask(bert, wordpiece, prompt + " [MASK]", top_k=20)[0]]
    assert greedy.replace(" ", "") == next(t for t in candidates if not t.startswith("["))


def test_confident_order_fills_the_surest_blank_first(bert, wordpiece):
    prompt_ids = wordpiece.encode("the union")
    favourite = 1 + len(prompt_ids) + 3  # the fourth of five blanks
    model = Peaked(bert.config, favourite)
    sure = generate_by_masking(model, wordpiece, "the union", 5, Sampling(greedy=True), order="confident")
    assert sure == wordpiece.decode([100 + 1 + len(prompt_ids) + k for k in range(5)])
    calls = []
    original = model.forward
    model.forward = lambda x, predict: (calls.append(x[0].tolist()), original(x, predict))[1]
    generate_by_masking(model, wordpiece, "the union", 5, Sampling(greedy=True), order="confident")
    assert calls[1][favourite] == 100 + favourite  # filled in the first step
    assert calls[1].count(wordpiece.mask_id) == 4


def test_masking_generation_refuses_a_gpt_and_impossible_lengths(gpt, bert, wordpiece):
    with pytest.raises(ValueError, match="needs a BERT model"):
        generate_by_masking(gpt, wordpiece, "the union", 4)
    with pytest.raises(ValueError, match="unknown order"):
        generate_by_masking(bert, wordpiece, "the union", 4, order="right")
    with pytest.raises(ValueError, match="no room for a prompt"):
        generate_by_masking(bert, wordpiece, "the union", bert.config.context)
