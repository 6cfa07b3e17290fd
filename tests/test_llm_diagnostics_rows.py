"""The evaluate pass's rows pooled over expert seeds (llm_eval/diagnostics_rows.py): the summary
of a synthetic two-seed workdir against an independent numpy computation over both seeds' rows,
the AUC's interval that resamples problems as clusters against index draws, copies of one seed
giving the one-seed AUC and interval, a planted predictor found, and the split's report."""

import os

import numpy as np
import pytest

from compgen_jax import metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.analysis import correlations
from compgen_jax.llm_eval import comparisons, diagnostics_rows, report
from compgen_jax.types import DataError

DRAWS, SEED = 2000, 0  # analysis.correlations.BOOTSTRAP_DRAWS / BOOTSTRAP_SEED
BENCH, SYSTEM, MEMBERS, PROBLEMS = "arith", "composed", ["base", "arith", "funcs"], 30


def _rows(rng, correct) -> list[dict]:
  """Diagnostics rows (diagnose._row's fields) of two experts, one per problem in a shuffled
  order; |log Z| mean planted: larger on failed problems."""
  out = []
  for i in rng.permutation(len(correct)):
    n = int(rng.integers(1, 40))
    both = rng.random((2, 2))
    ends = rng.random() < 0.7
    out.append({
        "step": 0, "benchmark": BENCH, "system": SYSTEM, "id": f"p{i}", "members": MEMBERS,
        "correct": bool(correct[i]), "finish": "eos" if ends else "budget", "num_tokens": n,
        "hits_budget": float(not ends), "active_frac_K": np.diag(both).tolist(),
        "active_frac": float(np.diag(both).mean()), "overlap_KxK": both.tolist(),
        "overlap": float(both[0, 1]), "mean_kl_K": rng.random(2).tolist(),
        "mean_kl": float(rng.random()),
        "mean_abs_log_z": float(rng.normal() + 1.5 * (not correct[i])),
        "max_abs_log_z": float(rng.random() * 5), "mean_tail_boost": float(rng.random()),
        "max_tail_boost": float(rng.random() * 3), "unranked_pick_frac": float(rng.random()),
        "mean_unranked_mass": float(rng.random()),
        "eos_first_M": (rng.random(3) < 0.5).tolist() if ends else None,
        "decode_log_z_gap": float(rng.random() * 1e-5), "decode_active_gap": 0})
  return out


def _write_seed(workdir, rows) -> None:
  """A seed's scored and diagnosed workdir: summary, per-problem and diagnostics rows."""
  correct = [r["correct"] for r in rows]
  metric_writer.append_rows(os.path.join(workdir, workdir_lib.SUMMARY_FILE), [{
      "step": 0, "benchmark": BENCH, "system": SYSTEM, "kind": "composed", "members": MEMBERS,
      "num_problems": len(rows), "accuracy": float(np.mean(correct)), "mean_tokens": 5.0,
      "finish_eos": 1.0, "finish_budget": 0.0, "mean_p_eos": 0.1, "spec": "authors",
      "active_frac_K": [0.5, 0.5], "overlap": 0.2, "mean_abs_log_z": 1.0,
      "max_abs_log_z": 2.0, "mean_p_eos_M": [0.1] * 3}])
  metric_writer.append_rows(os.path.join(workdir, BENCH, f"{SYSTEM}.jsonl"),
                            [{"id": r["id"], "correct": r["correct"]} for r in rows])
  metric_writer.append_rows(os.path.join(workdir, workdir_lib.DIAGNOSTICS_FILE), rows)


def _two_seeds(tmp_path, copy=False) -> tuple[str, list[list[dict]]]:
  rng = np.random.default_rng(3)
  correct = rng.random((2, PROBLEMS)) < 0.5
  seeds = [_rows(rng, correct[0])]
  seeds.append([dict(r) for r in seeds[0]] if copy else _rows(rng, correct[1]))
  workdir = str(tmp_path)
  for s, rows in enumerate(seeds):
    _write_seed(comparisons.seed_dir(workdir, s), rows)
  return workdir, seeds


