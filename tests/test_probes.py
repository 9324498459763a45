import torch

import bertgpt
from bertgpt import probes
from bertgpt.probes import cached_probe, probe
from bertgpt.tasks import Example, Task


def test_probes_give_one_accuracy_per_layer(gpt_ck, bert_ck, party):
    for ck in (gpt_ck, bert_ck):
        out = probe(ck, party, max_examples=60, steps=50)
        assert sorted(out["accuracy"]) == list(range(ck.config.n_layer + 1))
        assert all(0 <= a <= 1 for a in out["accuracy"].values())
        assert 0 <= out["majority_baseline"] <= 1


def test_a_probe_learns_a_task_its_features_can_tell(gpt_ck, bert_ck):
    # the label is which of two words fills the text: every layer's mean-pooled state can tell them
    # apart, so a probe that learns scores far above the constant answer's 50%
    def examples(n, offset):
        return [Example(" ".join([("peace", "war")[i % 2]] * 8), i % 2) for i in range(offset, offset + n)]

    task = Task("peace or war", ("peace", "war"), examples(60, 0), examples(20, 60), examples(40, 80))
    for ck in (gpt_ck, bert_ck):
        out = probe(ck, task, max_examples=60, steps=100, progress=False)
        assert out["majority_baseline"] == 0.5
        assert min(out["accuracy"].values()) >= 0.9, out["accuracy"]


def test_a_layer_probed_alone_scores_as_among_all_layers(gpt_ck, party):
    every = probe(gpt_ck, party, max_examples=60, steps=50, progress=False)
    last = probe(gpt_ck, party, max_examples=60, steps=50, progress=False, layers=[gpt_ck.config.n_layer])
    assert last["accuracy"] == {gpt_ck.config.n_layer: every["accuracy"][gpt_ck.config.n_layer]}


def test_a_cached_probe_is_probed_once_per_model_task_and_settings(gpt_ck, party, monkeypatch):
    calls = []
    real = probes.probe
    monkeypatch.setattr(probes, "probe", lambda *a, **k: calls.append(k) or real(*a, **k))
    saved = bertgpt.Checkpoint(gpt_ck.model, gpt_ck.tokenizer, {"weights_sha256": "0" * 64})
    first = cached_probe(saved, party, max_examples=60, steps=50)
    again = cached_probe(saved, party, max_examples=60, steps=50)
    assert len(calls) == 1 and again == first and sorted(again["accuracy"]) == list(range(3))
    cached_probe(saved, party, max_examples=60, steps=50, seed=1)  # other settings: probed anew
    cached_probe(gpt_ck, party, max_examples=60, steps=50)  # no saved hash: never cached
    cached_probe(gpt_ck, party, max_examples=60, steps=50)
    assert len(calls) == 4


def _topic_pairs(n, seed, shared_words):
    """Pairs over a 60-token vocabulary of two topics (ids 4-31 and 32-59): a true pair draws A and
    B from one topic, a false one from the two; with ``shared_words`` a true B repeats two of A's
    tokens, else A and B never share a token."""
    g = torch.Generator().manual_seed(seed)
    pairs = []
    for i in range(n):
        is_next = i % 2
        t_a = int(torch.randint(2, (1,), generator=g))
        t_b = t_a if is_next else 1 - t_a
        a = (4 + 28 * t_a + torch.randperm(14, generator=g)[:6]).tolist()  # first half of its topic
        b = (18 + 28 * t_b + torch.randperm(14, generator=g)[:6]).tolist()  # second half
        if shared_words and is_next:
            b += a[:2]
        pairs.append((a, b, is_next))
    return pairs


def test_idf_weights_count_documents_not_occurrences():
    docs = [[[4, 4, 5]], [[4]], [[6], [6]]]
    idf = probes.idf_weights(docs, vocab_size=8, n_special=4)
    assert idf[:4].tolist() == [0, 0, 0, 0]
    assert idf[4] < idf[5] == idf[6] < idf[7]  # 4 is in two documents; 5 and 6 in one; 7 in none


def test_token_bag_nsp_learns_shared_words():
    idf = torch.ones(60)
    idf[:4] = 0
    model = probes.fit_token_bag_nsp(_topic_pairs(800, 0, True), idf, rank=0, epochs=20, lr=3e-2)
    test = _topic_pairs(200, 1, True)
    right = (model(test) > 0).long() == torch.tensor([p[2] for p in test])
    assert right.float().mean() > 0.95


def test_only_the_bilinear_term_finds_a_shared_topic_without_shared_words():
    idf = torch.ones(60)
    idf[:4] = 0
    train, test = _topic_pairs(1000, 0, False), _topic_pairs(200, 1, False)
    labels = torch.tensor([p[2] for p in test])
    with_topic = probes.fit_token_bag_nsp(train, idf, rank=4, epochs=30, lr=3e-2)
    without = probes.fit_token_bag_nsp(train, idf, rank=0, epochs=30, lr=3e-2)
    assert ((with_topic(test) > 0).long() == labels).float().mean() > 0.9
    assert ((without(test) > 0).long() == labels).float().mean() < 0.65  # no shared token to go on


def test_token_bag_nsp_sees_sets_not_order():
    idf = torch.ones(60)
    model = probes.TokenBagNSP(idf, rank=3)
    with torch.no_grad():
        model.shared.normal_()
    pairs = [([5, 6, 7, 7], [7, 9, 5], 1), ([7, 6, 5], [5, 9, 9, 7], 0)]
    scores = model(pairs)
    assert torch.allclose(scores[0], scores[1])


def test_probes_with_other_seeds_share_the_test_features_and_score_as_alone(gpt_ck, party, monkeypatch):
    saved = bertgpt.Checkpoint(gpt_ck.model, gpt_ck.tokenizer, {"weights_sha256": "1" * 64})
    extracted = []
    real = probes.layer_features
    monkeypatch.setattr(probes, "layer_features", lambda m, t, ex, *a, **k: extracted.append(len(ex))
                        or real(m, t, ex, *a, **k))
    for seed in (0, 1):
        out = cached_probe(saved, party, max_examples=60, steps=50, seed=seed, layers=[1])
        alone = probe(gpt_ck, party, max_examples=60, steps=50, seed=seed, layers=[1], progress=False)
        assert out["accuracy"] == alone["accuracy"]
    n_test = len(party.test)
    assert extracted.count(n_test) == 3  # once for both cached seeds, once for each probe alone (2)
