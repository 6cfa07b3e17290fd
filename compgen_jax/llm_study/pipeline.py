"""Issue 38's study as one resumable program (configs/llm_study.py): llm_data's corpora, skills and
tokenizer, a background, an expert per skill fine-tuned from its export, a joint expert, then
every system scored on each skill's benchmark by llm_eval's runner, and the compositions'
decodes diagnosed by llm_eval's evaluate pass (diagnose.py).

WORKDIR/config.json       the study's config
WORKDIR/data/             llm_data.build (corpora, <skill>_<split>.jsonl, tokenizer.model)
WORKDIR/background/       lm_train workdirs: checkpoints, metrics.jsonl, export/seed_<s>/
WORKDIR/expert_<skill>/
WORKDIR/joint/
WORKDIR/drift/            each expert seed's drift from the background before composing
                          (llm_study/drift.py): drift.jsonl, report.md, drift.png
WORKDIR/score_<split>/    llm_eval workdir of the experts' seed 0: <benchmark>/<system>.jsonl
                          (one row per problem), summary.jsonl, report.md; the
                          diagnose_<split> stage adds diagnostics.jsonl,
                          diagnostics_summary.jsonl, predictors.jsonl and rewrites report.md
                          with them
WORKDIR/score_<split>/seed_<s>/  the same for the experts' seed s (s = 1 .. study.seeds - 1;
                          stages score_<split>_seed<s> and diagnose_<split>_seed<s>), without
                          the systems that use no expert (the background alone): the background
                          is seed 0's at every seed (each seed's experts are fine-tuned from
                          it), so it is decoded once, in score_<split>/, and its rows there stand
                          for every seed in the split's report (llm_eval/comparisons.py)
WORKDIR/score_<split>/report.md  the split's report over every seed scored so far (intervals
                          over seeds and problems, the paired comparisons), rewritten by each
                          seed's diagnose stage; seed_<s>/report.md: seed s's alone
WORKDIR/stages.jsonl      a row per stage run: its name, what it did, its wall time
WORKDIR/<stage>/inputs.json  sha256 of each file or directory that other stages wrote and the
                          stage read (the data files; the exports it starts from or scores;
                          llm_study/inputs.py)
WORKDIR/stale/<stage>.<n>/  a stage's earlier outputs, set aside when its inputs changed

Each stage is the stage's own library call (build.ensure, lm_train's experiment.train,
llm_eval's runner.run, diagnose.run) on a config the pipeline completes from the study's
sections; a stage whose outputs are complete (every export written; the score's summary
written; the diagnostics' predictors written) is skipped after its workdir's config is checked
equal, so a changed section is refused rather than read stale, and an interrupted one resumes
by its own mechanism (the diagnostics pass runs again whole). A stage's outputs are kept only
for the inputs they were made from: when its inputs.json differs from the inputs now there (a
retrained background, re-exported experts, a fresh clone whose models differ in a bit from the
committed run's), its directory is moved to WORKDIR/stale/ and the stage runs again; so the
committed rows of a run are reused only for bit-identical models, and re-scored otherwise.
"""

import os
import time
from collections.abc import Callable
from typing import NamedTuple

import ml_collections

from compgen_jax import checks, metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.llm_data import build
from compgen_jax.llm_data import config as data_config
from compgen_jax.llm_eval import comparisons, diagnose, evaluate_report, runner, systems
from compgen_jax.llm_eval import report as llm_report
from compgen_jax.llm_study import drift, layout, recipes, retention
from compgen_jax.llm_study import inputs as inputs_lib
from compgen_jax.lm_train import experiment as lm_experiment
from compgen_jax.types import ConfigError

STAGES_FILE = "stages.jsonl"
class Stage(NamedTuple):
  name: str
  workdir: str
  config: ml_collections.ConfigDict | None  # None: the data stage (cfg.data)
  done: Callable[[], bool]  # whether its outputs are complete
  run: Callable[[], object]
  # files or directories other stages write that it reads: its outputs are valid for these
  # (their digests in its inputs.json); () for a stage that reads none (data) or whose
  # directory is another's (diagnose: the score's)
  inputs: tuple[str, ...] = ()


