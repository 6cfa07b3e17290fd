"""The diagnostics pass over composed decodes (llm_eval/diagnose.py): per-problem quantities
against an independent numpy computation, the teacher-forced steps against the decode's own
records on tiny random models, and the AUC (analysis.correlations.auc) on hand-computed cases."""

import copy
import math
import os
import types

import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from compgen_jax import apps, metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.analysis import correlations
from compgen_jax.llm_eval import benchmarks, diagnose, diagnostics_rows, runner
from compgen_jax.types import ConfigError, DataError


def test_auc_on_a_hand_computed_case():
  pos, neg = [3.0, 5.0, 7.0, 9.0, 11.0], [2.0, 4.0, 6.0, 8.0, 11.0]
  # pairs a positive wins: 1 + 2 + 3 + 4 + (4 and a tie at 11: 1/2) = 14.5 of 25
  a = correlations.auc(pos + neg + [math.nan], [True] * 5 + [False] * 5 + [True])
  assert a.auc == pytest.approx(14.5 / 25)
  assert (a.positives, a.negatives) == (5, 5)  # the NaN score left out
  assert 0.0 <= a.low <= a.auc <= a.high <= 1.0
  assert a.auc == pytest.approx(stats.mannwhitneyu(pos, neg).statistic / 25)
  apart = [5.0, 6.0, 7.0, 8.0, 9.0, 0.0, 1.0, 2.0, 3.0, 4.0]
  assert correlations.auc(apart, [True] * 5 + [False] * 5)[:3] == (1.0, 1.0, 1.0)
  assert correlations.auc(apart, [False] * 5 + [True] * 5)[:3] == (0.0, 0.0, 0.0)
  # every resample on one side of 0.5: p = 0; every resample at 0.5 (all tied): p = 1
  assert correlations.auc(apart, [True] * 5 + [False] * 5).p == 0.0
  assert correlations.auc(apart, [False] * 5 + [True] * 5).p == 0.0
  assert correlations.auc([2.0] * 10, [True] * 5 + [False] * 5)[:3] == (0.5, 0.5, 0.5)
  assert correlations.auc([2.0] * 10, [True] * 5 + [False] * 5).p == 1.0
  short = correlations.auc(list(range(40)), [True] * 36 + [False] * 4)
  assert math.isnan(short.auc) and (short.positives, short.negatives) == (36, 4)
  assert math.isnan(short.p)
  assert correlations.auc_text(short, "failures", "successes") == "not testable: 4 successes"
  assert correlations.auc_text(a) == f"{a.auc:.3f} [{a.low:.3f}, {a.high:.3f}]"
  with pytest.raises(ValueError, match="one vector"):
    correlations.auc([1.0, 2.0], [True])


def test_auc_interval_is_the_percentile_of_resampled_aucs():
  """The count-weighted pair matrix equals the AUC of each resample, computed plainly on the
  resampled items (each pair counted, ties 1/2)."""
  rng = np.random.default_rng(1)
  s = rng.normal(size=30)
  y = s + rng.normal(size=30) > 0
  a = correlations.auc(s, y)
  picks = np.random.default_rng(correlations.BOOTSTRAP_SEED).integers(
      0, 30, size=(correlations.BOOTSTRAP_DRAWS, 30))
  plain = lambda pos, neg: np.mean([(a > b) + 0.5 * (a == b) for a in pos for b in neg])  # noqa: E731
  draws = np.asarray([plain(s[p][y[p]], s[p][~y[p]]) for p in picks if 0 < y[p].sum() < 30])
  assert (a.low, a.high) == pytest.approx(tuple(np.quantile(draws, [0.025, 0.975])))
  # the two-sided p-value of AUC = 0.5: twice the smaller tail of the same draws
  assert a.p == pytest.approx(min(1, 2 * min(np.mean(draws <= 0.5), np.mean(draws >= 0.5))))


