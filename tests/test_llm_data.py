"""llm_data's build: schemas the benchmarks load, determinism, resumption, held-out templates,
the real corpora and the tokenizer (the answers' correctness: test_llm_data_answers.py)."""

import ast
import json
import os
import re

import pytest
import sentencepiece as spm

from compgen_jax.llm_data import buckets, build, code_skill, config, corpora, math_skill
from compgen_jax.llm_eval import runner, sandbox
from compgen_jax.llm_eval.benchmarks import BENCHMARKS
from compgen_jax.types import ConfigError
from tests.helpers import llm_config

SKILLS = ("arith", "funcs", "strings", "cross")


def records(directory, skill, split):
  return build.read_jsonl(os.path.join(directory, build.split_file(skill, split)))


def read_bytes(directory, name):
  with open(os.path.join(directory, name), "rb") as f:
    return f.read()


def test_every_skill_loads_through_its_benchmark_and_the_runner(tiny_llm_data):
  cfg, directory = tiny_llm_data
  llm = llm_config()
  llm.run = SKILLS
  for name, paths in build.benchmark_settings(directory).items():
    llm.benchmarks[name].update(paths)
  for name in ("funcs", "cross"):
    llm.benchmarks[name].allow_unisolated = sandbox.isolation_problem() is not None
  runner.validate(llm)  # the paper preset's code path accepts them
  for name in SKILLS:
    problems = BENCHMARKS[name].load(llm.benchmarks[name])
    assert len(problems) == cfg[name].num_test and len({p.id for p in problems}) == len(problems)
  for split in ("seen", "validation"):
    for name, paths in build.benchmark_settings(directory, split).items():
      settings = llm.benchmarks[name].copy_and_resolve_references()
      settings.update(paths)
      assert len(BENCHMARKS[name].load(settings)) == cfg[name][f"num_{split}"]
  arith = BENCHMARKS["arith"].load(llm.benchmarks.arith)
  first = records(directory, "arith", "train")[0]
  assert arith[0].prompt.startswith(f"Question: {first['question']}\nAnswer: {first['answer']}")
  # Training examples are prompted as the benchmarks prompt their test problems.
  for name in ("arith", "strings", "funcs"):
    settings = llm.benchmarks[name].copy_and_resolve_references()
    settings.path = os.path.join(directory, build.split_file(name, "train"))
    if "num_fewshot" in settings:
      settings.num_fewshot = 0
    prompts = [p.prompt for p in BENCHMARKS[name].load(settings)]
    assert prompts == [context for context, _ in build.examples(directory, name)]
  funcs = records(directory, "funcs", "test")
  assert set(funcs[0]) == {"task_id", "prompt", "entry_point", "canonical_solution",
                           "base_input", "plus_input", "atol", "template"}
  assert [r["task_id"] for r in funcs] == [f"Funcs/test/{i}" for i in range(len(funcs))]
  assert len(funcs[0]["base_input"]) == cfg.funcs.num_base
  assert len(funcs[0]["plus_input"]) == cfg.funcs.num_plus


def test_splits_hold_out_templates_and_instances(tiny_llm_data):
  """By template and by each split's instance key (content: test_llm_data_disjoint.py)."""
  cfg, directory = tiny_llm_data
  for skill in ("arith", "funcs", "strings"):
    train, test, validation, seen = (records(directory, skill, s)
                                     for s in ("train", "test", "validation", "seen"))
    assert [len(train), len(test), len(validation), len(seen)] == [
        cfg[skill][f"num_{s}"] for s in ("train", "test", "validation", "seen")]
    held_out = set(cfg[skill].test_templates)
    assert {r["template"] for r in test} <= held_out
    assert {r["template"] for r in validation} <= set(cfg[skill].validation_templates)
    trained = {r["template"] for r in train + seen}
    assert not trained & (held_out | set(cfg[skill].validation_templates))
    key = build.coarse_key(skill)
    assert not {key(r) for r in train} & {key(r) for r in test + validation + seen}  # instances
    assert len({key(r) for r in test + validation + seen}) == len(test + validation + seen)
    assert len({build.SKILLS[skill].key(r) for r in train}) == len(train)
  cross = {s: records(directory, "cross", s) for s in ("test", "validation")}
  for split in ("test", "validation"):  # the stories the math expert trains on, as functions
    assert {r["template"] for r in cross[split]} <= {t.name for t in build.templates(
        cfg, "arith", "train")}
  key = build.coarse_key("cross")  # the function: prompt up to its example
  assert not {key(r) for r in cross["test"]} & {key(r) for r in cross["validation"]}
  seen = build.benchmark_settings(directory, "seen")
  assert set(seen) == {"arith", "funcs", "strings"}
  assert seen["arith"]["path"].endswith("arith_seen.jsonl")
  validation = build.benchmark_settings(directory, "validation")
  assert set(validation) == set(SKILLS)
  assert validation["cross"]["path"].endswith("cross_validation.jsonl")
  assert validation["arith"]["fewshot_path"].endswith("arith_train.jsonl")