def validate(cfg: ml_collections.ConfigDict) -> None:
  """What can be checked before anything is built: ConfigError naming the field."""
  try:
    data_config.validate(cfg.data)
  except ConfigError as e:
    raise ConfigError(f"data.{e.field}", str(e).split(": ", 1)[1]) from e
  checks.choices("experts", tuple(cfg.experts), ("arith", "funcs", "strings"))
  checks.boolean("study.joint", cfg.study.joint)
  checks.integer("study.seeds", cfg.study.seeds, low=1)
  checks.integer("study.drift_rows", cfg.study.drift_rows, low=1)
  checks.choices("study.splits", cfg.study.splits, ("test", "validation", "seen"))
  checks.choices("study.recipes", cfg.study.recipes, tuple(cfg.recipes), allow_empty=True)
  if len(set(cfg.study.recipes)) < len(cfg.study.recipes):
    raise ConfigError("study.recipes", f"names a recipe twice: {cfg.study.recipes}")
  # every training stage as lm_train validates it (each expert under each recipe), init_from
  # aside (the background's export is written by the time an expert starts)
  sections = {"background": cfg.background}
  for recipe in recipes.names(cfg):
    sections |= {recipes.stage_name(recipe, f"experts.{s}"): recipes.expert_section(cfg, s, recipe)
                 for s in cfg.experts}
  if cfg.study.joint:
    sections["joint"] = cfg.joint
  start = lm_experiment.export_dir(os.path.join("<workdir>", layout.BACKGROUND),
                                   layout.BACKGROUND_SEED)
  for prefix, section in sections.items():
    try:
      lm_experiment.validate(layout.lm_config(cfg, section, "<workdir>",
                                       "" if prefix == "background" else start),
                             start_written=False)
    except ConfigError as e:
      raise ConfigError(f"{prefix}.{e.field}", str(e).split(": ", 1)[1]) from e
    if prefix != "background" and not section.corpus.answer_only:
      raise ConfigError(f"{prefix}.corpus.answer_only", "an expert trains on answers only")
    if prefix != "background" and section.num_seeds < cfg.study.seeds:
      raise ConfigError(f"{prefix}.num_seeds", f"{section.num_seeds} seeds trained, fewer "
                        f"than the study.seeds={cfg.study.seeds} scored")
  for prefix, section in sections.items():
    if prefix != "background" and section.model.to_dict() != cfg.background.model.to_dict():
      raise ConfigError(f"{prefix}.model", "must be the background's: experts fine-tune it")
  models = set(layout.model_dirs(cfg, "<workdir>"))
  checks.choices("score.run", cfg.score.run, build.SPLITS)
  try:
    resolved = systems.resolve(cfg.score)
    diagnose.diagnosable(resolved)  # the diagnose stage's compositions
    needed = systems.needed_models(resolved)
  except ConfigError as e:
    raise ConfigError(f"score.{e.field}", str(e).split(": ", 1)[1]) from e
  missing = [m for m in needed if m not in models]
  if missing:
    raise ConfigError("score.systems", f"need {', '.join(missing)}, which the study does not "
                      f"train (it trains {', '.join(sorted(models))}; the joint model with "
                      "study.joint=True)")


