"""The LLM study's pipeline (configs/llm_study.py, llm_study/pipeline.py) at test size, end to
end: llm_data's tokenizer -> a background -> two experts fine-tuned from its export -> export ->
load -> composition -> sandboxed HumanEval+-style scoring. The funcs skill is planted: every
problem asks for the sum of `xs`, a body a 31k-parameter model learns in 40 steps, so a score
above the background's means each stage handed the next a working model. Bad configs are
refused before anything is written; a finished study resumes by skipping every stage. The
diagnostics stage writes what the llm application's evaluate pass writes, and the report
shows it."""

import os
import random
import shutil

import jax
import numpy as np
import pytest

from compgen_jax import apps, metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.llm_data import build, code_skill
from compgen_jax.llm_eval import diagnostics_rows
from compgen_jax.llm_study import drift, layout, pipeline, retention
from compgen_jax.llm_study import inputs as inputs_lib
from compgen_jax.lm import gemma2, loading
from compgen_jax.lm.model import forward
from compgen_jax.types import ConfigError
from tests.helpers import load_config

# heavy: collected first (tests/conftest.py); the group: one worker builds the module's `study`
pytestmark = [pytest.mark.heavy, pytest.mark.xdist_group("llm_study")]

BODY = "    return sum(xs)\n"
# two seeds of each expert, each scored and diagnosed in its own stages, the background once
SEEDS = {"study.seeds": 2, "experts.arith.num_seeds": 2, "experts.funcs.num_seeds": 2}


def _planted(cfg, split: str, n: int, rand: random.Random) -> list[dict]:
  """n HumanEval+ records of code_skill's sum_list template with the argument `xs`."""
  out = []
  while len(out) < n:
    record = code_skill.make(code_skill.BY_NAME["sum_list"], rand, cfg.funcs.num_base,
                             cfg.funcs.num_plus)
    if record["canonical_solution"] == BODY:
      out.append({**record, "task_id": f"Funcs/{split}/{len(out)}"})
  return out


def plant(cfg, workdir: str) -> None:
  """The data directory with the planted funcs files; build.ensure writes the rest (it skips
  files that are there) and trains the tokenizer on them."""
  data_dir = os.path.join(workdir, layout.DATA_DIR)
  workdir_lib.prepare(data_dir, cfg.data)
  rand = random.Random(0)
  for split in build.SPLITS["funcs"]:
    records = _planted(cfg.data, split, cfg.data.funcs[f"num_{split}"], rand)
    metric_writer.append_rows(os.path.join(data_dir, build.split_file("funcs", split)), records)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
  cfg = load_config("llm_study", "test")
  workdir = str(tmp_path_factory.mktemp("llm_study") / "study")
  plant(cfg, workdir)
  summary = apps.of_config(cfg).run(cfg, workdir)
  return cfg, workdir, summary


def _accuracy(workdir: str, system: str, seed: int = 0) -> float:
  rows = metric_writer.read_rows(os.path.join(layout.score_dir(workdir, "test", seed), "funcs",
                                              f"{system}.jsonl"))
  return sum(bool(r["correct"]) for r in rows) / len(rows), rows


def test_the_planted_skill_survives_every_stage_and_the_composition(study):
  cfg, workdir, summary = study
  expert, rows = _accuracy(workdir, "funcs")
  background, _ = _accuracy(workdir, "base")
  composed, composed_rows = _accuracy(workdir, "composed")
  assert len(rows) == cfg.score.benchmarks.funcs.limit
  assert expert > background and composed > 0, (expert, background, composed)
  assert all(r["isolated"] for r in rows + composed_rows)  # scored in the sandbox
  assert "funcs" in summary and "composed" in summary
  # the experts started from the background's export and were exported themselves
  for skill in cfg.experts:
    saved = workdir_lib.load_config(os.path.join(workdir, layout.expert_name(skill)))
    assert saved.init_from == layout.model_dirs(cfg, workdir)["base"]
    assert os.path.isfile(os.path.join(layout.model_dirs(cfg, workdir)[skill],
                                       "model.safetensors"))
  stages = [r["stage"] for r in metric_writer.read_rows(
      os.path.join(workdir, pipeline.STAGES_FILE))]
  assert stages == ["data", "background", "expert_arith", "expert_funcs", "drift", "score_test",
                    "diagnose_test"]


