import math

import pytest
import torch

from bertgpt.evaluate import (
    accuracy,
    bands_apart,
    bits_per_character,
    cloze_accuracy,
    cloze_items,
    cloze_ranks,
    confusion_matrix,
    doubled_words,
    f1,
    masked_token_accuracy,
    perplexity,
    seed_band,
    sem,
    shared_words,
    standard_error,
    word_kind,
    z_score,
)
from bertgpt.heldout import content_cloze_items
from bertgpt.inputs import split_sentences
from bertgpt.scoring import log_likelihood, token_log_probs

SENTENCE = "the congress shall have power to lay and collect taxes"


def test_perplexity_is_exp_of_the_mean_negative_log_likelihood(gpt, wordpiece):
    texts = [SENTENCE, "we the people", "the union is strong"]
    scores = [log_likelihood(gpt, wordpiece, t) for t in texts]
    nll = -sum(s.log_prob for s in scores) / sum(s.n_tokens for s in scores)
    assert math.isclose(perplexity(gpt, wordpiece, texts), math.exp(nll), rel_tol=1e-5)
    stream = torch.randint(8, 100, (80,))
    assert math.isclose(perplexity(gpt, wordpiece, stream),
                        math.exp(-float(token_log_probs(gpt, stream).mean())), rel_tol=1e-6)
    assert math.isclose(scores[0].perplexity, math.exp(-scores[0].mean))


def test_gpt_cloze_uses_the_left_context_only(gpt, wordpiece, corpus):
    texts = [p for d in corpus.val for p in d.paragraphs][:20]
    items = cloze_items(wordpiece, texts, 50, 0, gpt.config.context)
    hits = 0
    for ids, t in items:  # a causal model's logits at t from the whole text equal those from its prefix
        x = torch.tensor([[wordpiece.sep_id, *ids]])
        hits += int(gpt(x).logits[0, t].argmax() == ids[t])
    assert cloze_accuracy(gpt, wordpiece, texts, n=50, seed=0) == hits / 50


def test_cloze_and_masked_accuracy_are_seeded_fractions(bert, wordpiece, corpus):
    texts = [p for d in corpus.val for p in d.paragraphs][:20]
    for sides in ("both", "left"):
        a = cloze_accuracy(bert, wordpiece, texts, n=40, seed=1, sides=sides)
        assert 0 <= a <= 1 and a == cloze_accuracy(bert, wordpiece, texts, n=40, seed=1, sides=sides)
    m = masked_token_accuracy(bert, wordpiece, texts, rate=0.15, seed=2)
    assert 0 <= m <= 1 and m == masked_token_accuracy(bert, wordpiece, texts, rate=0.15, seed=2)


def test_cloze_ranks_give_top_k_accuracy_and_rank_zero_is_the_argmax(bert, wordpiece, corpus):
    texts = [p for d in corpus.val for p in d.paragraphs][:20]
    items = cloze_items(wordpiece, texts, 40, 1, bert.config.context)
    ranks = cloze_ranks(bert, wordpiece, items)
    assert (ranks == 0).float().mean().item() == cloze_accuracy(bert, wordpiece, texts, n=40, seed=1)
    ids, t = items[0]
    x = torch.tensor([[wordpiece.cls_id, *ids[:t], wordpiece.mask_id, *ids[t + 1:], wordpiece.sep_id]])
    with torch.no_grad():
        logits = bert(x).logits[0, t + 1]
    assert ranks[0].item() == int((logits > logits[ids[t]]).sum())
    assert ((ranks < 5).float().mean() >= (ranks < 1).float().mean()).item()


def test_shared_words_are_the_same_word_at_the_same_place_in_both_vocabularies(wordpiece, bpe, corpus):
    texts = [s for d in corpus.val for p in d.paragraphs[:3] for s in split_sentences(p)][:30]
    items_w, items_b, words = shared_words(wordpiece, bpe, texts)
    assert len(words) > 100 and len(items_w) == len(items_b) == len(words)
    for (ids_w, t_w), (ids_b, t_b), (i, _, word) in zip(items_w, items_b, words):
        assert wordpiece.id_to_token(ids_w[t_w]) == word.lower()
        assert bpe.id_to_token(ids_b[t_b]) == word.lower() + "</w>"
        assert word in texts[i]


def test_a_gpt_is_refused_both_sides_of_the_cloze(gpt, wordpiece):
    with pytest.raises(ValueError, match="a GPT .causal model. sees only the left"):
        cloze_accuracy(gpt, wordpiece, [SENTENCE], sides="both")


def test_classification_metrics_on_hand_worked_examples():
    y_true = [1, 1, 1, 0, 0, 2]
    y_pred = [1, 0, 1, 1, 0, 2]
    assert accuracy(y_true, y_pred) == 4 / 6
    # class 1: tp=2, fp=1, fn=1 → precision 2/3, recall 2/3, F1 2/3
    assert math.isclose(f1(y_true, y_pred), 2 / 3)
    # class 0: tp=1, fp=1, fn=1 → 1/2; class 2: 1
    assert math.isclose(f1(y_true, y_pred, positive=0), 1 / 2)
    assert confusion_matrix(y_true, y_pred, 3) == [[1, 1, 0], [1, 2, 0], [0, 0, 1]]
    assert confusion_matrix(torch.tensor([0, 1]), torch.tensor([1, 1])) == [[0, 1], [0, 1]]
    assert f1([0, 0], [0, 0]) == 0.0  # no positive anywhere: F1 is 0 by convention
    with pytest.raises(ValueError, match="must pair up"):
        accuracy([1, 0], [1])


