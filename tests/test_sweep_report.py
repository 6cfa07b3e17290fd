"""The sweep report: its numbers, verdicts and fits follow from planted workdir files; one tiny
sweep end to end (launcher, probes, REPORT.md whose table equals the workdirs' metrics)."""

import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from compgen_jax import apps, metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.analysis import aggregate, sweep_report
from compgen_jax.sweeps import index as index_lib
from compgen_jax.sweeps import spec
from compgen_jax.tasks import combinatorics
from tests import helpers
from tests.helpers import REPO

# on the worker of test_committed_reports.py (--dist=loadgroup): one tiny sweep per session
pytestmark = pytest.mark.xdist_group("tiny_sweep")

# ------------------------------------------------------------------------------------------
# Aggregation against independent formulas


def test_first_crossing_and_power_law():
  # A curve linear in log x crosses the target exactly where the line does.
  xs = np.array([10.0, 20.0, 40.0, 80.0])
  ys = 0.5 + 0.1 * np.log(xs / 10.0)
  crossing = aggregate.first_crossing(xs, ys, 0.6)
  assert crossing.x == pytest.approx(10.0 * math.e) and not crossing.bound
  assert aggregate.first_crossing(xs, ys, 0.4) == (10.0, True)
  assert math.isnan(aggregate.first_crossing(xs, ys, 0.99).x)
  T = np.array([50.0, 200.0, 1000.0, 5000.0])
  fit = aggregate.fit_power_law(T, 3.0 * T**0.4)
  assert fit.exponent == pytest.approx(0.4) and fit.prefactor == pytest.approx(3.0)
  assert fit.exponent_se == pytest.approx(0.0, abs=1e-9)


# ------------------------------------------------------------------------------------------
# The report on planted workdirs


def _fake_sweep(root, experiment: str, base: str, programs: list[tuple[dict, list[dict]]]) -> str:
  """A sweep dir whose programs' metrics.jsonl hold the given final rows (no training)."""
  sweep_dir = str(root / experiment)
  entries = []
  for overrides, planted in programs:
    name = spec.program_name(overrides)
    cfg = spec.program_config(spec.resolve_base(base), name, overrides)
    wd = os.path.join(sweep_dir, name)
    workdir_lib.prepare(wd, cfg)
    metric_writer.append_rows(os.path.join(wd, workdir_lib.METRICS_FILE), [
        {"step": cfg.train.num_steps, "run": i, "seed": i, "frac_ood": 0.25,
         "learning_rate": 0.003, "weight_decay": 0.003, **run} for i, run in enumerate(planted)])
    entries.append({"name": name, "overrides": overrides, "workdir": wd,
                    "command": f"python experiments/train.py --workdir={wd}", "log": "",
                    "status": "done", "exit_code": 0, "stage": None, "wall_s": 2.0,
                    "error": None, "job_id": None, "skipped": False})
  index_lib.write(sweep_dir, {
      "spec": f"configs/sweeps/{experiment}.py:tiny", "name": experiment, "app": "scaling",
      "base": base, "overrides": {}, "sweep_dir": sweep_dir, "launcher": "local", "started": "-",
      "updated": "-", "programs": entries})
  return sweep_dir


def _verdicts(text: str) -> dict[str, str]:
  return dict(re.findall(r"^- (.+?): \*\*(yes|no|not judged|shown|partial|not shown)\*\*",
                         text, re.M))


def _report(sweep_dir: str) -> str:
  path = sweep_report.write_report(sweep_dir)
  with open(path) as f:
    return f.read()


def test_scaling_law_recovers_a_planted_exponent(tmp_path):
  # OOD R^2 (ID 1, so OOD / ID too) linear in log n_train, crossing 0.9 at n* = 0.5 T^0.6 for
  # every (M, K); one seed: the fit's interval (exact here) needs no seeds, comparisons do.
  programs = []
  for M in (5, 6, 7, 8):
    T = combinatorics.num_tasks(M, 2)
    n_star = 0.5 * T**0.6
    planted = [{"n_train": n, "ood/r2": 0.9 + 0.1 * math.log(n / n_star), "id/r2": 1.0}
            for n in (2, 4, 8, 16, 32)]
    programs.append(({"task.num_modules": M, "task.max_hotness": 2}, planted))
  text = _report(_fake_sweep(tmp_path, "scaling_law", "configs/hyperteacher.py:tiny", programs))
  verdicts = _verdicts(text)
  assert verdicts["mlp: tasks needed grow more slowly than T (exponent < 1; so the fraction "
                  "of tasks needed falls as T grows; relative and absolute targets both)"
                  ] == "shown"
  assert "T^0.600, exponent (95% interval) 0.600 [0.600, 0.600], 4 points" in text
  assert "reaches 0.9 (fixed before the data" in text
  assert os.path.exists(tmp_path / "scaling_law" / "scaling_law_ood_r2.png")


