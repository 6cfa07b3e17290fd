"""A rerun against the committed rows (analysis/rerun.py, experiments/rerun_diff.py): identical
files, numbers apart by a planted amount, unpaired files and changed verdicts are each found."""

import json
import math
import os
import subprocess
import sys

import pytest

from compgen_jax.analysis import registration, rerun
from compgen_jax.types import ConfigError
from tests.helpers import REPO

ROWS = [{"step": 500, "run": 0, "train/loss": 0.25, "train/grad_norm": 1.5},
        {"step": 1000, "run": 0, "train/loss": 0.12, "train/grad_norm": 1.0, "id/r2": 0.93,
         "ood/r2": 0.91}]
CLAIM = {"experiment": "exp", "claim": "OOD R^2 rises", "paper": "rises", "ours": "3 of 3 yes",
         "seeds": 2, "verdict": "shown", "figure": None, "note": "", "composition": "gap 0.02",
         "against_paper": "ours agrees", "rules": ["rises_scale"], "rule_commit": "0" * 40,
         "registration": registration.POST_HOC}


def _write(root, rel, obj):
  path = root / rel
  path.parent.mkdir(parents=True, exist_ok=True)
  if rel.endswith(".jsonl"):
    path.write_text("".join(json.dumps(r) + "\n" for r in obj))
  else:
    path.write_text(json.dumps(obj))


REPORT = "# Data scaling\n\n| n | OOD |\n| 10 | 0.91 |\n\n## Runs\n\n| prog_a | {wall} s |\n"


def _results(root, rows=ROWS, verdict="shown", probes=True, wall=60.5, ood="0.91"):
  _write(root, "exp/prog_a/config.json", {"task": {"num_modules": 8}})
  _write(root, "exp/prog_a/metrics.jsonl", rows)
  if probes:
    _write(root, "exp/prog_a/probes.jsonl", [{"step": 1000, "run": 0, "z/dense_0/ood_r2": 0.8}])
  _write(root, "exp/prog_a/checkpoints/1000/x.json", {"not": "compared"})
  _write(root, "exp/logs/prog_a.jsonl", [{"not": "compared"}])
  _write(root, "exp/claims.json", [{**CLAIM, "verdict": verdict}])
  _write(root, "theorem/theorem.jsonl", [{"kind": "error", "sup_error": 0.4, "wall_s": wall}])
  (root / "exp" / "REPORT.md").write_text(REPORT.format(wall=wall).replace("0.91", ood))
  return root


def test_differences_pair_numbers_and_refuse_what_does_not_pair():
  assert rerun.differences({"a": [1, 2.5], "b": "x"}, {"a": [1, 2.0], "b": "x"}) == [
      (0.0, "a[0]"), (0.5, "a[1]")]
  assert rerun.differences(math.nan, math.nan) == [(0.0, "")]
  assert rerun.differences({"r": 1.0}, {"r": math.nan}) == [(math.inf, "r")]
  assert rerun.differences({"a": 1}, {"b": 1}) is None          # other keys
  assert rerun.differences([1, 2], [1]) is None                 # other lengths
  assert rerun.differences({"s": "x"}, {"s": "y"}) is None      # other strings
  assert rerun.differences(True, 1) is None                     # a bool is not a number


def test_an_identical_rerun_is_identical_file_by_file(tmp_path):
  # other wall times only: in theorem.jsonl's wall_s and in the report's runs section
  committed, again = _results(tmp_path / "c"), _results(tmp_path / "r", wall=71.25)
  result = rerun.compare(str(committed), str(again))
  assert set(result) == {"exp", "theorem"}
  # config, metrics and probes of the program, and the theorem's rows; never checkpoints or logs
  assert sorted(result["exp"]["files"]) == ["prog_a/config.json", "prog_a/metrics.jsonl",
                                            "prog_a/probes.jsonl"]
  assert all(f["status"] == "identical" for r in result.values() for f in r["files"].values())
  text, ok = rerun.render(result)
  assert ok and "| exp | 3 | 3 | 0 | 0 | - | 0 | 1 of 1 | same |" in text
  assert "| theorem | 1 | 1 | 0 | 0 | - | 0 | 0 of 0 | - |" in text


