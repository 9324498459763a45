import json

import pytest
import torch
import torch.nn.functional as F

import bertgpt
from bertgpt.cli import main
from bertgpt.evaluate import accuracy
from bertgpt.finetune import (
    Classifier,
    finetune,
    load_classifier,
    predict,
    save_classifier,
)
from bertgpt.pretraining import IGNORE
from bertgpt.probes import probe
from bertgpt.tasks import TASKS, Example, Task, load_task
from conftest import tiny

TEXTS = ["the congress shall meet in december", "peace and war",
         "the union is strong and the people are free", "taxes"]


@pytest.fixture(scope="module")
def gpt_ck(bpe):
    return bertgpt.Checkpoint(tiny("gpt", vocab_size=bpe.vocab_size), bpe, {})


@pytest.fixture(scope="module")
def bert_ck(wordpiece):
    return bertgpt.Checkpoint(tiny("bert", vocab_size=wordpiece.vocab_size), wordpiece, {})


@pytest.fixture(scope="module")
def party(corpus):
    return load_task("party", corpus)


def _classifier(ck, lm_coef=0.0):
    torch.manual_seed(0)
    return Classifier(ck.model, ck.tokenizer, ("a", "b"), lm_coef).eval()


def test_gpt_classifier_reads_the_extract_token_never_a_pad(gpt_ck):
    clf = _classifier(gpt_ck)
    examples = [Example(t, i % 2, text_b="and so on" if i == 1 else None) for i, t in enumerate(TEXTS)]
    rows = clf.encode(examples)
    batch = clf.collate(rows)
    assert (batch["pad_mask"] == 0).any(), "the batch should need padding"
    with torch.no_grad():
        logits = clf(batch)
        alone = torch.cat([clf(clf.collate([r])) for r in rows])
        garbage = dict(batch, input_ids=batch["input_ids"].masked_fill(batch["pad_mask"] == 0, 77))
        feature, h = clf.features(batch)
    torch.testing.assert_close(logits, alone)            # padding changes nothing
    torch.testing.assert_close(clf(garbage), logits)     # nor does what the pad positions hold
    extract = batch["pad_mask"].sum(1) - 1
    assert (batch["input_ids"][torch.arange(len(rows)), extract] == gpt_ck.tokenizer.extract_id).all()
    torch.testing.assert_close(feature, h[torch.arange(len(rows)), extract])
    assert rows[1][0][0] == gpt_ck.tokenizer.start_id and gpt_ck.tokenizer.delim_id in rows[1][0]


def test_bert_classifier_ignores_padding_and_uses_segments(bert_ck):
    clf = _classifier(bert_ck)
    rows = clf.encode([Example(t, 0, text_b="and so on") for t in TEXTS])
    assert rows[0][0][0] == bert_ck.tokenizer.cls_id and rows[0][1][-1] == 1
    with torch.no_grad():
        torch.testing.assert_close(clf(clf.collate(rows)), torch.cat([clf(clf.collate([r])) for r in rows]))


def test_long_inputs_are_cut_to_the_context_keeping_the_special_tokens(gpt_ck):
    clf = _classifier(gpt_ck)
    long = " ".join(["liberty"] * 200)
    ids = clf.encode([Example(long, 0), Example(long, 0, text_b=long + " end")])
    context = gpt_ck.config.context
    assert [len(r[0]) for r in ids] == [context, context]
    assert ids[0][0][-1] == ids[1][0][-1] == gpt_ck.tokenizer.extract_id


def test_lm_coef_zero_removes_the_lm_term(gpt_ck):
    rows = _classifier(gpt_ck).encode([Example(t, i % 2) for i, t in enumerate(TEXTS)])
    with torch.no_grad():
        clf0, clf5 = _classifier(gpt_ck, 0.0), _classifier(gpt_ck, 0.5)
        batch = clf0.collate(rows)
        loss0, m0 = clf0.loss(batch)
        loss5, m5 = clf5.loss(batch)
        task = F.cross_entropy(clf0(batch), batch["label"])
        # the LM loss by hand: next token of the text, pads and special tokens ignored
        logits = gpt_ck.model(batch["input_ids"])[:, :-1]
        target = batch["input_ids"][:, 1:]
        target = torch.where(target >= gpt_ck.tokenizer.n_special, target, IGNORE)
        lm = F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=IGNORE)
    assert "lm_loss" not in m0
    torch.testing.assert_close(loss0, task)
    torch.testing.assert_close(m5["lm_loss"], lm)
    torch.testing.assert_close(loss5, task + 0.5 * lm)


