import dataclasses

import pytest
import torch

import bertgpt
from bertgpt.checkpoint import load_training_state
from bertgpt.inputs import IGNORE
from bertgpt.pretraining import (
    bert_batches,
    clm_loss,
    document_sentences,
    gpt_batches,
    mask_tokens,
    mlm_nsp_loss,
    nsp_pairs,
    pretraining_run,
    token_stream,
)
from conftest import tiny


def test_masking_follows_the_papers_15_and_80_10_10(wordpiece):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(wordpiece.n_special, wordpiece.vocab_size, (400, 100), generator=g)
    inputs, labels = mask_tokens(ids, wordpiece, 0.15, g)
    chosen = labels != IGNORE
    assert chosen.float().mean().item() == pytest.approx(0.15, abs=0.005)
    n = chosen.sum().item()
    as_mask = (inputs[chosen] == wordpiece.mask_id).sum().item() / n
    unchanged = (inputs[chosen] == ids[chosen]).sum().item() / n
    randomized = 1 - as_mask - unchanged
    assert as_mask == pytest.approx(0.8, abs=0.01)
    # a random replacement can draw the original token back: 0.1 * (1 - 1/V) stays "random"
    assert unchanged == pytest.approx(0.1, abs=0.01)
    assert randomized == pytest.approx(0.1, abs=0.01)
    assert (labels[chosen] == ids[chosen]).all()
    assert (inputs[~chosen] == ids[~chosen]).all()


def test_mask_split_sets_the_shares_and_always_mask_leaves_no_token_visible(wordpiece):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(wordpiece.n_special, wordpiece.vocab_size, (400, 100), generator=g)
    default = mask_tokens(ids, wordpiece, 0.15, torch.Generator().manual_seed(3))
    spelled = mask_tokens(ids, wordpiece, 0.15, torch.Generator().manual_seed(3), (0.8, 0.1, 0.1))
    assert all(torch.equal(x, y) for x, y in zip(default, spelled))  # the default is BERT's rule
    inputs, labels = mask_tokens(ids, wordpiece, 0.15, g, split=(1.0, 0.0, 0.0))
    chosen = labels != IGNORE
    assert (inputs[chosen] == wordpiece.mask_id).all()
    inputs, labels = mask_tokens(ids, wordpiece, 0.15, g, split=(0.5, 0.0, 0.5))
    chosen = labels != IGNORE
    as_mask = (inputs[chosen] == wordpiece.mask_id).float().mean().item()
    assert as_mask == pytest.approx(0.5, abs=0.02)
    assert ((inputs[chosen] == wordpiece.mask_id) | (inputs[chosen] == ids[chosen])).all()


@pytest.mark.parametrize("split", [(0.8, 0.1), (0.9, 0.2, -0.1), (0.5, 0.3, 0.1)])
def test_a_mask_split_that_is_not_three_shares_summing_to_one_is_refused(split):
    with pytest.raises(ValueError, match="mask_split"):
        bertgpt.PretrainConfig(mask_split=split)


def test_without_nsp_every_pair_is_a_continuation_and_the_loss_is_mlm_alone(wordpiece):
    docs = [[[1000 * d + 10 * k + 10 + j for j in range(4)] for k in range(60)] for d in range(20)]
    pairs = nsp_pairs(docs, 40, torch.Generator().manual_seed(0), p_next=1.0)
    assert all(is_next for _, _, is_next in pairs)
    model = tiny("bert", vocab_size=wordpiece.vocab_size).eval()
    ids = torch.randint(wordpiece.n_special, wordpiece.vocab_size, (4, 12))
    inputs, labels = mask_tokens(ids, wordpiece, 0.3, torch.Generator().manual_seed(0))
    batch = dict(input_ids=inputs, segments=torch.zeros_like(ids), pad_mask=torch.ones_like(ids),
                 labels=labels, is_next=torch.tensor([1, 0, 1, 0]))
    with torch.no_grad():
        both, metrics = mlm_nsp_loss(model, batch)
        mlm_only, _ = mlm_nsp_loss(model, batch, nsp=False)
    assert mlm_only.item() == pytest.approx(metrics["mlm_loss"].item())
    assert both.item() == pytest.approx((metrics["mlm_loss"] + metrics["nsp_loss"]).item())