def stages(cfg: ml_collections.ConfigDict, workdir: str) -> list[Stage]:
  """Every stage in order: data, background, [joint], then per recipe (llm_study/recipes.py)
  its experts, their drift, and per split and experts' seed (0 .. study.seeds - 1) a score and
  its diagnostics."""
  data_dir = os.path.join(workdir, layout.DATA_DIR)
  data_files = tuple(build.paths(data_dir).values())
  out = [Stage("data", data_dir, None, lambda: all(map(os.path.isfile, data_files)),
               lambda: build.ensure(cfg.data, data_dir))]
  background = os.path.join(workdir, layout.BACKGROUND)
  start = lm_experiment.export_dir(background, layout.BACKGROUND_SEED)
  trained = [(layout.BACKGROUND, background, cfg.background, "")]
  if cfg.study.joint:
    trained.append((layout.JOINT, os.path.join(workdir, layout.JOINT), cfg.joint, start))
  for recipe in recipes.names(cfg):
    trained += [(recipes.stage_name(recipe, layout.expert_name(s)),
                 os.path.join(recipes.root(workdir, recipe), layout.expert_name(s)),
                 recipes.expert_section(cfg, s, recipe), start) for s in cfg.experts]
  for name, stage_dir, section, init_from in trained:
    stage_cfg = layout.lm_config(cfg, section, workdir, init_from)
    out.append(Stage(name, stage_dir, stage_cfg, _exported(stage_cfg, stage_dir),
                     lambda c=stage_cfg, w=stage_dir: lm_experiment.train(c, w),
                     data_files + ((init_from,) if init_from else ())))
  for recipe in recipes.names(cfg):
    out.append(_drift_stage(cfg, workdir, recipe, start, data_files))
    out += _score_stages(cfg, workdir, recipe, data_files)
  return out


def _score_stages(cfg: ml_collections.ConfigDict, workdir: str, recipe: str,
                  data_files: tuple[str, ...]) -> list[Stage]:
  """Per split and experts' seed, the score of the recipe's systems and its diagnostics."""
  out = []
  for split, seed in ((split, seed) for split in cfg.study.splits
                      for seed in range(cfg.study.seeds)):
    split_dir = layout.score_dir(workdir, split, 0, recipe)
    stage_dir = layout.score_dir(workdir, split, seed, recipe)
    stage_cfg = layout.score_config(cfg, workdir, split, seed, recipe)
    summary = os.path.join(stage_dir, workdir_lib.SUMMARY_FILE)
    out.append(Stage(recipes.stage_name(recipe, layout.score_name(split, seed)), stage_dir,
                     stage_cfg,
                     lambda p=summary: os.path.isfile(p),
                     lambda c=stage_cfg, w=stage_dir: runner.run(c, w),
                     data_files + tuple(layout.model_dirs(cfg, workdir, seed, recipe).values())))
    # in the score's workdir, on its config: the pass writes its rows (predictors last) there
    predictors = os.path.join(stage_dir, workdir_lib.PREDICTORS_FILE)
    out.append(Stage(recipes.stage_name(recipe, layout.diagnose_name(split, seed)), stage_dir,
                     stage_cfg, lambda p=predictors: os.path.isfile(p),
                     lambda c=stage_cfg, w=stage_dir, d=split_dir: _diagnose(c, w, d)))
  return out


def _drift_stage(cfg: ml_collections.ConfigDict, workdir: str, recipe: str, background: str,
                 data_files: tuple[str, ...]) -> Stage:
  """Each scored expert seed's drift from the background's export (llm_study/drift.py)."""
  experts = {s: layout.lm_config(cfg, recipes.expert_section(cfg, s, recipe), workdir, background)
             for s in cfg.experts}
  exports = {s: [layout.model_dirs(cfg, workdir, seed, recipe)[s]
                 for seed in range(cfg.study.seeds)] for s in cfg.experts}
  stage_dir = os.path.join(recipes.root(workdir, recipe), layout.DRIFT)
  stage_cfg = ml_collections.ConfigDict(dict(
      rows=cfg.study.drift_rows, seeds=cfg.study.seeds,
      experts={s: c.to_dict() for s, c in experts.items()}))

  def run_stage():
    workdir_lib.prepare(stage_dir, stage_cfg)
    return drift.run(experts, exports, background, stage_dir, cfg.study.drift_rows)

  rows = os.path.join(stage_dir, drift.ROWS_FILE)
  return Stage(recipes.stage_name(recipe, layout.DRIFT), stage_dir, stage_cfg,
               lambda: os.path.isfile(rows), run_stage,
               data_files + (background, *(e for es in exports.values() for e in es)))


