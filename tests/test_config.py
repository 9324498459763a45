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
    cfg2, tcfg2 = bertgpt.apply_overrides(["n_layer=2", "lr=1e-3", "causal=false"], cfg, tcfg)
    assert (cfg2.n_layer, tcfg2.lr, cfg2.causal) == (2, 1e-3, False)
    with pytest.raises(ValueError, match="unknown field 'layers'"):
        bertgpt.apply_overrides(["layers=2"], cfg, tcfg)
    with pytest.raises(ValueError, match="n_layer=two: expected a value of type int"):
        bertgpt.apply_overrides(["n_layer=two"], cfg, tcfg)
    with pytest.raises(ValueError, match="must be divisible"):
        bertgpt.apply_overrides(["n_head=5"], cfg, tcfg)


def test_the_finetuning_config_takes_the_same_overrides_and_checks_its_fields():
    (cfg,) = bertgpt.apply_overrides(["epochs=4", "lr=1e-4", "restarts=3"], bertgpt.FinetuneConfig())
    assert (cfg.epochs, cfg.lr, cfg.restarts) == (4, 1e-4, 3)
    with pytest.raises(ValueError, match="unknown field 'steps'; known fields: batch_size"):
        bertgpt.apply_overrides(["steps=4"], bertgpt.FinetuneConfig())
    with pytest.raises(ValueError, match="restarts must be a positive integer"):
        bertgpt.FinetuneConfig(restarts=0)


def test_the_loop_carries_no_pretraining_recipe_and_a_pretraining_run_carries_both():
    loop = bertgpt.TrainConfig(steps=10)
    with pytest.raises(TypeError, match="mask_rate"):
        bertgpt.TrainConfig(mask_rate=0.4)
    recipe = bertgpt.train_config("mini", "bert")
    assert isinstance(recipe, bertgpt.PretrainConfig) and isinstance(recipe, bertgpt.TrainConfig)
    assert (recipe.mask_rate, recipe.short_fraction) == (0.4, 0.5) and not hasattr(loop, "snapshots")
    with pytest.raises(ValueError, match="mask_rate must lie strictly between 0 and 1"):
        bertgpt.PretrainConfig(mask_rate=1.0)
    with pytest.raises(ValueError, match="steps must be a positive integer"):
        bertgpt.PretrainConfig(steps=0)  # the loop's checks hold for a pretraining run too
