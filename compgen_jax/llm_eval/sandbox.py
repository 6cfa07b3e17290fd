"""Runs untrusted generated code: one throwaway subprocess per job, JSON in and out.

The parent starts this file as a script (`python -s -P sandbox.py`) in a fresh temporary directory,
in a new session (so a timeout kills the whole process group), with a minimal environment. The
child limits its own memory, CPU time and file sizes, hides destructive os/shutil/subprocess
functions, execs the program, calls the entry point on each input and writes one JSON line per
result. This is damage control against buggy code, not a security boundary. Standard library only:
the child imports nothing else.
"""

import concurrent.futures
import copy
import json
import math
import os
import resource
import signal
import subprocess
import sys
import tempfile
from typing import NamedTuple

_FILE_BYTES = 16 << 20  # RLIMIT_FSIZE: scratch files only; results travel over a pipe
_BIG_INT_BITS = 10_000  # ints this long go as hex: decimal str() is capped at 4300 digits
_MESSAGE_CHARS = 300
_GUARDED_OS = ("kill", "killpg", "system", "fork", "forkpty", "setsid", "setpgid",
               "remove", "unlink", "removedirs", "rmdir", "rename", "renames", "replace",
               "truncate", "chmod", "chown", "fchmod", "fchown", "lchown", "chroot", "setuid",
               "chdir", "fchdir")


class Job(NamedTuple):
  program: str
  entry_point: str
  inputs: list  # argument lists: entry_point(*args)


class Result(NamedTuple):
  status: str  # "ok" (every input returned), "error" or "timeout"
  outputs: list  # encode()d return values of the inputs that finished, in order
  message: str | None


def encode(x):
  """A JSON-able value that compares equal iff the Python values do (up to tuple == list):
  sets and dicts become sorted tagged lists, anything else unknown its repr."""
  if x is None or isinstance(x, bool | str | float):
    return x
  if isinstance(x, int):
    return int(x) if x.bit_length() <= _BIG_INT_BITS else {"__int__": hex(x)}
  if isinstance(x, list | tuple):
    return [encode(v) for v in x]
  if isinstance(x, set | frozenset):
    return {"__set__": sorted((encode(v) for v in x), key=_sort_key)}
  if isinstance(x, dict):
    return {"__dict__": sorted(([encode(k), encode(v)] for k, v in x.items()), key=_sort_key)}
  if type(x).__module__ == "numpy" and hasattr(x, "tolist"):  # numpy scalars and arrays
    return encode(x.tolist())
  return {"__repr__": repr(x)}


def _sort_key(encoded) -> str:
  return json.dumps(encoded, sort_keys=True)


def run(job: Job, timeout_s: float, memory_mb: int) -> Result:
  """Runs one job in its own subprocess; the process group is killed after timeout_s seconds."""
  request = json.dumps(dict(program=job.program, entry_point=job.entry_point, inputs=job.inputs,
                            memory_mb=memory_mb, cpu_s=math.ceil(timeout_s) + 1))
  with tempfile.TemporaryDirectory(prefix="sandbox_", ignore_cleanup_errors=True) as cwd:
    # -s -P (no user site, no script or cwd on sys.path) is -I minus -E: -E would drop
    # PYTHONHASHSEED, and a fixed seed makes str-set iteration orders agree between the
    # reference run and the candidate run.
    proc = subprocess.Popen(
        [sys.executable, "-s", "-P", os.path.abspath(__file__)], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd, env=_environment(cwd),
        start_new_session=True, text=True, encoding="utf-8", errors="replace")
    timed_out = False
    try:
      out, _ = proc.communicate(request, timeout=timeout_s)
    except subprocess.TimeoutExpired:
      timed_out = True
      _kill_group(proc.pid)
      try:  # what was written before the kill
        out, _ = proc.communicate(timeout=5)
      except subprocess.TimeoutExpired:  # a grandchild outside the group holds the pipe
        out = ""
        proc.kill()
        proc.wait()
    finally:
      _kill_group(proc.pid)  # grandchildren that outlive a normal exit
  return _result(out, proc.returncode, timed_out, timeout_s)


