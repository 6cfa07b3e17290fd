"""DIR/index.json: the sweep, and per program its overrides, command and how it ran.

Rewritten atomically (temp file + rename) whenever a program starts or finishes, by the launching
process only; a report reads it to find the workdirs and what failed. Statuses: pending, running,
submitted (a SLURM job), done, failed. `skipped` marks a program this invocation found finished.
A program's workdir and log are recorded relative to the sweep dir, so a copy of the sweep dir
(a clone of results/) reads the same; `workdir.located` resolves them, and the absolute paths of
older indexes. The file's name and reading it are the workdir module's (a report reads the index
without this launcher).
"""

import datetime
import os
import shlex
import threading
import time

from compgen_jax import files
from compgen_jax import workdir as workdir_lib
from compgen_jax.sweeps.spec import REPO, Sweep, shell


def write(sweep_dir: str, index: dict) -> None:
  """Replaces the index atomically: a reader sees the old or the new file, never half of one."""
  files.write_json(workdir_lib.index_path(sweep_dir), index, indent=2)


def _relative(sweep_dir: str, path: str) -> str:
  return os.path.relpath(path, sweep_dir) if path else path


def _invocation(command: str, sweep_dir: str) -> list[str]:
  """A program's command line without its interpreter and with the sweep dir's paths made
  relative to it: what stays the same when the checkout or the sweep dir moves (a clone of
  results/, a worktree)."""
  prefix = sweep_dir.rstrip(os.sep) + os.sep
  return [arg.replace(prefix, "") for arg in shlex.split(command)[1:]]


def _now() -> str:
  return datetime.datetime.now().isoformat(timespec="seconds")


def new(sweep: Sweep, launcher: str, previous: dict) -> dict:
  """An index of every program of `sweep`, keeping what `previous` recorded of the same
  command (its status, wall time, job id), wherever either sweep dir lay (_invocation).
  `started` says when the sweep's rows were first made (a report sets it beside the
  registration): `previous`'s where a finished program is kept, else now."""
  old = {entry["name"]: entry for entry in previous.get("programs", [])}
  old_dir = previous.get("sweep_dir", sweep.sweep_dir)
  entries = []
  for program in sweep.programs:
    entry = {"name": program.name, "overrides": program.overrides,
             "workdir": _relative(sweep.sweep_dir, program.workdir),
             "command": shell(program.command), "log": _relative(sweep.sweep_dir, program.log),
             "status": "pending",
             "exit_code": None, "stage": None, "wall_s": None, "error": None, "job_id": None,
             "skipped": False}
    was = old.get(program.name, {}).get("command")
    if was and _invocation(was, old_dir) == _invocation(entry["command"], sweep.sweep_dir):
      entry.update({k: old[program.name].get(k) for k in ("status", "exit_code", "stage",
                                                           "wall_s", "error", "job_id")})
    entries.append(entry)
  kept = any(entry["status"] == "done" for entry in entries)
  started = previous.get("started") if kept and previous.get("started") else _now()
  return {"spec": sweep.spec, "name": sweep.name, "app": sweep.app, "base": sweep.base,
          "overrides": sweep.overrides, "sweep_dir": sweep.sweep_dir, "repo": REPO,
          "launcher": launcher,
          "started": started, "updated": _now(), "programs": entries}


class Index:
  """The index and the progress lines, updated as programs start and finish (thread-safe)."""

  def __init__(self, sweep: Sweep, launcher: str, to_run: list[str], echo=print,
               parallel: int | None = None):
    """`parallel`: programs run at once by the local launcher; then the index also records
    the invocation's elapsed wall time (first start to last end) as elapsed_s."""
    self.sweep_dir, self.echo, self.total = sweep.sweep_dir, echo, len(to_run)
    previous = workdir_lib.read_index(sweep.sweep_dir)
    self.data = new(sweep, launcher, previous)
    if parallel is not None and to_run:
      self.data["parallel"] = parallel
    elif "elapsed_s" in previous:  # nothing ran: the last invocation that ran programs stands
      self.data.update(parallel=previous.get("parallel"), elapsed_s=previous["elapsed_s"])
    self._t0 = time.monotonic()
    self.entries = {entry["name"]: entry for entry in self.data["programs"]}
    self.started = self.ended = 0
    self._lock = threading.Lock()
    echo(f"sweep {sweep.name} ({sweep.spec}): {len(self.entries)} program(s), "
         f"{len(self.entries) - len(to_run)} finished, {len(to_run)} to run ({launcher}) in "
         f"{sweep.sweep_dir}")
    for name, entry in self.entries.items():
      if name in to_run:
        entry.update(status="pending", skipped=False)
      else:
        entry.update(status="done", skipped=True)
        echo(f"  skip    {name} (finished)")
    self._write()

  def _write(self) -> None:
    self.data["updated"] = _now()
    write(self.sweep_dir, self.data)

  def start(self, name: str) -> None:
    with self._lock:
      self.started += 1
      self.entries[name].update(status="running", exit_code=None, stage=None, error=None)
      self._write()
      self.echo(f"[{self.started}/{self.total}] start  {name}")

  def submitted(self, name: str, job_id: str) -> None:
    with self._lock:
      self.started += 1
      self.entries[name].update(status="submitted", job_id=job_id, exit_code=None, error=None)
      self._write()
      self.echo(f"[{self.started}/{self.total}] submitted {name} (job {job_id})")

  def finish(self, name: str, outcome: dict) -> None:
    with self._lock:
      self.ended += 1
      self.entries[name].update(outcome, log=_relative(self.sweep_dir, outcome["log"]))
      if "parallel" in self.data and self.ended == self.total:
        self.data["elapsed_s"] = round(time.monotonic() - self._t0, 2)
      self._write()
      wall = "" if outcome["wall_s"] is None else f" in {outcome['wall_s']:.1f} s"
      line = f"[{self.ended}/{self.total}] {outcome['status']:<6} {name}{wall}"
      if outcome["status"] == "failed":
        line += (f" (exit {outcome['exit_code']} in {outcome['stage']}; log {outcome['log']}"
                 + (f"; {outcome['error']}" if outcome.get("error") else "") + ")")
      self.echo(line)

  def failures(self) -> list[dict]:
    """The failed programs' entries, their logs' paths absolute (to print)."""
    return [{**entry, "log": workdir_lib.located(self.sweep_dir, self.data, entry["log"])}
            for entry in self.entries.values() if entry["status"] == "failed"]
