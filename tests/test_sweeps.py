"""The sweep launcher: expansion and names, validation before anything runs, local and submitit
runs, skipping finished programs and resuming interrupted ones (experiments/sweep.py)."""

import json
import os
import re
import shutil

import pytest

from compgen_jax import metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.sweeps import launch, slurm, spec
from compgen_jax.sweeps import program as program_lib
from compgen_jax.types import ConfigError
from tests.helpers import REPO, run_sweep_binary, sweep_config_file

# heavy: collected first (tests/conftest.py); the group: one worker builds the module's `two_done`
pytestmark = [pytest.mark.heavy, pytest.mark.xdist_group("sweeps")]

SWEEP_CONFIG = '''
import ml_collections

PROGRAMS = {
    "two": ({"student.mlp.width": 8}, {"student.mlp.width": 16}),
    "one": ({"student.mlp.width": 8},),
    "failing": ({"student.mlp.width": 8}, {"student.mlp.width": 16, "optim.learning_rate": 1e30}),
    "bad_support": ({"student.mlp.width": 8}, {"student.mlp.width": 16, "task.support": "bogus"}),
    "duplicate": ({"student.mlp.width": 8}, {"student": {"mlp": {"width": 8}}}),
    "unknown_field": ({"student.mlp.widht": 8},),
}


def get_config(preset):
  cfg = ml_collections.ConfigDict()
  cfg.name = "test_" + preset
  cfg.base = "configs/hyperteacher.py:tiny"
  cfg.overrides = {"num_seeds": 1, "train": {"num_steps": 100 if preset == "one" else 200}}
  cfg.programs = PROGRAMS.get(preset, PROGRAMS["one"])
  if preset == "extra_field":
    cfg.seeds = 3
  return cfg
'''


@pytest.fixture(scope="module")
def sweep_file(tmp_path_factory):
  return sweep_config_file(tmp_path_factory, SWEEP_CONFIG, "test_sweep")


def _programs(index: dict) -> dict:
  return {entry["name"]: entry for entry in index["programs"]}


@pytest.fixture(scope="module")
def two_done(sweep_file, tmp_path_factory):
  """A finished local sweep of two tiny programs (widths 8 and 16, 200 steps)."""
  sweep_dir = str(tmp_path_factory.mktemp("sweep") / "two")
  result = run_sweep_binary(f"--config={sweep_file}:two", f"--sweep_dir={sweep_dir}")
  assert result.returncode == 0, result.stdout + result.stderr[-3000:]
  return sweep_dir, result


def test_names_overrides_and_command_lines():
  programs = ({"task.num_modules": 8, "task.max_hotness": 2}, {"encoding.name": "orthogonal"},
              {"student": {"mlp": {"widths": (64, 32)}}, "sweep.frac_ood": (0.5,)})
  assert [name for name, _ in spec.expand(programs)] == [
      "M8_K2", "encoding-orthogonal", "widths-64-32_frac_ood-0.5"]
  assert spec.override_args({"sweep.frac_ood": (0.25, 0.5), "sweep.learning_rate": (1e-05,),
                             "encoding.name": "tokens", "train.progress": False}) == [
      "--config.sweep.frac_ood=(0.25,0.5)", "--config.sweep.learning_rate=(1e-05,)",
      "--config.encoding.name=tokens", "--config.train.progress=False"]
  # Every value type comes back from the command line exactly as the sweep config gave it.
  overrides = {"optim.learning_rate": 1e-05, "sweep.frac_ood": (0.25, 0.5),
               "sweep.weight_decay": (0.1,), "probe.targets": ("z",),
               "train.progress": True, "encoding.name": "orthogonal", "student.mlp.widths": (8, 4)}
  base = spec.resolve_base("configs/hyperteacher.py:tiny")
  cfg = spec.program_config(base, "p", overrides)
  for path, value in overrides.items():
    got = cfg
    for key in path.split("."):
      got = got[key]
    assert got == value and type(got) is type(value), path


