"""The letters report: it regenerates from the committed rows, and its tables are the rows'."""

import json
import os
import shutil

import pytest

from compgen_jax import metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.letters import report, report_rows
from tests.helpers import REPO

COMMITTED = os.path.join(REPO, "results", "cpu", "letters")


@pytest.mark.skipif(not os.path.exists(os.path.join(COMMITTED, report.REPORT_FILE)),
                    reason="no committed letters results")
def test_committed_report_regenerates_from_the_committed_rows(tmp_path):
  report.write_report(COMMITTED, str(tmp_path))
  for name in (report.REPORT_FILE, report.CLAIMS_FILE):
    with open(tmp_path / name) as f, open(os.path.join(COMMITTED, name)) as g:
      assert f.read() == g.read(), name
  for png in (report.EM_PNG, report.SEPARATION_PNG, report.LENGTH_PNG):
    assert os.path.getsize(tmp_path / png) > 0


def _fake_run(root, name, ems, qualitative):
  run = root / workdir_lib.RUNS_DIR / name
  os.makedirs(run)
  cfg = {"preset": "authors", "init": "independent", "num_seeds": len(ems),
         "data": {"layout": "position"}, "optim": {"learning_rate": 3e-4},
         "model": {"width": 64, "positions": "learned", "tie_head": True},
         "train": {"num_steps": 10, "batch_size": 1}}
  with open(run / "config.json", "w") as f:
    json.dump(cfg, f)
  metric_writer.append_rows(str(run / "scratch" / "metrics.jsonl"), [
      {"step": s, "task": t, "seed": 0, "train/loss": loss}
      for s, t, loss in ((5, "identity", 9.0), (10, "identity", 0.5), (10, "A>K", 0.1))])
  diag = {k: 0.0 for k, _ in report_rows.DIAGNOSTICS}
  metric_writer.append_rows(str(run / "substitution" / "results.jsonl"), [
      {"pair": "A>K,M>B", "seed": s, "exact_match": em, "exact_match_all_sources": em,
       "qualitative": q, **diag} for s, (em, q) in enumerate(zip(ems, qualitative, strict=True))])


def test_tables_are_computed_from_the_rows(tmp_path):
  _fake_run(tmp_path, "a", [1.0, 0.5], [{"AMMA": "KBBK"}, {"AMMA": "KBBA"}])
  runs = report_rows.load_runs(str(tmp_path))
  assert report_rows.em_rows(runs) == [["a", "A>K,M>B", 0.75, 0.5, "1.000, 0.500", "1.000, 0.500"]]
  assert report_rows.qualitative_rows(runs, "A>K,M>B") == [["a", "AMMA", "KBBK", "KBBA"]]
  assert report_rows.final_losses(runs["a"]["metrics"]) == {"identity": 0.5, "A>K": 0.1}
  text = open(report.write_report(str(tmp_path))).read()
  assert "| a | A>K,M>B | 0.750 | 0.500 |" in text
  shutil.rmtree(tmp_path / workdir_lib.RUNS_DIR)


def test_a_diagnostic_no_list_names_gets_a_column(tmp_path):
  _fake_run(tmp_path, "a", [1.0, 0.5], [{"AMMA": "KBBK"}, {"AMMA": "KBBA"}])
  path = tmp_path / workdir_lib.RUNS_DIR / "a" / "substitution" / "results.jsonl"
  rows = metric_writer.read_rows(str(path))
  os.remove(path)
  metric_writer.append_rows(str(path), [{**r, "kl_gap": 0.25 * (i + 1), "max_tail_boost": 9.0}
                                        for i, r in enumerate(rows)])
  runs = report_rows.load_runs(str(tmp_path))
  columns = report_rows.diagnostic_columns(runs)
  # the known columns, then the new number under its name (not one the table leaves out)
  assert columns == [*report_rows.DIAGNOSTICS, ("kl_gap", "kl_gap")]
  assert report_rows.diagnostic_rows(runs)[0][-1] == "0.375"
  text = open(report.write_report(str(tmp_path))).read()
  assert "| H(p_i) | kl_gap |" in text


def _fake_pass(root, name, layout, experiment, rows):
  run = root / report_rows.STEP_SPECS_DIR / name
  os.makedirs(run / experiment)
  cfg = {"preset": "authors", "init": "independent", "data": {"layout": layout},
         "model": {"init": "flax"}}
  (run / "config.json").write_text(json.dumps(cfg))
  metric_writer.append_rows(str(run / experiment / "results.jsonl"), rows)


def test_step_spec_and_eos_rule_tables_from_the_passes(tmp_path):
  """One folder per evaluate-only pass; each cell is the mean over seeds with its 95%
  t-interval (mean +- t_{0.975, n-1} s / sqrt(n))."""
  em = [1.0, 0.9, 0.8]
  _fake_pass(tmp_path, "p_gate", "aligned", "substitution", [
      {"pair": "A>B,C>D", "seed": s, "spec": "paper, gate=kl 0.1", "exact_match": v}
      for s, v in enumerate(em)])
  for rule in ("composed", "vote"):
    spec = "paper" if rule == "composed" else f"paper, eos={rule}"
    _fake_pass(tmp_path, f"k_{rule}", "aligned", "k_experts", [
        {"k": k, "seed": s, "spec": spec,
         "exact_match": v if rule == "vote" else 1.0}
        for k in (1, 2) for s, v in enumerate(em)])
  passes = report_rows.load_runs(str(tmp_path), report_rows.STEP_SPECS_DIR)
  half = 4.302652729911275 * 0.1 / 3 ** 0.5  # scipy.stats.t.ppf(0.975, 2) x s / sqrt(3)
  cell = f"0.900 [{0.9 - half:.3f}, {min(0.9 + half, 1.0):.3f}]"  # exact match is at most 1
  setting = "authors, lockstep decoding (aligned), independent inits"
  assert report_rows.step_spec_rows(passes) == [
      [setting, "A>B,C>D", "paper, gate=kl 0.1", cell, "1.000, 0.900, 0.800"]]
  exact = "1.000 [1.000, 1.000]"
  assert report_rows.k_spec_columns(passes) == ["paper", "paper, eos=vote"]
  assert report_rows.k_spec_rows(passes) == [[setting, 1, exact, cell], [setting, 2, exact, cell]]
  assert report_rows.load_runs(str(tmp_path)) == {}  # no runs/: the passes are not runs
