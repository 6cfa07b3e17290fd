"""The study's intervals and paired comparisons (llm_eval/comparisons.py): the crossed bootstrap
against an independent numpy re-implementation (index draws, float64), a planted difference
told apart and none mostly not, pairing by problem and seed, and the report on synthetic
per-problem rows of two seeds (the background scored at seed 0 only)."""

import os
import random

import numpy as np
import pytest

from compgen_jax import metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.llm_eval import comparisons, report
from compgen_jax.types import DataError

DRAWS, SEED = 2000, 0  # analysis.correlations.BOOTSTRAP_DRAWS / BOOTSTRAP_SEED


def reference(x_SxP) -> tuple[float, float, float]:
  """Mean and 95% percentile interval: each draw picks seeds and problems by index (seeds
  first, from one generator) and averages the picked rows and columns."""
  x = np.asarray(x_SxP, np.float64)
  rng = np.random.default_rng(SEED)
  seeds = rng.integers(0, x.shape[0], size=(DRAWS, x.shape[0]))
  problems = rng.integers(0, x.shape[1], size=(DRAWS, x.shape[1]))
  draws = np.asarray([x[s][:, p].mean() for s, p in zip(seeds, problems, strict=True)])
  low, high = np.quantile(draws, [0.025, 0.975])
  return x.mean(), low, high


def _outcomes(rng, p_correct: float, seeds: int, problems: int) -> np.ndarray:
  return (rng.random((seeds, problems)) < p_correct).astype(np.float64)


@pytest.mark.parametrize("seeds", [1, 3])
def test_a_planted_difference_is_told_apart_and_matches_the_reference(seeds):
  rng = np.random.default_rng(1)
  a, b = _outcomes(rng, 0.75, seeds, 60), _outcomes(rng, 0.3, seeds, 60)
  d = comparisons.interval(a - b)
  np.testing.assert_allclose((d.value, d.low, d.high), reference(a - b), rtol=0, atol=1e-12)
  assert d.low > 0 and comparisons.verdict(d) == comparisons.LEADS
  assert comparisons.verdict(comparisons.interval(b - a)) == comparisons.TRAILS
  one = comparisons.interval(a)
  np.testing.assert_allclose((one.value, one.low, one.high), reference(a), atol=1e-12)
  assert (one.seeds, one.problems) == (seeds, 60)


@pytest.mark.parametrize("seeds", [1, 3])
def test_no_difference_is_mostly_not_told_apart(seeds):
  rng = np.random.default_rng(2)
  covered = []
  for _ in range(40):
    a, b = _outcomes(rng, 0.5, seeds, 40), _outcomes(rng, 0.5, seeds, 40)
    d = comparisons.interval(a - b)
    covered.append(d.low <= 0 <= d.high)
    assert (comparisons.verdict(d) == comparisons.NOT_TOLD_APART) == covered[-1]
  assert np.mean(covered) >= 0.85, np.mean(covered)  # nominal 0.95


def _problem_rows(bench, system, seed, correct, ids=None):
  ids = ids or [str(i) for i in range(len(correct))]
  return [{"benchmark": bench, "system": system, "seed": seed, "id": i, "correct": bool(c)}
          for i, c in zip(ids, correct, strict=True)]