def test_example_sweep_config_expands_and_validates(tmp_path):
  sizes = {}
  for preset in ("tiny", "cpu", "paper"):
    sweep = spec.load(f"{REPO}/configs/sweeps/width_depth_demo.py:{preset}", str(tmp_path / "s"))
    sizes[preset] = len(sweep.programs)
    assert len({p.name for p in sweep.programs}) == len(sweep.programs)
    assert all(p.workdir == str(tmp_path / "s" / p.name) for p in sweep.programs)
  assert sizes == {"tiny": 4, "cpu": 4, "paper": 9}
  assert "--config.sweep.frac_ood=(0.25,0.5,0.75)" in sweep.programs[0].command
  assert sweep.programs[0].name == "width-256_depth-2"
  assert not os.path.exists(tmp_path / "s")


@pytest.mark.parametrize("preset, field, words", [
    ("duplicate", "sweep_config.programs[1]", ["width-8", "twice"]),
    ("unknown_field", "student.mlp.widht", ["widht", "width"]),
    ("extra_field", "sweep_config.seeds", ["name, base, overrides, programs"]),
])
def test_sweep_config_errors_name_the_field(sweep_file, tmp_path, preset, field, words):
  with pytest.raises(ConfigError) as e:
    spec.load(f"{sweep_file}:{preset}", str(tmp_path / "s"))
  assert e.value.field == field and all(w in str(e.value) for w in words), str(e.value)
  assert not os.path.exists(tmp_path / "s")


def test_bad_program_fails_before_any_workdir_exists(sweep_file, tmp_path):
  sweep_dir = tmp_path / "s"
  result = run_sweep_binary(f"--config={sweep_file}:bad_support", f"--sweep_dir={sweep_dir}")
  assert result.returncode == 2
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
  assert "width-16_support-bogus" in lines[0] and "task.support" in lines[0], lines[0]
  assert not os.path.exists(sweep_dir)  # not even the valid program's workdir


def test_dry_run_prints_commands_and_writes_nothing(sweep_file, tmp_path, capsys):
  sweep_dir = tmp_path / "s"
  assert launch.run_sweep(f"{sweep_file}:two", str(sweep_dir), dry=True) == []
  commands = [l for l in capsys.readouterr().out.splitlines() if not l.startswith("#")]
  assert len(commands) == 2 and all("experiments/train.py" in c for c in commands)
  assert f"--workdir={sweep_dir}/width-16" in commands[1]
  assert "--config.student.mlp.width=16" in commands[1]
  assert not os.path.exists(sweep_dir)


def test_local_run_makes_a_workdir_per_program_and_the_index(two_done, sweep_file):
  sweep_dir, result = two_done
  index = workdir_lib.read_index(sweep_dir)
  assert index["spec"] == f"{sweep_file}:two" and index["base"] == "configs/hyperteacher.py:tiny"
  entries = _programs(index)
  assert sorted(entries) == ["width-16", "width-8"]
  sweep = spec.load(f"{sweep_file}:two", sweep_dir)
  for program in sweep.programs:
    entry = entries[program.name]
    assert entry["status"] == "done" and entry["exit_code"] == 0 and entry["wall_s"] > 0
    assert entry["overrides"] == {"student.mlp.width": int(program.name.split("-")[1])}
    assert os.path.isdir(os.path.join(program.workdir, "checkpoints", "200"))
    # Recorded relative to the sweep dir, so a copy of it (a clone of results/) reads the same.
    assert (entry["workdir"], entry["log"]) == (program.name, f"logs/{program.name}.log")
    assert "train:" in open(workdir_lib.located(sweep_dir, index, entry["log"])).read()
    # train.py read back exactly the config the launcher validated.
    cfg = spec.program_config(spec.resolve_base(sweep.base), program.name,
                              {**sweep.overrides, **program.overrides})
    with open(os.path.join(program.workdir, "config.json")) as f:
      assert json.load(f) == workdir_lib.config_dict(cfg)
  assert "[2/2] done" in result.stdout


def test_rerun_skips_finished_programs(two_done, sweep_file):
  sweep_dir, _ = two_done
  metrics = os.path.join(sweep_dir, "width-8", "metrics.jsonl")
  mtime = os.path.getmtime(metrics)
  started = workdir_lib.read_index(sweep_dir)["started"]
  again = run_sweep_binary(f"--config={sweep_file}:two", f"--sweep_dir={sweep_dir}")
  assert again.returncode == 0, again.stderr[-2000:]
  assert "skip    width-8" in again.stdout and "start" not in again.stdout
  assert os.path.getmtime(metrics) == mtime
  entries = _programs(workdir_lib.read_index(sweep_dir))
  assert all(e["skipped"] and e["status"] == "done" and e["wall_s"] > 0 for e in entries.values())
  assert workdir_lib.read_index(sweep_dir)["started"] == started  # when its rows were made


