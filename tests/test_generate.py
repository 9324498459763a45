import pytest
import torch

import bertgpt
from bertgpt.generate import (
    Sampling,
    fill_mask,
    generate,
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