def test_data_scaling_table_and_monotonicity(tmp_path):
  rising = [{"n_train": n, "ood/r2": v} for n, v in ((8, 0.2), (12, 0.5), (8, 0.4), (12, 0.7))]
  falling = [{"n_train": n, "ood/r2": v} for n, v in ((8, 0.6), (12, 0.3))]
  sweep_dir = _fake_sweep(tmp_path, "data_scaling", "configs/hyperteacher.py:tiny", [
      ({"task.num_modules": 5, "task.max_hotness": 2}, rising),
      ({"task.num_modules": 6, "task.max_hotness": 2}, falling)])
  text = _report(sweep_dir)
  # M=5 has two seeds but its rise (0.3 -> 0.6, s.d. 0.14 each) is within their noise: no; M=6
  # has one seed per point: not judged there (its falling mean says nothing).
  assert _verdicts(text)["OOD R^2 rises with n_train at every (M, K)"] == "not shown"
  assert "| 5 | 2 | 2 | 2 | no | OOD: 2 points: one comparison" in text
  assert "| 6 | 2 | 2 | 1 | not judged | OOD: one seed; OOD / ID: one seed |" in text
  # mean and sample s.d. over the two seeds of (M=5, K=2, n_train=8): 0.3 ± 0.141 (no ID)
  assert "| 5 | 2 | 15 | 8 | 0.250 | - | 0.300 ± 0.141 | - | 2 |" in text
  assert "No probes in this sweep" in text


def test_task_support_verdicts_follow_the_planted_numbers(tmp_path):
  def seeds(*values):
    return [{"n_train": 10, "n_ood": 5, "ood/r2": v} for v in values]

  planted = {"random": seeds(0.9, 0.92, 0.91, 0.91), "non_compositional": seeds(0.3, 0.32),
             "popular_modules": seeds(0.91, 0.9, 0.9, 0.91),
             "unpopular_modules": seeds(0.88, 0.9)}
  sweep_dir = _fake_sweep(tmp_path, "task_support", "configs/hyperteacher.py:tiny",
                          [({"task.support": s}, r) for s, r in planted.items()])
  verdicts = _verdicts(_report(sweep_dir))
  assert verdicts["OOD R^2: non_compositional clearly lower than random"] == "shown"
  # The equivalence margin is 0.2 of the smallest shown hurt (non_compositional's 0.6 below
  # random): 0.12; the paired shortfall's interval [-0.016, +0.026] ends below it.
  margin = 0.2 * (np.mean([0.9, 0.92, 0.91, 0.91]) - np.mean([0.3, 0.32]))
  label = f"OOD R^2: popular_modules not lower by more than {margin:.3f} than random"
  assert verdicts[label] == "shown"
  assert verdicts["OOD R^2: unpopular_modules clearly lower than random"] == "not shown"
  assert (tmp_path / "task_support" / "task_support_ood_r2.png").stat().st_size > 0


def test_encoding_table_and_decodability(tmp_path):
  programs = []
  for i, enc in enumerate(("identity", "few_shot")):
    planted = [{"n_train": 12, "ood/r2": 0.5 + 0.1 * i + 0.01 * s} for s in range(3)]
    programs.append(({"encoding.name": enc, "student.mlp.width": 32}, planted))
  texts = {}
  for experiment in ("encoding_table", "model_size"):  # the table is the first one's alone
    sweep_dir = _fake_sweep(tmp_path, experiment, "configs/hyperteacher.py:tiny", programs)
    for entry in workdir_lib.read_index(sweep_dir)["programs"]:  # decodability = OOD R^2 - 0.1
      rows = metric_writer.read_rows(os.path.join(entry["workdir"], workdir_lib.METRICS_FILE))
      metric_writer.append_rows(os.path.join(entry["workdir"], workdir_lib.PROBE_FILE), [
          {**r, "lambda": 1.0, "z/best/ood_r2": r["ood/r2"] - 0.1, "z/input/ood_r2": 1.0}
          for r in rows])
    texts[experiment] = _report(sweep_dir)
  text = texts["encoding_table"]
  assert "| identity (`identity`) | 0.950 | 0.410 ± 0.010 | 1.000 | 1.000 | 1.000 | - | " \
         "0.510 ± 0.010 | - |" in text
  assert "| few-shot (`few_shot`) | 0.900 |" in text
  assert "the paper's table" not in texts["model_size"]
  assert ("Pearson r of task decodability with OOD R^2: r = 1.000, no interval (6 runs, 6 "
          "clusters: fewer than 10)") in texts["model_size"]
  # No ID metric in these rows: the partial r given ID, the verdict, is undefined.
  assert _verdicts(texts["model_size"])[
      "strong positive correlation given ID (partial r of task decodability with OOD R^2 given "
      "ID R^2)"] == "not judged"


