"""Code benchmarks as distributed: jsonl read plain or gzip-compressed, MBPP's original schema
(tests/fixtures/llm_eval/mbpp.jsonl, problems in its format) prompted as the paper does and
scored by its asserts, and experiments/score.py over a samples file: rows, pass@k, resume after a
kill, one-line errors before anything is written. The real HumanEval: tests/test_humaneval.py."""

import gzip
import itertools
import json
import math
import os
import signal
import subprocess
import sys
import time
from fractions import Fraction

import numpy as np
import pytest

from compgen_jax import metric_writer
from compgen_jax.llm_eval import base, functional, samples, sandbox
from compgen_jax.llm_eval.benchmarks import BENCHMARKS
from compgen_jax.types import ConfigError, DataError
from tests.helpers import REPO

FIXTURES = os.path.join(REPO, "tests", "fixtures", "llm_eval")
MBPP = os.path.join(FIXTURES, "mbpp.jsonl")
UNISOLATED = sandbox.isolation_problem() is not None  # then run unisolated, and say so


def records(path=MBPP):
  with open(path) as f:
    return {r["task_id"]: r for r in map(json.loads, f)}


def mbpp(**overrides):
  settings = functional.mbpp_settings()
  settings.update(path=MBPP, timeout_s=5.0, memory_mb=512, allow_unisolated=UNISOLATED,
                  **overrides)
  BENCHMARKS["mbpp"].validate(settings, "benchmarks.mbpp")
  return BENCHMARKS["mbpp"].load(settings), settings


def test_jsonl_is_read_plain_or_gzip_and_bad_files_are_one_line(tmp_path):
  plain = os.path.join(FIXTURES, "humaneval_plus.jsonl")
  packed = tmp_path / "HumanEvalPlus.jsonl.gz"
  packed.write_bytes(gzip.compress(open(plain, "rb").read()))
  settings = BENCHMARKS["humaneval_plus"].default_settings()
  settings.path = plain
  expected = BENCHMARKS["humaneval_plus"].load(settings)
  settings.path = str(packed)
  assert BENCHMARKS["humaneval_plus"].load(settings) == expected  # every reader: base.read_jsonl
  misnamed = tmp_path / "data.jsonl"  # gzip told by its bytes, not its name
  misnamed.write_bytes(packed.read_bytes())
  assert base.read_jsonl(str(misnamed), {}) == base.read_jsonl(plain, {})
  broken = tmp_path / "broken.jsonl.gz"
  broken.write_bytes(packed.read_bytes()[:40])
  latin = tmp_path / "latin.jsonl"
  latin.write_bytes('{"text": "caf\xe9"}\n'.encode("latin-1"))
  for path, words in ((broken, "damaged gzip"), (latin, "not UTF-8")):
    with pytest.raises(DataError, match=words) as error:
      base.read_jsonl(str(path), {})
    assert "\n" not in str(error.value) and str(path) in str(error.value)


def test_mbpp_prompt_is_the_papers_and_split_picks_the_tasks():
  problems, _ = mbpp()
  raw = records()
  assert [p.id for p in problems] == ["11", "12", "13", "14"]  # the test split: 11 to 510

  def block(r):
    return ("You are an expert Python programmer, and here is your task: " + r["text"]
            + " Your code should pass these tests:\n\n" + "\n".join(r["test_list"])
            + "\n[BEGIN]\n")

  shots = "".join(block(raw[i]) + raw[i]["code"].replace("\r\n", "\n") + "\n[DONE]\n"
                  for i in (2, 3, 4))
  assert problems[0].prompt == shots + block(raw[11])
  zero, _ = mbpp(fewshot_ids=())
  assert zero[1].prompt == block(raw[12])
  assert [p.id for p in mbpp(split="validation")[0]] == ["511"]
  assert len(mbpp(split="all")[0]) == len(raw)
  assert "[DONE]" in BENCHMARKS["mbpp"].stop_strings
  with pytest.raises(DataError, match="no task 7 for the prompt"):
    mbpp(fewshot_ids=(2, 7))
  with pytest.raises(ConfigError) as error:
    mbpp(split="dev")
  assert error.value.field == "benchmarks.mbpp.split"


