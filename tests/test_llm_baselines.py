"""The trivial baselines (llm_eval/baselines.py): each rule against an independent reading of
the questions and training files, the TF-IDF nearest neighbour against a dictionary-and-loop
re-implementation, and the baselines scored by the runner as systems on llm_data's tiny
splits (no model), their rows in the format every system's have."""

import math
import os
import re
from collections import Counter

import numpy as np
import pytest

from compgen_jax import metric_writer
from compgen_jax.llm_data import build
from compgen_jax.llm_eval import baselines, gsm8k, runner, sandbox
from compgen_jax.llm_eval.base import Problem
from compgen_jax.llm_eval.benchmarks import BENCHMARKS
from compgen_jax.types import ConfigError
from tests.helpers import llm_config


def _prompt(question: str, shots=()) -> str:
  return gsm8k.prompt(question, list(shots))


def test_the_question_rules_read_the_last_question_alone():
  shot = {"question": "Ben has 90 pens and 70 more.", "answer": "#### 160"}
  problems = [Problem("0", _prompt("Ava has 3 apples and buys 12 more. How many?", [shot]), {}),
              Problem("1", _prompt("A bus has 7 people."), {}),
              Problem("2", _prompt("No numbers here."), {})]
  assert baselines.last_number(problems, [], "numeric") == [" #### 12", " #### 7", ""]
  assert baselines.product_first_two(problems, [], "numeric") == [" #### 36", "", ""]
  [score] = gsm8k.score([Problem("0", "", {"gold": "12"})], [" #### 12"],
                        BENCHMARKS["arith"].default_settings())
  assert score["correct"]


def reference_nearest(docs: list[str], queries: list[str]) -> list[int]:
  """TF-IDF cosine by dictionaries and loops: tf counts, idf = ln((1 + N) / (1 + df)) + 1."""
  tokens = [re.findall(r"\w+|[^\w\s]", d) for d in docs]
  df = Counter(w for words in tokens for w in set(words))
  idf = {w: math.log((1 + len(docs)) / (1 + n)) + 1 for w, n in df.items()}

  def vector(words):
    v = {w: c * idf[w] for w, c in Counter(words).items() if w in idf}
    norm = math.sqrt(sum(x * x for x in v.values())) or 1.0
    return {w: x / norm for w, x in v.items()}

  vectors = [vector(words) for words in tokens]
  out = []
  for q in queries:
    u = vector(re.findall(r"\w+|[^\w\s]", q))
    sims = [sum(u[w] * d.get(w, 0.0) for w in u) for d in vectors]
    best = max(sims)
    out.append(next(i for i, s in enumerate(sims) if math.isclose(s, best, rel_tol=1e-12)))
  return out


def test_nearest_is_the_tfidf_cosine_of_an_independent_reading(tiny_llm_data):
  _, directory = tiny_llm_data
  train = build.read_jsonl(os.path.join(directory, build.split_file("strings", "train")))
  test = build.read_jsonl(os.path.join(directory, build.split_file("strings", "test")))
  docs, queries = [r["question"] for r in train], [r["question"] for r in test]
  assert list(baselines.nearest(docs, queries)) == reference_nearest(docs, queries)
  docs_NxV, _ = baselines.tfidf(docs, queries)
  np.testing.assert_allclose(np.linalg.norm(docs_NxV, axis=1), 1.0)
  # a query equal to a training text finds it; ties go to the first
  assert list(baselines.nearest(["a b", "c d", "c d"], ["c d", "zzz"])) == [1, 0]