def test_preference_reports_both_accuracies(tmp_path):
  planted = [{"n_train": n, "ood/acc": a, "ood/acc_all": b}
          for n, a, b in ((4, 0.6, 0.1), (6, 0.7, 0.2))]
  text = _report(_fake_sweep(tmp_path, "preference_data_scaling", "configs/preference.py:tiny",
                             [({"task.num_modules": 4}, planted)]))
  assert "| 4 | 2 | 10 | 4 | 0.250 | - | 0.100 | - | - | 0.600 | - | 1 |" in text
  for slug in ("ood_acc_all", "ood_acc"):
    assert (tmp_path / "preference_data_scaling" / f"data_scaling_{slug}.png").exists()


def test_an_ood_metric_no_list_names_is_reported(tmp_path):
  # a family's new metric (OOD and ID) shows after the known one, under its own name; the
  # loss, the training objective, does not
  planted = [{"n_train": n, "ood/r2": n / 20, "id/r2": 0.9, "ood/loss": 0.1,
              "ood/calibration": n / 40, "id/calibration": 0.8} for n in (8, 12)]
  rows = [{**r, "program": "p"} for r in planted]
  assert [m.key for m in sweep_report.metrics(rows)] == ["ood/r2", "ood/calibration"]
  assert sweep_report.metrics(rows)[1].id_key == "id/calibration"
  text = _report(_fake_sweep(tmp_path, "data_scaling", "configs/hyperteacher.py:tiny",
                             [({"task.num_modules": 5}, planted)]))
  assert "| ID calibration | OOD calibration | ID - OOD |" in text and "OOD loss" not in text
  assert (tmp_path / "data_scaling" / "data_scaling_ood_calibration.png").exists()


def test_unfinished_programs_are_listed_not_reported(tmp_path):
  planted = [{"n_train": n, "ood/r2": n / 20} for n in (8, 12)]
  sweep_dir = _fake_sweep(tmp_path, "data_scaling", "configs/hyperteacher.py:tiny", [
      ({"task.num_modules": 5}, planted), ({"task.num_modules": 6}, planted)])
  index = workdir_lib.read_index(sweep_dir)
  index["programs"][1].update(status="failed", exit_code=2, stage="train", log="L.log")
  index_lib.write(sweep_dir, index)
  text = _report(sweep_dir)
  assert "| 5 | 2 | 15 | 8 |" in text and "| 6 | 2 | 21 |" not in text
  assert _verdicts(text)["every program finished"] == "no"
  assert f"exit 2 in train; log {sweep_dir}/L.log" in text


def test_missing_index_is_a_clear_error(tmp_path):
  with pytest.raises(Exception, match="index.json"):
    sweep_report.write_report(str(tmp_path))


# ------------------------------------------------------------------------------------------
# End to end: the tiny data-scaling sweep, probed, then its report


def _table_cells(text: str, section: str) -> dict[tuple, str]:
  """{(M, K, n_train): OOD R^2 cell} of a section's markdown table."""
  body = text.split(f"## {section}", 1)[1].split("\n## ", 1)[0]
  cells = {}
  for line in body.splitlines():
    parts = [p.strip() for p in line.strip("|").split("|")]
    if len(parts) == 9 and parts[0].isdigit() and parts[2].isdigit():  # ID, OOD, gap
      cells[(int(parts[0]), int(parts[1]), int(parts[3]))] = parts[6]
  return cells