def test_pairing_ignores_row_order_and_refuses_unpaired_problems_and_seeds():
  rng = np.random.default_rng(3)
  summary = [{"benchmark": "arith", "system": s, "kind": k, "members": m}
             for s, k, m in (("base", "single", ["base"]), ("arith", "single", ["arith"]),
                             ("composed", "composed", ["base", "arith", "funcs"]))]
  rows = [r for seed in (0, 1) for s in ("arith", "composed")
          for r in _problem_rows("arith", s, seed, _outcomes(rng, 0.5, 1, 30)[0])]
  rows += _problem_rows("arith", "base", 0, _outcomes(rng, 0.2, 1, 30)[0])
  got = comparisons.compare(summary, rows)
  assert [(r["system"], r["other"]) for r in got] == [("arith", "base"), ("composed", "arith")]
  assert all(r["seeds"] == 2 and r["problems"] == 30 for r in got)
  shuffled = rows[:]
  random.Random(0).shuffle(shuffled)
  assert comparisons.compare(summary, shuffled) == got
  # the background, scored once, stands for both seeds: the same as its rows copied to seed 1
  copied = rows + [{**r, "seed": 1} for r in rows if r["system"] == "base"]
  assert comparisons.compare(summary, copied) == got
  unpaired = [r for r in rows if not (r["system"] == "base" and r["id"] == "7")]
  with pytest.raises(DataError, match=r"arith: arith against base: unpaired problems \(1 "):
    comparisons.compare(summary, unpaired)
  seed2 = [{**r, "seed": 2} if r["system"] == "composed" and r["seed"] == 1 else r
           for r in rows]
  with pytest.raises(DataError, match=r"seeds \[0, 2\] against \[0, 1\]"):
    comparisons.compare(summary, seed2)
  twice = rows + rows[:1]
  with pytest.raises(DataError, match="scored twice"):
    comparisons.compare(summary, twice)


SYSTEMS = {"base": ("single", ["base"]), "arith": ("single", ["arith"]),
           "funcs": ("single", ["funcs"]), "composed": ("composed", ["base", "arith", "funcs"]),
           "task_arithmetic": ("task_arithmetic", ["base", "arith", "funcs"])}
RATES = {"base": 0.1, "arith": 0.8, "funcs": 0.5, "composed": 0.6, "task_arithmetic": 0.2}


def _write_seed(workdir, seed, rng, problems=20) -> dict:
  """A seed's llm workdir: summary rows and per-problem rows (the background at seed 0 only);
  returns {(benchmark, system): outcomes}."""
  out, summary = {}, []
  for bench in ("arith", "funcs"):
    for name, (kind, members) in SYSTEMS.items():
      if seed and name == "base":
        continue
      correct = _outcomes(rng, RATES[name], 1, problems)[0]
      out[bench, name] = correct
      summary.append({"step": 0, "benchmark": bench, "system": name, "kind": kind,
                      "members": members, "num_problems": problems,
                      "accuracy": float(correct.mean()), "mean_tokens": 5.0,
                      "finish_eos": 1.0, "finish_budget": 0.0, "mean_p_eos": 0.1,
                      **({"spec": "authors", "active_frac_K": [1.0, 1.0], "overlap": 1.0,
                          "mean_abs_log_z": 1.0, "max_abs_log_z": 2.0,
                          "mean_p_eos_M": [0.1] * 3} if kind == "composed" else {})})
      ids = [str(i) for i in rng.permutation(problems)]  # each file in its own order
      metric_writer.append_rows(os.path.join(workdir, bench, f"{name}.jsonl"),
                                [{"id": i, "correct": bool(correct[int(i)])} for i in ids])
  metric_writer.append_rows(os.path.join(workdir, workdir_lib.SUMMARY_FILE), summary)
  return out