def test_the_training_answers_rules():
  train = [{"question": q, "answer": a} for q, a in (
      ("Ava has 2 pens.", "Ava has 2 pens.\n#### 2"), ("Ben has 3 cups.", "So 3.\n#### 3"),
      ("Cy has 3 hats.", "#### 3"), ("Di has 9 owls.", "#### 9"))]
  problems = [Problem("0", _prompt("Ben has 5 cups."), {}), Problem("1", _prompt("Owls?"), {})]
  assert baselines.majority(problems, train, "numeric") == [" #### 3"] * 2
  assert baselines.nearest_train(problems, train, "numeric")[0] == " So 3.\n#### 3"  # verbatim
  words = [{"question": f"q{i}", "answer": a} for i, a in enumerate(["b", "a", "b", "a", "c"])]
  assert baselines.majority(problems, words, "text") == [" a"] * 2  # a tie: the first as text
  code = [{"prompt": "def f(xs):\n", "canonical_solution": "    return 1\n"}] * 2 + [
      {"prompt": "def g(s):\n", "canonical_solution": "    return s\n"}]
  assert baselines.majority(problems[:1], code, "code") == ["    return 1\n"]


def _config(directory: str):
  llm = llm_config()
  llm.run = ("arith", "funcs", "strings", "cross")
  for name, paths in build.benchmark_settings(directory).items():
    llm.benchmarks[name].update(paths)  # arith, strings 8-shot: the last question is read
  for name in ("funcs", "cross"):
    llm.benchmarks[name].allow_unisolated = sandbox.isolation_problem() is not None
  llm.systems = tuple(baselines.BASELINES)
  llm.baselines.train.update(build.train_files(directory))
  return llm


def test_the_runner_scores_the_baselines_as_systems_without_a_model(tiny_llm_data, tmp_path):
  _, directory = tiny_llm_data
  llm = _config(directory)
  summary = runner.run(llm, str(tmp_path))
  got = {(r["benchmark"], r["system"]): r for r in summary}
  # the question rules on arith alone; the training rules on every benchmark
  assert set(got) == {("arith", "last_number"), ("arith", "product_first_two")} | {
      (b, s) for b in llm.run for s in ("nearest_train", "majority")}
  assert all(r["kind"] == "baseline" and r["members"] == [] for r in summary)
  test = {s: build.read_jsonl(os.path.join(directory, build.split_file(s, "test")))
          for s in ("arith", "funcs", "strings")}
  train = {s: build.read_jsonl(path) for s, path in build.train_files(directory).items()}
  rows = {key: sorted(metric_writer.read_rows(os.path.join(tmp_path, key[0], f"{key[1]}.jsonl")),
                      key=lambda r: int(r["id"].split("/")[-1])) for key in got}
  # last_number: right exactly where the question's last number is the answer
  last = [re.findall(r"\d+", r["question"])[-1] == r["answer"].split("#### ")[1]
          for r in test["arith"]]
  assert [r["correct"] for r in rows["arith", "last_number"]] == last
  assert got["arith", "last_number"]["accuracy"] == pytest.approx(np.mean(last))
  # majority: every completion the most common training body / answer
  bodies = Counter(r["canonical_solution"] for r in train["funcs"])
  top = max(bodies.values())
  assert rows["funcs", "majority"][0]["completion"] in {b for b, n in bodies.items() if n == top}
  assert {r["completion"] for r in rows["cross", "nearest_train"]} <= {
      r["canonical_solution"] for r in train["cross"]}  # cross's own training bodies
  for r, record in zip(rows["strings", "nearest_train"], test["strings"], strict=True):
    assert r["completion"].strip() in {t["answer"] for t in train["strings"]}
    assert r["correct"] == (r["completion"].strip() == record["answer"])
  # the row format every system has, with nothing generated
  assert {"completion", "num_tokens", "tokens", "finish", "sum_p_eos", "correct"} <= set(
      rows["funcs", "majority"][0])
  assert all(r["num_tokens"] == 0 and r["finish"] == "baseline" for rs in rows.values()
             for r in rs)
  report = open(os.path.join(tmp_path, "report.md")).read()
  assert "| benchmark | last_number | product_first_two | nearest_train | majority |" in report


def test_a_training_baseline_without_its_training_file_is_refused(tiny_llm_data):
  _, directory = tiny_llm_data
  llm = _config(directory)
  llm.baselines.train.cross = ""
  with pytest.raises(ConfigError, match="baselines.train.cross"):
    runner.validate(llm)
  llm.systems = ("last_number",)  # reads no training file
  runner.validate(llm)