def test_a_second_seeds_stages_score_its_experts_and_the_report_pools_both(study, tmp_path):
  """The seed-1 stages of a 2-seed study, run on a copy of the finished study whose experts'
  seed 1 is a copy of seed 0 (training a second seed doubles the fixture's funcs expert,
  8.8 -> 16.2 s: the stages are what is tested here). Greedy decoding of the same models
  gives seed 1 the rows of seed 0; the background is not decoded again."""
  cfg, workdir, _ = study
  copy = str(tmp_path / "study")
  shutil.copytree(workdir, copy)
  two = load_config("llm_study", "test", **SEEDS)
  for skill in two.experts:
    shutil.copytree(layout.model_dirs(cfg, copy)[skill], layout.model_dirs(two, copy, 1)[skill])
  stages = pipeline.stages(two, copy)
  assert [s.name for s in stages[-2:]] == ["score_test_seed1", "diagnose_test_seed1"]
  for stage in stages[-2:]:
    stage.run()
  seed_dir = layout.score_dir(copy, "test", 1)
  assert not os.path.exists(os.path.join(seed_dir, "funcs", "base.jsonl"))
  assert workdir_lib.load_config(seed_dir).models.funcs.endswith("expert_funcs/export/seed_1")
  for system in ("funcs", "composed"):
    first, second = (sorted((r["id"], r["correct"]) for r in _accuracy(copy, system, s)[1])
                     for s in (0, 1))
    assert first == second
  assert os.path.isfile(os.path.join(seed_dir, workdir_lib.PREDICTORS_FILE))
  text = open(os.path.join(layout.score_dir(copy, "test"), workdir_lib.REPORT_FILE)).read()
  assert "| funcs (n=4, 2 seeds) |" in text and "2 seeds of expert fine-tuning (0, 1)" in text
  assert "| expert against the background, own skill | funcs | funcs | base |" in text
  assert "| funcs | base | " in text.split("Accuracy (%) per seed")[1]
  # the evaluate pass's rows of both seeds pooled: counts over (seed, problem) pairs
  wins = sum(r["correct"] for r in _accuracy(copy, "composed", 0)[1])
  assert f"| funcs | composed | {2 * wins}/8 (4 problems x 2 seeds) |" in text
  assert f"| funcs | composed | {2 * wins} of 8 (4 problems x 2 seeds) |" in text
  # experiments/report.py --dir rewrites the seed's report and the split's from their rows
  paths = [os.path.join(d, workdir_lib.REPORT_FILE) for d in (seed_dir, layout.score_dir(
      copy, "test"))]
  before = [open(p).read() for p in paths]
  for p in paths:
    os.remove(p)
  assert apps.of_report_dir(copy).report(copy) == paths[1]
  assert [open(p).read() for p in paths] == before