def test_special_tokens_and_padding_are_never_chosen(wordpiece):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, wordpiece.vocab_size, (200, 64), generator=g)
    ids[:, 0], ids[:, 30], ids[:, 50:] = wordpiece.cls_id, wordpiece.sep_id, wordpiece.pad_id
    inputs, labels = mask_tokens(ids, wordpiece, 0.5, g)
    special = ids < wordpiece.n_special
    assert (labels[special] == IGNORE).all()
    assert (inputs[special] == ids[special]).all()
    assert (inputs[labels != IGNORE] >= wordpiece.n_special).logical_or(
        inputs[labels != IGNORE] == wordpiece.mask_id).all()


@pytest.mark.parametrize("rate", [0.0, 1.0, -0.1, 1.5])
def test_mask_rate_outside_the_open_interval_is_refused(wordpiece, rate):
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        mask_tokens(torch.full((1, 4), 20), wordpiece, rate)


def test_nsp_labels_are_balanced_and_negatives_come_from_another_document():
    # 100 documents of 60 sentences; sentence k of document d is [1000 d + 10 k + 10, ... + 3 more]:
    # every token names its document and its sentence.
    docs = [[[1000 * d + 10 * k + 10 + j for j in range(4)] for k in range(60)] for d in range(100)]
    pairs = nsp_pairs(docs, 40, torch.Generator().manual_seed(0))
    labels = torch.tensor([p[2] for p in pairs]).float()
    assert len(pairs) > 800
    assert labels.mean().item() == pytest.approx(0.5, abs=0.05)
    for a, b, is_next in pairs:
        assert len(a) + len(b) <= 40
        same_document = a[-1] // 1000 == b[0] // 1000
        follows = same_document and b[0] == a[-1] + 7  # B's first sentence is the one after A's last
        assert follows == bool(is_next) and same_document == bool(is_next)


def test_nsp_needs_two_documents(wordpiece):
    with pytest.raises(ValueError, match="at least two documents"):
        nsp_pairs([[[10, 11], [12, 13]]], 20, torch.Generator())


def test_bert_batches_have_segments_padding_and_fresh_masks(corpus, wordpiece):
    docs = document_sentences(wordpiece, corpus.train)
    batches = bert_batches(docs, wordpiece, 32, 8, 0.15, torch.Generator().manual_seed(0))
    b = next(batches)
    ids = b["input_ids"]
    assert (ids[:, 0] == wordpiece.cls_id).all()
    assert ((ids == wordpiece.sep_id).sum(1) == 2).all()
    assert set(b["segments"].unique().tolist()) <= {0, 1}
    assert ((b["pad_mask"] == 0) == (ids == wordpiece.pad_id)).all()
    assert (b["labels"][b["pad_mask"] == 0] == IGNORE).all()
    seen = [next(batches)["labels"] for _ in range(3)]
    assert not all(torch.equal(seen[0], s) for s in seen[1:])


def test_static_masking_repeats_the_drawn_batches_and_dynamic_masking_does_not(corpus, wordpiece):
    docs = document_sentences(wordpiece, corpus.train[:4])
    per_pass = len(nsp_pairs(docs, 29, torch.Generator().manual_seed(0))) // 8
    static = bert_batches(docs, wordpiece, 32, 8, 0.15, torch.Generator().manual_seed(0), dupe_factor=2)
    first_round = [next(static)["labels"] for _ in range(2 * per_pass)]  # two passes: the whole draw
    second_round = [next(static)["labels"] for _ in range(2 * per_pass)]
    key = lambda labels: labels.flatten().tolist()  # noqa: E731
    assert sorted(map(key, first_round)) == sorted(map(key, second_round))  # same masks, new order
    dynamic = bert_batches(docs, wordpiece, 32, 8, 0.15, torch.Generator().manual_seed(0))
    drawn = [key(next(dynamic)["labels"]) for _ in range(4 * per_pass)]
    assert len(set(map(tuple, drawn))) == len(drawn)