def test_build_is_deterministic_resumes_and_seeds_matter(tiny_llm_data, tmp_path, monkeypatch):
  cfg, directory = tiny_llm_data
  again = str(tmp_path / "again")
  build.ensure(cfg, again)  # from nothing, in another directory: the same bytes
  assert sorted(os.listdir(again)) == sorted(os.listdir(directory))
  for name in os.listdir(directory):
    assert read_bytes(directory, name) == read_bytes(again, name), name
  os.remove(os.path.join(again, "funcs_train.jsonl"))  # as if killed before it was written
  monkeypatch.setattr(corpora, "python_corpus", lambda **_: pytest.fail("rebuilt a corpus"))
  build.ensure(cfg, again)  # writes the missing file alone
  assert read_bytes(again, "funcs_train.jsonl") == read_bytes(directory, "funcs_train.jsonl")
  other = config.data_config("tiny")
  with other.unlocked():
    other.seed = 1
  assert build.draw(other, "arith", "test", set()) != records(directory, "arith", "test")
  with pytest.raises(ConfigError, match="different config"):
    build.ensure(other, again)


@pytest.mark.parametrize("field, value, message", [
    ("arith.test_templates", ("laps", "nope"), "unknown 'nope'"),
    ("strings.test_templates", tuple(config.TEMPLATES["strings"]), "none is left"),
    ("arith.train_templates", ("boxes", "nope"), "unknown 'nope'"),
    ("strings.train_templates", ("dashes", "last_word"), "last_word also held out"),
    ("arith.validation_templates", ("weekly", "laps"), "laps also held out for test"),
    ("strings.validation_templates", (), "strings.validation_templates"),
    ("funcs.num_validation", 0, "funcs.num_validation"),
    ("cross.num_validation", 0, "cross.num_validation"),
    ("held_out_content.test", 0.0, "held_out_content.test"),
    ("held_out_content.validation", 0.8, "held_out_content.: validation 0.8 .* leave no content"),
    ("funcs.num_train", 0, "funcs.num_train"),
    ("arith.max_operand", 4, "arith.max_operand"),
    ("tokenizer.vocab_size", 100, "tokenizer.vocab_size"),
])
def test_bad_config_raises_before_writing(tmp_path, field, value, message):
  cfg = config.data_config("tiny")
  section, name = field.split(".")
  cfg[section][name] = value
  with pytest.raises(ConfigError, match=message):
    build.ensure(cfg, str(tmp_path / "data"))
  assert not os.path.exists(tmp_path / "data")


def test_validation_templates_are_neither_test_nor_training_templates():
  cfg = config.data_config("tiny")
  cfg.arith.train_templates = ("boxes", "weekly")
  with pytest.raises(ConfigError, match="'arith.validation_templates'.*weekly also trained"):
    config.validate(cfg)
  cfg.arith.train_templates = ()
  cfg.strings.validation_templates = tuple(
      t for t in config.TEMPLATES["strings"] if t not in cfg.strings.test_templates)
  with pytest.raises(ConfigError, match="none is left to train on"):
    config.validate(cfg)
  # a template with no constant of the test bucket: one line naming the field
  cfg = config.data_config("tiny")
  cfg.funcs.test_templates = ("repeat_string",)  # k in 2..4: one of them in the test bucket
  cfg.held_out_content.test = 1e-9
  with pytest.raises(ConfigError, match="funcs.test_templates.*'repeat_string'.*constant"):
    build.draw(cfg, "funcs", "test", set())


