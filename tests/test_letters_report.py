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
  path = report.write_report(COMMITTED, str(tmp_path))
  with open(path) as f, open(os.path.join(COMMITTED, report.REPORT_FILE)) as g:
    assert f.read() == g.read()
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
  diag = {k: 0.0 for k in report_rows.DIAGNOSTICS}
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