def test_the_summary_pools_every_token_of_both_seeds(tmp_path):
  workdir, seeds = _two_seeds(tmp_path)
  rows = diagnostics_rows.read(workdir)
  assert [r["seed"] for r in rows] == [0] * PROBLEMS + [1] * PROBLEMS
  [s] = diagnostics_rows.summarize(rows)
  every = seeds[0] + seeds[1]
  w = np.asarray([r["num_tokens"] for r in every], np.float64)
  col = lambda k: np.asarray([r[k] for r in every], np.float64)  # noqa: E731
  for k in ("mean_abs_log_z", "mean_tail_boost", "unranked_pick_frac", "mean_unranked_mass"):
    np.testing.assert_allclose(s[k], (w * col(k)).sum() / w.sum(), rtol=1e-12, err_msg=k)
  both = np.tensordot(w, col("overlap_KxK"), axes=1) / w.sum()
  np.testing.assert_allclose(s["active_frac_K"], np.diag(both), rtol=1e-12)
  np.testing.assert_allclose(s["overlap"], max(both[0, 1], both[1, 0]), rtol=1e-6)  # float32
  assert s["max_abs_log_z"] == col("max_abs_log_z").max()
  ends = np.asarray([r["eos_first_M"] for r in every if r["eos_first_M"] is not None])
  np.testing.assert_allclose(s["eos_first_frac_M"], ends.mean(0))
  assert s["eos_first_none"] == pytest.approx((~ends.any(1)).mean())
  assert (s["num_problems"], s["problems"], s["seeds"]) == (2 * PROBLEMS, PROBLEMS, 2)
  assert s["num_correct"] == sum(r["correct"] for r in every)
  assert s["finish_eos"] == len(ends) and s["mean_tokens"] == pytest.approx(w.mean())
  # one seed's rows (the pass's own, no `seed`): no seed counts, as diagnose.run writes them
  assert "seeds" not in diagnostics_rows.summarize(seeds[0])[0]


def _reference_interval(scores, failed, problems) -> tuple[float, float, float]:
  """Percentile interval of AUCs of index draws: each draw picks problems (numbered in the
  order the rows first give them) and takes every row of each picked problem; and the
  two-sided p-value of AUC = 0.5, twice the smaller share of draws on either side."""
  s, y, p = map(np.asarray, (scores, failed, problems))
  order = list(dict.fromkeys(problems))
  members = [np.flatnonzero(p == name) for name in order]
  picks = np.random.default_rng(SEED).integers(0, len(order), size=(DRAWS, len(order)))
  draws = []
  for pick in picks:
    rows = np.concatenate([members[i] for i in pick])
    pos, neg = s[rows][y[rows]], s[rows][~y[rows]]
    if len(pos) and len(neg):
      draws.append(((pos[:, None] > neg[None]) + 0.5 * (pos[:, None] == neg[None])).mean())
  low, high = np.quantile(draws, [0.025, 0.975])
  draws = np.asarray(draws)
  return low, high, min(1.0, 2 * min(np.mean(draws <= 0.5), np.mean(draws >= 0.5)))