def test_the_report_of_two_seeds_states_intervals_and_comparisons(tmp_path):
  rng = np.random.default_rng(4)
  workdir = str(tmp_path)
  seeds = [_write_seed(workdir, 0, rng), _write_seed(comparisons.seed_dir(workdir, 1), 1, rng)]
  rows = comparisons.read(workdir)
  assert {r["seed"] for r in rows if r["system"] == "composed"} == {0, 1}
  assert {r["seed"] for r in rows if r["system"] == "base"} == {0}

  order = [int(i) for i in sorted(map(str, range(20)))]  # the problems' ids sorted as text

  def outcomes(bench, name):  # [2, 20]; the background's seed-0 row for both seeds
    return np.stack([s.get((bench, name), seeds[0].get((bench, name))) for s in seeds])[:, order]

  text = open(report.rewrite(workdir)).read()
  for bench, name in (("arith", "arith"), ("funcs", "base"), ("funcs", "composed")):
    mean, low, high = reference(outcomes(bench, name))
    assert f"| {100 * mean:.1f} ({100 * low:.1f}-{100 * high:.1f}) |" in text
  assert "| arith (n=20, 2 seeds) |" in text
  expected = [("expert against the background, own skill", "arith", "arith", "base"),
              ("expert against the background, own skill", "funcs", "funcs", "base"),
              ("composition against its member, the member's skill", "arith", "composed",
               "arith"),
              ("composition against its member, the member's skill", "funcs", "composed",
               "funcs"),
              ("composition against a merge or the joint model", "arith", "composed",
               "task_arithmetic"),
              ("composition against a merge or the joint model", "funcs", "composed",
               "task_arithmetic")]
  for question, bench, a, b in expected:
    mean, low, high = reference(outcomes(bench, a) - outcomes(bench, b))
    word = ("leads" if low > 0 else "trails" if high < 0 else "not told apart")
    line = (f"| {question} | {bench} | {a} | {b} | {100 * outcomes(bench, a).mean():.1f} - "
            f"{100 * outcomes(bench, b).mean():.1f} | {100 * mean:+.1f} [{100 * low:+.1f}, "
            f"{100 * high:+.1f}] | {word} |")
    assert line in text, line
  assert sum(line.startswith("| composition against") or line.startswith("| expert against")
             for line in text.splitlines()) == len(expected)
  assert "2 seeds of expert fine-tuning (0, 1)" in text
  assert "| benchmark | system | seed 0 | seed 1 |" in text
  assert f"| arith | base | {100 * seeds[0]['arith', 'base'].mean():.1f} (all) |  |" in text


def test_a_summary_without_its_per_problem_rows_is_refused(tmp_path):
  _write_seed(str(tmp_path), 0, np.random.default_rng(5))
  os.remove(tmp_path / "funcs" / "composed.jsonl")
  with pytest.raises(DataError, match=r"funcs/composed.jsonl: 0 per-problem rows, its summary "
                     "says 20"):
    comparisons.read(str(tmp_path))


def test_the_majority_answer_is_the_leave_one_out_mode_of_the_golds():
  """Each problem guessed with the mode of the other problems' golds: six 3s and four 4s among
  15 problems -> the 3s are right (5 other 3s beat 4 4s), a 4 is not (six 3s), nor a single;
  two answers twice each -> every problem's own gold loses its tie. The expert's comparison
  against it is paired per problem, on a benchmark with golds only."""
  golds = ["3"] * 6 + ["4"] * 4 + ["5", "6", "7", "8", "9"]
  ids = [f"p{i:02d}" for i in range(len(golds))]
  expert = [g in ("4", "9") for g in golds]  # right on the 4s and the 9
  rows = [{**r, "gold": g} for s, correct in (("base", [False] * 15), ("arith", expert))
          for r, g in zip(_problem_rows("arith", s, 0, correct, ids), golds, strict=True)]
  got = comparisons.majority_answer(rows, "arith")
  assert got.seeds == (0,) and got.ids == tuple(ids)
  np.testing.assert_array_equal(got.correct_SxP[0], [g == "3" for g in golds])
  pairs = [{**r, "gold": g} for r, g in zip(_problem_rows("x", "a", 0, [0] * 4),
                                            ["a", "a", "b", "b"], strict=True)]
  assert comparisons.majority_answer(pairs, "x").correct_SxP.sum() == 0
  summary = [{"benchmark": b, "system": s, "kind": k, "members": m}
             for b in ("arith", "funcs")
             for s, k, m in (("base", "single", ["base"]), ("arith", "single", ["arith"]),
                             ("composed", "composed", ["base", "arith", "funcs"]))]
  code = _problem_rows("funcs", "base", 0, [False] * 3) + _problem_rows("funcs", "arith", 0,
                                                                        [True] * 3)
  out = comparisons.compare(summary, rows + code)
  mine = [r for r in out if r["other"] == comparisons.MAJORITY]
  assert [(r["benchmark"], r["system"]) for r in mine] == [("arith", "arith")]  # no funcs golds
  assert mine[0]["accuracy"] == 5 / 15 and mine[0]["other_accuracy"] == 6 / 15
  assert mine[0]["difference"] == pytest.approx(-1 / 15)
  assert comparisons.majority_answer(code, "funcs") is None
  clash = rows + [{**rows[0], "system": "composed", "gold": "4"}]
  with pytest.raises(DataError, match="has golds '3' and '4'"):
    comparisons.majority_answer(clash, "arith")