def test_the_drift_stage_measures_each_expert_against_the_background(study):
  """Its rows per expert, seed and set; one row recomputed in float64 numpy from both models'
  logits on the same rows; the background against itself drifts by nothing."""
  cfg, workdir, _ = study
  out = os.path.join(workdir, layout.DRIFT)
  rows = metric_writer.read_rows(os.path.join(out, drift.ROWS_FILE))
  assert {(r["expert"], r["seed"], r["set"], r["kind"]) for r in rows} == {
      (e, 0, s, "own" if s == e else "off") for e in ("arith", "funcs")
      for s in ("prose", "python", "arith", "funcs")}
  assert os.path.isfile(os.path.join(out, drift.FIGURE_FILE))
  assert drift.table(rows) in open(os.path.join(out, drift.REPORT_FILE)).read()
  models = layout.model_dirs(cfg, workdir)
  expert_cfg = layout.lm_config(cfg, cfg.experts.arith, workdir, models["base"])
  _, docs, masks = drift.sets(expert_cfg, tuple(cfg.experts))["funcs"]
  packed = drift.rows_of(docs, masks, expert_cfg.corpus.seq_len, cfg.study.drift_rows)
  (model, pe), (_, pb) = (gemma2.load(models[m]) for m in ("arith", "base"))
  logp, logq = (jax.nn.log_softmax(np.asarray(forward(model, p, packed.tokens_NxL[:, :-1]),
                                              np.float64), -1) for p in (pe, pb))
  w = packed.weight_NxL[:, 1:]
  kl = float(((np.exp(logp) * (logp - logq)).sum(-1) * w).sum() / w.sum())
  row = next(r for r in rows if r["expert"] == "arith" and r["set"] == "funcs")
  assert row["kl"] == pytest.approx(kl, rel=1e-3) and row["tokens"] == int(w.sum())
  c = gemma2.config_from_hf(*loading.read_config(models["base"]))
  same = drift.measure(c, pb, pb, packed, 4)
  assert same["kl"] == pytest.approx(0, abs=1e-6) and same["ppl_ratio"] == pytest.approx(1)


def test_a_recipes_experts_drift_and_scores_live_in_its_own_directory(study, tmp_path):
  """study.recipes: after the data and background (the finished study's, copied), the recipe's
  experts are fine-tuned by it into WORKDIR/<recipe>/, and its drift and scores read those
  experts (the stages run as the pipeline runs them, on a copy of the study)."""
  _, workdir, _ = study
  copy = str(tmp_path / "study")
  for name in (layout.DATA_DIR, layout.BACKGROUND):
    shutil.copytree(os.path.join(workdir, name), os.path.join(copy, name))
  cfg = load_config("llm_study", "test", **{"study.recipes": ("lora",)})
  stages = pipeline.stages(cfg, copy)
  assert [s.name for s in stages] == [
      "data", "background", "lora/expert_arith", "lora/expert_funcs", "lora/drift",
      "lora/score_test", "lora/diagnose_test"]
  for stage in stages[2:]:
    stage.run()
  saved = workdir_lib.load_config(os.path.join(copy, "lora", layout.expert_name("funcs")))
  assert saved.finetune.lora_rank == cfg.recipes.lora.finetune.lora_rank > 0
  scored = workdir_lib.load_config(layout.score_dir(copy, "test", 0, "lora"))
  assert scored.models.funcs == layout.model_dirs(cfg, copy, 0, "lora")["funcs"]
  assert scored.models.funcs.startswith(os.path.join(copy, "lora", "expert_funcs"))
  assert scored.models.base == os.path.join(copy, "background", "export", "seed_0")
  rows = metric_writer.read_rows(os.path.join(copy, "lora", layout.DRIFT, drift.ROWS_FILE))
  assert {r["expert"] for r in rows} == {"arith", "funcs"}
  assert os.path.isfile(os.path.join(layout.score_dir(copy, "test", 0, "lora"),
                                     workdir_lib.PREDICTORS_FILE))


def test_a_finished_study_skips_every_stage(study, capsys):
  cfg, workdir, summary = study
  before = _accuracy(workdir, "composed")[1]
  again = apps.of_config(cfg).run(cfg, workdir)
  lines = [line for line in capsys.readouterr().out.splitlines() if "[llm_study" in line]
  assert len(lines) == 7 and all(line.endswith("complete, skipped") for line in lines)
  assert again == summary and _accuracy(workdir, "composed")[1] == before
  assert len(metric_writer.read_rows(os.path.join(workdir, pipeline.STAGES_FILE))) == 7


DIAGNOSED = (workdir_lib.DIAGNOSTICS_FILE, workdir_lib.DIAGNOSTICS_SUMMARY_FILE,
             workdir_lib.PREDICTORS_FILE)