def test_train_templates_narrow_the_train_and_seen_splits_alone():
  cfg = config.data_config("tiny")
  cfg.strings.train_templates = ("dashes", "final_word")
  cfg.arith.train_templates = ("boxes",)
  for split in ("train", "seen"):
    assert {r["template"] for r in build.draw(cfg, "strings", split, set())} == {
        "dashes", "final_word"}
  # the test split and cross (arith's training stories) follow: cross's stories are boxes'
  default = config.data_config("tiny")
  assert build.draw(cfg, "strings", "test", set()) == build.draw(default, "strings", "test",
                                                                 set())
  assert {r["template"] for r in build.draw(cfg, "cross", "test", set())} == {"boxes"}
  # empty (the default): every template not held out, as before the field, but the OPT_IN
  # ones, which only a config naming them draws
  held_out = {s: set(default[s].test_templates) | set(default[s].validation_templates)
              for s in ("arith", "strings")}
  assert {t.name for t in build.templates(default, "strings", "train")} == set(
      config.TEMPLATES["strings"]) - held_out["strings"]
  assert {t.name for t in build.templates(default, "arith", "train")} == set(
      config.TEMPLATES["arith"]) - held_out["arith"] - set(config.OPT_IN["arith"])
  cfg.arith.update(train_templates=config.OPT_IN["arith"], num_train=200)  # each drawn
  assert {r["template"] for r in build.draw(cfg, "arith", "train", set())} == set(
      config.OPT_IN["arith"])


def test_arith_rewordings_are_held_out_stories_in_other_words():
  """Each of math_skill.REWORDINGS solves a default held-out story (test, then validation) with
  its very steps and worked-solution sentences, told in other words; and only a config naming
  it draws it."""
  arith = config.data_config("cpu").arith
  held_out = [math_skill.BY_NAME[n] for n in arith.test_templates + arith.validation_templates]
  assert len(math_skill.REWORDINGS) == len(held_out)
  for rewording, story in zip(math_skill.REWORDINGS, held_out, strict=True):
    assert rewording.steps == story.steps and rewording.items == story.items, rewording.name
    assert rewording.text != story.text
  assert config.OPT_IN["arith"] == tuple(t.name for t in math_skill.REWORDINGS)


def test_too_many_problems_for_the_templates_is_a_config_error():
  cfg = config.data_config("tiny")
  cfg.strings.update(test_templates=("last_letter",), num_test=1000)  # one problem per word
  with pytest.raises(ConfigError, match="strings.num_test.*found only"):
    build.draw(cfg, "strings", "test", set())


def test_prose_is_the_python_documentation(tiny_llm_data):
  cfg, directory = tiny_llm_data
  prose = build.read_jsonl(os.path.join(directory, build.PROSE))
  assert len(prose) == cfg.corpora.max_prose and prose[0]["source"] == "topic:assert"
  assert "Assert statements are a convenient way to insert debugging assertions" in (
      prose[0]["text"])
  _, modules = corpora.python_corpus(max_functions=1)  # stops after the first file
  assert modules and all(m["source"].startswith("module:") for m in modules)


def test_python_pairs_are_the_stdlib_functions(tiny_llm_data, tmp_path):
  cfg, directory = tiny_llm_data
  pairs = build.read_jsonl(os.path.join(directory, build.PYTHON))
  assert len(pairs) == cfg.corpora.max_functions
  root = corpora.stdlib_root()
  for pair in pairs[:20]:
    with open(os.path.join(root, pair["path"]), encoding="utf-8") as f:
      source = f.read()
    assert all(line.strip() in source for line in (pair["prompt"] + pair["body"]).splitlines())
    assert pair["body"].strip() and f"def {pair['name']}(" in pair["prompt"]
  # A made-up library: methods and functions with a docstring and a body, in source order;
  # test folders and unparseable files skipped.
  (tmp_path / "test").mkdir()
  (tmp_path / "test" / "t.py").write_text('def skipped():\n  """Doc."""\n  return 1\n')
  (tmp_path / "bad.py").write_text("def broken(:\n")
  (tmp_path / "good.py").write_text(
      '"""A module."""\n\n\nclass C:\n  @staticmethod\n  def m():\n    """Doc m."""\n    return 2'
      '\n\n\ndef only_doc():\n  """No body."""\n\n\ndef no_doc():\n  return 3\n\n\n'
      'def f(x):\n  """Doc f."""\n  def inner():\n    """Nested."""\n    return x\n  return x\n')
  functions, modules = corpora.python_corpus(str(tmp_path))
  assert [(r["path"], r["name"]) for r in functions] == [("good.py", "m"), ("good.py", "f")]
  assert functions[0]["prompt"] == '@staticmethod\ndef m():\n  """Doc m."""\n'
  assert functions[0]["body"] == "  return 2\n"
  assert modules == [dict(source="module:good.py", text="A module.")]