def test_each_expert_is_judged_against_the_strongest_baseline_of_its_benchmark():
  """The baseline of the highest accuracy on the expert's own benchmark (the first scored on a
  tie), scored at seed 0 alone and paired with every expert seed, as the background; none
  where no baseline is scored (the committed reports' comparisons are as they were)."""
  rng = np.random.default_rng(6)
  kinds = {"base": "single", "arith": "single", "funcs": "single", "composed": "composed",
           "last_number": "baseline", "nearest_train": "baseline", "majority": "baseline"}
  members = {"composed": ["base", "arith", "funcs"]}
  rates = {"last_number": 0.2, "nearest_train": 0.5, "majority": 0.5}
  rows, summary = [], []
  for bench in ("arith", "funcs"):
    for system, kind in kinds.items():
      if bench == "funcs" and system in ("last_number", "nearest_train"):
        continue  # the question rules apply to arith alone
      seeds = (0,) if kind == "baseline" or system == "base" else (0, 1)
      correct = {s: _outcomes(rng, rates.get(system, 0.4), 1, 30)[0] for s in seeds}
      if kind == "baseline":  # the accuracy the summary states
        correct[0] = (np.arange(30) < 30 * rates[system]).astype(np.float64)
      rows += [r for s in seeds for r in _problem_rows(bench, system, s, correct[s])]
      summary.append({"benchmark": bench, "system": system, "kind": kind,
                      "members": members.get(system, [system] if kind == "single" else []),
                      "accuracy": float(correct[0].mean())})
  got = [r for r in comparisons.compare(summary, rows) if r["question"] == comparisons.STRONGEST]
  assert [(r["benchmark"], r["system"], r["other"]) for r in got] == [
      ("arith", "arith", "nearest_train"), ("funcs", "funcs", "majority")]
  order = [int(i) for i in sorted(map(str, range(30)))]

  def outcomes(bench, system):
    by_seed = {r["seed"]: r for r in rows if r["benchmark"] == bench and r["system"] == system}
    return np.asarray([[r["correct"] for r in rows if r["benchmark"] == bench and
                        r["system"] == system and r["seed"] == s] for s in sorted(by_seed)],
                      np.float64)[:, order]

  expert, baseline = outcomes("arith", "arith"), outcomes("arith", "nearest_train")
  mean, low, high = reference(expert - np.broadcast_to(baseline, expert.shape))
  assert (got[0]["seeds"], got[0]["problems"]) == (2, 30)
  np.testing.assert_allclose((got[0]["difference"], got[0]["low"], got[0]["high"]),
                             (mean, low, high), atol=1e-12)
  section = report.comparisons_section(summary, rows)
  assert "The strongest trivial baseline" in section
  assert f"| {comparisons.STRONGEST} | funcs | funcs | majority |" in section
  plain = [r for r in summary if r["kind"] != "baseline"]
  assert not [r for r in comparisons.compare(plain, rows) if r["question"] == comparisons.STRONGEST]
  assert "The strongest trivial baseline" not in report.comparisons_section(plain, rows)