def test_the_diagnose_stage_writes_what_the_evaluate_pass_writes(study, tmp_path):
  """The stage's rows equal those of experiments/evaluate.py's pass run on a copy of the
  scored split; the report and the study's summary show them per benchmark."""
  cfg, workdir, summary = study
  score_dir = os.path.join(workdir, layout.score_name("test"))
  copy = str(tmp_path / "score_copy")
  shutil.copytree(score_dir, copy, ignore=shutil.ignore_patterns(*DIAGNOSED))
  app, saved = apps.of_workdir(copy)
  app.evaluate(saved, copy)
  for name in DIAGNOSED:
    assert (metric_writer.read_rows(os.path.join(score_dir, name))
            == metric_writer.read_rows(os.path.join(copy, name))), name
  # a row per scored problem of the composition; 4 problems: no AUC, each class counted
  rows = metric_writer.read_rows(os.path.join(score_dir, workdir_lib.DIAGNOSTICS_FILE))
  _, scored = _accuracy(workdir, "composed")
  assert sorted(r["id"] for r in rows) == sorted(r["id"] for r in scored)
  wins = sum(bool(r["correct"]) for r in scored)
  untestable = f"not testable: {len(scored) - wins} failures, {wins} successes"
  line = (f"| funcs | composed | {wins} of {len(scored)} | "
          + " | ".join([untestable] * len(diagnostics_rows.PREDICTORS)))
  report_text = open(os.path.join(score_dir, workdir_lib.REPORT_FILE)).read()
  assert line + " |" in report_text and line + " |" in summary
  assert "## Do the pre-scoring quantities predict failure?" in report_text


def test_each_stage_records_the_digests_of_what_it_read(study):
  cfg, workdir, _ = study
  for stage in pipeline.stages(cfg, workdir):
    recorded = inputs_lib.recorded(stage.workdir)
    if not stage.inputs:  # data; diagnose shares the score's directory and its record
      assert stage.name == "data" or stage.name.startswith("diagnose"), stage.name
      continue
    assert recorded == {os.path.relpath(p, workdir): inputs_lib.digest(p) for p in stage.inputs}
  score = {s.name: s for s in pipeline.stages(cfg, workdir)}["score_test"]
  assert set(layout.model_dirs(cfg, workdir).values()) <= set(score.inputs)


def test_a_score_whose_models_changed_is_set_aside_and_scored_again(study, capsys):
  """The arith expert's export replaced by the funcs expert's (as a retrained expert, or a fresh
  clone whose models differ from the committed run's): the score stages run again on the new
  weights; the old rows are kept in stale/, never read as the new models'."""
  cfg, workdir, _ = study
  backup = workdir + ".backup"
  shutil.copytree(workdir, backup)
  try:
    models = layout.model_dirs(cfg, workdir)
    weights = os.path.join(models["arith"], "model.safetensors")
    shutil.copyfile(os.path.join(models["funcs"], "model.safetensors"), weights)
    capsys.readouterr()
    pipeline.run(cfg, workdir)
    out = capsys.readouterr().out
    stale = os.path.join(workdir, inputs_lib.STALE_DIR, "score_test.0")
    assert ("score_test: its inputs changed since it ran (expert_arith/export/seed_0); its "
            f"outputs set aside in {stale}") in out
    for name in (workdir_lib.SUMMARY_FILE, "funcs/composed.jsonl"):  # the earlier rows, intact
      assert open(os.path.join(stale, name)).read() == open(os.path.join(
          layout.score_dir(backup, "test"), name)).read()
    stages = [r["stage"] for r in metric_writer.read_rows(
        os.path.join(workdir, pipeline.STAGES_FILE))]
    assert stages[7:] == ["drift", "score_test", "diagnose_test"]  # drift read the expert too
    recorded = inputs_lib.recorded(layout.score_dir(workdir, "test"))
    assert recorded["expert_arith/export/seed_0"] == inputs_lib.digest(models["arith"])
    # what did not change decodes as before (greedy): the funcs expert's rows
    assert _accuracy(workdir, "funcs")[1] == _accuracy(backup, "funcs")[1]
    assert os.path.isfile(os.path.join(layout.score_dir(workdir, "test"),
                                       workdir_lib.PREDICTORS_FILE))
  finally:
    shutil.rmtree(workdir)
    os.rename(backup, workdir)


