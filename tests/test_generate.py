import json
import math
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import bertgpt
from bertgpt.cli import main
from bertgpt.evaluate import (
    accuracy,
    cloze_accuracy,
    cloze_items,
    confusion_matrix,
    f1,
    macro_f1,
    masked_token_accuracy,
    perplexity,
)
from bertgpt.generate import (
    fill_mask,
    generate,
    generate_ids,
    log_likelihood,
    pseudo_log_likelihood,
    repetition_penalty_filter,
    sample_next,
    token_log_probs,
    top_k_filter,
    top_p_filter,
)
from bertgpt.pretraining import clm_loss
from conftest import tiny

SENTENCE = "the congress shall have power to lay and collect taxes"


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny models run fastest on one thread; on a shared, loaded CPU two threads can be 100x slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def gpt(wordpiece):
    return tiny("gpt", vocab_size=wordpiece.vocab_size).eval()


@pytest.fixture(scope="module")
def bert(wordpiece):
    return tiny("bert", vocab_size=wordpiece.vocab_size).eval()


# --- Generation -----------------------------------------------------------------------------------

@pytest.mark.parametrize("sampling", [dict(greedy=True), dict(temperature=0.9, top_k=50, top_p=0.95)])
def test_the_kv_cache_chooses_exactly_the_tokens_of_full_recomputation(gpt, wordpiece, sampling):
    prompt = wordpiece.encode(SENTENCE)  # 12 tokens + 40 new: past the context of 32, so the window slides
    runs = [generate_ids(gpt, prompt, 40, generator=torch.Generator().manual_seed(3), use_cache=cache,
                         repetition_penalty=1.2, **sampling) for cache in (True, False)]
    assert len(runs[0]) == 40 and runs[0] == runs[1]


def test_one_cached_step_gives_the_logits_of_the_full_sequence(gpt):
    ids = torch.randint(8, 100, (1, 20))
    cache = bertgpt.KVCache()
    gpt(ids[:, :-1], cache=cache)
    step = gpt(ids[:, -1:], cache=cache)[0, -1]
    assert torch.allclose(step, gpt(ids)[0, -1], atol=1e-5)


def test_same_seed_same_text_and_another_seed_another(gpt, wordpiece):
    a, b, c = (generate(gpt, wordpiece, "the union", 20, seed=s) for s in (7, 7, 8))
    assert a == b and a != c
    assert generate(gpt, wordpiece, "the union", 5, greedy=True) == generate(gpt, wordpiece, "the union", 5,
                                                                              temperature=0)


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
    assert {sample_next(logits, 2.0, top_k=5, generator=g) for _ in range(500)} <= top5
    nucleus = set(torch.isfinite(top_p_filter(logits, 0.6)).nonzero().flatten().tolist())
    drawn = {sample_next(logits, 1.0, top_p=0.6, generator=g) for _ in range(500)}
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
        out = generate_ids(gpt, prompt, 5, greedy=True)
    assert out == generate_ids(gpt, prompt[-gpt.config.context:], 5, greedy=True)


def test_each_model_is_refused_the_other_ones_job(gpt, bert, wordpiece):
    with pytest.raises(ValueError, match="generation needs a causal .GPT. model.*use fill_mask"):
        generate(bert, wordpiece, "the union", 5)
    with pytest.raises(ValueError, match="fill-mask needs a BERT"):
        fill_mask(gpt, wordpiece, "the [MASK] is strong")
    with pytest.raises(ValueError, match="has no \\[MASK\\]"):
        fill_mask(bert, wordpiece, "the union is strong")
    with pytest.raises(ValueError, match="a GPT .causal model. sees only the left"):
        cloze_accuracy(gpt, wordpiece, [SENTENCE], sides="both")


def test_fill_mask_gives_top_k_candidates_per_mask(bert, wordpiece):
    out = fill_mask(bert, wordpiece, "The [MASK] of the Union is [MASK].", top_k=4)
    assert len(out) == 2 and all(len(c) == 4 for c in out)
    for candidates in out:
        probs = [p for _, p in candidates]
        assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1


# --- Scoring --------------------------------------------------------------------------------------

def _overfit(model, loss, steps):
    torch.manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(steps):
        opt.zero_grad()
        loss(model).backward()
        opt.step()
    return model.eval()


