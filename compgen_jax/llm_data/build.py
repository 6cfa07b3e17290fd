"""Writes the study's data into a directory: the corpora, each skill's splits and the tokenizer.

DIR/config.json   the data config (a directory holding another config is refused)
DIR/prose.jsonl   {source, text}: pydoc topics and stdlib module docstrings (corpora.py)
DIR/python.jsonl  {path, name, prompt, body}: stdlib docstring -> body pairs
DIR/<skill>_<split>.jsonl  arith, funcs, strings: train, test and validation (each from its
                  held-out templates and its own bucket of content: buckets.py) and seen
                  (training templates, instances not in train); cross: test, validation and
                  train (arith's training stories as functions, in every split: the joint
                  model's problems of the combination; instances content-disjoint)
                  Each in the schema of the benchmark of the same name (llm_eval/benchmarks.py)
DIR/tokenizer.model  SentencePiece on every training document (lm/tokenizer.py)

Each file is written whole (files.write_*) and skipped when present, so a killed build resumes;
the same config writes the same bytes.
"""

import ast
import os
import random
from collections.abc import Callable
from typing import NamedTuple

import ml_collections

from compgen_jax import files, metric_writer, rng
from compgen_jax import workdir as workdir_lib
from compgen_jax.llm_data import (
  buckets,
  code_skill,
  corpora,
  cross_skill,
  formats,
  math_skill,
  strings_skill,
)
from compgen_jax.llm_data.config import OPT_IN, TEMPLATES, validate
from compgen_jax.lm import tokenizer
from compgen_jax.types import ConfigError, DataError

PROSE, PYTHON, TOKENIZER = "prose.jsonl", "python.jsonl", "tokenizer.model"
TRIES_PER_PROBLEM = 50  # draws per wanted problem before a split is called too large


class Skill(NamedTuple):
  make: Callable  # (template, random.Random, cfg, buckets.Bucket) -> record
  key: Callable   # record -> what makes two problems the same instance
  task_prefix: str = ""  # HumanEval+ schema: task_id = f"{prefix}/{split}/{index}"
  test_key: Callable | None = None  # a coarser key for test problems (None: key)


def _function(record: dict) -> str:
  """A code problem's function: the prompt up to its doctest example (name, argument, task)."""
  return record["prompt"].split(">>>")[0]


# funcs and cross: training problems are distinct prompts (a function may recur with another
# example, as the no-constant templates hold only a dozen functions each, and a cross story a
# few dozen with its train-bucket names); test problems distinct functions.
SKILLS = {
    "arith": Skill(lambda t, r, c, b: math_skill.make(t, r, c.arith.max_operand, b),
                   lambda rec: rec["question"]),
    "funcs": Skill(lambda t, r, c, b: code_skill.make(t, r, c.funcs.num_base, c.funcs.num_plus,
                                                      b),
                   lambda rec: rec["prompt"], "Funcs", _function),
    "strings": Skill(lambda t, r, c, b: strings_skill.make(t, r, b), lambda rec: rec["question"]),
    "cross": Skill(lambda t, r, c, b: cross_skill.make(t, r, c.arith.max_operand,
                                                       c.cross.num_base, c.cross.num_plus, b),
                   lambda rec: rec["prompt"], "Cross", _function),
}
# In the order they are drawn: each leaves out every instance of the splits before it (train:
# seen's, which shares its templates and bucket; the others' differ by construction)
SPLITS = {"arith": ("test", "validation", "seen", "train"),
          "funcs": ("test", "validation", "seen", "train"),
          "strings": ("test", "validation", "seen", "train"),
          "cross": ("test", "validation", "train")}
HELD_OUT = {"test": "test_templates", "validation": "validation_templates"}


def split_file(skill: str, split: str) -> str:
  return f"{skill}_{split}.jsonl"


def split_random(cfg: ml_collections.ConfigDict, skill: str, split: str) -> random.Random:
  """The split's own generator: changing one split's size leaves the others' problems as
  they were."""
  return random.Random(cfg.seed << 32 | rng.stream_id(f"llm_data/{skill}/{split}"))


def templates(cfg: ml_collections.ConfigDict, skill: str, split: str) -> list:
  """The templates a split draws from: test and validation their held-out ones, train and seen
  the rest but the OPT_IN ones (those of train_templates alone, where it names some); cross's
  splits the stories arith trains on."""
  if skill == "cross":
    skill, split = "arith", "train"
  if split in HELD_OUT:
    names = set(cfg[skill][HELD_OUT[split]])
  else:
    held_out = {t for field in HELD_OUT.values() for t in cfg[skill][field]}
    names = set(cfg[skill].train_templates) or (
        set(TEMPLATES[skill]) - held_out - set(OPT_IN[skill]))
  return [t for name, t in TEMPLATES[skill].items() if name in names]