def test_digests_follow_content_not_place_and_a_missing_or_damaged_record_is_unknown(tmp_path):
  a = tmp_path / "a"
  (a / "sub").mkdir(parents=True)
  (a / "sub" / "w.bin").write_bytes(b"\x00\x01")
  (a / "config.json").write_text("{}")
  first = inputs_lib.digest(str(a))
  shutil.copytree(a, tmp_path / "b")
  assert inputs_lib.digest(str(tmp_path / "b")) == first  # a copy elsewhere matches
  (a / "sub" / "w.bin").write_bytes(b"\x00\x02")
  assert inputs_lib.digest(str(a)) != first  # one byte
  (a / "sub" / "w.bin").write_bytes(b"\x00\x01")
  os.rename(a / "sub" / "w.bin", a / "sub" / "v.bin")
  assert inputs_lib.digest(str(a)) != first  # a name
  assert inputs_lib.digest(str(a / "config.json")) != inputs_lib.digest(str(a / "sub" / "v.bin"))
  assert inputs_lib.recorded(str(tmp_path / "none")) is None
  (tmp_path / "empty").mkdir()
  (tmp_path / "empty" / workdir_lib.LOCK_FILE).write_text("")
  assert inputs_lib.recorded(str(tmp_path / "empty")) is None
  assert inputs_lib.recorded(str(a)) == {}  # files, no record: not known to match
  inputs_lib.record(str(a), {"x": first})
  assert inputs_lib.recorded(str(a)) == {"x": first}
  for damaged in ('{"x": "', "[1, 2]", '{"x": 3}', "\udcff"):  # cut short, not a record
    (a / "inputs.json").write_text(damaged, errors="surrogateescape")
    assert inputs_lib.recorded(str(a)) == {}  # as a missing record: set aside, never trusted
  assert inputs_lib.changed({}, {"x": first}) == "no readable inputs.json"


def test_report_rewrites_each_scored_splits_report_from_its_rows(study):
  _, workdir, _ = study
  path = os.path.join(workdir, "score_test", workdir_lib.REPORT_FILE)
  before = open(path).read()
  os.remove(path)
  assert apps.of_report_dir(workdir).report(workdir) == path
  assert open(path).read() == before


@pytest.mark.parametrize("overrides, field", [
    ({"score.systems": ("base", "joint")}, "score.systems"),
    ({"experts.funcs.model.mlp_dim": 128}, "experts.funcs.model"),
    ({"experts.arith.corpus.answer_only": False}, "experts.arith.corpus.answer_only"),
    ({"background.train.num_steps": 0}, "background.train.num_steps"),
    ({"data.arith.num_train": 0}, "data.arith.num_train"),
    ({"study.splits": ("train",)}, "study.splits"),
    ({"study.seeds": 0}, "study.seeds"),
    ({"study.seeds": 2}, "experts.arith.num_seeds"),  # the test preset trains one seed
    ({"score.compositions.composed": ("arith", "poems")}, "score.compositions.composed"),
    # gated: no composition for the diagnose stage
    ({"score.compose.gate": "kl"}, "score.systems"),
    ({"study.recipes": ("lora", "poems")}, "study.recipes"),
    ({"study.recipes": ("lora", "lora")}, "study.recipes"),
    ({"study.recipes": ("full",), "recipes.full": {"finetune": {"rank": 2}}},
     "recipes.full.finetune.rank"),
    ({"study.recipes": ("full",), "recipes.full": {"optim": {"learning_rate": "fast"}}},
     "recipes.full.optim.learning_rate"),
])
def test_bad_fields_are_refused_before_anything_is_written(overrides, field, tmp_path):
  cfg = load_config("llm_study", "test", **overrides)
  with pytest.raises(ConfigError, match=f"config field '{field}'"):
    apps.of_config(cfg).run(cfg, str(tmp_path / "w"))
  assert os.listdir(tmp_path) == []