def test_the_clustered_interval_resamples_problems_with_all_their_seeds(tmp_path):
  _, seeds = _two_seeds(tmp_path)
  every = seeds[0] + seeds[1]
  scores = [r["mean_abs_log_z"] for r in every]
  failed = [not r["correct"] for r in every]
  problems = [r["id"] for r in every]
  a = correlations.auc(scores, failed, clusters=problems)
  pos = np.asarray(scores)[np.asarray(failed)]
  neg = np.asarray(scores)[~np.asarray(failed)]
  assert a.auc == pytest.approx(np.mean(pos[:, None] > neg[None]))  # no ties
  np.testing.assert_allclose((a.low, a.high, a.p),
                             _reference_interval(scores, failed, problems), rtol=0, atol=1e-12)
  assert a.low > 0.5  # the planted predictor is found
  with pytest.raises(ValueError, match="3 cluster labels for 60 scores"):
    correlations.auc(scores, failed, clusters=problems[:3])
  # a moderate planted effect over 25 problems of two rows each: p neither 0 nor 1
  rng = np.random.default_rng(7)
  failed = np.repeat(rng.random(25) < 0.5, 2)
  scores = rng.normal(size=50) + 0.5 * failed
  problems = np.repeat([f"p{i}" for i in range(25)], 2).tolist()
  a = correlations.auc(scores, failed, clusters=problems)
  np.testing.assert_allclose((a.low, a.high, a.p),
                             _reference_interval(scores, failed, problems), rtol=0, atol=1e-12)
  assert 0.0 < a.p < 1.0


def test_a_copied_seed_gives_the_one_seed_auc_and_interval(tmp_path):
  """Seed 1 a copy of seed 0: each cluster is two identical rows, every resample's AUC is the
  one-seed resample's, draw for draw; resampling the 2P rows as independent items would narrow
  the interval without any new information."""
  workdir, seeds = _two_seeds(tmp_path, copy=True)
  one = {r["quantity"]: r for r in diagnostics_rows.predictors(seeds[0])}
  pooled = diagnostics_rows.predictors(diagnostics_rows.read(workdir))
  for r in pooled:
    o = one[r["quantity"]]
    np.testing.assert_allclose([r["auc"], r["low"], r["high"]],
                               [o["auc"], o["low"], o["high"]], rtol=0, atol=1e-12)
    assert (r["failures"], r["successes"]) == (2 * o["failures"], 2 * o["successes"])
    assert (r["seeds"], r["problems"]) == (2, PROBLEMS)
  planted = next(r for r in pooled if r["quantity"] == "mean_abs_log_z")
  every = seeds[0] + seeds[1]
  items = correlations.auc([r["mean_abs_log_z"] for r in every],
                           [not r["correct"] for r in every])
  assert items.high - items.low < planted["high"] - planted["low"]


def test_the_split_report_pools_the_seeds_and_each_seeds_report_its_own(tmp_path):
  workdir, seeds = _two_seeds(tmp_path)
  text = open(report.rewrite(workdir)).read()
  every = seeds[0] + seeds[1]
  wins = sum(r["correct"] for r in every)
  pooled = f"({PROBLEMS} problems x 2 seeds)"
  assert f"| {BENCH} | {SYSTEM} | {wins}/{2 * PROBLEMS} {pooled} |" in text  # the summary
  assert f"| {BENCH} | {SYSTEM} | {wins} of {2 * PROBLEMS} {pooled} |" in text  # predictors
  assert "(the evaluate pass), 2 seeds' experts pooled" in text
  assert "## Composition diagnostics at decode time (seed 0's experts;" in text
  own = open(report.rewrite(comparisons.seed_dir(workdir, 1))).read()
  mine = sum(r["correct"] for r in seeds[1])
  assert f"| {BENCH} | {SYSTEM} | {mine}/{PROBLEMS} |" in own and "x 2 seeds" not in own


def test_seeds_that_diagnosed_other_problems_are_refused(tmp_path):
  workdir, seeds = _two_seeds(tmp_path)
  os.remove(os.path.join(comparisons.seed_dir(workdir, 1), workdir_lib.DIAGNOSTICS_FILE))
  metric_writer.append_rows(os.path.join(comparisons.seed_dir(workdir, 1),
                                         workdir_lib.DIAGNOSTICS_FILE), seeds[1][1:])
  with pytest.raises(DataError, match="seed 1 diagnosed other problems than seed 0"):
    report.read(workdir)
  with pytest.raises(DataError, match="diagnosed twice at seed 0"):
    diagnostics_rows.summarize(seeds[0] + seeds[0][:1])


