"""Programs as SLURM jobs through submitit (one job array), waited on until they end.

`submitit_local` runs the same path with submitit's LocalExecutor (jobs are local processes,
all at once), so it is tested without a cluster. A job that SLURM preempts or times out is
requeued by submitit (ProgramJob is Checkpointable) and train.py resumes from its checkpoints.
tests/test_slurm_cluster.py runs it against a real controller; docs/slurm.md is the user's guide.
"""

import os
import signal
import subprocess
import time
from typing import NamedTuple

import submitit

from compgen_jax.sweeps import program as program_lib
from compgen_jax.sweeps.index import Index
from compgen_jax.sweeps.spec import Program, Sweep

CLUSTERS = {"slurm": "slurm", "submitit_local": "local"}  # launcher -> submitit cluster
POLL_S = {"slurm": 30.0, "local": 1.0}
FOLDER = "slurm"  # submitit's pickles and job logs, in the sweep dir
ACTIVE = ("PENDING", "RUNNING", "REQUEUED", "CONFIGURING", "COMPLETING", "SUSPENDED",
          "RESIZING")
ENDED = ("BOOT_FAIL", "CANCELLED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY",
         "TIMEOUT")  # final states (a requeued job passes through others: REQUEUED, PENDING)
# What SLURM sends every process of a job it requeues, preempts or cancels (SIGTERM), or of one
# near its time limit (submitit's --signal, SIGUSR2): a stage killed by one was stopped, not failed.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR2)


class Options(NamedTuple):
  partition: str | None = None
  time_min: int = 720
  gpus: int = 1
  cpus: int | None = None
  mem_gb: int | None = None
  array_parallelism: int | None = None
  nodes: int = 1  # > 1: each program is one multi-host job (one task per node, --distributed)


class ProgramJob(submitit.helpers.Checkpointable):
  """One program as a submitit job: program.run on the node (requeued as is on preemption).

  With several nodes every task runs the program's training with --distributed (JAX reads the
  job from SLURM's variables, which the training subprocess inherits); only task 0 then runs
  the probe / evaluate passes, which read the checkpoints on one host.
  """

  def __init__(self, program: Program, probe: bool, evaluate: bool, nodes: int = 1):
    self.program, self.probe, self.evaluate, self.nodes = program, probe, evaluate, nodes

  def __call__(self) -> dict:
    program_lib.host_only()
    if self.nodes == 1:
      result = program_lib.run(self.program, self.probe, self.evaluate)
    else:
      rank = submitit.JobEnvironment().global_rank
      program = self.program if rank == 0 else self.program._replace(
          log=f"{self.program.log}.task{rank}")  # each task logs to its own file
      result = program_lib.run(program, self.probe and rank == 0, self.evaluate and rank == 0,
                               distributed=True)
    code = result.get("exit_code")
    if code is not None and -code in STOP_SIGNALS:
      # No result file (submitit saves none for SystemExit): the sweep goes on waiting, the
      # requeued job resumes; a cancelled one ends in its SLURM state (sacct).
      raise SystemExit(f"{result['stage']} stopped by signal {-code}")
    return result


def executor(sweep: Sweep, cluster: str, options: Options) -> submitit.AutoExecutor:
  """An AutoExecutor writing to DIR/slurm with the flags' resources (None: cluster default)."""
  ex = submitit.AutoExecutor(folder=os.path.join(sweep.sweep_dir, FOLDER), cluster=cluster)
  ex.update_parameters(name=f"sweep_{sweep.name}", timeout_min=options.time_min,
                       gpus_per_node=options.gpus, cpus_per_task=options.cpus,
                       mem_gb=options.mem_gb, slurm_partition=options.partition,
                       slurm_array_parallelism=options.array_parallelism)
  if options.nodes > 1:
    ex.update_parameters(nodes=options.nodes, tasks_per_node=1)
  return ex


def state(job) -> str:
  """A SLURM job's state: sacct's (through submitit), else squeue's. sacct answers nothing on a
  cluster without accounting (slurmdbd); squeue knows a job until MinJobAge after it ends."""
  sacct = job.state.split(" ")[0]
  if sacct != "UNKNOWN":
    return sacct
  out = subprocess.run(["squeue", "-h", "-r", "-t", "all", "-j", str(job.job_id), "-o", "%T"],
                       capture_output=True, text=True, check=False).stdout.split()
  return out[0] if out else "UNKNOWN"


def still_queued(sweep_dir: str, job_id: str | None):
  """The SLURM job of an earlier launch when it is still queued or running, else None: a
  relaunch waits on it instead of submitting a second job into the same workdir."""
  if not job_id:
    return None
  job = submitit.SlurmJob(os.path.join(sweep_dir, FOLDER), job_id)
  return job if state(job) in ACTIVE else None


def _outcome(job, program: Program) -> dict:
  """Task 0's outcome, or the first failed task's (a multi-host job)."""
  try:
    results = job.results()
    return next((r for r in results if r["status"] != "done"), results[0])
  except Exception as e:  # noqa: BLE001 - the job died (killed, timed out, node failure)
    error = str(e).strip().splitlines()[-1:] or [type(e).__name__]
    return program_lib.outcome("failed", None, "job", None, program.log, error[0][:300])


def run(sweep: Sweep, to_run: list[Program], launcher: str, options: Options, probe: bool,
        evaluate: bool, index: Index) -> None:
  """Submits every program of `to_run` as one job array and records each as it ends."""
  cluster = CLUSTERS[launcher]
  jobs = {}
  if cluster == "slurm":
    for program in to_run:
      job = still_queued(sweep.sweep_dir, index.entries[program.name]["job_id"])
      if job is not None:
        jobs[program.name] = job
  new = [p for p in to_run if p.name not in jobs]
  if new:
    ex = executor(sweep, cluster, options)
    with ex.batch():
      submitted = [ex.submit(ProgramJob(p, probe, evaluate, options.nodes)) for p in new]
    jobs.update({p.name: job for p, job in zip(new, submitted, strict=True)})
  for name, job in jobs.items():
    index.submitted(name, str(job.job_id))
  _wait(jobs, {p.name: p for p in to_run}, cluster, index)


def _wait(jobs: dict, programs: dict, cluster: str, index: Index) -> None:
  """Records each job as it ends: from its result file, or, for a SLURM job that reached a final
  state without one (cancelled, node failure), as failed. submitit alone would wait on that job
  forever where sacct answers nothing (no accounting); `state` falls back on squeue."""
  pending = dict(jobs)
  while pending:
    for name, job in list(pending.items()):
      final = state(job) if cluster == "slurm" else None
      if job.done():
        index.finish(name, _outcome(job, programs[name]))
      elif final in ENDED:
        index.finish(name, program_lib.outcome("failed", None, "job", None, programs[name].log,
                                               f"job {job.job_id} ended {final} without a result"))
      else:
        continue
      del pending[name]
    if pending:
      time.sleep(POLL_S[cluster])