def test_committed_rows_without_checkpoints_count_as_finished(two_done, sweep_file, tmp_path):
  # A clone of results/: the small files only. Finished programs are skipped, not retrained;
  # one whose rows stop before the final evaluation is trained again.
  done_dir, _ = two_done
  sweep_dir = str(tmp_path / "clone")
  shutil.copytree(done_dir, sweep_dir, ignore=shutil.ignore_patterns("checkpoints", "logs"))
  metrics = os.path.join(sweep_dir, "width-16", "metrics.jsonl")
  rows = metric_writer.read_rows(metrics)
  with open(metrics, "w") as f:
    f.writelines(json.dumps(r) + "\n" for r in rows if r["step"] < 200)
  result = run_sweep_binary(f"--config={sweep_file}:two", f"--sweep_dir={sweep_dir}")
  assert result.returncode == 0, result.stdout + result.stderr[-3000:]
  assert "skip    width-8" in result.stdout and "start  width-16" in result.stdout
  assert not os.path.exists(os.path.join(sweep_dir, "width-8", "checkpoints"))
  assert metric_writer.read_rows(os.path.join(sweep_dir, "width-16", "metrics.jsonl")) == (
      metric_writer.read_rows(os.path.join(done_dir, "width-16", "metrics.jsonl")))
  # The skipped program keeps the wall time its first run recorded, in another sweep dir.
  recorded = _programs(workdir_lib.read_index(done_dir))["width-8"]["wall_s"]
  assert _programs(workdir_lib.read_index(sweep_dir))["width-8"]["wall_s"] == recorded > 0


def test_interrupted_program_resumes_to_the_uninterrupted_metrics(two_done, sweep_file, tmp_path):
  done_dir, _ = two_done
  sweep_dir = str(tmp_path / "interrupted")
  shutil.copytree(done_dir, sweep_dir, ignore=shutil.ignore_patterns("index.json", "logs"))
  # Killed after the checkpoint of step 100: its metrics.jsonl already has rows past it.
  shutil.rmtree(os.path.join(sweep_dir, "width-8", "checkpoints", "200"))
  result = run_sweep_binary(f"--config={sweep_file}:two", f"--sweep_dir={sweep_dir}")
  assert result.returncode == 0, result.stdout + result.stderr[-3000:]
  assert "start  width-8" in result.stdout and "skip    width-16" in result.stdout
  rows = metric_writer.read_rows(os.path.join(sweep_dir, "width-8", "metrics.jsonl"))
  assert rows == metric_writer.read_rows(os.path.join(done_dir, "width-8", "metrics.jsonl"))
  entries = _programs(workdir_lib.read_index(sweep_dir))
  assert not entries["width-8"]["skipped"] and entries["width-16"]["skipped"]


def test_failed_program_is_recorded_and_the_others_run(sweep_file, tmp_path):
  sweep_dir = tmp_path / "s"
  result = run_sweep_binary(f"--config={sweep_file}:failing", f"--sweep_dir={sweep_dir}",
                            "--parallel=2")
  assert result.returncode == 1
  assert "width-16_learning_rate-1e" in result.stderr and "exit 2" in result.stderr
  entries = _programs(workdir_lib.read_index(str(sweep_dir)))
  failed = entries["width-16_learning_rate-1e+30"]
  assert (failed["status"], failed["exit_code"], failed["stage"]) == ("failed", 2, "train")
  assert "non-finite" in open(sweep_dir / failed["log"]).read()
  assert f"log {sweep_dir / failed['log']}" in result.stderr  # printed absolute
  assert entries["width-8"]["status"] == "done"
  assert os.path.isdir(sweep_dir / "width-8" / "checkpoints" / "200")
  # Two at once: each on its own core (launch.core_shares), and the sweep's elapsed time kept.
  index = workdir_lib.read_index(str(sweep_dir))
  assert index["parallel"] == 2 and 0 < index["elapsed_s"]
  cores = {re.search(r"train \(cores (\d+)\)", open(sweep_dir / e["log"]).read()).group(1)
           for e in entries.values()}
  assert len(cores) == 2


