"""The data of the CPU-sized LLM study (issue 38): corpora, generated skills, tokenizer.

  from compgen_jax.llm_data import build, config
  paths = build.ensure(config.data_config("cpu"), "/tmp/llm_data")

Presets: cpu (sized for a 2-core CPU: every corpus, a few thousand training problems per skill,
a 4096-piece tokenizer) and tiny (tests: a slice of each, seconds). Each skill's
`test_templates` and `validation_templates` are held out: its test split is drawn from the
first alone, its validation split (for every tuning choice, so that the test split is scored by
the final run only) from the second, its train split from the rest (OPT_IN aside; where
`train_templates` names some, from those alone), so no validation or test problem's template
appears in training; its seen split holds new instances of the training templates (what
memorising a template can pass, for comparison). Beyond templates, every content atom (an arith
question's numbers, a person's name, a function's argument name and constants, a quoted word)
belongs to one split's bucket (buckets.py; `held_out_content` gives the validation and test
buckets' shares), so no validation or test problem shares them with any training problem, nor
validation with test. `cross` (word problems answered by a function) has test and validation
splits only, each drawn from arith's training stories with its own bucket's names and numbers.
"""

import ml_collections

from compgen_jax import checks
from compgen_jax.llm_data import code_skill, math_skill, strings_skill
from compgen_jax.types import ConfigError

PRESETS = ("cpu", "tiny")
# Templates that reword a default held-out template (the same task, other words; test, then
# validation): held out with it by default, so no test or validation task is trained under any
# wording; a preset may train on them (configs/llm_study.py) to bring the held-out wordings
# within a small model's reach.
REWORDED = {"funcs": ("keep_smaller", "total_above", "lowest", "delete_char", "char_count",
                      "above_count", "star_char", "highest"),
            "strings": ("final_letter", "title_case", "twice_letters", "final_word",
                        "swap_ends", "word_times", "opening_word")}
# The strings tasks that move whole words (each word of code_skill.WORDS is a piece or two of
# the tokenizer): held out by default with the letter-level ones; the strings test split of
# configs/llm_study.py's quick and cpu presets (cpu-size experts did not learn letter-level
# operations: results/cpu/llm*/).
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
  # the shares of every content pool (number tuples, names, argument names, constants, words)
  # that only the validation and the test split draw (buckets.py); the rest trains. A quarter
  # each, so that the presets' held-out funcs templates hold 200 distinct functions per split
  # (at a fifth, the validation ones held 144)
  cfg.held_out_content = ml_collections.ConfigDict(dict(validation=0.25, test=0.25))
  # max_functions / max_prose: the first n stdlib functions / prose documents (0 = all)
  cfg.corpora = ml_collections.ConfigDict(dict(max_functions=0, max_prose=0))
  # max_operand: numbers in the stories are drawn from [2, max_operand]
  # train_templates: the templates the train and seen splits draw from (empty: every template
  # neither held out (test_templates, validation_templates) nor OPT_IN)
  # validation_templates: held out as the test ones are, each with a training relative as
  # each test template has (arith: a twin with the same steps and a rewording in OPT_IN;
  # funcs and strings: rewordings in REWORDED, and siblings), so the validation split measures
  # the kind of transfer the test split does, and tuning on it leaves the test split unseen.
  # arith: weekly (twin: classes, the same steps) and rows (its steps open trays and savings);
  # both name a person and have over a hundred number tuples at max_operand 6, so 200
  # validation problems fit their bucket
  cfg.arith = ml_collections.ConfigDict(dict(
      num_train=4000, num_test=200, num_validation=200, num_seen=100, max_operand=100,
      test_templates=("laps", "lost", "packs_cost", "groups_total", "difference"),
      validation_templates=("weekly", "rows"), train_templates=()))
  # num_base / num_plus: inputs per problem, HumanEval+'s base_input and plus_input
  # funcs validation: a count, a letter operation and an extreme, as the test templates (their
  # siblings count_less / count_equal, replace_char's remove_spaces, spread train)
  cfg.funcs = ml_collections.ConfigDict(dict(
      num_train=3000, num_test=200, num_validation=200, num_seen=100, num_base=3, num_plus=6,
      test_templates=("filter_less", "sum_greater", "min_list", "remove_char", "count_char",
                      "keep_smaller", "total_above", "lowest", "delete_char", "char_count"),
      validation_templates=("count_greater", "replace_char", "max_list", "above_count",
                            "star_char", "highest"), train_templates=()))
  # strings validation: a word-level task (the presets' test tasks are word-level) and its
  # rewording
  cfg.strings = ml_collections.ConfigDict(dict(
      num_train=2000, num_test=200, num_validation=200, num_seen=100,
      test_templates=("last_letter", "capitalize", "double_letters", *WORD_LEVEL,
                      "final_letter", "title_case", "twice_letters", "final_word",
                      "swap_ends", "word_times"),
      validation_templates=("first_word", "opening_word"), train_templates=()))
  # cross: num_train trains only a joint model trained on the combination (the upper baseline)
  cfg.cross = ml_collections.ConfigDict(dict(num_train=2000, num_test=200, num_validation=200,
                                             num_base=3, num_plus=6))
  cfg.tokenizer = ml_collections.ConfigDict(dict(vocab_size=4096))
  if preset == "tiny":
    cfg.corpora.update(max_functions=100, max_prose=8)
    cfg.arith.update(num_train=40, num_test=10, num_validation=6, num_seen=5)
    cfg.funcs.update(num_train=30, num_test=6, num_validation=5, num_seen=4, num_plus=3)
    cfg.strings.update(num_train=30, num_test=8, num_validation=6, num_seen=5)
    cfg.cross.update(num_train=20, num_test=5, num_validation=4, num_plus=3)
    cfg.tokenizer.vocab_size = 512
  cfg.lock()
  return cfg


