import dataclasses
import importlib
import itertools

import pytest
import torch
import torch.nn.functional as F

import bertgpt
from bertgpt.config import FinetuneConfig
from bertgpt.evaluate import best_threshold
from bertgpt.finetune import (
    Classifier,
    GainClassifier,
    default_readout,
    finetune,
    load_classifier,
    patience_stop,
    predict,
    run_key,
    save_classifier,
)
from bertgpt.inputs import IGNORE
from bertgpt.tasks import Example, Tagged
from bertgpt.zeroshot import context_gains

TEXTS = ["the congress shall meet in december", "peace and war",
         "the union is strong and the people are free", "taxes"]


def _classifier(ck, lm_coef=0.0):
    torch.manual_seed(0)
    return Classifier(ck.model, ck.tokenizer, ("a", "b"), lm_coef).eval()


def test_gpt_classifier_reads_the_extract_token_never_a_pad(gpt_ck):
    clf = _classifier(gpt_ck)
    examples = [Example(t, i % 2, text_b="and so on" if i == 1 else None) for i, t in enumerate(TEXTS)]
    rows = clf.pack(examples)
    batch = clf.collate(rows)
    assert (batch["pad_mask"] == 0).any(), "the batch should need padding"
    with torch.no_grad():
        logits = clf(batch)
        alone = torch.cat([clf(clf.collate([r])) for r in rows])
        garbage = dict(batch, input_ids=batch["input_ids"].masked_fill(batch["pad_mask"] == 0, 77))
        h = gpt_ck.model(batch["input_ids"], predict=False).hidden
    torch.testing.assert_close(logits, alone)            # padding changes nothing
    torch.testing.assert_close(clf(garbage), logits)     # nor does what the pad positions hold
    extract = batch["pad_mask"].sum(1) - 1
    assert (batch["input_ids"][torch.arange(len(rows)), extract] == gpt_ck.tokenizer.extract_id).all()
    torch.testing.assert_close(logits, clf.head(h[torch.arange(len(rows)), extract]))  # read at [EXTRACT]
    assert rows[1][0][0] == gpt_ck.tokenizer.start_id and gpt_ck.tokenizer.delim_id in rows[1][0]


def test_bert_classifier_ignores_padding_and_uses_segments(bert_ck):
    clf = _classifier(bert_ck)
    rows = clf.pack([Example(t, 0, text_b="and so on") for t in TEXTS])
    assert rows[0][0][0] == bert_ck.tokenizer.cls_id and rows[0][1][-1] == 1
    with torch.no_grad():
        torch.testing.assert_close(clf(clf.collate(rows)), torch.cat([clf(clf.collate([r])) for r in rows]))


def test_long_inputs_are_cut_to_the_context_keeping_the_special_tokens(gpt_ck):
    clf = _classifier(gpt_ck)
    long = " ".join(["liberty"] * 200)
    ids = clf.pack([Example(long, 0), Example(long, 0, text_b=long + " end")])
    context = gpt_ck.config.context
    assert [len(r[0]) for r in ids] == [context, context]
    assert ids[0][0][-1] == ids[1][0][-1] == gpt_ck.tokenizer.extract_id


def test_lm_coef_zero_removes_the_lm_term(gpt_ck):
    rows = _classifier(gpt_ck).pack([Example(t, i % 2) for i, t in enumerate(TEXTS)])
    with torch.no_grad():
        clf0, clf5 = _classifier(gpt_ck, 0.0), _classifier(gpt_ck, 0.5)
        batch = clf0.collate(rows)
        loss0, m0 = clf0.loss(batch)
        loss5, m5 = clf5.loss(batch)
        task = F.cross_entropy(clf0(batch), batch["label"])
        # the LM loss by hand: next token of the text, pads and special tokens ignored
        logits = gpt_ck.model(batch["input_ids"]).logits[:, :-1]
        target = batch["input_ids"][:, 1:]
        target = torch.where(target >= gpt_ck.tokenizer.n_special, target, IGNORE)
        lm = F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=IGNORE)
    assert "lm_loss" not in m0
    torch.testing.assert_close(loss0, task)
    torch.testing.assert_close(m5["lm_loss"], lm)
    torch.testing.assert_close(loss5, task + 0.5 * lm)