def coarse_key(skill: str) -> Callable:
  """The key that tells a test instance: test_key, else key."""
  return SKILLS[skill].test_key or SKILLS[skill].key


def draw(cfg, skill: str, split: str, exclude: set) -> list[dict]:
  """num_<split> distinct problems (by the split's key: coarse_key but for train), none whose
  coarse_key is in `exclude`, each of a template drawn uniformly, its content from the split's
  bucket (buckets.py); ConfigError when the templates hold too few distinct problems, or a
  template has no content in the bucket."""
  spec, pool = SKILLS[skill], templates(cfg, skill, split)
  key = spec.key if split == "train" else coarse_key(skill)
  wanted, rand = cfg[skill][f"num_{split}"], split_random(cfg, skill, split)
  bucket = buckets.for_split(cfg, split)
  out, seen = [], set()
  for _ in range(TRIES_PER_PROBLEM * wanted):
    if len(out) == wanted:
      break
    template = rand.choice(pool)
    try:
      record = spec.make(template, rand, cfg, bucket)
    except buckets.EmptyBucket as e:
      field = (f"{skill}.{HELD_OUT.get(split, 'train_templates')}" if skill != "cross" else
               "arith.train_templates")  # cross tells arith's training stories
      raise ConfigError(field, f"template {template.name!r}: {e} (held_out_content)") from None
    if key(record) not in seen and coarse_key(skill)(record) not in exclude:
      seen.add(key(record))
      out.append(record)
  if len(out) < wanted:
    raise ConfigError(f"{skill}.num_{split}", f"found only {len(out)} distinct problems in "
                      f"{TRIES_PER_PROBLEM * wanted} draws from {len(pool)} templates; ask "
                      "for fewer")
  if spec.task_prefix:
    out = [{**r, "task_id": f"{spec.task_prefix}/{split}/{i}"} for i, r in enumerate(out)]
  return out


def draw_all(cfg, skill: str) -> dict[str, list[dict]]:
  """Every split of `skill` in memory, in SPLITS' order, each drawn as `ensure` draws it."""
  validate(cfg)
  out: dict[str, list[dict]] = {}
  for split in SPLITS[skill]:
    out[split] = draw(cfg, skill, split, {coarse_key(skill)(r) for rs in out.values() for r in rs})
  return out


def read_jsonl(path: str) -> list[dict]:
  """The records of one of the directory's files; DataError if it was never written."""
  if not os.path.isfile(path):
    raise DataError(f"{path}: no such file (build.ensure writes it)")
  return metric_writer.read_rows(path)


def question_prompt(question: str) -> str:
  """The prompt of a {question, answer} problem: lm-eval's GSM8K block, as the arith and
  strings benchmarks show it (llm_eval/gsm8k.prompt; tests/test_llm_data.py holds them equal)."""
  return f"Question: {question}\nAnswer:"


def docstring_summary(record: dict) -> str:
  """The first line of a python.jsonl function's docstring ("" if it does not parse alone)."""
  try:
    tree = ast.parse(record["prompt"] + record["body"])
  except SyntaxError:
    return ""
  node = next((n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)),
              None)
  doc = ast.get_docstring(node) if node is not None else None
  return doc.strip().split("\n")[0].strip() if doc and doc.strip() else ""


REPEAT_LINES, REPEAT_WORDS = 30000, (8, 16)  # the repeat source: its lines, words per line


def repeated_passages(directory: str, count: int = REPEAT_LINES, seed: int = 0) -> list[str]:
  """The repeat source's lines: `count` lines of REPEAT_WORDS words drawn at random from the
  prose's alphabetic words (each as often as it occurs), from `seed`. Nothing predicts a line's
  first copy; only copying it predicts the second (examples)."""
  words = [w for r in read_jsonl(os.path.join(directory, PROSE)) for w in r["text"].split()
           if w.isalpha()]
  rand = random.Random(seed)
  return [" ".join(rand.choice(words) for _ in range(rand.randint(*REPEAT_WORDS)))
          for _ in range(count)]