def _numpy_reference(logp_MxNxV, n, lam_K, eos_id, kl_threshold, tail_logp):
  """The quantities of one problem from their definitions, in float64."""
  lp = np.maximum(np.asarray(logp_MxNxV, np.float64)[:, :n], -1e4)
  b, e = lp[0], lp[1:]
  kl_KxN = (np.exp(e) * (e - b)).sum(-1)
  active_KxN = kl_KxN > kl_threshold
  if lam_K is None:  # the authors' operator
    unnorm = e.sum(0) - b
  else:
    unnorm = b + np.einsum("k,knv->nv", lam_K, e - b)
  log_z = logsumexp(unnorm, axis=-1)
  p_c = np.exp(unnorm - log_z[:, None])
  boost = np.where(b < tail_logp, unnorm - b, -np.inf).max(-1)
  tops_MxN = lp.argmax(-1)
  ranked = np.zeros_like(p_c, bool)
  for m in range(lp.shape[0]):
    ranked[np.arange(n), tops_MxN[m]] = True
  k = len(e)
  both = [(active_KxN[i] & active_KxN[j]).mean() for i in range(k) for j in range(k) if i != j]
  return {"active_frac_K": active_KxN.mean(1), "overlap": max(both),
          "mean_abs_log_z": np.abs(log_z).mean(), "max_abs_log_z": np.abs(log_z).max(),
          "mean_kl_K": kl_KxN.mean(1),
          "mean_tail_boost": np.where(np.isfinite(boost), boost, 0.0).mean(),
          "max_tail_boost": np.where(np.isfinite(boost), boost, 0.0).max(),
          "unranked_pick_frac": (~ranked[np.arange(n), p_c.argmax(-1)]).mean(),
          "mean_unranked_mass": np.where(ranked, 0.0, p_c).sum(-1).mean(),
          "eos_first_M": (tops_MxN[:, n - 1] == eos_id).tolist(), "active_K": active_KxN.sum(1)}


@pytest.mark.parametrize("lam_K", [None, np.asarray([1.0, 0.5, -0.5], np.float32)])
def test_per_problem_diagnostics_match_numpy(lam_K):
  """Three experts over a background on random log-probs with a tail; problem 0 ends at an
  EOS that the background and expert 2 rank first; problems of 12, 7 and 1 steps."""
  rng = np.random.default_rng(0)
  num_models, batch, steps, vocab, eos_id = 4, 3, 12, 50, 1
  logits = rng.normal(scale=3.0, size=(num_models, batch, steps, vocab))
  lengths = [12, 7, 1]
  logits[[0, 2], 0, lengths[0] - 1, eos_id] += 40.0
  logp = logits - logsumexp(logits, axis=-1, keepdims=True)
  valid = np.arange(steps)[None] < np.asarray(lengths)[:, None]
  d = diagnose.per_problem(jnp.asarray(logp, jnp.float32), jnp.asarray(valid),
                           None if lam_K is None else jnp.asarray(lam_K),
                           operator="authors" if lam_K is None else "paper", kl_threshold=0.5)
  system = types.SimpleNamespace(name="c", members=("b", "e1", "e2", "e3"))
  for i, n in enumerate(lengths):
    ref = _numpy_reference(logp[:, i], n, lam_K, eos_id, 0.5, diagnose.TAIL_LOGP)
    decoded = {"id": str(i), "correct": i == 1, "finish": "eos" if i == 0 else "budget",
               "tokens": [0] * n, "sum_abs_log_z": ref["mean_abs_log_z"] * n,
               "active_K": ref["active_K"].tolist()}
    row = diagnose._row(system, "bench", decoded, {k: np.asarray(v[i]) for k, v in d.items()
                                                    if k != "top_MxBxN"},
                        np.asarray(d["top_MxBxN"])[:, i], eos_id)
    for key in ("active_frac_K", "overlap", "mean_abs_log_z", "max_abs_log_z", "mean_kl_K",
                "mean_tail_boost", "max_tail_boost", "unranked_pick_frac",
                "mean_unranked_mass"):
      np.testing.assert_allclose(row[key], ref[key], rtol=1e-4, atol=1e-4, err_msg=key)
    assert row["eos_first_M"] == ([True, False, True, False] if i == 0 else None)
    assert row["decode_log_z_gap"] < 1e-4 and row["decode_active_gap"] == 0
    assert row["num_tokens"] == n and row["hits_budget"] == float(i > 0)
  assert any(r > 0 for r in np.asarray(d["max_tail_boost"]))  # the tail was exercised


