"""One program's work, the same under every launcher: train (resuming), then probe / evaluate.

What is left to do is read from the workdir each time, so a re-run, or a SLURM job requeued after
preemption, does only that: train.py resumes from the latest checkpoint. A stage's process dies
with the launcher (even SIGKILLed) and, on a re-run, waits for the workdir's lock, so a program
never has two writers.
"""

import ctypes
import datetime
import os
import shlex
import signal
import subprocess
import sys
import time

import jax

from compgen_jax import apps, checkpointing, metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.sweeps.spec import FOLLOW_UPS, REPO, Program

# A stage waits this long for its workdir's lock before refusing: a re-run right after the sweep
# was killed can find the killed stage's process still exiting.
LOCK_WAIT_S = 60
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
# resolved here, not in the forked child (which should do as little as possible before exec)
_PRCTL = ctypes.CDLL(None).prctl if sys.platform.startswith("linux") else None


def _child_setup(cores: tuple[int, ...] | None = None):
  """A child's preexec_fn: SIGKILL the child when the launcher dies (Linux; elsewhere nothing),
  and keep it on `cores` when given (XLA then sizes its thread pool to them). The signal
  follows the thread that started the child, which waits on it until it ends."""
  if _PRCTL is None and cores is None:
    return None
  launcher = os.getpid()

  def preexec() -> None:
    if cores is not None:
      os.sched_setaffinity(0, cores)
    if _PRCTL is not None:
      _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)
      if os.getppid() != launcher:  # it died before prctl: nothing would signal us
        os._exit(1)

  return preexec


def host_only() -> None:
  """The launcher only checks files and starts programs: keep its JAX off the accelerator,
  which belongs to the programs. Call before anything touches a JAX backend."""
  jax.config.update("jax_platforms", "cpu")


def finished(program: Program) -> bool:
  """Training is done: the workdir holds the checkpoint of step train.num_steps, or, in a workdir
  of committed rows without any checkpoint (results/ keeps no checkpoints), metrics.jsonl has
  the last step's row of every run (train.py: its final evaluation). (spec.load already refused
  a workdir whose config.json is not the program's.)"""
  steps = checkpointing.available_steps(os.path.join(program.workdir, workdir_lib.CHECKPOINT_DIR))
  if steps:
    return program.num_steps in steps
  rows = metric_writer.read_rows(os.path.join(program.workdir, workdir_lib.METRICS_FILE))
  final_key = apps.APPS[program.app].sweep.final_key
  evaluated = {r.get("run") for r in rows if r.get("step") == program.num_steps
               and any(k.startswith(final_key) for k in r)}
  return bool(evaluated) and evaluated == {r.get("run") for r in rows}


def _has_step(path: str, step: int) -> bool:
  return any(row.get("step") == step for row in metric_writer.read_rows(path))


def pending_stages(program: Program, probe: bool = False, evaluate: bool = False) -> list[str]:
  """The stages still to run: train unless finished; probe / evaluate (when asked for) unless
  their jsonl file already has rows of the final step."""
  stages = [] if finished(program) else ["train"]
  for stage, wanted in (("probe", probe), ("evaluate", evaluate)):
    if wanted and not _has_step(os.path.join(program.workdir, FOLLOW_UPS[stage][1]),
                                program.num_steps):
      stages.append(stage)
  return stages


def stage_command(program: Program, stage: str, distributed: bool = False) -> tuple[str, ...]:
  """The command line of a stage (run from the repository root); `distributed`: training joins
  a multi-host job (cli's --distributed)."""
  if stage == "train":
    return program.command + (("--distributed",) if distributed else ())
  return (program.command[0], FOLLOW_UPS[stage][0], f"--workdir={program.workdir}",
          *apps.APPS[program.app].sweep.follow_up_args[stage])


def outcome(status: str, exit_code: int | None, stage: str | None, wall_s: float | None,
            log: str, error: str | None = None) -> dict:
  """What the index records of one program's run."""
  return {"status": status, "exit_code": exit_code, "stage": stage,
          "wall_s": None if wall_s is None else round(wall_s, 2), "log": log, "error": error}


def run(program: Program, probe: bool = False, evaluate: bool = False,
        distributed: bool = False, cores: tuple[int, ...] | None = None) -> dict:
  """Runs the program's pending stages in order, appending their output to program.log; stops
  at the first that fails. `cores`: the CPU cores its processes may use (all when None).
  Returns its `outcome`."""
  start = time.monotonic()
  os.makedirs(os.path.dirname(program.log), exist_ok=True)
  with open(program.log, "a") as log:
    for stage in pending_stages(program, probe, evaluate):
      command = stage_command(program, stage, distributed)
      now = datetime.datetime.now().isoformat(timespec="seconds")
      on = "" if cores is None else f" (cores {','.join(map(str, cores))})"
      log.write(f"### {now} {stage}{on}: {shlex.join(command)}\n")
      log.flush()
      code = subprocess.run(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                            check=False, preexec_fn=_child_setup(cores),
                            env={workdir_lib.LOCK_WAIT_ENV: str(LOCK_WAIT_S), **os.environ}
                            ).returncode
      if code:
        return outcome("failed", code, stage, time.monotonic() - start, program.log)
  return outcome("done", 0, None, time.monotonic() - start, program.log)
