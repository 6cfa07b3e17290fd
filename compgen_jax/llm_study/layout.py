"""Where a study's stages live and the configs the pipeline gives them (llm_study/pipeline.py):
the data directory, the background and joint model at the top, each recipe's experts, drift and
scores under WORKDIR/<recipe>/ (llm_study/recipes.py), a split's score of the experts' seed s in
score_<split>/seed_<s>/."""

import os

import ml_collections

from compgen_jax.llm_data import build
from compgen_jax.llm_eval import comparisons, systems
from compgen_jax.llm_study import recipes
from compgen_jax.lm_train import experiment as lm_experiment

DATA_DIR, BACKGROUND, JOINT, DRIFT = "data", "background", "joint", "drift"
BACKGROUND_SEED = 0  # the background's exported seed: every expert is fine-tuned from it


def expert_name(skill: str) -> str:
  return f"expert_{skill}"


def _seed_suffix(seed: int) -> str:
  return f"_seed{seed}" if seed else ""


def score_name(split: str, seed: int = 0) -> str:
  """The split's score stage of the experts' seed `seed` (and, at seed 0, its workdir's name)."""
  return f"score_{split}{_seed_suffix(seed)}"


def diagnose_name(split: str, seed: int = 0) -> str:
  return f"diagnose_{split}{_seed_suffix(seed)}"


def score_dir(workdir: str, split: str, seed: int = 0, recipe: str = "") -> str:
  """The llm workdir scoring `split` with the experts of `seed` (seed 0: the split's own) of
  `recipe` (llm_study/recipes.py; "": a study without recipes)."""
  return comparisons.seed_dir(os.path.join(recipes.root(workdir, recipe), score_name(split)),
                              seed)


def lm_config(cfg, section: ml_collections.ConfigDict, workdir: str,
              init_from: str = "") -> ml_collections.ConfigDict:
  """A stage's configs/lm_train.py tree with the study's data section, tokenizer size,
  data directory and starting point."""
  out = ml_collections.ConfigDict(section.to_dict())
  out.data = ml_collections.ConfigDict(cfg.data.to_dict())
  out.model.vocab_size = cfg.data.tokenizer.vocab_size
  out.corpus.data_dir = os.path.join(workdir, DATA_DIR)
  out.init_from = init_from
  out.lock()
  return out


def model_dirs(cfg, workdir: str, seed: int = 0, recipe: str = "") -> dict[str, str]:
  """{score model name: exported directory} of every model the study trains: the experts' (of
  `recipe`) and the joint model's seed `seed`, the background's BACKGROUND_SEED."""
  export = lambda d, s=seed: lm_experiment.export_dir(d, s)  # noqa: E731
  out = {"base": export(os.path.join(workdir, BACKGROUND), BACKGROUND_SEED)}
  out |= {s: export(os.path.join(recipes.root(workdir, recipe), expert_name(s)))
          for s in cfg.experts}
  return out | ({"joint": export(os.path.join(workdir, JOINT))} if cfg.study.joint else {})


def score_config(cfg, workdir: str, split: str, seed: int = 0,
                 recipe: str = "") -> ml_collections.ConfigDict:
  """The score section as configs/llm.py reads it: the trained models' exports (the experts'
  seed `seed` of `recipe`), the split's benchmark files (build.benchmark_settings) and the
  baselines' training files (build.train_files), the benchmarks of `run` that have the split;
  past seed 0, only the systems that use an expert (the background and the baselines are the
  same at every seed: scored once)."""
  out = ml_collections.ConfigDict(cfg.score.to_dict())
  for name, path in model_dirs(cfg, workdir, seed, recipe).items():
    out.models[name] = path
  if seed:
    out.systems = tuple(s.name for s in systems.resolve(cfg.score)
                        if s.kind != "baseline" and set(s.members) != {cfg.score.background})
  out.baselines.train.update(build.train_files(os.path.join(workdir, DATA_DIR)))
  have = build.benchmark_settings(os.path.join(workdir, DATA_DIR), split)
  out.run = tuple(name for name in cfg.score.run if name in have)
  for name in out.run:
    out.benchmarks[name].path = have[name]["path"]
    if "fewshot_path" in out.benchmarks[name]:
      out.benchmarks[name].fewshot_path = have[name].get("fewshot_path", "")
  out.lock()
  return out