def test_log_likelihood_is_the_sum_of_next_token_log_probs(gpt, wordpiece):
    score = log_likelihood(gpt, wordpiece, SENTENCE)
    ids = torch.tensor([[wordpiece.sep_id, *wordpiece.encode(SENTENCE)]])
    with torch.no_grad():
        by_hand = -F.cross_entropy(gpt(ids)[0, :-1], ids[0, 1:], reduction="sum")
    assert score.n_tokens == len(ids[0]) - 1 and score.log_prob < 0
    assert math.isclose(score.log_prob, float(by_hand), rel_tol=1e-5)


def test_a_long_stream_is_scored_once_per_token_in_sliding_windows(gpt):
    stream = torch.randint(8, 100, (100,))  # > 3 contexts of 32
    for stride in (8, 16, 31):
        logp = token_log_probs(gpt, stream, stride=stride)
        assert logp.shape == (99,)
        first = gpt(stream[None, :32])[0].log_softmax(-1)[torch.arange(31), stream[1:32]]
        assert torch.allclose(logp[:31], first, atol=1e-5)  # the first window's tokens
    start = 16  # with stride 16, token 40 is scored in the window starting at 16
    with torch.no_grad():
        window = gpt(stream[None, start:start + 32])[0].log_softmax(-1)
    assert math.isclose(float(token_log_probs(gpt, stream, stride=16)[39]),
                        float(window[40 - start - 1, stream[40]]), abs_tol=1e-5)


def test_perplexity_is_exp_of_the_mean_negative_log_likelihood(gpt, wordpiece):
    texts = [SENTENCE, "we the people", "the union is strong"]
    scores = [log_likelihood(gpt, wordpiece, t) for t in texts]
    nll = -sum(s.log_prob for s in scores) / sum(s.n_tokens for s in scores)
    assert math.isclose(perplexity(gpt, wordpiece, texts), math.exp(nll), rel_tol=1e-5)
    stream = torch.randint(8, 100, (80,))
    assert math.isclose(perplexity(gpt, wordpiece, stream),
                        math.exp(-float(token_log_probs(gpt, stream).mean())), rel_tol=1e-6)
    assert math.isclose(scores[0].perplexity, math.exp(-scores[0].mean))


def test_pseudo_log_likelihood_masks_one_token_at_a_time(bert, wordpiece):
    ids = wordpiece.encode(SENTENCE)
    full = [wordpiece.cls_id, *ids, wordpiece.sep_id]
    by_hand = 0.0
    for i in range(1, len(ids) + 1):
        x = torch.tensor([full])
        x[0, i] = wordpiece.mask_id
        with torch.no_grad():
            by_hand += float(bert(x)[0][0, i].log_softmax(-1)[full[i]])
    for batch_size in (1, 5, 64):
        score = pseudo_log_likelihood(bert, wordpiece, SENTENCE, batch_size=batch_size)
        assert score.n_tokens == len(ids) and score.log_prob < 0
        assert math.isclose(score.log_prob, by_hand, rel_tol=1e-5)


def test_a_sentence_the_model_learnt_scores_above_its_words_shuffled(wordpiece):
    shuffled = "taxes the power collect to shall and congress lay have"
    ids = torch.tensor([[wordpiece.sep_id, *wordpiece.encode(SENTENCE)]])
    gpt = _overfit(tiny("gpt", vocab_size=wordpiece.vocab_size),
                   lambda m: clm_loss(m, (ids[:, :-1], ids[:, 1:])), 60)
    assert (log_likelihood(gpt, wordpiece, SENTENCE).log_prob
            > log_likelihood(gpt, wordpiece, shuffled).log_prob)

    full = torch.tensor([wordpiece.cls_id, *wordpiece.encode(SENTENCE), wordpiece.sep_id])
    n = len(full) - 2
    masked = full.repeat(n, 1)
    masked[torch.arange(n), torch.arange(1, n + 1)] = wordpiece.mask_id  # every one-mask copy

    def mlm(m):
        logits = m.mlm_logits(m.backbone(masked))[torch.arange(n), torch.arange(1, n + 1)]
        return F.cross_entropy(logits, full[1:-1])

    bert = _overfit(tiny("bert", vocab_size=wordpiece.vocab_size), mlm, 300)
    assert (pseudo_log_likelihood(bert, wordpiece, SENTENCE).log_prob
            > pseudo_log_likelihood(bert, wordpiece, shuffled).log_prob)
    assert fill_mask(bert, wordpiece, SENTENCE.replace("congress", "[MASK]"))[0][0][0] == "congress"


