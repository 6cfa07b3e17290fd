"""GSM8K as lm-eval-harness's `gsm8k` task scores it (the paper's protocol).

Prompt: the first `num_fewshot` train examples as "Question: q\\nAnswer: a", joined by blank lines,
then the test question. Metric: exact match after lm-eval's regexes_to_ignore, with the answer
taken by 'flexible-extract' (the last number in the completion; the paper's headline) and by
'strict-match' (the first "#### n"); the setting `extract` picks which one is "correct" (GSM8K:
flexible, the paper's; the study's arith: strict, so a completion without "#### n" is wrong and
a bare guessed number never passes), and every row carries both.
"""

import re

import ml_collections

from compgen_jax import checks
from compgen_jax.llm_eval import base
from compgen_jax.llm_eval.base import Benchmark, Problem
from compgen_jax.types import DataError

# lm-eval gsm8k.yaml: filters and metric settings, verbatim.
FLEXIBLE = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")
STRICT = re.compile(r"#### (\-?[0-9\.\,]+)")
IGNORE = (",", r"\$", r"(?s).*#### ", r"\.$")
STOP_STRINGS = ("Question:", "</s>", "<|im_end|>")
_FIELDS = {"question": str, "answer": str}
EXTRACTS = ("flexible", "strict")


def prompted_settings() -> ml_collections.ConfigDict:
  """The settings of a benchmark prompted as GSM8K is (this one, exact_match's)."""
  return ml_collections.ConfigDict(dict(path="", fewshot_path="", num_fewshot=8, limit=0))


def default_settings(extract: str = "flexible") -> ml_collections.ConfigDict:
  settings = prompted_settings()
  settings.extract = extract
  return settings


def validate_prompted(settings: ml_collections.ConfigDict, prefix: str,
                      defaults: ml_collections.ConfigDict | None = None) -> None:
  """Settings checks and file existence, without reading the files (`defaults`: the known
  settings, prompted_settings' unless given)."""
  base.check_known(settings, prefix, defaults or prompted_settings())
  checks.integer(f"{prefix}.num_fewshot", settings.num_fewshot, low=0)
  checks.integer(f"{prefix}.limit", settings.limit, low=0)
  base.check_file(settings, prefix, "path")
  if settings.num_fewshot:
    base.check_file(settings, prefix, "fewshot_path")


def validate(settings: ml_collections.ConfigDict, prefix: str) -> None:
  validate_prompted(settings, prefix, default_settings())
  checks.choice(f"{prefix}.extract", settings.extract, EXTRACTS)


def normalize(text: str) -> str:
  """lm-eval's exact_match preprocessing: drop each regex of IGNORE, then lowercase."""
  for pattern in IGNORE:
    text = re.sub(pattern, "", text)
  return text.lower()


def extract_flexible(completion: str) -> str | None:
  """The last match of FLEXIBLE (lm-eval group_select=-1: its first non-empty group)."""
  matches = FLEXIBLE.findall(completion)
  if not matches:
    return None
  groups = [g for g in matches[-1] if g]
  return groups[0].strip() if groups else None


def extract_strict(completion: str) -> str | None:
  """The first "#### <number>" (lm-eval group_select=0)."""
  matches = STRICT.findall(completion)
  return matches[0].strip() if matches else None


def prompt(question: str, shots: list[dict]) -> str:
  parts = [f"Question: {s['question']}\nAnswer: {s['answer']}" for s in shots]
  return "\n\n".join(parts + [f"Question: {question}\nAnswer:"])


def shots(settings: ml_collections.ConfigDict) -> list[dict]:
  """The first num_fewshot records of fewshot_path ({question, answer})."""
  if not settings.num_fewshot:
    return []
  train = base.read_jsonl(settings.fewshot_path, _FIELDS)
  if len(train) < settings.num_fewshot:
    raise DataError(f"{settings.fewshot_path}: {len(train)} examples, fewer than "
                    f"num_fewshot={settings.num_fewshot}")
  return [record for _, record in train[:settings.num_fewshot]]


def load(settings: ml_collections.ConfigDict) -> list[Problem]:
  examples = shots(settings)
  problems = []
  for index, record in base.read_jsonl(settings.path, _FIELDS):
    if "#### " not in record["answer"]:
      raise DataError(f"{settings.path}:{index + 1}: field 'answer' lacks '#### <number>'")
    problems.append(Problem(str(index), prompt(record["question"], examples),
                            {"gold": normalize(record["answer"])}))
  return base.limited(problems, settings)


def score(problems: list[Problem], completions: list[str],
          settings: ml_collections.ConfigDict | None) -> list[dict]:
  """Per problem: "correct" and "extracted" by the settings' `extract` (None: flexible), both
  rules' fields (correct_flexible, correct_strict, ...) and "format_valid": the answer is in
  the benchmark's format (a "#### n" line), right or wrong."""
  rule = "flexible" if settings is None else settings.extract
  out = []
  for problem, completion in zip(problems, completions, strict=True):
    gold = problem.target["gold"]
    found = dict(flexible=extract_flexible(completion), strict=extract_strict(completion))
    right = {k: v is not None and normalize(v) == gold for k, v in found.items()}
    out.append(dict(correct=right[rule], extracted=found[rule],
                    correct_flexible=right["flexible"], extracted_flexible=found["flexible"],
                    correct_strict=right["strict"], extracted_strict=found["strict"],
                    format_valid=found["strict"] is not None, gold=gold))
  return out


BENCHMARK = Benchmark("gsm8k", default_settings, validate, load, STOP_STRINGS, score,
                      headline="flexible-extract accuracy")
# the study's arith (llm_data): GSM8K's protocol with strict-match as its headline
ARITH = BENCHMARK._replace(name="arith", default_settings=lambda: default_settings("strict"),
                           headline="strict-match accuracy")