def test_clm_loss_ignores_padding_targets():
    model = tiny("gpt").eval()
    x = torch.randint(8, 512, (2, 10))
    y = torch.randint(8, 512, (2, 10))
    padded_y = y.clone()
    padded_y[:, 7:] = IGNORE
    expected = torch.nn.functional.cross_entropy(model(x).logits[:, :7].flatten(0, 1), y[:, :7].flatten())
    assert clm_loss(model, (x, padded_y)).item() == pytest.approx(expected.item(), rel=1e-5)


def test_mlm_loss_is_the_same_with_or_without_padding(wordpiece):
    model = tiny("bert").eval()
    ids = torch.tensor([[2, 20, 21, 4, 23, 3, 30, 31, 3]])
    labels = torch.full_like(ids, IGNORE)
    labels[0, 3] = 22
    batch = dict(input_ids=ids, segments=torch.tensor([[0] * 6 + [1] * 3]), pad_mask=torch.ones_like(ids),
                 labels=labels, is_next=torch.tensor([1]))
    pad = lambda t, v: torch.cat([t, torch.full((1, 5), v)], 1)  # noqa: E731
    padded = dict(input_ids=pad(ids, 0), segments=pad(batch["segments"], 0),
                  pad_mask=pad(batch["pad_mask"], 0), labels=pad(labels, IGNORE), is_next=batch["is_next"])
    loss, metrics = mlm_nsp_loss(model, batch)
    padded_loss, _ = mlm_nsp_loss(model, padded)
    assert padded_loss.item() == pytest.approx(loss.item(), rel=1e-5)


@pytest.mark.parametrize("family", ["gpt", "bert"])
def test_a_model_can_drive_the_loss_near_zero_on_one_batch(family, corpus, wordpiece, bpe):
    tok = bpe if family == "gpt" else wordpiece
    model = tiny(family, vocab_size=tok.vocab_size)
    g = torch.Generator().manual_seed(0)
    if family == "gpt":
        batch = next(gpt_batches(token_stream(tok, corpus.train[:3]), 32, 4, g))
        loss_fn = clm_loss
    else:
        batch = next(bert_batches(document_sentences(tok, corpus.train), tok, 32, 4, 0.15, g))
        loss_fn = mlm_nsp_loss
    cfg = bertgpt.TrainConfig(steps=300, batch_size=4, lr=3e-3, warmup=10, decay="constant", weight_decay=0)
    same_batch = iter(lambda: batch, None)
    history = bertgpt.train(model, loss_fn, same_batch, cfg, evaluate=bertgpt.validation(loss_fn, [batch]),
                            progress=False)
    assert history.train[0]["loss"] > 3
    assert history.val[-1]["loss"] < 0.05


def test_seeded_runs_repeat_exactly_on_cpu(corpus):
    cfg = bertgpt.model_config("tiny", "gpt")
    tcfg = bertgpt.train_config("tiny", steps=20)
    runs = [bertgpt.pretrain(corpus, cfg, tcfg, device="cpu", progress=False) for _ in range(2)]
    assert [h["loss"] for h in runs[0][2].train] == [h["loss"] for h in runs[1][2].train]
    for p, q in zip(runs[0][0].parameters(), runs[1][0].parameters()):
        assert torch.equal(p, q)
    other = bertgpt.pretrain(corpus, cfg, dataclasses.replace(tcfg, seed=1), device="cpu", progress=False)
    assert other[2].train[-1]["loss"] != runs[0][2].train[-1]["loss"]


def _crash_after_two_checkpoints(monkeypatch) -> list[int]:
    """Make the run die right after its second checkpoint (step 8 at eval_every=4), as a killed
    process would; returns the steps saved, filled as it runs."""
    real_save, saved = bertgpt.pretraining.save, []

    def save_then_crash(*args, **kwargs):
        real_save(*args, **kwargs)
        saved.append(kwargs["training_state"]["step"])
        if len(saved) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr("bertgpt.pretraining.save", save_then_crash)
    return saved