def test_tiny_sweep_end_to_end(tiny_sweep, tmp_path):
  sweep_dir = tiny_sweep  # launch.run_sweep(spec_path, ..., probe=True), in conftest
  spec_path = f"{REPO}/configs/sweeps/data_scaling.py:tiny"
  out = str(tmp_path / "report")
  path = apps.APPS["scaling"].report(sweep_dir, out)  # as experiments/report.py writes it
  assert path == os.path.join(out, "REPORT.md")
  for figure in ("data_scaling_ood_r2.png", "decodability_ood_r2.png"):
    assert os.path.getsize(os.path.join(out, figure)) > 0
  with open(path) as f:
    text = f.read()
  # The table's numbers are the final metrics.jsonl rows, averaged over seeds here by hand.
  expected = {}
  for program in spec.load(spec_path, sweep_dir).programs:
    with open(os.path.join(program.workdir, "config.json")) as f:
      task = json.load(f)["task"]
    rows = [r for r in metric_writer.read_rows(os.path.join(program.workdir, "metrics.jsonl"))
            if r["step"] == program.num_steps]
    for n in {r["n_train"] for r in rows}:
      values = [r["ood/r2"] for r in rows if r["n_train"] == n]
      expected[(task["num_modules"], task["max_hotness"], n)] = (
          f"{np.mean(values):.3f} ± {np.std(values, ddof=1):.3f}")
  assert _table_cells(text, "Data scaling") == expected
  assert len(expected) == 4
  assert "experiments/probe.py" in text and "every program finished: **yes**" in text
  assert "strong positive correlation given ID (partial r of task decodability" in text
  # its setting against the paper preset's 300k steps and 3 seeds (tiny: 100 steps, 2 seeds)
  setting = text.split("## Setting against the paper's")[1].split("\n## ")[0]
  assert "| train.num_steps |" in setting and "300,000" in setting and "| num_seeds |" in setting


def test_older_absolute_paths_are_found_after_a_move(tmp_path):
  moved = str(tmp_path / "new" / "s")
  old = {"sweep_dir": "/gone/repo/results/cpu/s"}
  assert workdir_lib.located(moved, old, "M5_K2") == f"{moved}/M5_K2"
  assert workdir_lib.located(moved, old, "/gone/repo/results/cpu/s/M5_K2") == f"{moved}/M5_K2"
  assert workdir_lib.located(moved, old, "/gone/elsewhere/M5_K2") == f"{moved}/M5_K2"
  assert workdir_lib.located(moved, old, str(tmp_path)) == str(tmp_path)  # still there
  # An index without `repo` (written before it was recorded), now in a clone elsewhere.
  clone_dir = os.path.join(REPO, "results", "cpu", "s")
  assert sweep_report.launch_repo(old, clone_dir) == "/gone/repo"
  assert sweep_report.launch_repo({**old, "repo": "/r"}, clone_dir) == "/r"
  assert sweep_report.launch_repo(old, moved) == sweep_report.REPO  # outside: cannot tell
  assert sweep_report.portable("/gone/repo/.venv/bin/python experiments/train.py "
                               "--workdir=/gone/repo/results/cpu/s/M5_K2", "/gone/repo") == (
      "python experiments/train.py --workdir=results/cpu/s/M5_K2")


def test_results_gitignore_keeps_what_a_report_reads():
  # The files load.py reads are the ones tests.helpers.committed_copy keeps ...
  assert set(helpers.COMMITTED_WORKDIR_FILES) == {
      workdir_lib.CONFIG_FILE, workdir_lib.METRICS_FILE, workdir_lib.EVAL_FILE,
      workdir_lib.PROBE_FILE, workdir_lib.PARAMS_FILE}

  def ignored(path: str) -> bool:
    done = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=REPO)
    assert done.returncode in (0, 1), path
    return done.returncode == 0

  # ... and the ones results/cpu/.gitignore keeps; checkpoints, logs and locks it does not.
  program = "results/cpu/some_sweep/M8_K2"
  for name in helpers.COMMITTED_WORKDIR_FILES:
    assert not ignored(f"{program}/{name}"), name
  for path in (f"{program}/checkpoints/100/x", f"{program}/.lock", f"{program}/curves.png",
               "results/cpu/theorem/.lock", "results/cpu/some_sweep/index.json.tmp",
               "results/cpu/some_sweep/logs/M8_K2.log"):
    assert ignored(path), path
  for path in ("results/cpu/some_sweep/index.json", "results/cpu/some_sweep/REPORT.md",
               "results/cpu/some_sweep/claims.json", "results/cpu/some_sweep/fig.png"):
    assert not ignored(path), path


def test_report_binary_sweep_mode_and_flag_errors(tmp_path):
  sweep_dir = _fake_sweep(tmp_path, "data_scaling", "configs/hyperteacher.py:tiny", [
      ({"task.num_modules": 5}, [{"n_train": n, "ood/r2": n / 20} for n in (8, 12)])])
  binary = os.path.join(REPO, "experiments", "report.py")
  done = subprocess.run([sys.executable, binary, f"--sweep_dir={sweep_dir}",
                         f"--out={tmp_path / 'out'}"], capture_output=True, text=True, cwd=REPO)
  assert done.returncode == 0, done.stderr[-2000:]
  assert done.stdout.strip() == str(tmp_path / "out" / "REPORT.md")
  done = subprocess.run([sys.executable, binary], capture_output=True, text=True, cwd=REPO)
  assert done.returncode == 2 and "exactly one of --dir, --sweep_dir and --workdirs" in done.stderr