def test_mbpp_is_scored_by_its_asserts_after_its_setup_code():
  problems, settings = mbpp(split="all")
  raw = {str(k): v for k, v in records().items()}
  right = BENCHMARKS["mbpp"].score(problems, [raw[p.id]["code"] for p in problems], settings)
  assert [r["correct"] for r in right] == [True] * len(problems)
  assert {r["isolated"] for r in right} == {not UNISOLATED}
  # 13's tests build Rect in test_setup_code; a model's echoed asserts and chatter are dropped
  rect = problems[[p.id for p in problems].index("13")]
  echoed = "def rect_area(r):\n  return r.width * r.height\nassert rect_area(1) == 0\nDone."
  wrong = ["def rect_area(r):\n  return r.width + r.height\n",
           "def rect_area(r):\n  return r.area\n", echoed]
  rows = BENCHMARKS["mbpp"].score([rect] * 3, wrong, settings)
  assert [(r["correct"], r["failure"]) for r in rows] == [
      (False, "assertion"), (False, "exception"), (True, None)]
  assert "AttributeError" in rows[1]["message"] and "assert" not in rows[2]["extracted"]


def test_pass_at_k_is_chen_et_als_estimator():
  # the definition: the chance that k of the n samples, drawn without replacement, hold a pass
  for n in range(1, 8):
    for c in range(n + 1):
      for k in range(1, n + 1):
        subsets = list(itertools.combinations([True] * c + [False] * (n - c), k))
        assert samples.pass_at_k(n, c, k) == pytest.approx(
            np.mean([any(s) for s in subsets], dtype=np.float64), abs=1e-12)
  for n, c, k in ((200, 17, 100), (500, 3, 10), (1000, 999, 1), (50, 0, 10)):
    exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert samples.pass_at_k(n, c, k) == pytest.approx(float(exact), rel=1e-12, abs=1e-15)


def write_samples(path, completions: dict) -> None:
  with open(path, "w") as f:
    for task, texts in completions.items():
      for text in texts:
        f.write(json.dumps({"task_id": task, "completion": text}) + "\n")


def mbpp_samples(path, slow: float = 0.0):
  """Four samples per fixture test task (the canonical code, two wrong ones, the code again);
  `slow`: each sample sleeps that long first. Returns the expected passes per task."""
  raw = records()
  nap = f"import time\ntime.sleep({slow})\n" if slow else ""
  texts = {i: [nap + raw[i]["code"], nap + "def nothing():\n  return 0\n", nap + "x = (",
               nap + raw[i]["code"]] for i in (11, 12, 13, 14)}
  write_samples(path, texts)
  return {str(i): [True, False, False, True] for i in texts}


def test_score_rows_and_pass_at_k(tmp_path):
  path = tmp_path / "samples.jsonl"
  expected = mbpp_samples(path)
  summary = samples.run("mbpp", MBPP, str(path), str(tmp_path / "w"), (1, 2, 3),
                        [f"--config.allow_unisolated={UNISOLATED}"], progress=False)
  rows = metric_writer.read_rows(str(tmp_path / "w" / samples.ROWS_FILE))
  assert [(r["task_id"], r["sample"]) for r in rows] == [
      (t, i) for t in expected for i in range(4)]
  assert [r["passed"] for r in rows] == [v for t in expected for v in expected[t]]
  assert [r["failure"] for r in rows[:4]] == [None, "exception", "syntax", None]  # NameError
  for k in (1, 2, 3):  # 2 of 4 pass in every task
    subsets = list(itertools.combinations([True, False, False, True], k))
    assert summary[f"pass@{k}"] == pytest.approx(np.mean([any(s) for s in subsets]))
  assert summary["failures"] == {"exception": 4, "syntax": 4} and summary["tasks"] == 4
  assert json.load(open(tmp_path / "w" / samples.SUMMARY_FILE)) == summary