# --- Evaluation -----------------------------------------------------------------------------------

def test_gpt_cloze_uses_the_left_context_only(gpt, wordpiece, corpus):
    texts = [p for d in corpus.val for p in d.paragraphs][:20]
    items = cloze_items(wordpiece, texts, 50, 0, gpt.config.context)
    hits = 0
    for ids, t in items:  # a causal model's logits at t from the whole text equal those from its prefix
        x = torch.tensor([[wordpiece.sep_id, *ids]])
        hits += int(gpt(x)[0, t].argmax() == ids[t])
    assert cloze_accuracy(gpt, wordpiece, texts, n=50, seed=0) == hits / 50


def test_cloze_and_masked_accuracy_are_seeded_fractions(bert, wordpiece, corpus):
    texts = [p for d in corpus.val for p in d.paragraphs][:20]
    for sides in ("both", "left"):
        a = cloze_accuracy(bert, wordpiece, texts, n=40, seed=1, sides=sides)
        assert 0 <= a <= 1 and a == cloze_accuracy(bert, wordpiece, texts, n=40, seed=1, sides=sides)
    m = masked_token_accuracy(bert, wordpiece, texts, rate=0.15, seed=2)
    assert 0 <= m <= 1 and m == masked_token_accuracy(bert, wordpiece, texts, rate=0.15, seed=2)


def test_classification_metrics_on_hand_worked_examples():
    y_true = [1, 1, 1, 0, 0, 2]
    y_pred = [1, 0, 1, 1, 0, 2]
    assert accuracy(y_true, y_pred) == 4 / 6
    # class 1: tp=2, fp=1, fn=1 → precision 2/3, recall 2/3, F1 2/3
    assert math.isclose(f1(y_true, y_pred), 2 / 3)
    # class 0: tp=1, fp=1, fn=1 → 1/2; class 2: 1
    assert math.isclose(f1(y_true, y_pred, positive=0), 1 / 2)
    assert math.isclose(macro_f1(y_true, y_pred), (2 / 3 + 1 / 2 + 1) / 3)
    assert confusion_matrix(y_true, y_pred, 3) == [[1, 1, 0], [1, 2, 0], [0, 0, 1]]
    assert confusion_matrix(torch.tensor([0, 1]), torch.tensor([1, 1])) == [[0, 1], [0, 1]]
    assert f1([0, 0], [0, 0]) == 0.0  # no positive anywhere: F1 is 0 by convention
    with pytest.raises(ValueError, match="must pair up"):
        accuracy([1, 0], [1])


# --- Command line ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, gpt, bert, wordpiece):
    root = tmp_path_factory.mktemp("ck")
    return (bertgpt.save(root / "gpt", gpt, wordpiece), bertgpt.save(root / "bert", bert, wordpiece))


def test_cli_generate_and_fill_print_json(checkpoints, capsys):
    gpt_dir, bert_dir = checkpoints
    main(["generate", "--checkpoint", str(gpt_dir), "--prompt", "the union", "--max-new-tokens", "6",
          "--top-k", "20", "--seed", "1"])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["text"] and out["prompt_tokens"] == 3 and out["new_tokens"] == 6 and not out["truncated"]
    main(["fill", "--checkpoint", str(bert_dir), "--text", "the [MASK] of the [MASK]", "--top-k", "3"])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert len(out["masks"]) == 2 and len(out["masks"][0]) == 3 and 0 < out["masks"][0][0]["probability"] < 1


def test_cli_refuses_the_wrong_family_with_a_message_not_a_traceback(checkpoints):
    gpt_dir, bert_dir = checkpoints
    cases = ((["generate", "--checkpoint", str(bert_dir), "--prompt", "the"], "a gpt model is needed"),
             (["fill", "--checkpoint", str(gpt_dir), "--text", "the [MASK]"], "a bert model is needed"),
             (["fill", "--checkpoint", "gpt-mini", "--text", "the [MASK]"], "a bert model is needed"))
    for args, message in cases:
        out = subprocess.run([sys.executable, "-m", "bertgpt", *args], capture_output=True, text=True,
                             env=os.environ)
        assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr, out.stderr
