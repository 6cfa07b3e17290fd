"""Trivial baselines, scored as systems beside the models (issue 55): no model, no decoding,
deterministic. Each writes one completion per problem, which the benchmark scores as it scores a
model's, so their rows are the runner's per-problem rows and the report and the paired
comparisons treat them as any system (llm_eval/comparisons.py judges each expert against the
strongest on its benchmark).

  last_number        (GSM8K-scored benchmarks) "#### n", n the question's last number
  product_first_two  (GSM8K-scored) "#### a * b" of the question's first two numbers
  nearest_train      the gold answer, verbatim, of the training problem whose text is nearest
                     the problem's: the worked answer, the string, the canonical body
  majority           the gold answer most common among the training problems (GSM8K-scored:
                     "#### n" of the most common final number; ties: the first as text)

Nearest: the largest cosine between word TF-IDF vectors (tokens \\w+ and single punctuation
marks; idf = log((1 + N) / (1 + df)) + 1 over the N training texts; ties: the first training
problem). The text is a prompted question's question (the prompt's last "Question: ...") or a
code problem's prompt. nearest_train and majority read the benchmark's training file,
`baselines.train.<benchmark>` (the schema of its test file).
"""

import re
from collections import Counter
from collections.abc import Callable

import ml_collections
import numpy as np

from compgen_jax.llm_eval import base, evalplus, exact_match, gsm8k
from compgen_jax.llm_eval.base import Benchmark, Problem
from compgen_jax.types import ConfigError

NUMBER = re.compile(r"\d+(?:\.\d+)?")
TOKEN = re.compile(r"\w+|[^\w\s]")
FIELDS = {"numeric": {"question": str, "answer": str}, "text": {"question": str, "answer": str},
          "code": {"prompt": str, "canonical_solution": str}}


def kind(bench: Benchmark) -> str | None:
  """How a benchmark's answers look: numeric (GSM8K-scored), text (exact match), code
  (HumanEval+ / MBPP+ schema); None where no baseline applies (MATH)."""
  if bench.score is gsm8k.score:
    return "numeric"
  if bench.score is exact_match.score:
    return "text"
  return "code" if bench.default_settings is evalplus.default_settings else None


def question(prompt: str) -> str:
  """A prompted problem's question: the text after the prompt's last 'Question: '."""
  return prompt.rsplit("Question: ", 1)[-1].removesuffix("\nAnswer:")


def _numbers(prompt: str) -> list[float]:
  return [float(n) for n in NUMBER.findall(question(prompt).replace(",", ""))]


def _hashes(value: float) -> str:
  return f" #### {int(value) if float(value).is_integer() else value}"


def last_number(problems: list[Problem], train: list[dict], what: str) -> list[str]:
  del train, what  # reads the questions alone
  return [_hashes(n[-1]) if (n := _numbers(p.prompt)) else "" for p in problems]


def product_first_two(problems: list[Problem], train: list[dict], what: str) -> list[str]:
  del train, what
  return [_hashes(n[0] * n[1]) if len(n := _numbers(p.prompt)) >= 2 else "" for p in problems]


def _text(record: dict, what: str) -> str:
  return record["prompt"] if what == "code" else record["question"]


def _answer(record: dict, what: str) -> str:
  """A training problem's gold answer as a completion of its prompt."""
  return record["canonical_solution"] if what == "code" else " " + record["answer"]


TIE = 1e-12  # cosines this close are equal (float64 sums in another order differ by ~1e-16)


def tfidf(docs: list[str], queries: list[str]) -> tuple[np.ndarray, np.ndarray]:
  """Unit-norm TF-IDF rows [docs, V] and [queries, V] over the docs' vocabulary (float64)."""
  vocab: dict[str, int] = {}
  tokens = [TOKEN.findall(d) for d in docs]
  for words in tokens:
    for w in words:
      vocab.setdefault(w, len(vocab))

  def counts(rows: list[list[str]]) -> np.ndarray:
    out = np.zeros((len(rows), len(vocab)))
    for i, words in enumerate(rows):
      ids = [vocab[w] for w in words if w in vocab]
      np.add.at(out[i], ids, 1.0)
    return out

  docs_NxV, queries_MxV = counts(tokens), counts([TOKEN.findall(q) for q in queries])
  idf_V = np.log((1 + len(docs)) / (1 + (docs_NxV > 0).sum(axis=0))) + 1
  unit = lambda x: x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-300)  # noqa: E731
  return unit(docs_NxV * idf_V), unit(queries_MxV * idf_V)


def nearest(docs: list[str], queries: list[str]) -> np.ndarray:
  """Per query, the index of the doc of largest TF-IDF cosine (the first on ties: cosines within
  TIE of the largest, so that a tie does not depend on the sums' rounding)."""
  docs_NxV, queries_MxV = tfidf(docs, queries)
  sims_MxN = queries_MxV @ docs_NxV.T
  return np.argmax(sims_MxN >= sims_MxN.max(axis=1, keepdims=True) - TIE, axis=1)


def nearest_train(problems: list[Problem], train: list[dict], what: str) -> list[str]:
  texts = [p.prompt if what == "code" else question(p.prompt) for p in problems]
  picks = nearest([_text(r, what) for r in train], texts)
  return [_answer(train[i], what) for i in picks]


def majority(problems: list[Problem], train: list[dict], what: str) -> list[str]:
  if what == "numeric":
    counts = Counter(gsm8k.normalize(r["answer"]) for r in train)
    return [" #### " + min(counts, key=lambda a: (-counts[a], a))] * len(problems)
  counts = Counter(_answer(r, what) for r in train)
  return [min(counts, key=lambda a: (-counts[a], a))] * len(problems)


# name -> (completions of (problems, training records, kind), the kinds it applies to, whether
# it reads the training file)
BASELINES: dict[str, tuple[Callable, tuple[str, ...], bool]] = {
    "last_number": (last_number, ("numeric",), False),
    "product_first_two": (product_first_two, ("numeric",), False),
    "nearest_train": (nearest_train, ("numeric", "text", "code"), True),
    "majority": (majority, ("numeric", "text", "code"), True),
}


def applies(name: str, bench: Benchmark) -> bool:
  return kind(bench) in BASELINES[name][1]


def validate(cfg: ml_collections.ConfigDict, names: list[str], benches: dict[str, Benchmark]
             ) -> None:
  """ConfigError naming baselines.train.<benchmark> where a scored baseline needs a training
  file it does not have (a missing file: DataError)."""
  for name in names:
    for bench_name, bench in benches.items():
      if not (applies(name, bench) and BASELINES[name][2]):
        continue
      field = f"baselines.train.{bench_name}"
      if not cfg.baselines.train.get(bench_name):
        raise ConfigError(field, f"the {name} baseline needs {bench_name}'s training problems "
                          "(a jsonl file in its test file's schema)")
      base.check_file(cfg.baselines.train, "baselines.train", bench_name)


def completions(cfg: ml_collections.ConfigDict, name: str, bench_name: str, bench: Benchmark,
                problems: list[Problem]) -> list[str]:
  """The baseline's completion of each problem (applies(name, bench) must hold)."""
  fn, _, reads = BASELINES[name]
  what = kind(bench)
  train = ([r for _, r in base.read_jsonl(cfg.baselines.train[bench_name], FIELDS[what])]
           if reads else [])
  return fn(problems, train, what)
