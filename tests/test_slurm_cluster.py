"""The sweep's SLURM launcher against a real controller (tests/slurm_cluster.py: munged,
slurmctld and two slurmd nodes on localhost): a job array, a job requeued mid-run that resumes
to the uninterrupted metrics, a 2-node job training with --distributed, and a re-run that
submits nothing. Skipped, with the reason, where SLURM cannot be installed or started (the
last test, of what a job stopped by SLURM leaves, needs no cluster).

The sweeps run in this process (launch.run_sweep, what experiments/sweep.py calls) so that the
launcher's 30 s SLURM poll can be shortened; the re-run goes through the binary itself.
"""

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from compgen_jax import checkpointing, metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.scaling import train as scaling_train
from compgen_jax.sweeps import launch, slurm, spec
from tests import slurm_cluster
from tests.helpers import REPO

# One cluster per module and worker (its own directory and ports), so two pytest-xdist workers
# may each start one; --dist=loadgroup keeps the module on one worker.
pytestmark = [pytest.mark.xdist_group("slurm"), pytest.mark.heavy]

SWEEP_CONFIG = '''
import ml_collections


def get_config(preset):
  cfg = ml_collections.ConfigDict()
  cfg.name = "slurm_" + preset
  cfg.base = "configs/hyperteacher.py:tiny"
  if preset == "long":  # long enough after its first checkpoint to be requeued mid-run
    train = {"num_steps": 3000, "checkpoint_every": 500, "log_every": 50, "max_checkpoints": 10}
    cfg.overrides = {"num_seeds": 1, "train": train,
                     "evals": {"id": {"every": 500}, "ood": {"every": 500}}}
  else:
    cfg.overrides = {"num_seeds": 1}
  cfg.programs = ({"student.mlp.width": 8}, {"student.mlp.width": 16})[:2 if preset == "two" else 1]
  return cfg
'''
OPTIONS = slurm.Options(gpus=0, time_min=10)  # a CPU node: no GRES
TIMEOUT_S = 300


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
  directory = tmp_path_factory.mktemp("slurm")
  started, reason = slurm_cluster.start(str(directory))
  if started is None:
    pytest.skip(reason)
  with pytest.MonkeyPatch.context() as patch:
    patch.setenv("SLURM_CONF", started.env["SLURM_CONF"])  # for submitit's sbatch, squeue
    patch.setitem(slurm.POLL_S, "slurm", 0.5)
    yield started
  slurm_cluster.stop(started)


@pytest.fixture(scope="module")
def sweep_file(tmp_path_factory):
  path = tmp_path_factory.mktemp("configs") / "slurm_sweep.py"
  path.write_text(SWEEP_CONFIG)
  return str(path)


def _one_go_rows(spec_: str, directory) -> list[dict]:
  """metrics.jsonl of the sweep's program trained in one go, in this process."""
  sweep = spec.load(spec_, str(directory))
  program = sweep.programs[0]
  cfg = spec.program_config(spec.resolve_base(sweep.base), program.name,
                            {**sweep.overrides, **program.overrides})
  scaling_train.train_and_evaluate(cfg, program.workdir)
  return _rows(program.workdir)


def _start_sweep(spec_: str, sweep_dir, options: slurm.Options = OPTIONS):
  """launch.run_sweep in a daemon thread: a job that ended without a result would keep it
  waiting forever (no sacct here), so `_wait` gives up after TIMEOUT_S instead."""
  out = {}

  def sweep():
    try:
      out["failures"] = launch.run_sweep(spec_, str(sweep_dir), "slurm", slurm_options=options)
    except BaseException as e:  # noqa: BLE001 - re-raised by _wait
      out["error"] = e

  thread = threading.Thread(target=sweep, daemon=True)
  thread.start()
  return thread, out


def _wait(started) -> list[dict]:
  thread, out = started
  thread.join(TIMEOUT_S)
  assert not thread.is_alive(), f"the sweep did not end within {TIMEOUT_S} s"
  if "error" in out:
    raise out["error"]
  return out["failures"]