def _diagnose(cfg: ml_collections.ConfigDict, workdir: str, split_dir: str) -> str:
  """The evaluate pass over a scored seed of a split, then its report again with the pass's
  rows, and the split's report over every seed scored so far."""
  diagnose.run(cfg, workdir)
  path = llm_report.rewrite(workdir)
  return path if workdir == split_dir else llm_report.rewrite(split_dir)


def _exported(cfg: ml_collections.ConfigDict, workdir: str) -> Callable[[], bool]:
  """Whether every seed's export is written (hf_export renames a finished directory in)."""
  return lambda: all(os.path.isfile(os.path.join(lm_experiment.export_dir(workdir, s),
                                                 "model.safetensors"))
                     for s in range(cfg.num_seeds))


def run(cfg: ml_collections.ConfigDict, workdir: str) -> str:
  """Validates, then runs every stage not yet complete, a progress line each; returns where
  the per-problem rows are."""
  validate(cfg)
  workdir_lib.prepare(workdir, cfg)
  todo = stages(cfg, workdir)
  log = os.path.join(workdir, STAGES_FILE)
  digests = {}  # path -> sha256: each input is written by an earlier stage, before it is read
  for i, stage in enumerate(todo, 1):
    head = f"[llm_study {i}/{len(todo)}] {stage.name}"
    for p in stage.inputs:
      if p not in digests:
        digests[p] = inputs_lib.digest(p)
    inputs = {os.path.relpath(p, workdir): digests[p] for p in stage.inputs}
    old = inputs_lib.recorded(stage.workdir) if inputs else None
    if old is not None and old != inputs:
      where = inputs_lib.set_aside(stage.workdir, os.path.join(workdir, inputs_lib.STALE_DIR),
                                   stage.name)
      print(f"{head}: its inputs changed since it ran ({inputs_lib.changed(old, inputs)}); its "
            f"outputs set aside in {where}", flush=True)
    if stage.done():
      # a complete stage made with another config is refused, not read stale
      workdir_lib.check(stage.workdir, stage.config if stage.config is not None else cfg.data)
      print(f"{head}: complete, skipped", flush=True)
      continue
    print(f"{head}: running in {stage.workdir}", flush=True)
    start = time.time()
    if inputs:
      inputs_lib.record(stage.workdir, inputs)
    with workdir_lib.lock(stage.workdir):
      stage.run()
    seconds = time.time() - start
    metric_writer.append_rows(log, [dict(stage=stage.name, seconds=round(seconds, 1),
                                         finished=time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                time.gmtime()))])
    print(f"{head}: done in {seconds:.0f} s", flush=True)
  out = []
  for split in cfg.study.splits:
    out.append(f"retention against drift ({split}): {retention.write(cfg, workdir, split)}")
  for recipe, split in ((r, s) for r in recipes.names(cfg) for s in cfg.study.splits):
    where = layout.score_dir(workdir, split, 0, recipe)
    rows, diagnosed, preds, problems = llm_report.read(where)
    out += [f"{recipes.stage_name(recipe, split)} split (per-problem rows: {where}/<benchmark>/"
            f"<system>.jsonl, seed s > 0's in {where}/seed_<s>/; report: "
            f"{where}/{workdir_lib.REPORT_FILE})",
            llm_report.table(rows, comparisons.cells(problems)),
            "paired comparisons (llm_eval/comparisons.py):",
            llm_report.comparisons_table(comparisons.compare(rows, problems)),
            "diagnostics of the compositions' decodes (the evaluate pass, pooled over the "
            "seeds it diagnosed):",
            evaluate_report.summary_table(diagnosed),
            "AUC of each pre-scoring quantity for failure:",
            evaluate_report.predictors_table(preds),
            "do they predict failure (registered rule: diagnostics_rows.RULE)?",
            evaluate_report.verdict_table(preds)]
  return "\n".join(out)