def test_planted_differences_are_measured_and_a_changed_verdict_fails(tmp_path):
  committed = _results(tmp_path / "c")
  moved = [dict(ROWS[0], **{"train/grad_norm": 1.5 + 0.25}), dict(ROWS[1], **{"ood/r2": 0.9})]
  again = _results(tmp_path / "r", rows=moved, verdict="partial", probes=False, ood="0.90")
  result = rerun.compare(str(committed), str(again), ["exp"])
  metrics = result["exp"]["files"]["prog_a/metrics.jsonl"]
  assert metrics["status"] == "numbers" and metrics["key"] == "train/grad_norm"
  assert metrics["diff"] == pytest.approx(0.25)
  assert metrics["headline_diff"] == pytest.approx(0.01)  # ood/r2 only: a verdict's number
  assert result["exp"]["files"]["prog_a/probes.jsonl"] == {"status": "missing"}
  text, ok = rerun.render(result)
  assert not ok
  assert "| exp | 3 | 1 | 1 | 1 | 2.5e-01 (train/grad_norm, prog_a/metrics.jsonl) | 1.0e-02 |" \
      " 0 of 1 | differs at line 4 |" in text
  assert '- exp: "OOD R^2 rises": committed shown (3 of 3 yes), rerun partial' in text
  assert "- exp/prog_a/probes.jsonl: missing" in text


def test_rows_that_do_not_pair_are_reported_not_compared(tmp_path):
  committed = _results(tmp_path / "c")
  again = _results(tmp_path / "r", rows=ROWS[:1])
  found = rerun.compare(str(committed), str(again))["exp"]["files"]["prog_a/metrics.jsonl"]
  assert found == {"status": "structure"}
  assert not rerun.render(rerun.compare(str(committed), str(again)))[1]


def test_bad_dirs_and_unknown_experiments_are_refused(tmp_path):
  committed = _results(tmp_path / "c")
  with pytest.raises(ConfigError, match="rerun"):
    rerun.compare(str(committed), str(tmp_path / "nowhere"))
  (tmp_path / "r").mkdir()
  with pytest.raises(ConfigError, match="'exp': no such folder in the rerun dir"):
    rerun.compare(str(committed), str(tmp_path / "r"), ["exp"])
  assert rerun.compare(str(committed), str(tmp_path / "r")) == {}  # nothing rerun yet


def test_binary_exit_status_says_whether_the_rerun_agrees(tmp_path):
  committed, again = _results(tmp_path / "c"), _results(tmp_path / "r")
  binary = os.path.join(REPO, "experiments", "rerun_diff.py")
  args = [sys.executable, binary, f"--committed={committed}", f"--rerun={again}",
          f"--out={tmp_path / 'diff.md'}"]
  done = subprocess.run(args, capture_output=True, text=True, cwd=REPO)
  assert done.returncode == 0, done.stderr[-2000:]
  assert (tmp_path / "diff.md").read_text() == done.stdout
  _write(again, "exp/claims.json", [{**CLAIM, "verdict": "not shown"}])
  done = subprocess.run(args, capture_output=True, text=True, cwd=REPO)
  assert done.returncode == 1 and "rerun not shown" in done.stdout
  (again / "exp" / "prog_a" / "metrics.jsonl").write_text("{garbage\n")
  done = subprocess.run(args, capture_output=True, text=True, cwd=REPO)
  assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr[-2000:]
  assert "metrics.jsonl" in done.stderr and "line 1 is not JSON" in done.stderr


def test_a_config_that_names_its_app_pairs_with_one_written_before(tmp_path):
  committed, again = _results(tmp_path / "c"), _results(tmp_path / "r")
  _write(again, "exp/prog_a/config.json", {"app": "scaling", "task": {"num_modules": 8}})
  files = rerun.compare(str(committed), str(again))["exp"]["files"]
  assert files["prog_a/config.json"]["status"] == "identical"
  # any other key, or `app` anywhere but a config's top level, still does not pair
  _write(again, "exp/prog_a/config.json", {"app": "scaling", "task": {"num_modules": 9}})
  assert rerun.compare(str(committed), str(again))["exp"]["files"]["prog_a/config.json"][
      "status"] == "numbers"
  _write(again, "exp/prog_a/config.json", {"task": {"num_modules": 8, "app": "x"}})
  assert rerun.compare(str(committed), str(again))["exp"]["files"]["prog_a/config.json"][
      "status"] == "structure"
