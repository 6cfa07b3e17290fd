"""Short plain-text answers scored by exact match (the generated `strings` skill,
llm_data/strings_skill.py): {question, answer} records, prompted as GSM8K is ("Question: q\\n
Answer:", after num_fewshot examples of fewshot_path), the answer being the completion's first
line with surrounding spaces stripped.
"""

import ml_collections

from compgen_jax.llm_eval import base, gsm8k
from compgen_jax.llm_eval.base import Benchmark, Problem
from compgen_jax.types import DataError

STOP_STRINGS = ("\n",)  # the answer is one line
_FIELDS = {"question": str, "answer": str}


def answer_of(completion: str) -> str:
  """The completion's first line, stripped."""
  return completion.split("\n", 1)[0].strip()


def load(settings: ml_collections.ConfigDict) -> list[Problem]:
  examples = gsm8k.shots(settings)
  problems = []
  for index, record in base.read_jsonl(settings.path, _FIELDS):
    if not record["answer"] or answer_of(record["answer"]) != record["answer"]:
      raise DataError(f"{settings.path}:{index + 1}: field 'answer' must be one non-empty line "
                      f"without surrounding spaces, got {record['answer']!r}")
    problems.append(Problem(str(index), gsm8k.prompt(record["question"], examples),
                            {"gold": record["answer"]}))
  return base.limited(problems, settings)


def score(problems: list[Problem], completions: list[str],
          settings: ml_collections.ConfigDict) -> list[dict]:
  """Per problem: "correct" (the first line equals the answer), "extracted", "gold" and
  "format_valid" (a non-empty first line: a plain one-line answer, right or wrong)."""
  del settings  # nothing to tune
  out = []
  for problem, completion in zip(problems, completions, strict=True):
    extracted = answer_of(completion)
    out.append(dict(correct=extracted == problem.target["gold"], extracted=extracted,
                    format_valid=bool(extracted), gold=problem.target["gold"]))
  return out


def make(name: str) -> Benchmark:
  """An exact-match benchmark named `name`, with GSM8K's prompt settings (path, few-shot
  file)."""
  return Benchmark(name, gsm8k.prompted_settings, gsm8k.validate_prompted, load, STOP_STRINGS,
                   score, headline="exact match")