@pytest.fixture(scope="module")
def scored(tiny_models, tmp_path_factory):
  """Three experts (the authors' operator; the two-expert case is the test above) composed on
  the tiny models, decoded and scored on the GSM8K fixture by the runner, then diagnosed
  through the llm application's evaluate stage, beside a gated composition it skips."""
  cfg, _, loaded = tiny_models
  cfg = copy.deepcopy(cfg)
  with cfg.unlocked():
    cfg.compositions.composed_3 = ("math", "coding", "math")
    cfg.systems = ("composed_3", "composed_selective")
    cfg.run = ("gsm8k",)
    cfg.generate.max_new_tokens = 8
  workdir = str(tmp_path_factory.mktemp("diagnose"))
  system = runner.validate(cfg)[0]
  problems = benchmarks.BENCHMARKS["gsm8k"].load(cfg.benchmarks.gsm8k)
  runner.run_one(cfg, loaded, system, "gsm8k", problems, workdir)
  return cfg, workdir, apps.APPS["llm"].evaluate(cfg, workdir)


def test_the_pass_recomputes_what_the_decode_recorded(scored):
  cfg, workdir, text = scored
  rows = metric_writer.read_rows(os.path.join(workdir, workdir_lib.DIAGNOSTICS_FILE))
  scored_rows = {("composed_3", r["id"]): r for r in metric_writer.read_rows(
      os.path.join(workdir, "gsm8k", "composed_3.jsonl"))}
  assert sorted((r["system"], r["id"]) for r in rows) == sorted(scored_rows)
  for r in rows:
    decoded = scored_rows[r["system"], r["id"]]
    # teacher-forced after each member's prompt == the cached decode, step for step
    assert r["decode_log_z_gap"] < 1e-3 and r["decode_active_gap"] == 0
    assert r["num_tokens"] == decoded["num_tokens"] and r["correct"] == decoded["correct"]
    assert len(r["active_frac_K"]) == len(r["members"]) - 1 == 3
    np.testing.assert_allclose(np.asarray(r["active_frac_K"]) * r["num_tokens"],
                               decoded["active_K"], atol=1e-6)
  assert "skipped (not the operator alone): composed_selective (authors, gate=kl 0.1)" in text


def test_summary_pools_tokens_and_predictors_say_when_not_testable(scored):
  _, workdir, text = scored
  rows = metric_writer.read_rows(os.path.join(workdir, workdir_lib.DIAGNOSTICS_FILE))
  summary = metric_writer.read_rows(os.path.join(workdir, workdir_lib.DIAGNOSTICS_SUMMARY_FILE))
  preds = metric_writer.read_rows(os.path.join(workdir, workdir_lib.PREDICTORS_FILE))
  for s in summary:
    group = [r for r in rows if r["system"] == s["system"]]
    w = np.asarray([r["num_tokens"] for r in group], np.float64)
    np.testing.assert_allclose(s["mean_abs_log_z"], np.dot(w, [r["mean_abs_log_z"]
                                                                for r in group]) / w.sum())
    assert s["num_correct"] == sum(r["correct"] for r in group)
    ends = [r["eos_first_M"] for r in group if r["eos_first_M"] is not None]
    assert s["finish_eos"] == len(ends)
  assert len(preds) == len(summary) * len(diagnostics_rows.PREDICTORS)
  for p in preds:  # 4 problems: too few of either class for an AUC
    group = [r for r in rows if r["system"] == p["system"]]
    wins = sum(r["correct"] for r in group)
    assert p["text"] == f"not testable: {len(group) - wins} failures, {wins} successes"
    assert p["failures"] + p["successes"] == len(group) == 4
  assert "| gsm8k | composed_3 |" in text


def test_bad_workdirs_are_refused_before_any_model_is_read(scored, tmp_path):
  cfg, workdir, _ = scored
  with pytest.raises(ConfigError, match="no composition"):
    gated = copy.deepcopy(cfg)
    with gated.unlocked():
      gated.systems = ("composed_selective",)
    apps.APPS["llm"].evaluate(gated, workdir)
  with pytest.raises(DataError, match="no scored rows"):
    apps.APPS["llm"].evaluate(cfg, str(tmp_path))
  old = tmp_path / "old"
  rows = metric_writer.read_rows(os.path.join(workdir, "gsm8k", "composed_3.jsonl"))
  metric_writer.append_rows(str(old / "gsm8k" / "composed_3.jsonl"),
                            [{k: v for k, v in r.items() if k != "tokens"} for r in rows])
  with pytest.raises(DataError, match="without generated `tokens`"):
    apps.APPS["llm"].evaluate(cfg, str(old))
  with pytest.raises(ConfigError, match="no --step"):
    apps.APPS["llm"].evaluate(cfg, workdir, step=3)