def test_distinct_n_and_repetition_rate_measure_loops():
    from bertgpt.evaluate import distinct_n, repetition_rate
    loop = "is my is my is my is my"
    assert repetition_rate(loop, n=2) == pytest.approx(5 / 7)  # 7 bigrams, only "is my" and "my is" new
    assert repetition_rate("the state of the union is strong", n=2) == 0.0
    assert distinct_n([loop], n=2) == pytest.approx(2 / 7)
    assert distinct_n(["a b c", "a b d"], n=2) == pytest.approx(3 / 4)
    assert distinct_n(["one"], n=2) == 0.0 and repetition_rate("", n=3) == 0.0


def test_loss_by_position_averages_the_loss_at_each_position(gpt, wordpiece, corpus):
    from bertgpt.evaluate import loss_by_position
    from bertgpt.pretraining import clm_loss, gpt_eval_batches, token_stream
    batches = gpt_eval_batches(token_stream(wordpiece, corpus.val), gpt.config.context, 4, 3)
    by_position = loss_by_position(gpt, batches)
    assert by_position.shape == (gpt.config.context,)
    overall = sum(float(clm_loss(gpt, b)) * len(b[0]) for b in batches) / sum(len(b[0]) for b in batches)
    assert float(by_position.mean()) == pytest.approx(overall, rel=1e-4)


def test_bits_per_character_is_the_texts_nats_in_bits_over_their_characters(gpt, wordpiece, corpus):

    texts = [p for d in corpus.val for p in d.paragraphs][:3]
    nats = -sum(log_likelihood(gpt, wordpiece, t).log_prob for t in texts)
    expected = nats / math.log(2) / sum(map(len, texts))
    assert bits_per_character(gpt, wordpiece, texts + ["  "]) == pytest.approx(expected, rel=1e-4)
    # a random model over V tokens pays about log2(V) bits per token, spread over each token's characters
    assert 0.3 * math.log2(wordpiece.vocab_size) / 5 < expected < 3 * math.log2(wordpiece.vocab_size)
    with pytest.raises(ValueError, match="no text to score"):
        bits_per_character(gpt, wordpiece, [" "])


def test_seed_bands_are_mean_and_half_range_and_apart_only_when_they_do_not_overlap():
    assert seed_band([0.5, 0.7, 0.6]) == pytest.approx((0.6, 0.1))
    assert seed_band([0.4]) == (0.4, 0.0)
    with pytest.raises(ValueError):
        seed_band([])
    assert bands_apart([0.5, 0.7], [0.8, 0.9])  # 0.6 ± 0.1 against 0.85 ± 0.05
    assert not bands_apart([0.5, 0.7], [0.65, 0.85])  # 0.6 ± 0.1 against 0.75 ± 0.1: they overlap
    assert bands_apart([0.3, 0.3], [0.31]) and not bands_apart([0.3], [0.3])


def test_doubled_words_counts_a_word_repeated_at_once():
    assert doubled_words("of of the union") == 1 / 4
    assert doubled_words("the union of the states") == 0
    assert doubled_words("") == 0


def test_standard_error_of_an_accuracy_is_binomial():
    assert math.isclose(standard_error(0.5, 200), (0.25 / 200) ** 0.5)
    assert standard_error(1.0, 50) == 0
    with pytest.raises(ValueError):
        standard_error(0.5, 0)


def test_z_score_divides_a_gap_by_the_error_of_the_difference():
    a, b, n = 0.7, 0.5, 300
    error = (a * (1 - a) / n + b * (1 - b) / n) ** 0.5
    assert math.isclose(z_score(a, b, n), (a - b) / error)
    assert math.isclose(z_score(b, a, n), -z_score(a, b, n))
    assert z_score(1.0, 1.0, n) == 0


def test_sem_is_the_standard_deviation_over_the_root_of_the_count():
    xs = [0.5, 0.6, 0.7]
    assert math.isclose(sem(xs), 0.1 / 3 ** 0.5)
    assert math.isclose(sem(torch.tensor(xs)), sem(xs), rel_tol=1e-6)
    with pytest.raises(ValueError):
        sem([0.5])


def test_word_kind_sorts_by_place_and_spelling():
    assert word_kind(0, "The") == "first word"  # even a function word, first
    assert word_kind(3, "the") == word_kind(3, "Which") == "function word"
    assert word_kind(3, "Treasury") == "content word"
    assert word_kind(0, ".") == word_kind(5, "1861") == word_kind(5, "self-") == "punctuation, numbers"


def test_one_word_list_decides_word_kinds_and_what_the_cloze_may_hide(wordpiece, corpus):
    assert word_kind(3, "because") == word_kind(3, "themselves") == "function word"  # long ones too
    items = content_cloze_items(wordpiece, corpus, n=40)
    assert len(items) == 40
    for sentence, word in items:
        assert word_kind(1, word) == "content word" and len(word) >= 5 and sentence.count("[MASK]") == 1
