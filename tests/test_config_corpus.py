import json
import subprocess
import sys

import pytest

import bertgpt


def test_unknown_preset_names_the_choices():
    with pytest.raises(ValueError, match="unknown preset 'medium'; choose one of tiny, mini"):
        bertgpt.model_config("medium", "gpt")


def test_the_family_sets_the_one_switch():
    gpt, bert = bertgpt.model_config("mini", "gpt"), bertgpt.model_config("mini", "bert")
    assert (gpt.causal, gpt.segments, bert.causal, bert.segments) == (True, 0, False, 2)
    with pytest.raises(ValueError, match="is a bert model"):
        bertgpt.model_config("bert-base", "gpt")


def test_overrides_apply_by_name_and_reject_unknown_or_ill_typed_values():
    cfg, tcfg = bertgpt.model_config("mini", "gpt"), bertgpt.train_config("mini")
    cfg2, tcfg2 = bertgpt.apply_overrides(cfg, tcfg, ["n_layer=2", "lr=1e-3", "causal=false"])
    assert (cfg2.n_layer, tcfg2.lr, cfg2.causal) == (2, 1e-3, False)
    with pytest.raises(ValueError, match="unknown field 'layers'"):
        bertgpt.apply_overrides(cfg, tcfg, ["layers=2"])
    with pytest.raises(ValueError, match="n_layer=two: expected a value of type int"):
        bertgpt.apply_overrides(cfg, tcfg, ["n_layer=two"])
    with pytest.raises(ValueError, match="must be divisible"):
        bertgpt.apply_overrides(cfg, tcfg, ["n_head=5"])


def test_sotu_is_split_by_document_deterministically():
    corpus = bertgpt.load_corpus()
    assert len(corpus.documents) >= 240
    parts = [set(d.id for d in corpus.part(s)) for s in ("train", "val", "test")]
    assert not (parts[0] & parts[1] or parts[0] & parts[2] or parts[1] & parts[2])
    assert 0.7 < len(parts[0]) / len(corpus.documents) < 0.9 and len(parts[2]) >= 15
    assert parts == [set(d.id for d in bertgpt.load_corpus().part(s)) for s in ("train", "val", "test")]
    first = corpus.documents[0]
    assert first.meta["year"] == 1790 and first.meta["party"] and first.paragraphs


def test_folders_files_and_lists_load_and_bad_paths_say_what_to_do(tmp_path):
    (tmp_path / "a.txt").write_text("One paragraph.\n\nAnother one.")
    (tmp_path / "b.txt").write_text("Third.")
    assert len(bertgpt.load_corpus(tmp_path).documents) == 2
    assert len(bertgpt.load_corpus(["some text", "more text", " "]).documents) == 2
    single = bertgpt.load_corpus(tmp_path / "a.txt")
    assert single.documents[0].paragraphs == ["One paragraph.", "Another one."]
    with pytest.raises(FileNotFoundError, match="does not exist: give 'sotu', a folder"):
        bertgpt.load_corpus(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no non-empty .txt file"):
        bertgpt.load_corpus(tmp_path / "empty")


@pytest.mark.parametrize("kind", ["bpe", "wordpiece", "char"])
def test_tokenizers_share_special_ids_and_round_trip(kind, corpus, tmp_path):
    tok = bertgpt.train_tokenizer([p for d in corpus.train for p in d.paragraphs], kind, 600)
    assert (tok.pad_id, tok.cls_id, tok.sep_id, tok.mask_id, tok.extract_id) == (0, 2, 3, 4, 7)
    assert tok.kind == kind
    text = "the state of the union"
    assert tok.decode(tok.encode(text)).replace(" ", "") == text.replace(" ", "")
    tok.save(tmp_path / "t.json")
    assert bertgpt.Tokenizer.load(tmp_path / "t.json").encode(text) == tok.encode(text)


def test_tokenizer_for_caches_and_rebuilds_a_damaged_file(corpus):
    tok = bertgpt.tokenizer_for(corpus, "wordpiece", 500)
    path = next((bertgpt.tokenizer.cache_dir() / "tokenizers").glob("*wordpiece-500*"))
    path.write_text("{ truncated")
    assert bertgpt.tokenizer_for(corpus, "wordpiece", 500).encode("union") == tok.encode("union")


def _cli(*args, env_cache):
    return subprocess.run([sys.executable, "-m", "bertgpt", *args], capture_output=True, text=True,
                          env={**__import__("os").environ, "BERTGPT_CACHE": env_cache})


def test_cli_pretrain_prints_its_figures_as_json_and_writes_a_checkpoint(tmp_path):
    corpus = tmp_path / "texts"
    corpus.mkdir()
    for i in range(12):  # a corpus of the user's own: one address per file
        text = bertgpt.load_corpus().documents[i * 5].text
        (corpus / f"doc{i}.txt").write_text(text)
    out = _cli("pretrain", "--model", "bert", "--preset", "tiny", "--steps", "5", "--corpus", str(corpus),
               "--out", str(tmp_path / "ck"), "--set", "context=48", env_cache=str(tmp_path / "c"))
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    for key in ("train_loss", "val_loss", "steps", "params", "tokens_per_second", "checkpoint",
                "mlm_accuracy", "nsp_accuracy"):
        assert key in result
    assert result["steps"] == 5
    assert bertgpt.load(result["checkpoint"]).model.config.context == 48


def test_cli_rejects_bad_input_with_a_message_not_a_traceback(tmp_path):
    out = _cli("pretrain", "--model", "gpt", "--preset", "tiny", "--out", str(tmp_path / "x"),
               "--set", "n_layers=3", env_cache=str(tmp_path / "c"))
    assert out.returncode == 2 and "unknown field 'n_layers'" in out.stderr and "Traceback" not in out.stderr
    out = _cli("pretrain", "--model", "gpt", "--preset", "tiny", "--out", str(tmp_path / "x"),
               "--corpus", str(tmp_path / "nowhere"), env_cache=str(tmp_path / "c"))
    assert out.returncode == 2 and "does not exist" in out.stderr


def test_cli_bench_reports_speed_and_the_shape_it_measured():
    out = subprocess.run([sys.executable, "-m", "bertgpt", "bench", "--model", "gpt", "--preset", "tiny",
                          "--steps", "3", "--device", "cpu"], capture_output=True, text=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["tokens_per_second"] > 0 and result["ms_per_step"] > 0 and result["peak_memory_mb"] > 0
    assert (result["n_layer"], result["d_model"], result["context"], result["batch_size"]) == (2, 32, 32, 8)