def run_many(jobs: list[Job], timeout_s: float, memory_mb: int, workers: int) -> list[Result]:
  """run() over jobs with `workers` subprocesses at a time; results in job order."""
  with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
    return list(pool.map(lambda job: run(job, timeout_s, memory_mb), jobs))


def _environment(cwd: str) -> dict:
  return {"PATH": "/usr/bin:/bin", "HOME": cwd, "TMPDIR": cwd, "LANG": "C.UTF-8",
          "PYTHONHASHSEED": "0", "PYTHONIOENCODING": "utf-8", "OMP_NUM_THREADS": "1",
          "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _kill_group(pgid: int) -> None:
  try:
    os.killpg(pgid, signal.SIGKILL)
  except (ProcessLookupError, PermissionError):
    pass


def _result(out: str, returncode: int, timed_out: bool, timeout_s: float) -> Result:
  lines = []
  for line in out.splitlines():
    try:
      lines.append(json.loads(line))
    except ValueError:
      pass  # a line cut by the kill
  outputs = [line["out"] for line in lines if "out" in line]
  errors = [line["error"] for line in lines if "error" in line]
  if errors:
    return Result("error", outputs, errors[0])
  if any("done" in line for line in lines):
    return Result("ok", outputs, None)
  if timed_out:
    return Result("timeout", outputs, f"timed out after {timeout_s:g} s")
  if returncode is not None and returncode < 0:
    return Result("error", outputs, f"killed by {signal.Signals(-returncode).name}")
  return Result("error", outputs, f"exited with code {returncode} before finishing")


# ---------------------------------------------------------------- the child (run as a script) --

def _limit(memory_mb: int, cpu_s: int) -> None:
  for kind, value in ((resource.RLIMIT_AS, memory_mb << 20), (resource.RLIMIT_CPU, cpu_s),
                      (resource.RLIMIT_FSIZE, _FILE_BYTES), (resource.RLIMIT_CORE, 0)):
    _, hard = resource.getrlimit(kind)
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(kind, (value, hard if hard != resource.RLIM_INFINITY else value))


def _guard() -> None:
  """Hides functions that delete files, signal or spawn processes (evalplus's reliability_guard
  in spirit); a mistaken rmtree then raises TypeError instead of deleting."""
  import shutil

  for name in _GUARDED_OS:
    if hasattr(os, name):
      setattr(os, name, None)
  shutil.rmtree = shutil.move = shutil.chown = None
  subprocess.Popen = None


def _child() -> None:
  sys.set_int_max_str_digits(0)  # inputs may hold long ints
  request = json.loads(sys.stdin.read())
  results = os.fdopen(os.dup(1), "w", encoding="utf-8")
  quiet = os.open(os.devnull, os.O_RDWR)
  for fd in (0, 1, 2):  # the program's prints must not corrupt the result stream
    os.dup2(quiet, fd)
  _limit(request["memory_mb"], request["cpu_s"])
  _guard()

  def emit(line: dict) -> None:
    results.write(json.dumps(line) + "\n")
    results.flush()

  try:
    namespace = {"__name__": "__sandbox__"}  # `if __name__ == "__main__":` blocks stay off
    exec(compile(request["program"], "<program>", "exec"), namespace)
    if not callable(namespace.get(request["entry_point"])):
      raise NameError(f"entry point {request['entry_point']!r} is not defined")
    function = namespace[request["entry_point"]]
    for args in request["inputs"]:
      emit({"out": encode(function(*copy.deepcopy(args)))})
  except BaseException as e:  # SystemExit and KeyboardInterrupt too: all are the program's
    try:
      emit({"error": f"{type(e).__name__}: {e}"[:_MESSAGE_CHARS]})
    except BaseException:
      os._exit(1)  # the parent reports the exit code
  else:
    emit({"done": True})
  os._exit(0)  # skip the program's atexit hooks and non-daemon threads


if __name__ == "__main__":
  _child()