@pytest.mark.parametrize("family", ["gpt", "bert"])
def test_an_interrupted_run_resumes_to_the_weights_of_an_uninterrupted_one(family, corpus, tmp_path,
                                                                          monkeypatch):
    cfg = bertgpt.model_config("tiny", family)  # dropout on: the RNG state must resume too
    tcfg = bertgpt.train_config("tiny", family, steps=12, eval_every=4, warmup=3)
    whole, _, history = bertgpt.pretrain(corpus, cfg, tcfg, device="cpu", progress=False)
    saved = _crash_after_two_checkpoints(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        bertgpt.pretrain(corpus, cfg, tcfg, device="cpu", progress=False, out=tmp_path / "run")
    monkeypatch.undo()
    assert saved == [4, 8] and load_training_state(tmp_path / "run")["step"] == 8
    resumed, _, again = bertgpt.resume(tmp_path / "run", corpus, device="cpu", progress=False)
    for (name, p), q in zip(whole.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(p, q), name
    def measured(val):  # what the evaluations measured, without the wall-clock time they report
        return [{k: v for k, v in r.items() if k != "seconds"} for r in val]

    assert again.train == history.train and measured(again.val) == measured(history.val)
    with pytest.raises(bertgpt.CheckpointError, match="another corpus"):
        bertgpt.resume(tmp_path / "run", bertgpt.Corpus("other", corpus.documents[:20]), device="cpu")


def test_an_interrupted_electra_run_goes_on_to_the_weights_of_an_uninterrupted_one(corpus, tmp_path,
                                                                                  monkeypatch):
    """ELECTRA's run resumes as the language models' do: the generator and the detection head travel
    in the training state, the discriminator is the checkpoint's model."""
    cfg = bertgpt.model_config("tiny", "bert")
    tcfg = bertgpt.train_config("tiny", "bert", steps=12, eval_every=4, warmup=3)
    whole, _, history = bertgpt.pretraining.pretrain_electra(corpus, cfg, tcfg, device="cpu", progress=False)
    run = dict(work=tmp_path / "work", device="cpu", progress=False)
    _crash_after_two_checkpoints(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        pretraining_run(corpus, cfg, tcfg, tmp_path / "out", width=0.5, **run)
    monkeypatch.undo()
    with pytest.raises(bertgpt.CheckpointError, match="another recipe"):  # another generator's width
        pretraining_run(corpus, cfg, tcfg, tmp_path / "out", width=0.25, **run)
    ck, again = pretraining_run(corpus, cfg, tcfg, tmp_path / "out", width=0.5, **run)
    for (name, p), q in zip(whole.state_dict().items(), ck.model.state_dict().values()):
        assert torch.equal(p, q), name
    assert again.train == history.train and not (tmp_path / "work").exists()
    assert isinstance(bertgpt.load(tmp_path / "out").model, bertgpt.BERT)


def test_pretraining_run_goes_on_with_its_own_interrupted_run_and_refuses_anothers(corpus, tmp_path,
                                                                                   monkeypatch):
    cfg = bertgpt.model_config("tiny", "gpt")
    tcfg = bertgpt.train_config("tiny", "gpt", steps=8, eval_every=4, warmup=2)
    run = bertgpt.pretraining.pretraining_run
    whole, _ = run(corpus, cfg, tcfg, tmp_path / "whole", progress=False, device="cpu")
    run(corpus, cfg, tcfg, tmp_path / "out", work=tmp_path / "work", until=4, progress=False, device="cpu")
    assert (tmp_path / "work" / "training.pt").exists() and not (tmp_path / "out").exists()  # stopped at 4
    with pytest.raises(bertgpt.CheckpointError, match="another recipe"):  # the interrupted run is not lost
        run(corpus, cfg, dataclasses.replace(tcfg, lr=tcfg.lr / 2), tmp_path / "out", work=tmp_path / "work")
    with monkeypatch.context() as m:  # it goes on from update 4, never from 0
        m.setattr(bertgpt.pretraining, "pretrain", lambda *a, **k: pytest.fail("started again from 0"))
        finished, _ = run(corpus, cfg, tcfg, tmp_path / "out", work=tmp_path / "work", progress=False,
                          device="cpu")
    assert not (tmp_path / "work").exists() and finished.info["step"] == 8
    assert bertgpt.load(tmp_path / "out").info["weights_sha256"] == bertgpt.load(tmp_path / "whole").info[
        "weights_sha256"]  # the weights of the run never interrupted
    with pytest.raises(bertgpt.CheckpointError, match="nothing to resume"):
        run(corpus, None, None, tmp_path / "out")


def test_lm_training_speed_counts_tokens_per_second_of_either_architecture(bpe, corpus):
    from bertgpt.pretraining import lm_training_speed, token_stream
    stream = token_stream(bpe, corpus.train)
    for arch in ("transformer", "lstm"):
        cfg = bertgpt.model_config("tiny", "gpt", vocab_size=bpe.vocab_size, arch=arch)
        assert lm_training_speed(cfg, stream, steps=3, batch_size=4) > 0


@pytest.fixture(scope="module")
def pretrained_tiny(corpus):
    """A tiny GPT and BERT pretrained for a few updates on the addresses, as checkpoints."""
    out = {}
    for family in ("gpt", "bert"):
        tcfg = bertgpt.train_config("tiny", family, steps=10, eval_every=10)
        model, tok, _ = bertgpt.pretrain(corpus, bertgpt.model_config("tiny", family), tcfg, device="cpu",
                                         progress=False)
        out[family] = bertgpt.Checkpoint(model.eval(), tok, dict(corpus=corpus.name,
                                                                 train=dataclasses.asdict(tcfg)))
    return out


@pytest.mark.parametrize("family", ["gpt", "bert"])
def test_continued_pretraining_keeps_the_tokenizer_and_lowers_the_loss_on_the_new_corpus(
        family, pretrained_tiny, bible, corpus):
    from bertgpt.pretraining import continuation_config, continue_pretraining, pretraining_data
    ck = pretrained_tiny[family]
    before = {k: v.clone() for k, v in ck.model.state_dict().items()}
    tcfg = continuation_config(ck, steps=40)
    loss_fn = clm_loss if family == "gpt" else mlm_nsp_loss
    _, val = pretraining_data(bible, ck.tokenizer, ck.config, tcfg)
    start = bertgpt.validate(ck.model, loss_fn, val)["loss"]
    model, tok, history = continue_pretraining(ck, bible, tcfg, reference=corpus, device="cpu",
                                               progress=False)
    assert tok is ck.tokenizer and model.config == ck.config and model is not ck.model
    assert history.val[-1]["step"] == 40
    assert bertgpt.validate(model, loss_fn, val)["loss"] < start - 0.3
    fit = history.setup["coverage"]
    assert fit["reference"]["corpus"] == corpus.name and fit["reference"]["words"] > 0
    for name, p in ck.model.state_dict().items():  # the checkpoint it started from is left as it was
        assert torch.equal(p, before[name]), name


def test_continued_pretraining_refuses_a_classifier_and_a_corpus_without_training_text(
        pretrained_tiny, bible, party):
    from bertgpt.pretraining import continuation_config, continue_pretraining
    ck = pretrained_tiny["gpt"]
    clf = bertgpt.Classifier(ck.model, ck.tokenizer, party.labels)
    with pytest.raises(bertgpt.CheckpointError, match="not a Classifier"):
        continue_pretraining(bertgpt.Checkpoint(clf, ck.tokenizer, {}), bible, continuation_config(ck, 2))
    held_out = bertgpt.Corpus("held-out", tuple(bible.val))
    with pytest.raises(ValueError, match="no training document"):
        continue_pretraining(ck, held_out, continuation_config(ck, 2), device="cpu", progress=False)


def test_continuation_config_keeps_the_recipe_and_fits_warmup_and_evaluation_in_the_steps(pretrained_tiny):
    from bertgpt.pretraining import continuation_config
    ck = pretrained_tiny["bert"]
    cfg = continuation_config(ck, steps=5, lr=1e-4)
    assert (cfg.steps, cfg.lr, cfg.warmup, cfg.eval_every, cfg.snapshots) == (5, 1e-4, 5, 5, ())
    assert cfg.batch_size == ck.info["train"]["batch_size"]
    bare = bertgpt.Checkpoint(ck.model, ck.tokenizer, {})  # no recipe saved: the family's mini recipe
    assert continuation_config(bare, 900).mask_rate == bertgpt.train_config("mini", "bert").mask_rate


@pytest.mark.parametrize("family", ["gpt", "bert"])
def test_an_interrupted_continued_run_resumes_to_the_weights_of_an_uninterrupted_one(
        family, pretrained_tiny, bible, tmp_path, monkeypatch):
    from bertgpt.pretraining import continuation_config, continue_pretraining
    ck = pretrained_tiny[family]
    tcfg = dataclasses.replace(continuation_config(ck, steps=12), eval_every=4, warmup=3, dropout=0.1)
    whole, _, history = continue_pretraining(ck, bible, tcfg, device="cpu", progress=False)
    saved = _crash_after_two_checkpoints(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        continue_pretraining(ck, bible, tcfg, device="cpu", progress=False, out=tmp_path / "run")
    monkeypatch.undo()
    assert saved == [4, 8] and load_training_state(tmp_path / "run")["step"] == 8
    resumed, tok, again = bertgpt.resume(tmp_path / "run", bible, device="cpu", progress=False)
    assert tok.hf.to_str() == ck.tokenizer.hf.to_str()  # still the tokenizer it started with
    for (name, p), q in zip(whole.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(p, q), name
    assert again.train == history.train
    assert [r["loss"] for r in again.val] == [r["loss"] for r in history.val]


def test_the_objectives_are_importable_from_pretraining_as_before():
    import importlib
    objectives, pretraining = (importlib.import_module(f"bertgpt.{m}") for m in ("objectives", "pretraining"))
    for name in ("clm_loss", "mask_tokens", "mlm_nsp_loss", "pretraining_loss"):
        assert getattr(pretraining, name) is getattr(objectives, name)


def test_mask_fates_name_what_mask_tokens_did_at_each_position(wordpiece):
    from bertgpt.objectives import mask_fates

    ids = torch.arange(wordpiece.n_special, wordpiece.n_special + 400)[None]
    inputs, labels = mask_tokens(ids, wordpiece, 0.5, torch.Generator().manual_seed(0))
    fates = mask_fates(ids, inputs, labels, wordpiece)[0]
    chosen = (labels != IGNORE)[0].tolist()
    assert [f != "not chosen" for f in fates] == chosen
    for f, x, orig in zip(fates, inputs[0].tolist(), ids[0].tolist()):
        assert (f == "[MASK]") == (x == wordpiece.mask_id)
        assert f not in ("kept", "not chosen") or x == orig
        assert f != "random" or x not in (orig, wordpiece.mask_id)
    assert {"[MASK]", "random", "kept"} <= set(fates)


def test_as_masked_lm_keeps_a_left_to_right_models_weights_and_goes_on_masked(corpus, wordpiece):
    cfg = bertgpt.model_config("tiny", "gpt", vocab_size=wordpiece.vocab_size)
    torch.manual_seed(0)
    causal = bertgpt.Checkpoint(bertgpt.build(cfg).eval(), wordpiece,
                                dict(train=dataclasses.asdict(bertgpt.train_config("tiny", "bert"))))
    masked = bertgpt.pretraining.as_masked_lm(causal)
    assert isinstance(masked.model, bertgpt.BERT) and not masked.model.config.causal
    assert masked.info["train"]["nsp"] is False and masked.model.config.nsp_head is False
    kept = masked.model.state_dict()
    for name, weight in causal.model.state_dict().items():  # every weight of the causal model, as it was
        if name != "lm_head.weight":
            assert torch.equal(kept[name], weight), name
    assert torch.equal(kept["mlm_decoder.weight"], kept["backbone.tok_emb.weight"])  # still tied
    assert not kept["backbone.seg_emb.weight"].any()  # the segment table adds nothing yet
    tcfg = bertgpt.pretraining.continuation_config(masked, 3)
    model, _, history = bertgpt.continue_pretraining(masked, corpus, tcfg, device="cpu", progress=False)
    assert "mlm_accuracy" in history.val[-1] and "nsp_accuracy" not in history.val[-1]
    with pytest.raises(bertgpt.CheckpointError, match="left-to-right"):
        bertgpt.pretraining.as_masked_lm(masked)


def _electra_batch(corpus, tok):
    from bertgpt.pretraining import document_sentences
    g = torch.Generator().manual_seed(0)
    return next(bert_batches(document_sentences(tok, corpus.train), tok, 32, 4, 0.15, g))


def test_replaced_token_detection_marks_exactly_the_sampled_tokens_that_differ(corpus, wordpiece,
                                                                               monkeypatch):
    from bertgpt.objectives import ReplacedTokenDetection, rtd_loss

    cfg = bertgpt.model_config("tiny", "bert", vocab_size=wordpiece.vocab_size, dropout=0.0)
    torch.manual_seed(0)
    pair = ReplacedTokenDetection(cfg)
    batch = _electra_batch(corpus, wordpiece)
    chosen = batch["labels"] != IGNORE
    seen = {}
    forward = pair.discriminator.forward

    def spy(idx, **kwargs):
        seen["corrupted"] = idx.clone()
        return forward(idx, **kwargs)

    monkeypatch.setattr(pair.discriminator, "forward", spy)
    loss, metrics = rtd_loss(pair, batch)
    original = batch["input_ids"].clone()
    original[chosen] = batch["labels"][chosen]
    corrupted = seen["corrupted"]
    # only the chosen positions change, and the share replaced is the share that differs there
    assert torch.equal(corrupted[~chosen], original[~chosen])
    real = batch["pad_mask"].bool()
    assert metrics["replaced"].item() == pytest.approx((corrupted != original)[real].float().mean().item())
    assert 0 < metrics["replaced"] <= chosen[real].float().mean() + 1e-6
    assert torch.isfinite(loss)


def test_the_detection_loss_trains_the_discriminator_and_not_the_generator(corpus, wordpiece):
    from bertgpt.objectives import ReplacedTokenDetection, rtd_loss

    cfg = bertgpt.model_config("tiny", "bert", vocab_size=wordpiece.vocab_size, dropout=0.0)
    batch = _electra_batch(corpus, wordpiece)
    grads = {}
    for weight in (0.0, 50.0):
        torch.manual_seed(0)
        pair = ReplacedTokenDetection(cfg)
        torch.manual_seed(1)  # the same samples in both runs
        rtd_loss(pair, batch, weight=weight)[0].backward()
        grads[weight] = pair
    gen0, gen50 = (dict(grads[w].generator.named_parameters()) for w in (0.0, 50.0))
    for name, p in gen0.items():  # the sample passes no gradient back to the generator
        assert torch.allclose(p.grad, gen50[name].grad), name
    # and the discriminator learns from the detection loss alone
    blocks = {w: grads[w].discriminator.backbone.blocks.parameters() for w in grads}
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in blocks[50.0])
    assert all(p.grad is None or p.grad.abs().sum() == 0 for p in blocks[0.0])


def test_the_generator_is_narrower_at_the_same_depth():
    from bertgpt.objectives import generator_config

    cfg = bertgpt.model_config("mini", "bert")
    gen = generator_config(cfg, 0.5)
    assert (gen.d_model, gen.n_layer, gen.d_ff) == (cfg.d_model // 2, cfg.n_layer, 2 * cfg.d_model)
    assert gen.d_model % gen.n_head == 0 and not gen.nsp_head


def test_pretrain_electra_keeps_a_discriminator_that_fine_tunes_as_a_bert(corpus):
    from bertgpt.pretraining import pretrain_electra

    cfg = bertgpt.model_config("tiny", "bert")
    tcfg = bertgpt.PretrainConfig(steps=4, batch_size=4, warmup=1, eval_every=2, eval_batches=2)
    model, tok, history = pretrain_electra(corpus, cfg, tcfg, progress=False)
    assert isinstance(model, bertgpt.BERT) and not model.config.nsp_head
    assert model.config.vocab_size == tok.vocab_size
    assert [r["step"] for r in history.val] == [2, 4]
    assert {"rtd_accuracy", "replaced", "mlm_accuracy"} <= set(history.val[-1])
    task = bertgpt.load_task("party", corpus).subsample(16)
    _, result = bertgpt.finetune(bertgpt.Checkpoint(model, tok, {}), task,
                                 bertgpt.FinetuneConfig(epochs=1, batch_size=8), progress=False)
    assert 0 <= result["test_accuracy"] <= 1