def _read(path) -> str:
  return open(path).read() if os.path.exists(path) else ""


def _entries(sweep_dir) -> dict:
  return {e["name"]: e for e in workdir_lib.read_index(str(sweep_dir))["programs"]}


def _rows(workdir) -> list[dict]:
  return metric_writer.read_rows(os.path.join(workdir, workdir_lib.METRICS_FILE))


def test_job_array_runs_every_program_and_a_rerun_submits_nothing(cluster, sweep_file,
                                                                  tmp_path):
  sweep_dir = tmp_path / "array"
  assert _wait(_start_sweep(f"{sweep_file}:two", sweep_dir)) == []
  entries = _entries(sweep_dir)
  array_ids = {e["job_id"].split("_")[0] for e in entries.values()}
  assert len(array_ids) == 1, entries  # one array, a task per program
  assert sorted(e["job_id"].split("_")[1] for e in entries.values()) == ["0", "1"]
  for program in spec.load(f"{sweep_file}:two", str(sweep_dir)).programs:
    entry = entries[program.name]
    assert entry["status"] == "done" and entry["exit_code"] == 0, entry
    assert {r["step"] for r in _rows(program.workdir)} >= {10, 200}
    assert "train:" in open(sweep_dir / entry["log"]).read()  # its own log, in DIR/logs
  known = slurm_cluster.settled(cluster, 60)
  assert all(known[e["job_id"]] == "COMPLETED" for e in entries.values()), known
  # The binary, re-run with the same flags: everything finished, so nothing is submitted.
  index_before = _entries(sweep_dir)
  again = subprocess.run([sys.executable, os.path.join(REPO, "experiments", "sweep.py"),
                          f"--config={sweep_file}:two", f"--sweep_dir={sweep_dir}",
                          "--launcher=slurm", "--slurm_gpus=0", "--slurm_time=10"],
                         capture_output=True, text=True, cwd=REPO, timeout=TIMEOUT_S)
  assert again.returncode == 0, again.stdout + again.stderr[-3000:]
  assert "skip    width-8" in again.stdout and "submitted" not in again.stdout, again.stdout
  assert slurm_cluster.jobs(cluster) == known
  after = _entries(sweep_dir)
  for name, entry in after.items():
    assert entry["skipped"] and entry["status"] == "done"
    assert entry["job_id"] == index_before[name]["job_id"]


def test_requeued_job_resumes_to_the_uninterrupted_metrics(cluster, sweep_file, tmp_path):
  sweep_dir = tmp_path / "requeue"
  program = spec.load(f"{sweep_file}:long", str(sweep_dir)).programs[0]
  sweep = _start_sweep(f"{sweep_file}:long", sweep_dir)
  checkpoints = os.path.join(program.workdir, workdir_lib.CHECKPOINT_DIR)
  deadline = time.monotonic() + TIMEOUT_S
  while not checkpointing.available_steps(checkpoints) and time.monotonic() < deadline:
    time.sleep(0.05)
  first = checkpointing.available_steps(checkpoints)
  assert first and program.num_steps not in first, first  # mid-run, after a checkpoint
  job_id = _entries(sweep_dir)[program.name]["job_id"]
  # the step's directory is listed before orbax has finished writing into it: wait until its
  # mtime holds still, so that any later change is the requeued job writing it again
  step_dir, settled = os.path.join(checkpoints, str(first[0])), None
  while settled != os.path.getmtime(step_dir):
    settled = os.path.getmtime(step_dir)
    time.sleep(0.5)
  subprocess.run(["scontrol", "requeue", job_id], env=cluster.env, check=True, timeout=30)
  assert _wait(sweep) == []
  assert _entries(sweep_dir)[program.name]["status"] == "done"
  assert "Restarts=1" in subprocess.run(["scontrol", "show", "job", job_id], env=cluster.env,
                                        capture_output=True, text=True, timeout=30).stdout
  assert open(program.log).read().count(" train: ") == 2  # the stage ran again
  # ... from its checkpoint: the one saved before the requeue was not written again.
  assert os.path.getmtime(step_dir) == settled
  assert _rows(program.workdir) == _one_go_rows(f"{sweep_file}:long", tmp_path / "ref")


