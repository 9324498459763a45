from bertgpt.probes import probe


def test_probes_give_one_accuracy_per_layer(gpt_ck, bert_ck, party):
    for ck in (gpt_ck, bert_ck):
        out = probe(ck, party, max_examples=60, steps=50)
        assert sorted(out["accuracy"]) == list(range(ck.config.n_layer + 1))
        assert all(0 <= a <= 1 for a in out["accuracy"].values())
        assert 0 <= out["majority_baseline"] <= 1