def test_frozen_layers_receive_no_updates(gpt_ck, party):
    before = {k: v.clone() for k, v in gpt_ck.model.state_dict().items()}
    cfg = FinetuneConfig(epochs=1, batch_size=16, freeze=1, lr=1e-2)
    clf, result = finetune(gpt_ck, party.subsample(48), cfg, device="cpu")
    after = clf.model.state_dict()
    for name, value in before.items():
        frozen = "_emb" in name or "blocks.0." in name or name == "lm_head.weight"
        assert torch.equal(value, after[name]) == frozen, name
    assert all(torch.equal(v, gpt_ck.model.state_dict()[k]) for k, v in before.items())  # caller's intact
    keys = ("val_accuracy", "test_accuracy", "majority_baseline", "epochs_run", "train_examples", "seconds")
    assert set(keys) <= set(result)
    assert result["train_examples"] == 48 and result["epochs_run"] == 1


def test_bert_finetunes_saves_and_loads(bert_ck, party, tmp_path):
    clf, result = finetune(bert_ck, party.subsample(32), FinetuneConfig(epochs=2, patience=1), device="cpu")
    assert 0 <= result["test_accuracy"] <= 1 and result["lm_coef"] == 0
    save_classifier(tmp_path / "clf", clf, metrics=result)
    again = load_classifier(tmp_path / "clf")
    assert again.labels == party.labels
    assert predict(again, party.test[:20]) == predict(clf, party.test[:20])
    assert len(result["history"]) == result["epochs_run"] <= 2


def test_from_scratch_is_seeded_and_differs_from_pretrained(gpt_ck, party):
    small = party.subsample(16)
    cfg = FinetuneConfig(epochs=1, seed=3)
    a, _ = finetune(gpt_ck, small, cfg, from_scratch=True, device="cpu")
    b, _ = finetune(gpt_ck, small, cfg, from_scratch=True, device="cpu")
    c, _ = finetune(gpt_ck, small, cfg, device="cpu")
    name = "model.backbone.blocks.1.mlp.0.weight"
    assert torch.equal(a.state_dict()[name], b.state_dict()[name])
    assert not torch.equal(a.state_dict()[name], c.state_dict()[name])


def test_a_label_curve_draws_each_seeds_own_labels_and_matches_single_runs(gpt_ck, party):
    curve = bertgpt.label_curve(gpt_ck, party, sizes=(8, 12), seeds=(0, 1), from_scratch=True)
    assert list(curve) == [8, 12] and all(len(accs) == 2 for accs in curve.values())
    # the second seed's point is the run finetune gives on that seed's own draw of 12 examples
    cfg = FinetuneConfig(epochs=8, patience=3, lm_coef=0.0, seed=1, lr=1e-3)
    _, one = finetune(gpt_ck, party.subsample(12, seed=1), cfg, from_scratch=True, progress=False)
    assert curve[12][1] == one["test_accuracy"]
    assert party.subsample(12, seed=1).train != party.subsample(12, seed=0).train


def test_a_label_curve_keeps_each_run_and_reads_it_back_instead_of_fine_tuning_again(
        gpt_ck, party, monkeypatch):
    module = importlib.import_module("bertgpt.finetune")  # bertgpt.finetune is the function
    runs, real = [], module.finetune
    monkeypatch.setattr(module, "finetune", lambda *a, **kw: runs.append(a[1]) or real(*a, **kw))
    first = bertgpt.label_curve(gpt_ck, party, sizes=(8,), seeds=(5,), from_scratch=True)
    again = bertgpt.label_curve(gpt_ck, party, sizes=(8,), seeds=(5, 6), from_scratch=True)
    assert again[8][0] == first[8][0] and len(runs) == 2  # seed 5 read back, only seed 6 fine-tuned
    assert runs[1].train == party.subsample(8, seed=6).train
    # weights built in memory have no hash: a run that starts from them is never kept
    bertgpt.label_curve(gpt_ck, party, sizes=(8,), seeds=(5,))
    bertgpt.label_curve(gpt_ck, party, sizes=(8,), seeds=(5,))
    assert len(runs) == 4