def examples(directory: str, source: str) -> list[tuple[str, str]]:
  """(context, target) per training document of one source, as the model reads it: prose
  ("", text); python (signature and docstring, body); qa (a question about a stdlib function
  in the skills' question format, answered by its docstring's first line: general Q/A that
  teaches a background the format and no skill); the skills' training problems as their
  benchmark prompts them (context) and answers them (target: the worked answer, the body);
  repeat (a line of random prose words given twice: in-context copying, which a language model
  learns from billions of tokens of text (Olsson et al. 2022, induction heads) and a CPU-sized
  background on prose and code did not in 800 steps; results/cpu/llm*/); formats (control
  problems in arith's and funcs' answer formats with no skill in them: formats.py)."""
  if source == "prose":
    return [("", r["text"]) for r in read_jsonl(os.path.join(directory, PROSE))]
  if source == "python":
    return [(r["prompt"], r["body"]) for r in read_jsonl(os.path.join(directory, PYTHON))]
  if source == "repeat":
    return [("", passage + "\n" + passage) for passage in repeated_passages(directory)]
  if source == "qa":
    pairs = [(r["name"], docstring_summary(r))
             for r in read_jsonl(os.path.join(directory, PYTHON))]
    return [(question_prompt(f"What does the Python function {name} do?"), " " + summary)
            for name, summary in pairs if summary]
  if source == "formats":
    bucket = buckets.for_split(workdir_lib.load_config(directory), "train")
    return [(c if kind == "funcs" else question_prompt(c), t if kind == "funcs" else " " + t)
            for kind, c, t in formats.problems(FORMATS_COUNT, 0, bucket)]
  records = read_jsonl(os.path.join(directory, split_file(source, "train")))
  if source in ("funcs", "cross"):
    return [(r["prompt"], r["canonical_solution"]) for r in records]
  return [(question_prompt(r["question"]), " " + r["answer"]) for r in records]


TOKENIZED = ("prose", "python", "arith", "funcs", "strings")  # what the tokenizer reads
SOURCES = (*TOKENIZED, "qa", "repeat", "formats", "cross")  # what a model may train on (qa,
# repeat: made from python's docstrings and the prose's words; formats: generated, formats.py;
# cross: a joint model trained on the combination)
FORMATS_COUNT = 4000  # the formats source's control problems


def benchmark_settings(directory: str, split: str = "test") -> dict[str, dict]:
  """{llm_eval benchmark name: settings to update}: each skill's `split` file (test,
  validation, or seen: cross has none), its train file as the few-shot file of the prompted
  ones."""
  path = lambda skill, split: os.path.join(directory, split_file(skill, split))
  out = dict(arith=dict(path=path("arith", split), fewshot_path=path("arith", "train")),
             funcs=dict(path=path("funcs", split)),
             strings=dict(path=path("strings", split), fewshot_path=path("strings", "train")),
             cross=dict(path=path("cross", split)))
  return {name: s for name, s in out.items() if split in SPLITS[name]}


def train_files(directory: str) -> dict[str, str]:
  """{llm_eval benchmark name: the training problems its trivial baselines read}
  (llm_eval/baselines.py: nearest_train, majority): each benchmark's train file (cross's: the
  joint model's training problems of the combination)."""
  path = lambda skill: os.path.join(directory, split_file(skill, "train"))  # noqa: E731
  return {skill: path(skill) for skill in ("arith", "funcs", "strings", "cross")}


def _write_corpora(cfg, directory: str) -> None:
  prose_path, python_path = (os.path.join(directory, n) for n in (PROSE, PYTHON))
  if os.path.isfile(prose_path) and os.path.isfile(python_path):
    return
  functions, modules = corpora.python_corpus(max_functions=cfg.corpora.max_functions)
  prose = corpora.prose_corpus(modules)
  files.write_jsonl(python_path, functions)
  files.write_jsonl(prose_path, prose[:cfg.corpora.max_prose] if cfg.corpora.max_prose
                    else prose)


def ensure(cfg: ml_collections.ConfigDict, directory: str) -> dict[str, str]:
  """Validates `cfg`, writes whatever of DIR is missing; {file name: path} of every file."""
  validate(cfg)
  workdir_lib.prepare(directory, cfg)
  _write_corpora(cfg, directory)
  for skill, splits in SPLITS.items():
    for i, split in enumerate(splits):
      path = os.path.join(directory, split_file(skill, split))
      if not os.path.isfile(path):
        earlier = [r for s in splits[:i] for r in read_jsonl(
            os.path.join(directory, split_file(skill, s)))]
        files.write_jsonl(path, draw(cfg, skill, split, set(map(coarse_key(skill), earlier))))
  model = os.path.join(directory, TOKENIZER)
  if not os.path.isfile(model):
    texts = [c + t for source in TOKENIZED for c, t in examples(directory, source)]
    tokenizer.train(model, texts, cfg.tokenizer.vocab_size)
  return paths(directory)


def paths(directory: str) -> dict[str, str]:
  """{file name: path} of every file `ensure` writes into `directory`."""
  names = [PROSE, PYTHON, TOKENIZER] + [split_file(s, p) for s, ps in SPLITS.items() for p in ps]
  return {name: os.path.join(directory, name) for name in names}