def test_a_changed_section_is_refused_not_read_stale(study, tmp_path):
  cfg, workdir, _ = study
  changed = load_config("llm_study", "test", **{"experts.funcs.train.num_steps": 60})
  # the study's own config.json names the change first
  with pytest.raises(ConfigError, match="experts.funcs.train.num_steps"):
    pipeline.run(changed, workdir)



def test_retention_is_the_composed_over_the_expert_accuracy_beside_the_others_drift(study):
  """Each seed's retention recomputed from the per-problem rows and the drift rows."""
  cfg, workdir, _ = study
  path = retention.write(cfg, workdir, "test")
  rows = metric_writer.read_rows(os.path.join(os.path.dirname(path), retention.ROWS_FILE))
  acc = {s: np.mean([r["correct"] for r in _accuracy(workdir, s)[1]]) for s in ("composed",
                                                                                 "funcs")}
  kl = next(r["kl"] for r in metric_writer.read_rows(os.path.join(
      workdir, layout.DRIFT, drift.ROWS_FILE)) if r["expert"] == "arith" and r["set"] == "funcs")
  seed0 = next(r for r in rows if r["composition"] == "composed" and r["seed"] == 0)
  assert seed0["skill"] == "funcs" and seed0["others_kl"] == pytest.approx(kl)
  assert seed0["composed"] == pytest.approx(acc["composed"])
  assert seed0["expert"] == pytest.approx(acc["funcs"])
  assert seed0["retention"] == pytest.approx(acc["composed"] / acc["funcs"]) if acc["funcs"] else (
      np.isnan(seed0["retention"]))
  assert "## The registered rule" in open(path).read()
  assert os.path.isfile(os.path.join(os.path.dirname(path), retention.FIGURE_FILE))


def _planted_retention(slope: float) -> tuple[list[dict], dict]:
  """Rows of 4 recipes x 3 seeds of one composition on one skill whose retention falls (slope
  < 0) or rises with the other member's KL; outcomes over 200 problems to match."""
  rng = np.random.default_rng(0)
  rows, outcomes = [], {}
  for i, recipe in enumerate(("full", "replay_kl", "lora", "decay_init")):
    kl = [3.0, 0.2, 0.05, 1.0][i]
    keep = float(np.clip(0.6 + slope * np.log(kl / 0.2) / 4, 0.05, 1.0))
    e = (rng.random((3, 200)) < 0.6).astype(float)
    c = e * (rng.random((3, 200)) < keep)
    outcomes[recipe, "composed", "arith"] = (c, e)
    for s in range(3):
      rows.append(dict(recipe=recipe, composition="composed", skill="arith", seed=s,
                       composed=c[s].mean(), expert=e[s].mean(),
                       retention=c[s].mean() / e[s].mean(), others_kl=kl * (1 + 0.1 * s),
                       expert_off_kl=kl))
    rows.append(dict(recipe=recipe, composition="composed", skill="arith", seed="all",
                     composed=c.mean(), expert=e.mean(), retention=c.mean() / e.mean(),
                     low=0.0, high=1.0, seeds=3, problems=200))
  return rows, outcomes


def test_the_registered_rule_finds_a_planted_dependence_and_its_opposite():
  assert retention.judge(*_planted_retention(-1.0))["verdict"] == retention.SUPPORTED
  judged = retention.judge(*_planted_retention(+1.0))
  assert judged["verdict"] == retention.REFUTED and judged["closest"] == "lora"
  assert judged["correlation"].high > 0 and judged["pairs"][0]["below"]
