"""The LLM study's stages from its configs alone, nothing trained (llm_study/pipeline.py
`stages`): each expert seed's score and diagnose stages and the models they read; the committed
cpu run's config.json files equal the cpu preset's, so `make reproduce-cpu-llm` resumes into
results/cpu/llm instead of refusing it."""

import os

from compgen_jax import workdir as workdir_lib
from compgen_jax.llm_study import pipeline
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
  assert second.config.systems == tuple(s for s in cfg.score.systems if s != "base")
  for skill in ("arith", "funcs"):
    assert first.config.models[skill] == f"/w/expert_{skill}/export/seed_0"
    assert second.config.models[skill] == f"/w/expert_{skill}/export/seed_1"
  assert first.config.models.base == second.config.models.base == "/w/background/export/seed_0"


def test_the_committed_cpu_run_holds_the_cpu_presets_configs(monkeypatch):
  """`make reproduce-cpu-llm` writes into results/cpu/llm (the Makefile's relative path, from
  the repository root), whose committed config.json files the pipeline checks before a stage
  runs: a preset field added without them (lm_train's evals.copying once was) would refuse
  the reproduction with "a different config"."""
  monkeypatch.chdir(REPO)
  cfg = load_config("llm_study", "cpu")
  workdir = os.path.join("results", "cpu", "llm")
  assert workdir_lib.check(workdir, cfg)
  checked = [s.name for s in pipeline.stages(cfg, workdir)
             if workdir_lib.check(s.workdir, s.config if s.config is not None else cfg.data)]
  assert {"data", "background", "expert_arith", "expert_funcs", "expert_strings",
          "joint", "score_test"} <= set(checked)