def _quantity_rows(rng, failed, planted: dict) -> list[dict]:
  """One problem per row, every quantity noise except the planted shifts on failed problems."""
  return [{"benchmark": BENCH, "system": SYSTEM, "id": f"p{i}", "correct": not bad,
           **{q: float(rng.normal() + planted.get(q, 0.0) * bad)
              for q in diagnostics_rows.PREDICTORS}} for i, bad in enumerate(failed)]


def test_a_planted_predictor_among_noise_is_named_with_its_direction():
  rng = np.random.default_rng(5)
  failed = rng.random(40) < 0.5
  rows = _quantity_rows(rng, failed, {"mean_kl": 3.0, "num_tokens": -3.0})
  [v] = diagnostics_rows.verdicts(diagnostics_rows.predictors(rows))
  assert (v["benchmark"], v["system"], v["predicts"]) == (BENCH, SYSTEM, "yes")
  assert v["tested"] == len(diagnostics_rows.PREDICTORS)
  found = {q["quantity"]: q["direction"] for q in v["quantities"]}
  assert found == {"mean_kl": "larger on failed problems",
                   "num_tokens": "smaller on failed problems"}
  assert all(q["p"] < 0.05 / len(diagnostics_rows.PREDICTORS) for q in v["quantities"])


def _pred(q, low, high, p, system=SYSTEM) -> dict:
  testable = not np.isnan(low)
  return {"benchmark": BENCH, "system": system, "quantity": q, "auc": (low + high) / 2,
          "low": low, "high": high, "p": p,
          "text": f"{(low + high) / 2:.3f} [{low:.3f}, {high:.3f}]" if testable else
          "not testable: 0 successes"}


def test_holm_over_the_testable_quantities_decides_the_verdict():
  qs, nan = diagnostics_rows.PREDICTORS, float("nan")
  # one borderline interval apart from 0.5 (p = 0.03) among ten noise ones: 0.03 > 0.05 / 11
  borderline = _pred(qs[0], 0.52, 0.80, 0.03)
  noise = [_pred(q, 0.40, 0.62, 0.5) for q in qs[1:]]
  [v] = diagnostics_rows.verdicts([borderline, *noise])
  assert (v["predicts"], v["quantities"], v["tested"]) == ("no", [], 11)
  # the same alone among untestable quantities: Holm over one, 0.03 < 0.05
  alone = [_pred(q, nan, nan, nan) for q in qs[1:]]
  [v] = diagnostics_rows.verdicts([borderline, *alone])
  assert (v["predicts"], v["tested"]) == ("yes", 1)
  assert v["quantities"] == [{"quantity": qs[0], "text": borderline["text"], "p": 0.03,
                              "direction": "larger on failed problems"}]
  # step-down over 11: thresholds 0.05/11, 0.05/10, 0.05/9: 0.001 and 0.004 pass, 0.02 stops
  ps = [0.001, 0.004, 0.02] + [0.5] * 8
  apart = [_pred(q, 0.2, 0.45, p) if p < 0.5 else _pred(q, 0.4, 0.6, p)
           for q, p in zip(qs, ps, strict=True)]
  [v] = diagnostics_rows.verdicts(apart)
  assert [q["quantity"] for q in v["quantities"]] == list(qs[:2])
  assert {q["direction"] for q in v["quantities"]} == {"smaller on failed problems"}
  # nothing testable; and a second composition keeps its own family, in the rows' order
  other = [_pred(q, nan, nan, nan, "composed_3") for q in qs]
  verdicts = diagnostics_rows.verdicts([*other, borderline, *alone])
  assert [(v["system"], v["predicts"], v["tested"]) for v in verdicts] == [
      ("composed_3", "not testable", 0), (SYSTEM, "yes", 1)]
  # a testable row without a p-value (written before predictors gave one) is refused
  with pytest.raises(DataError, match=f"without a p-value \\({qs[0]}\\)"):
    diagnostics_rows.verdicts([{k: v for k, v in borderline.items() if k != "p"}])
