"""The one settings loader: preset <- pagerag.toml <- environment <- flags, and the pipeline it
reports is the one whose preset it applied."""
from __future__ import annotations

import pytest

from pagerag.errors import ConfigError
from pagerag.settings import load_settings


def _toml(tmp_path, text: str):
    path = tmp_path / "pagerag.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_pipeline_named_in_the_config_file_is_applied_and_reported(tmp_path):
    settings = load_settings(config_file=_toml(tmp_path, 'pipeline = "passages-only"\n'), environ={})
    assert settings.pipeline == "passages-only"
    assert settings.retrieve.graph == "none"  # the preset's own setting


def test_the_nearer_layer_names_the_pipeline(tmp_path):
    config = _toml(tmp_path, 'pipeline = "passages-only"\n')
    from_env = load_settings(config_file=config, environ={"PAGERAG_PIPELINE": "no-floor"})
    assert from_env.pipeline == "no-floor" and from_env.retrieve.floor is False
    from_flag = load_settings("full", config_file=config, environ={"PAGERAG_PIPELINE": "no-floor"})
    assert from_flag.pipeline == "full" and from_flag.retrieve.graph == "governed" and from_flag.retrieve.floor


def test_layers_override_in_order(tmp_path):
    config = _toml(tmp_path, "[chunk]\ntokens = 300\n[retrieve]\nbudget_tokens = 900\n")
    env = {"PAGERAG_CHUNK__TOKENS": "250"}
    settings = load_settings(config_file=config, environ=env, sets=["chunk.overlap=0.2"],
                             overrides={"retrieve": {"top_k": 7}}, llm="extractive")
    assert settings.chunk.tokens == 250 and settings.retrieve.budget_tokens == 900
    assert settings.chunk.overlap == 0.2 and settings.retrieve.top_k == 7 and settings.llm.backend == "extractive"
    assert load_settings(environ={}, sets=["chunk.tokens=64"], overrides={"chunk": {"tokens": 32}}).chunk.tokens == 64


def test_bad_settings_are_one_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="unknown settings section 'retreive'"):
        load_settings(environ={}, overrides={"retreive": {"top_k": 3}})
    with pytest.raises(ConfigError, match="must be given as a dict"):
        load_settings(environ={}, overrides={"retrieve": 3})
    with pytest.raises(ConfigError, match="unknown pipeline 'nope'"):
        load_settings(config_file=_toml(tmp_path, 'pipeline = "nope"\n'), environ={})
    with pytest.raises(ConfigError, match="setting 'chunk.tokens'"):
        load_settings(environ={}, sets=["chunk.tokens=3"])


def test_the_judge_is_the_pick_and_its_old_name_auto_still_means_yes_no(tmp_path):
    assert load_settings(environ={}).generate.judge == "pick"
    assert load_settings(config_file=_toml(tmp_path, '[generate]\njudge = "auto"\n'), environ={}).generate.judge == "yesno"
    assert load_settings(environ={"PAGERAG_GENERATE__JUDGE": "auto"}).generate.judge == "yesno"
    with pytest.raises(ConfigError, match="generate.judge"):
        load_settings(environ={}, sets=["generate.judge=maybe"])