def _score_binary(*args):
  return [sys.executable, os.path.join(REPO, "experiments", "score.py"), *args]


def test_score_binary_resumes_after_a_kill_with_the_same_rows(tmp_path):
  path = tmp_path / "samples.jsonl"
  mbpp_samples(path, slow=0.1)
  args = ["--benchmark=mbpp", f"--data={MBPP}", f"--samples={path}", "--k=1,4",
          "--config.workers=1", f"--config.allow_unisolated={UNISOLATED}"]
  rows_path = tmp_path / "killed" / samples.ROWS_FILE
  proc = subprocess.Popen(_score_binary(*args, f"--workdir={tmp_path / 'killed'}"),
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
  deadline = time.monotonic() + 60
  while not (rows_path.exists() and rows_path.read_text().count("\n") >= 8):
    assert proc.poll() is None and time.monotonic() < deadline
    time.sleep(0.05)
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  kept = metric_writer.read_rows(str(rows_path))
  assert 8 <= len(kept) < 16  # one batch of 8 (one worker) written, the rest not
  done = subprocess.run(_score_binary(*args, f"--workdir={tmp_path / 'killed'}"), cwd=REPO,
                        capture_output=True, text=True)
  assert done.returncode == 0, done.stderr
  assert "pass@1 0.5000  pass@4 1.0000  (16 samples of 4/4 tasks" in done.stdout
  whole = samples.run("mbpp", MBPP, str(path), str(tmp_path / "whole"), (1,),  # 2 workers
                      ["--config.workers=2", args[-1]], progress=False)
  resumed = metric_writer.read_rows(str(rows_path))
  assert resumed[:len(kept)] == kept
  assert resumed == metric_writer.read_rows(str(tmp_path / "whole" / samples.ROWS_FILE))
  assert whole["pass@1"] == 0.5


def test_bad_inputs_are_one_line_errors_before_anything_is_written(tmp_path):
  good = tmp_path / "samples.jsonl"
  mbpp_samples(good)
  lines = good.read_text().splitlines()
  malformed, unknown, few = (tmp_path / n for n in ("malformed.jsonl", "unknown.jsonl",
                                                    "few.jsonl"))
  malformed.write_text("\n".join(lines[:3] + ['{"task_id": 11, "completion": '] + lines[3:]))
  unknown.write_text("\n".join(lines + ['{"task_id": 999, "completion": ""}']))
  few.write_text("\n".join(lines[:12]))  # task 14 has no samples
  cases = [
      (ConfigError, "unknown 'gsm8k'", dict(benchmark="gsm8k")),
      (DataError, "malformed.jsonl:4: not valid JSON", dict(samples_path=str(malformed))),
      (DataError, "unknown.jsonl:17: task 999 is not in", dict(samples_path=str(unknown))),
      (ConfigError, "cover 3 of the 4 tasks", dict(samples_path=str(few))),
      (ConfigError, "pass@5 needs 5 samples of every task; 11 has 4", dict(ks=(1, 5))),
      (DataError, "nowhere.jsonl: no such file", dict(data=str(tmp_path / "nowhere.jsonl"))),
      (ConfigError, "unknown field 'colour'", dict(overrides=["--config.colour=red"])),
  ]
  for error, words, change in cases:
    call = dict(benchmark="mbpp", data=MBPP, samples_path=str(good),
                workdir=str(tmp_path / "w"), ks=(1,), overrides=[], progress=False)
    with pytest.raises(error, match=words):
      samples.run(**{**call, **change})
    assert not (tmp_path / "w").exists()
  result = subprocess.run(_score_binary("--benchmark=mbpp", f"--data={MBPP}",
                                        f"--samples={unknown}", f"--workdir={tmp_path / 'w'}"),
                          cwd=REPO, capture_output=True, text=True)
  assert result.returncode == 2 and result.stderr.count("\n") == 1
  assert "task 999 is not in" in result.stderr and not (tmp_path / "w").exists()