def test_a_runs_key_names_its_start_its_examples_and_its_recipe(gpt_ck, party):
    cfg, small = FinetuneConfig(seed=0), party.subsample(8, seed=0)
    hashed = dataclasses.replace(gpt_ck, info={"weights_sha256": "a" * 64})
    other = dataclasses.replace(gpt_ck, info={"weights_sha256": "b" * 64})
    assert run_key(gpt_ck, small, cfg) is None and run_key(hashed, small, cfg) != run_key(other, small, cfg)
    assert run_key(hashed, small, cfg, from_scratch=True) == run_key(other, small, cfg, from_scratch=True)
    assert run_key(hashed, small, cfg) != run_key(hashed, party.subsample(8, seed=1), cfg)
    assert run_key(hashed, small, cfg) != run_key(hashed, small, FinetuneConfig(seed=1))
    assert run_key(hashed, small, cfg) != run_key(hashed, small, cfg, from_scratch=True)


def test_finetuning_trains_on_the_threads_training_gets_and_gives_the_caller_its_own_back(
        gpt_ck, party, monkeypatch):
    seen = []
    module = importlib.import_module("bertgpt.finetune")  # bertgpt.finetune is the function
    train = module.train

    def spy(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return train(*args, **kwargs)

    monkeypatch.setattr(module, "train", spy)
    monkeypatch.setenv("BERTGPT_THREADS", "2")
    caller = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        finetune(gpt_ck, party.subsample(16), FinetuneConfig(epochs=1), device="cpu")
        assert seen == [2] and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(caller)


def test_restarts_keep_the_run_best_on_validation(gpt_ck, party):
    small = party.subsample(16)
    once = [finetune(gpt_ck, small, FinetuneConfig(epochs=1, seed=2 + 1000 * i), device="cpu")
            for i in range(3)]
    best, result = finetune(gpt_ck, small, FinetuneConfig(epochs=1, seed=2, restarts=3), device="cpu")
    vals = [r["val_accuracy"] for _, r in once]
    k = vals.index(max(vals))
    assert result["restart_val_accuracies"] == vals and result["val_accuracy"] == vals[k]
    assert result["seed"] == 2 and result["run_seed"] == 2 + 1000 * k
    assert result["test_accuracy"] == once[k][1]["test_accuracy"]
    name = "head.weight"
    assert torch.equal(best.state_dict()[name], once[k][0].state_dict()[name])


def test_one_run_is_one_schedule_with_early_stopping_on_validation(bert_ck, party):
    cfg = FinetuneConfig(epochs=4, patience=1, lr=1e-3, batch_size=8)
    _, result = finetune(bert_ck, party.subsample(32), cfg, device="cpu")
    epochs = [h["epoch"] for h in result["history"]]
    assert epochs == list(range(1, result["epochs_run"] + 1))
    best = max(h["val_accuracy"] for h in result["history"])
    assert result["val_accuracy"] == best
    assert result["best_epoch"] == next(h["epoch"] for h in result["history"] if h["val_accuracy"] == best)
    assert result["epochs_run"] == 4 or result["epochs_run"] == result["best_epoch"] + 1


def test_patience_stop_replays_the_runs_early_stopping(bert_ck, party):
    history = [dict(epoch=e + 1, val_accuracy=v) for e, v in enumerate([0.5, 0.5, 0.4, 0.6, 0.7, 0.6])]
    assert patience_stop(history, 1) == (2, 0.5)  # a tie does not reset the count
    assert patience_stop(history, 2) == (3, 0.5)
    assert patience_stop(history, 3) == (6, 0.7)  # never ran out: the last epoch, the best kept
    with pytest.raises(ValueError, match="patience"):
        patience_stop(history, 0)
    # the same answer as a real run with that patience, from the history of a run without stopping
    cfg = FinetuneConfig(epochs=4, patience=4, lr=1e-3, batch_size=8)
    small = party.subsample(32)
    full = finetune(bert_ck, small, cfg, device="cpu")[1]["history"]
    stopped = finetune(bert_ck, small, dataclasses.replace(cfg, patience=1), device="cpu")[1]
    assert patience_stop(full, 1) == (stopped["epochs_run"], stopped["val_accuracy"])


def test_keep_layers_keeps_the_lower_blocks_and_reinitialises_the_rest(gpt_ck):
    from bertgpt.finetune import keep_layers
    n = gpt_ck.config.n_layer
    kept = keep_layers(gpt_ck, 1, seed=3)
    old, new = gpt_ck.model.backbone, kept.model.backbone
    assert torch.equal(old.tok_emb.weight, new.tok_emb.weight)
    assert torch.equal(old.blocks[0].attn.qkv.weight, new.blocks[0].attn.qkv.weight)
    for i in range(1, n):
        assert not torch.equal(old.blocks[i].attn.qkv.weight, new.blocks[i].attn.qkv.weight)
    again = keep_layers(gpt_ck, 1, seed=3).model.backbone
    assert torch.equal(new.blocks[1].attn.qkv.weight, again.blocks[1].attn.qkv.weight)  # seeded
    assert kept.info["kept_layers"] == 1 and gpt_ck.model.backbone is old  # the original is untouched
    with pytest.raises(ValueError, match="between 0 and"):
        keep_layers(gpt_ck, n + 1)


def _tagged_task(corpus, n=24):
    task = bertgpt.load_task("boundaries", corpus)
    return dataclasses.replace(task.subsample(n), val=task.val[:8], test=task.test[:8])


@pytest.mark.parametrize("ck_name", ["gpt_ck", "bert_ck"])
def test_a_word_tag_sits_on_its_last_token(request, ck_name):
    ck = request.getfixturevalue(ck_name)
    example = Tagged(("the", "congressional", "session", "ended", "we", "met"), (0, 0, 0, 1, 0, IGNORE))
    clf = Classifier(ck.model, ck.tokenizer, ("inside", "ends a sentence"), lm_coef=0, per_token=True)
    ids, segments, tags = clf.pack([example])[0]
    assert len(ids) == len(tags) and tags[0] == tags[-1] == IGNORE  # the special tokens are not scored
    pieces = [ck.tokenizer.tokens(w) for w in example.words]
    ends = list(itertools.accumulate(len(p) for p in pieces))  # 1 + index of each word's last token
    assert [tags[i] for i in ends] == list(example.tags)
    assert all(t == IGNORE for i, t in enumerate(tags) if i not in ends)
    batch = clf.collate([(ids, segments, tags)] * 2)
    assert batch["label"].shape == batch["input_ids"].shape
    assert clf.eval()(batch).shape == (2, len(ids), 2)


def test_token_level_finetuning_reports_f1_and_round_trips(bert_ck, gpt_ck, corpus, tmp_path):
    task = _tagged_task(corpus)
    for ck in (gpt_ck, bert_ck):
        clf, result = finetune(ck, task, FinetuneConfig(epochs=1, lm_coef=0.0), device="cpu")
        assert 0 <= result["test_f1"] <= 1 and "test_accuracy" not in result
        assert result["majority_baseline"] == task.majority_baseline() > 0.5
        assert 0 <= result["test_token_accuracy"] <= 1 and "val_f1" in result["history"][0]
    save_classifier(tmp_path / "tagger", clf)
    again = load_classifier(tmp_path / "tagger")
    predicted = predict(again, task.test)
    assert again.per_token and predicted == predict(clf, task.test)
    # one prediction per scored word that fits the (tiny) context
    assert [len(p) for p in predicted] == [sum(t != IGNORE for t in row[2]) for row in clf.pack(task.test)]
    assert all(0 < len(p) <= sum(t != IGNORE for t in e.tags) for p, e in zip(predicted, task.test))


PAIRS = [Example("the congress shall meet in december", 1, text_b="and the people are free"),
         Example("peace and war", 0, text_b="taxes upon tea and sugar"),
         Example("the union is strong", 1, text_b="and it shall stay strong"),
         Example("taxes", 0, text_b="the navy needs ships")]


def test_the_gain_readout_scores_a_pair_as_the_zero_shot_reading_does(gpt_ck):
    clf = GainClassifier(gpt_ck.model, gpt_ck.tokenizer, ("not next", "next")).eval()
    batch = clf.collate(clf.pack(PAIRS))
    with torch.no_grad():
        gains, _ = clf.gains(batch)
    expected = context_gains(gpt_ck.model, gpt_ck.tokenizer, PAIRS, span=GainClassifier.SPAN)
    torch.testing.assert_close(gains, torch.tensor(expected), atol=1e-4, rtol=1e-4)
    with torch.no_grad():
        padded = clf(batch)
        alone = torch.cat([clf(clf.collate([row])) for row in clf.pack(PAIRS)])
    torch.testing.assert_close(padded, alone)  # padding changes nothing


def test_the_gain_readout_starts_from_the_cut_that_best_splits_the_training_gains(gpt_ck):
    clf = GainClassifier(gpt_ck.model, gpt_ck.tokenizer, ("not next", "next")).eval()
    clf.start_from(PAIRS)
    with torch.no_grad():
        gains = clf.gains(clf.collate(clf.pack(PAIRS)))[0].tolist()
    cut = best_threshold(gains, [e.label for e in PAIRS])
    assert float(clf.shift) == pytest.approx(cut) and float(clf.scale) > 0
    assert predict(clf, PAIRS) == [int(g > cut) for g in gains]  # the zero-shot rule, before any update


def test_the_gain_readout_is_refused_where_it_has_no_meaning(gpt_ck, bert_ck):
    with pytest.raises(ValueError, match="two-class pair task"):
        GainClassifier(bert_ck.model, bert_ck.tokenizer, ("a", "b"))
    with pytest.raises(ValueError, match="two-class pair task"):
        GainClassifier(gpt_ck.model, gpt_ck.tokenizer, ("a", "b", "c"))
    with pytest.raises(ValueError, match="GainClassifier"):
        Classifier(gpt_ck.model, gpt_ck.tokenizer, ("a", "b"), readout="gain")
    with pytest.raises(ValueError, match="readout must be one of"):
        Classifier(gpt_ck.model, gpt_ck.tokenizer, ("a", "b"), readout="cls")
    with pytest.raises(ValueError, match="every example must have a text_b"):
        GainClassifier(gpt_ck.model, gpt_ck.tokenizer, ("a", "b")).pack([Example("alone", 0)])


def test_a_fine_tuned_gain_classifier_saves_and_loads(gpt_ck, tmp_path):
    task = bertgpt.Task("pairs", ("not next", "next"), PAIRS * 4, PAIRS, PAIRS)
    clf, result = finetune(gpt_ck, task, FinetuneConfig(readout="gain", epochs=2), progress=False)
    assert isinstance(clf, GainClassifier) and result["test_accuracy"] is not None
    save_classifier(tmp_path / "clf", clf)
    again = load_classifier(tmp_path / "clf")
    assert isinstance(again, GainClassifier) and predict(again, PAIRS) == predict(clf, PAIRS)


def test_the_default_readout_is_the_gain_for_a_gpt_on_a_two_class_pair_task_only():
    pairs = bertgpt.Task("pairs", ("not next", "next"), PAIRS, PAIRS, PAIRS)
    three = bertgpt.Task("pairs", ("a", "b", "c"), PAIRS, PAIRS, PAIRS)
    single = bertgpt.Task("single", ("a", "b"), [Example(t, i % 2) for i, t in enumerate(TEXTS)], [], [])
    assert default_readout("gpt", pairs) == "gain"
    assert default_readout("bert", pairs) == default_readout("gpt", three) == "summary"
    assert default_readout("gpt", single) == "summary"
