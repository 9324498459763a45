"""bertgpt.zeroshot: task scores from a pretrained model with no labelled example."""

import pytest
import torch

import bertgpt
from bertgpt import zeroshot
from bertgpt.objectives import mlm_nsp_loss
from bertgpt.pretraining import VAL_MASK_RATE, bert_collate, document_sentences, nsp_pairs
from bertgpt.scoring import token_log_probs
from bertgpt.trainer import validate
from bertgpt.zeroshot import (
    best_threshold,
    context_gains,
    nsp_pair_scores,
    row_log_probs,
    swap_pairs,
    swap_preference,
    zero_shot_next,
)


@pytest.fixture(scope="module")
def pairs_task(corpus):
    return bertgpt.load_task("next", corpus)


def test_batched_row_log_probs_equal_each_row_scored_alone(gpt_ck):
    rows = [[1, 20, 30, 40, 50], [1, 7], [1, 9, 9, 9, 9, 9, 9, 9]]
    batched = row_log_probs(gpt_ck.model, rows, batch_size=2)
    for row, logp in zip(rows, batched):
        assert torch.allclose(logp, token_log_probs(gpt_ck.model, row), atol=1e-5)


def test_best_threshold_separates_what_can_be_separated():
    scores, labels = [0.1, 0.4, 0.35, 0.8, 0.9], [0, 0, 0, 1, 1]
    t = best_threshold(scores, labels)
    assert [int(s > t) for s in scores] == labels


def test_context_gain_is_what_paragraph_a_adds_to_the_log_probability_of_b(gpt_ck, pairs_task):
    tok, e = gpt_ck.tokenizer, pairs_task.val[0]
    a, b = tok.encode(e.text)[-10:], tok.encode(e.text_b)[:10]
    with_a = token_log_probs(gpt_ck.model, [tok.sep_id, *a, *b])[-len(b):].sum()
    alone = token_log_probs(gpt_ck.model, [tok.sep_id, *b]).sum()
    assert context_gains(gpt_ck.model, tok, [e], span=10)[0] == pytest.approx(float(with_a - alone), abs=1e-4)


@pytest.mark.parametrize("family", ["gpt", "bert"])
def test_zero_shot_next_reports_accuracies_between_0_and_1(gpt_ck, bert_ck, pairs_task, family):
    ck = gpt_ck if family == "gpt" else bert_ck
    result = zero_shot_next(ck, pairs_task, n=20, span=20)
    assert 0 <= result["test_accuracy"] <= 1 and 0 <= result["val_accuracy"] <= 1
    assert ("head_test_accuracy" in result) == (family == "bert")


@pytest.mark.parametrize("scorer", ["context_gains", "nsp_scores"])
def test_zero_shot_next_cuts_on_validation_and_is_judged_on_held_out_pairs(gpt_ck, bert_ck, pairs_task,
                                                                          scorer, monkeypatch):
    # scores that say the label on validation pairs and its opposite on test pairs: a cut chosen on
    # validation gets every validation pair right and every test pair wrong; a cut fitted to the test
    # pairs, or validation's accuracy reported as the test's, would score 1 on test
    test = {id(e) for e in pairs_task.test}

    def rigged(model, tok, examples, *span):
        return [(1.0 if e.label else -1.0) * (-1 if id(e) in test else 1) for e in examples]

    monkeypatch.setattr(zeroshot, scorer, rigged)
    result = zero_shot_next(gpt_ck if scorer == "context_gains" else bert_ck, pairs_task, n=40)
    assert result["val_accuracy"] == 1.0 and result["test_accuracy"] == 0.0


def test_swap_preference_counts_the_pairs_where_the_original_scores_higher(gpt_ck, corpus):
    task = bertgpt.load_task("acceptability", corpus)
    pairs = swap_pairs(task, n=30)
    assert pairs and all(a != b and sorted(a.split()) == sorted(b.split()) for a, b in pairs)
    expected = sum(bertgpt.log_likelihood(gpt_ck.model, gpt_ck.tokenizer, a).log_prob
                   > bertgpt.log_likelihood(gpt_ck.model, gpt_ck.tokenizer, b).log_prob for a, b in pairs)
    assert swap_preference(gpt_ck, task, n=30) == pytest.approx(expected / len(pairs))


def test_nsp_pair_scores_decide_as_validation_scores_the_head(bert_ck, corpus):
    tok = bert_ck.tokenizer
    pairs = nsp_pairs(document_sentences(tok, corpus.val), 29, torch.Generator().manual_seed(0))[:64]
    scores = nsp_pair_scores(bert_ck.model, tok, pairs, torch.Generator().manual_seed(3), batch_size=32)
    g = torch.Generator().manual_seed(3)
    batches = [bert_collate(pairs[s:s + 32], tok, VAL_MASK_RATE, g) for s in range(0, 64, 32)]
    head = validate(bert_ck.model, mlm_nsp_loss, batches)["nsp_accuracy"]
    right = ((scores > 0).long() == torch.tensor([p[2] for p in pairs])).float().mean()
    assert scores.shape == (64,) and float(right) == pytest.approx(head, abs=1e-6)


def test_in_context_prompts_show_each_demonstration_with_its_label_and_end_open():
    demos = [("We met.", "1861-1945"), ("They left.", "after 1945")]
    prompt = zeroshot.in_context_prompt(demos, "It rained.")
    assert prompt == "We met. (1861-1945).\nThey left. (after 1945).\nIt rained. ("


def test_in_context_accuracy_picks_the_label_the_model_finds_most_probable(gpt_ck, monkeypatch):
    labels = ("alpha", "beta")
    task = bertgpt.Task("toy", labels, [bertgpt.Example(f"text {i}", i % 2) for i in range(8)], [],
                        [bertgpt.Example(f"test {i}", i % 2) for i in range(6)])
    assert zeroshot.in_context_accuracy(gpt_ck, task, shots=1) in {i / 6 for i in range(7)}
    beta = gpt_ck.tokenizer.encode("beta).")

    def prefer_beta(model, rows, batch_size=32):  # the model finds "beta" likelier after any prompt
        return [torch.full((len(r) - 1,), -1.0 if r[-len(beta):] == beta else -2.0) for r in rows]

    monkeypatch.setattr(zeroshot, "row_log_probs", prefer_beta)
    assert zeroshot.in_context_accuracy(gpt_ck, task, shots=1) == 0.5  # "beta" for all: the odd half
    assert zeroshot.in_context_accuracy(gpt_ck, task, shots=0, n=2) == 0.5


def test_in_context_draws_are_the_demonstrations_and_a_prompt_too_long_is_refused(gpt_ck):
    labels = ("alpha", "beta")
    train = [bertgpt.Example(f"text {i}", i % 2) for i in range(8)]
    task = bertgpt.Task("toy", labels, train, [], [bertgpt.Example("test " * 20, 0)])
    demos = zeroshot.demonstrations(task, 2, seed=3)
    assert sorted(e.label for e in demos) == [0, 0, 1, 1]
    assert demos == zeroshot.demonstrations(task, 2, seed=3)  # the seed decides the draw
    long = bertgpt.Task("toy", labels, [bertgpt.Example("word " * 60, i % 2) for i in range(4)], [],
                        task.test)
    with pytest.raises(ValueError, match="use shorter texts"):
        zeroshot.in_context_accuracy(gpt_ck, long, shots=2)
