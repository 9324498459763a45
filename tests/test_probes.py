import bertgpt
from bertgpt import probes
from bertgpt.probes import cached_probe, probe


def test_probes_give_one_accuracy_per_layer(gpt_ck, bert_ck, party):
    for ck in (gpt_ck, bert_ck):
        out = probe(ck, party, max_examples=60, steps=50)
        assert sorted(out["accuracy"]) == list(range(ck.config.n_layer + 1))
        assert all(0 <= a <= 1 for a in out["accuracy"].values())
        assert 0 <= out["majority_baseline"] <= 1


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