def test_frozen_layers_receive_no_updates(gpt_ck, party):
    before = {k: v.clone() for k, v in gpt_ck.model.state_dict().items()}
    clf, result = finetune(gpt_ck, party.subsample(48), epochs=1, batch_size=16, freeze=1, lr=1e-2,
                           device="cpu")
    after = clf.model.state_dict()
    for name, value in before.items():
        frozen = "_emb" in name or "blocks.0." in name or name == "lm_head.weight"
        assert torch.equal(value, after[name]) == frozen, name
    assert all(torch.equal(v, gpt_ck.model.state_dict()[k]) for k, v in before.items())  # caller's intact
    keys = ("val_accuracy", "test_accuracy", "majority_baseline", "epochs_run", "train_examples", "seconds")
    assert set(keys) <= set(result)
    assert result["train_examples"] == 48 and result["epochs_run"] == 1


def test_bert_finetunes_saves_and_loads(bert_ck, party, tmp_path):
    clf, result = finetune(bert_ck, party.subsample(32), epochs=2, patience=1, device="cpu")
    assert 0 <= result["test_accuracy"] <= 1 and result["lm_coef"] == 0
    save_classifier(tmp_path / "clf", clf, metrics=result)
    again = load_classifier(tmp_path / "clf")
    assert again.labels == party.labels
    assert predict(again, party.test[:20]) == predict(clf, party.test[:20])
    with pytest.raises(bertgpt.CheckpointError, match="not a fine-tuned classifier"):
        bertgpt.save(tmp_path / "plain", bert_ck.model, bert_ck.tokenizer)
        load_classifier(tmp_path / "plain")


def test_from_scratch_is_seeded_and_differs_from_pretrained(gpt_ck, party):
    small = party.subsample(16)
    a, _ = finetune(gpt_ck, small, epochs=1, from_scratch=True, seed=3, device="cpu")
    b, _ = finetune(gpt_ck, small, epochs=1, from_scratch=True, seed=3, device="cpu")
    c, _ = finetune(gpt_ck, small, epochs=1, seed=3, device="cpu")
    name = "model.backbone.blocks.1.mlp.0.weight"
    assert torch.equal(a.state_dict()[name], b.state_dict()[name])
    assert not torch.equal(a.state_dict()[name], c.state_dict()[name])


def test_restarts_keep_the_run_best_on_validation(gpt_ck, party):
    small = party.subsample(16)
    once = [finetune(gpt_ck, small, epochs=1, seed=2 + 1000 * i, device="cpu") for i in range(3)]
    best, result = finetune(gpt_ck, small, epochs=1, seed=2, restarts=3, device="cpu")
    vals = [r["val_accuracy"] for _, r in once]
    k = vals.index(max(vals))
    assert result["restart_val_accuracies"] == vals and result["val_accuracy"] == vals[k]
    assert result["seed"] == 2 and result["run_seed"] == 2 + 1000 * k
    assert result["test_accuracy"] == once[k][1]["test_accuracy"]
    name = "head.weight"
    assert torch.equal(best.state_dict()[name], once[k][0].state_dict()[name])
    with pytest.raises(ValueError, match="restarts must be positive"):
        finetune(gpt_ck, small, restarts=0)