def test_submitit_local_runs_a_program_then_evaluates_it(sweep_file, tmp_path):
  sweep_dir = tmp_path / "s"
  result = run_sweep_binary(f"--config={sweep_file}:one", f"--sweep_dir={sweep_dir}",
                  "--launcher=submitit_local", "--evaluate")
  assert result.returncode == 0, result.stdout + result.stderr[-3000:]
  entry = _programs(workdir_lib.read_index(str(sweep_dir)))["width-8"]
  assert entry["status"] == "done" and entry["job_id"], entry
  assert os.listdir(sweep_dir / "slurm")  # submitit's own pickles and logs
  program = spec.load(f"{sweep_file}:one", str(sweep_dir)).programs[0]
  assert program_lib.finished(program)
  assert {r["step"] for r in metric_writer.read_rows(str(sweep_dir / "width-8" / "eval.jsonl"))
          } == {100}
  assert program_lib.pending_stages(program, evaluate=True) == []
  assert program_lib.pending_stages(program, probe=True) == ["probe"]


def test_relaunch_waits_on_a_slurm_jobstill_queued(monkeypatch):
  class FakeJob:  # submitit.SlurmJob reads the state from sacct, which only a cluster has
    def __init__(self, folder, job_id):
      self.state = {"1_0": "RUNNING", "2_0": "PENDING", "3_0": "COMPLETED"}[job_id]

  monkeypatch.setattr(slurm.submitit, "SlurmJob", FakeJob)
  assert [slurm.still_queued("/d", j) is not None for j in ("1_0", "2_0", "3_0", None)] == [
      True, True, False, False]


def test_multi_node_programs_train_distributed_and_only_task_0_runs_passes(monkeypatch):
  """--slurm_nodes > 1: every task trains with --distributed (each logging to its own file);
  only task 0 probes / evaluates; the job's outcome is the first failed task's."""
  program = spec.Program("p", {}, "/w", ("python", "experiments/train.py"), "/w/log", 10)
  assert program_lib.stage_command(program, "train", distributed=True)[-1] == "--distributed"
  assert "--distributed" not in program_lib.stage_command(program, "evaluate", distributed=True)
  calls = []
  monkeypatch.setattr(slurm.program_lib, "run",
                      lambda p, probe, evaluate, distributed=False: calls.append(
                          (p.log, probe, evaluate, distributed)) or {"status": "done"})
  monkeypatch.setattr(slurm.program_lib, "host_only", lambda: None)
  for rank in (0, 1):
    monkeypatch.setattr(slurm.submitit, "JobEnvironment",
                        lambda rank=rank: type("Env", (), {"global_rank": rank})())
    slurm.ProgramJob(program, True, True, nodes=2)()
  slurm.ProgramJob(program, True, False)()
  assert calls == [("/w/log", True, True, True), ("/w/log.task1", False, False, True),
                   ("/w/log", True, False, False)]

  class Job:
    def results(self):
      return [{"status": "done"}, {"status": "failed", "error": "task 1"}]

  assert slurm._outcome(Job(), program)["error"] == "task 1"


def test_multi_node_needs_slurm_and_sets_the_job_shape(sweep_file, tmp_path, monkeypatch):
  for launcher in ("local", "submitit_local"):
    with pytest.raises(ConfigError, match="slurm_nodes"):
      launch.run_sweep(f"{sweep_file}:one", str(tmp_path / "s"), launcher,
                       slurm_options=slurm.Options(nodes=2))
  assert not (tmp_path / "s").exists()
  bin_dir = tmp_path / "bin"  # submitit's SLURM executor only checks that srun exists
  bin_dir.mkdir()
  (bin_dir / "srun").write_text("#!/bin/sh\n")
  (bin_dir / "srun").chmod(0o755)
  monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
  sweep = spec.load(f"{sweep_file}:one", str(tmp_path / "s"))
  params = slurm.executor(sweep, "slurm", slurm.Options(nodes=2))._executor.parameters
  assert (params["nodes"], params["ntasks_per_node"]) == (2, 1)
  params = slurm.executor(sweep, "slurm", slurm.Options())._executor.parameters
  assert params.get("nodes", 1) == 1
