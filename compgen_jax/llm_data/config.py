"""The data of the CPU-sized LLM study (issue 38): corpora, generated skills, tokenizer.

  from compgen_jax.llm_data import build, config
  paths = build.ensure(config.data_config("cpu"), "/tmp/llm_data")

Presets: cpu (sized for a 2-core CPU: every corpus, a few thousand training problems per skill,
a 4096-piece tokenizer) and tiny (tests: a slice of each, seconds). Each skill's
`test_templates` are held out: its test split is drawn from them alone, its train split from
the rest (OPT_IN aside; where `train_templates` names some, from those alone), so a test problem's
template never appears in training; its seen split holds new instances of the training
templates (what memorising a template can pass, for comparison).
`cross` (word problems answered by a function) has a test split only, drawn from arith's
training stories.
"""

import ml_collections

from compgen_jax import checks
from compgen_jax.llm_data import code_skill, math_skill, strings_skill
from compgen_jax.types import ConfigError

PRESETS = ("cpu", "tiny")
# Templates that reword a default held-out template (the same task, other words): held out
# with it by default, so no test task is trained under any wording; a preset may train on them
# (configs/llm_study.py:quick) to bring the held-out wordings within a small model's reach.
REWORDED = {"funcs": ("keep_smaller", "total_above", "lowest", "delete_char", "char_count"),
            "strings": ("final_letter", "title_case", "twice_letters", "final_word",
                        "swap_ends", "word_times")}
# The strings tasks that move whole words (each word of code_skill.WORDS is a piece or two of
# the tokenizer): held out by default with the letter-level ones; the strings test split of
# configs/llm_study.py's quick and cpu presets (cpu-size experts did not learn letter-level
# operations: docs/llm_study.md).
WORD_LEVEL = ("last_word", "swap_words", "repeat_word")
# Templates in no split unless a config names them (train_templates or test_templates): the
# rewordings of arith's default held-out stories (the quick preset trains them)
OPT_IN = {"arith": tuple(t.name for t in math_skill.REWORDINGS), "funcs": (), "strings": ()}
TEMPLATES = {"arith": math_skill.BY_NAME, "funcs": code_skill.BY_NAME,
             "strings": strings_skill.BY_NAME}


def data_config(preset: str = "cpu") -> ml_collections.ConfigDict:
  """The named preset, locked."""
  if preset not in PRESETS:
    raise ConfigError("preset", f"unknown {preset!r}; allowed: {', '.join(PRESETS)}")
  cfg = ml_collections.ConfigDict()
  cfg.seed = 0  # every split draws from its own stream of it (build.split_random)
  # max_functions / max_prose: the first n stdlib functions / prose documents (0 = all)
  cfg.corpora = ml_collections.ConfigDict(dict(max_functions=0, max_prose=0))
  # max_operand: numbers in the stories are drawn from [2, max_operand]
  # train_templates: the templates the train and seen splits draw from (empty: every template
  # neither held out nor OPT_IN)
  cfg.arith = ml_collections.ConfigDict(dict(
      num_train=4000, num_test=200, num_seen=100, max_operand=100,
      test_templates=("laps", "lost", "packs_cost", "groups_total", "difference"),
      train_templates=()))
  # num_base / num_plus: inputs per problem, HumanEval+'s base_input and plus_input
  cfg.funcs = ml_collections.ConfigDict(dict(
      num_train=3000, num_test=150, num_seen=100, num_base=3, num_plus=6,
      test_templates=("filter_less", "sum_greater", "min_list", "remove_char", "count_char",
                      *REWORDED["funcs"]), train_templates=()))
  cfg.strings = ml_collections.ConfigDict(dict(
      num_train=2000, num_test=200, num_seen=100,
      test_templates=("last_letter", "capitalize", "double_letters", *WORD_LEVEL,
                      *REWORDED["strings"]), train_templates=()))
  cfg.cross = ml_collections.ConfigDict(dict(num_test=100, num_base=3, num_plus=6))
  cfg.tokenizer = ml_collections.ConfigDict(dict(vocab_size=4096))
  if preset == "tiny":
    cfg.corpora.update(max_functions=100, max_prose=8)
    cfg.arith.update(num_train=40, num_test=10, num_seen=5)
    cfg.funcs.update(num_train=30, num_test=6, num_seen=4, num_plus=3)
    cfg.strings.update(num_train=30, num_test=8, num_seen=5)
    cfg.cross.update(num_test=5, num_plus=3)
    cfg.tokenizer.vocab_size = 512
  cfg.lock()
  return cfg


def validate(cfg: ml_collections.ConfigDict) -> None:
  """ConfigError naming the field, before anything is generated or written."""
  checks.integer("seed", cfg.seed, low=0)
  checks.integer("corpora.max_functions", cfg.corpora.max_functions, low=0)
  checks.integer("corpora.max_prose", cfg.corpora.max_prose, low=0)
  for skill, templates in TEMPLATES.items():
    section = cfg[skill]
    checks.integer(f"{skill}.num_train", section.num_train, low=1)
    checks.integer(f"{skill}.num_test", section.num_test, low=1)
    checks.integer(f"{skill}.num_seen", section.num_seen, low=1)
    checks.choices(f"{skill}.test_templates", section.test_templates, templates)
    if len(set(section.test_templates)) == len(templates):
      raise ConfigError(f"{skill}.test_templates", "holds out every template: none is left "
                        "to train on")
    checks.choices(f"{skill}.train_templates", section.train_templates, templates,
                   allow_empty=True)
    both = sorted(set(section.train_templates) & set(section.test_templates))
    if both:
      raise ConfigError(f"{skill}.train_templates", f"{', '.join(both)} also held out "
                        "(test_templates): a test template never trains")
  checks.integer("arith.max_operand", cfg.arith.max_operand, low=5)
  for section in ("funcs", "cross"):
    checks.integer(f"{section}.num_base", cfg[section].num_base, low=1)
    checks.integer(f"{section}.num_plus", cfg[section].num_plus, low=1)
  checks.integer("cross.num_test", cfg.cross.num_test, low=1)
  checks.integer("tokenizer.vocab_size", cfg.tokenizer.vocab_size, low=300)
