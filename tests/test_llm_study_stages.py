"""The LLM study's stages from its configs alone, nothing trained (llm_study/pipeline.py
`stages`): each expert seed's score and diagnose stages and the models they read, the
baselines' training files and the validation split; the committed cpu run, the record of the
design before issue 55 (its data and presets differ on purpose), still reads and reports."""

import os

import pytest

from compgen_jax import workdir as workdir_lib
from compgen_jax.llm_study import pipeline
from compgen_jax.types import ConfigError
from tests import test_llm_report
from tests.helpers import REPO, load_config


def test_each_expert_seed_is_scored_in_its_own_stages_the_background_once():
  seeds = {"study.seeds": 2, "experts.arith.num_seeds": 2, "experts.funcs.num_seeds": 2}
  cfg = load_config("llm_study", "test", **seeds)
  pipeline.validate(cfg)
  by_name = {s.name: s for s in pipeline.stages(cfg, "/w")}
  assert list(by_name)[-4:] == ["score_test", "diagnose_test", "score_test_seed1",
                                "diagnose_test_seed1"]
  first, second = by_name["score_test"], by_name["score_test_seed1"]
  assert (first.workdir, second.workdir) == ("/w/score_test", "/w/score_test/seed_1")
  assert by_name["diagnose_test_seed1"].workdir == second.workdir
  assert first.config.systems == cfg.score.systems
  # the background and the baselines are the same at every seed: scored once
  assert {"nearest_train", "majority"} <= set(cfg.score.systems)
  assert second.config.systems == tuple(s for s in cfg.score.systems
                                        if s not in ("base", "nearest_train", "majority"))
  assert first.config.baselines.train.funcs == "/w/data/funcs_train.jsonl"
  assert first.config.baselines.train.cross == "/w/data/cross_train.jsonl"  # its own
  for skill in ("arith", "funcs"):
    assert first.config.models[skill] == f"/w/expert_{skill}/export/seed_0"
    assert second.config.models[skill] == f"/w/expert_{skill}/export/seed_1"
  assert first.config.models.base == second.config.models.base == "/w/background/export/seed_0"


def test_a_validation_split_is_scored_from_its_own_files():
  cfg = load_config("llm_study", "quick", **{"study.splits": ("validation", "test")})
  pipeline.validate(cfg)
  by_name = {s.name: s for s in pipeline.stages(cfg, "/w")}
  score = by_name["score_validation"].config
  assert score.benchmarks.arith.path == "/w/data/arith_validation.jsonl"
  assert score.benchmarks.cross.path == "/w/data/cross_validation.jsonl"
  assert score.benchmarks.arith.extract == "strict"
  assert by_name["score_test"].config.benchmarks.arith.path == "/w/data/arith_test.jsonl"
  for preset in ("quick", "cpu"):  # issue 55: >= 200 problems per benchmark
    cfg = load_config("llm_study", preset)
    assert all(cfg.score.benchmarks[b].limit >= 200 for b in cfg.score.run)
    assert all(cfg.data[s][f"num_{split}"] >= 200 for s in ("arith", "funcs", "strings", "cross")
               for split in ("test", "validation"))
  bad = load_config("llm_study", "test", **{"data.arith.validation_templates": ("laps",)})
  with pytest.raises(ConfigError, match="'data.arith.validation_templates'"):
    pipeline.validate(bad)


def test_the_committed_cpu_run_still_reads_and_reports():
  """results/cpu/llm is the record of the design before issue 55: its data (no validation
  split, no content buckets), score limit and systems differ from today's cpu preset on
  purpose, so `make reproduce-cpu-llm` into it refuses the changed config rather than mixing
  the two. What still holds: its config.json is a readable study config, and its reports
  regenerate from their rows byte for byte (every committed llm report:
  tests/test_llm_report.py, results/cpu/llm/score_test among them)."""
  workdir = os.path.join(REPO, "results", "cpu", "llm")
  saved = workdir_lib.load_config(workdir)
  assert saved.study.seeds == 3 and saved.score.benchmarks.funcs.limit == 50
  with pytest.raises(ConfigError, match="different config"):
    workdir_lib.check(workdir, load_config("llm_study", "cpu"))
  assert os.path.join(workdir, "score_test") in test_llm_report.COMMITTED