def test_tokenizer_round_trips_every_source_and_has_the_vocabulary(tiny_llm_data):
  cfg, directory = tiny_llm_data
  sp = spm.SentencePieceProcessor(model_file=os.path.join(directory, build.TOKENIZER))
  assert 256 < sp.get_piece_size() <= cfg.tokenizer.vocab_size
  assert (sp.pad_id(), sp.eos_id(), sp.bos_id(), sp.unk_id()) == (0, 1, 2, 3)
  tests = [json.dumps(records(directory, s, "test")[0]) for s in SKILLS]
  for text in ["".join(build.examples(directory, s)[0]) for s in build.SOURCES] + tests:
    assert sp.decode(sp.encode(text)) == text


def test_made_sources_qa_and_repeat(tiny_llm_data):
  _, directory = tiny_llm_data
  pairs = build.read_jsonl(os.path.join(directory, build.PYTHON))
  qa = build.examples(directory, "qa")
  names = {p["name"] for p in pairs}
  for context, target in qa[:50]:
    name = context.removeprefix("Question: What does the Python function ").split(" do?")[0]
    assert name in names and context.endswith("do?\nAnswer:") and target.startswith(" ")
    assert "\n" not in target.strip()
  # repeat: a line of prose words given twice; nothing but copying predicts the second half
  prose = build.read_jsonl(os.path.join(directory, build.PROSE))
  words = {w for r in prose for w in r["text"].split()}
  repeat = build.examples(directory, "repeat")
  assert len(repeat) == build.REPEAT_LINES
  lines = []
  for context, target in repeat[:200]:
    first, second = target.split("\n")
    assert context == "" and first == second
    low, high = build.REPEAT_WORDS
    assert low <= len(first.split()) <= high and set(first.split()) <= words
    lines.append(first)
  assert len(set(lines)) == len(lines)  # drawn, not one line repeated
  assert build.repeated_passages(directory, 5, seed=1) != build.repeated_passages(
      directory, 5, seed=0) == [t.split("\n")[0] for _, t in repeat[:5]]


def test_formats_are_the_skills_answer_formats_without_a_skill(tiny_llm_data):
  """arith's: a worked sentence, then "#### n" with n a number the question states (no
  arithmetic); funcs': a body that returns what the docstring says, its doctest right; every
  name, argument and constant from the train bucket."""
  cfg, directory = tiny_llm_data
  train = buckets.for_split(cfg, "train")
  made = build.examples(directory, "formats")
  assert len(made) == build.FORMATS_COUNT
  arith = [(c, t) for c, t in made if c.startswith("Question: ")]
  funcs = [(c, t) for c, t in made if c.startswith("def ")]
  assert len(arith) == len(funcs) == build.FORMATS_COUNT // 2
  for context, target in arith[:300]:
    sentence, last = target.strip().split("\n")
    number = last.removeprefix("#### ")
    assert last.startswith("#### ") and re.findall(r"\d+", context) == [number]
    assert number in sentence and context.endswith("?\nAnswer:")
    person, = set(re.findall(r"\b[A-Z][a-z]+\b", context)) & set(math_skill.NAMES)
    assert train.holds("person", person)
  for prompt, body in funcs[:300]:
    entry = prompt.split("(")[0].removeprefix("def ")
    argument = prompt.split("(")[1].split(":")[0]
    example, shown = prompt.split(">>> ")[1].split("\n")[:2]
    assert code_skill.call(prompt + body, entry, [ast.literal_eval(example[len(entry) + 1:-1])]
                           ) == ast.literal_eval(shown.strip())
    assert train.holds("argument", argument)
    assert body.startswith("    return ") and body.count("\n") == 1