@pytest.mark.parametrize("name", TASKS)
def test_tasks_keep_documents_within_one_split(corpus, name):
    task = load_task(name, corpus)
    assert task == load_task(name, corpus)  # deterministic
    split_of = {d.id: d.split for d in corpus.documents}
    docs_with = {}
    for d in corpus.documents:
        for p in d.paragraphs:
            docs_with.setdefault(p, set()).add(d.id)
    for split in ("train", "val", "test"):
        examples = task.split(split)
        assert examples or split != "train"
        for e in examples:
            assert split_of[e.doc] == split and 0 <= e.label < task.n_classes
            if e.text_b is not None:  # paragraph B comes from a document of the same split
                assert any(split_of[d] == split for d in docs_with[e.text_b])
    assert {e.doc for e in task.test} <= {d.id for d in corpus.test}
    counts = [sum(e.label == k for e in task.train) for k in range(task.n_classes)]
    if name in ("next", "acceptability"):  # 50/50 by construction (the small corpus is short of some
        assert max(counts) - min(counts) <= 1  # parties and eras to balance those)


def test_acceptability_negatives_are_one_neighbour_swap(corpus):
    task = load_task("acceptability", corpus)
    sentences = {" ".join(s.split()) for d in corpus.documents for p in d.paragraphs
                 for s in bertgpt.pretraining.split_sentences(p)}
    for e in task.train[:200]:
        assert (e.text in sentences) == (e.label == 1)
        if e.label == 0:
            words = e.text.split()
            swaps = [i for i in range(len(words) - 1)
                     if " ".join([*words[:i], words[i + 1], words[i], *words[i + 2:]]) in sentences]
            assert swaps


def test_majority_baseline_and_subsample():
    ex = [Example(str(i), label) for i, label in enumerate([0, 1, 1, 1, 2, 2])]
    task = Task("toy", ("x", "y", "z"), train=ex, val=ex[:2], test=[Example("t", k) for k in (1, 1, 0, 0, 0)])
    assert task.majority_baseline() == pytest.approx(0.4)
    assert task.majority_baseline("val") == pytest.approx(0.5)
    small = task.subsample(3, seed=1)
    assert sorted(e.label for e in small.train) == [0, 1, 2] or len(small.train) == 3
    assert small.test == task.test and small.subsample(3, seed=1) == small.subsample(3, seed=1)


def test_csv_tasks(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("sentence,label\nhello,pos\n")
    with pytest.raises(ValueError, match="no 'text' column.*columns text and label"):
        load_task(bad)
    good = tmp_path / "good.csv"
    good.write_text("text,label,split\n" + "".join(f"row {i},{'neg' if i % 2 else 'pos'},{s}\n"
                                                   for i, s in enumerate(["train"] * 6 + ["val", "test"])))
    task = load_task(good)
    assert task.labels == ("neg", "pos") and len(task.train) == 6 and len(task.val) == len(task.test) == 1
    assert task.train[0] == Example("row 0", 1, doc="good.csv:2")
    with pytest.raises(ValueError, match="unknown task"):
        load_task("sentiment")


def test_probes_give_one_accuracy_per_layer(gpt_ck, bert_ck, party):
    for ck in (gpt_ck, bert_ck):
        out = probe(ck, party, max_examples=60, steps=50)
        assert sorted(out["accuracy"]) == list(range(ck.config.n_layer + 1))
        assert all(0 <= a <= 1 for a in out["accuracy"].values())
        assert 0 <= out["majority_baseline"] <= 1


def test_cli_finetune_and_errors(gpt_ck, tmp_path, capsys):
    bertgpt.save(tmp_path / "gpt", gpt_ck.model, gpt_ck.tokenizer)
    csv = tmp_path / "toy.csv"
    splits = ["train"] * 8 + ["val", "test"] * 2
    csv.write_text("text,label,split\n" + "".join(f"word {i},{i % 2},{s}\n" for i, s in enumerate(splits)))
    main(["finetune", "--checkpoint", str(tmp_path / "gpt"), "--task", str(csv), "--out",
          str(tmp_path / "clf"), "--epochs", "1", "--device", "cpu"])
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {"val_accuracy", "test_accuracy", "majority_baseline", "epochs_run"} <= set(result)
    test = load_task(csv).test
    assert accuracy([e.label for e in test], predict(load_classifier(tmp_path / "clf"), test)) == \
        result["test_accuracy"]
    with pytest.raises(SystemExit) as exit:
        main(["probe", "--checkpoint", str(tmp_path / "gpt"), "--task", "nonsense"])
    assert exit.value.code == 2 and "error: unknown task" in capsys.readouterr().err