def validate(cfg: ml_collections.ConfigDict) -> None:
  """ConfigError naming the field, before anything is generated or written."""
  checks.integer("seed", cfg.seed, low=0)
  checks.integer("corpora.max_functions", cfg.corpora.max_functions, low=0)
  checks.integer("corpora.max_prose", cfg.corpora.max_prose, low=0)
  share = cfg.held_out_content
  checks.number("held_out_content.validation", share.validation, 0, 1, low_open=True)
  checks.number("held_out_content.test", share.test, 0, 1, low_open=True)
  if share.validation + share.test >= 1:
    raise ConfigError("held_out_content", f"validation {share.validation} + test {share.test} "
                      "leave no content to train on (their sum must be below 1)")
  for skill, templates in TEMPLATES.items():
    _validate_skill(cfg[skill], skill, templates)
  checks.integer("arith.max_operand", cfg.arith.max_operand, low=5)
  checks.integer("cross.num_validation", cfg.cross.num_validation, low=1)
  for section in ("funcs", "cross"):
    checks.integer(f"{section}.num_base", cfg[section].num_base, low=1)
    checks.integer(f"{section}.num_plus", cfg[section].num_plus, low=1)
  checks.integer("cross.num_test", cfg.cross.num_test, low=1)
  checks.integer("cross.num_train", cfg.cross.num_train, low=1)
  checks.integer("tokenizer.vocab_size", cfg.tokenizer.vocab_size, low=300)


def _validate_skill(section: ml_collections.ConfigDict, skill: str, templates: dict) -> None:
  """A skill's sizes and template lists: known names, test, validation and training disjoint,
  something left to train on."""
  for split in ("train", "test", "validation", "seen"):
    checks.integer(f"{skill}.num_{split}", section[f"num_{split}"], low=1)
  checks.choices(f"{skill}.test_templates", section.test_templates, templates)
  checks.choices(f"{skill}.validation_templates", section.validation_templates, templates)
  if len(set(section.test_templates) | set(section.validation_templates)) == len(templates):
    raise ConfigError(f"{skill}.test_templates", "with validation_templates holds out every "
                      "template: none is left to train on")
  both = sorted(set(section.validation_templates) & set(section.test_templates))
  if both:
    raise ConfigError(f"{skill}.validation_templates", f"{', '.join(both)} also held out for "
                      "test (test_templates): validation and test hold out different templates")
  checks.choices(f"{skill}.train_templates", section.train_templates, templates,
                 allow_empty=True)
  both = sorted(set(section.train_templates) & set(section.test_templates))
  if both:
    raise ConfigError(f"{skill}.train_templates", f"{', '.join(both)} also held out "
                      "(test_templates): a test template never trains")
  both = sorted(set(section.train_templates) & set(section.validation_templates))
  if both:
    raise ConfigError(f"{skill}.validation_templates", f"{', '.join(both)} also trained "
                      "(train_templates): a validation template never trains")