def test_two_node_job_trains_distributed_to_the_one_process_metrics(cluster, sweep_file,
                                                                     tmp_path):
  sweep_dir = tmp_path / "two_nodes"
  assert _wait(_start_sweep(f"{sweep_file}:one", sweep_dir, OPTIONS._replace(nodes=2))) == []
  program = spec.load(f"{sweep_file}:one", str(sweep_dir)).programs[0]
  for log in (program.log, f"{program.log}.task1"):  # each task ran train.py --distributed
    text = open(log).read()
    assert "--distributed" in text.splitlines()[0], text[-2000:]
  rows, want = _rows(program.workdir), _one_go_rows(f"{sweep_file}:one", tmp_path / "ref")
  assert [r["step"] for r in rows] == [r["step"] for r in want]
  for row, one in zip(rows, want, strict=True):  # to float32 rounding, as tests/test_sharding.py
    assert row == pytest.approx(one, rel=1e-5, abs=1e-6)


def test_cancelled_job_is_recorded_failed_and_the_sweep_ends(cluster, sweep_file, tmp_path):
  """A job that ends without a result (scancel) is seen to end without sacct (squeue)."""
  sweep_dir = tmp_path / "cancel"
  program = spec.load(f"{sweep_file}:long", str(sweep_dir)).programs[0]
  sweep = _start_sweep(f"{sweep_file}:long", sweep_dir)
  deadline = time.monotonic() + TIMEOUT_S
  while " train: " not in _read(program.log) and time.monotonic() < deadline:
    time.sleep(0.05)
  subprocess.run(["scancel", _entries(sweep_dir)[program.name]["job_id"]], env=cluster.env,
                 check=True, timeout=30)
  [failed] = _wait(sweep)
  assert (failed["status"], failed["stage"]) == ("failed", "job"), failed
  assert "CANCELLED without a result" in failed["error"], failed


def test_relaunch_sees_a_job_still_queued(cluster):
  """still_queued, which makes a relaunch wait on an earlier launch's job, reads squeue here."""
  job_id = subprocess.run(["sbatch", "--parsable", "--hold", "--wrap=true"], env=cluster.env,
                          capture_output=True, text=True, check=True, timeout=30).stdout.strip()
  assert slurm.still_queued("/unused", job_id) is not None
  subprocess.run(["scancel", job_id], env=cluster.env, check=True, timeout=30)
  assert slurm_cluster.settled(cluster, 30)[job_id] == "CANCELLED"
  assert slurm.still_queued("/unused", job_id) is None


@pytest.mark.parametrize("code, stopped", [(-signal.SIGTERM, True), (-signal.SIGUSR2, True),
                                           (-signal.SIGKILL, False), (2, False)])
def test_a_stage_stopped_by_slurm_leaves_no_result(monkeypatch, code, stopped):
  """SIGTERM / SIGUSR2 (SLURM requeueing, preempting, cancelling or timing out the job) end the
  job with SystemExit, which submitit saves no result for; other deaths are failures. No
  cluster needed."""
  outcome = {"status": "failed", "exit_code": code, "stage": "train"}
  monkeypatch.setattr(slurm.program_lib, "run", lambda *a, **k: outcome)
  monkeypatch.setattr(slurm.program_lib, "host_only", lambda: None)
  job = slurm.ProgramJob(spec.Program("p", {}, "/w", ("python",), "/w/log", 10), False, False)
  if stopped:
    with pytest.raises(SystemExit, match="train stopped by signal"):
      job()
  else:
    assert job() == outcome
