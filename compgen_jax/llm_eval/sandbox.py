"""Runs untrusted generated code: one throwaway, isolated process tree per job, JSON in and out.

Isolated (the default; Linux, util-linux `unshare`): each job is one `unshare` call with new
mount, PID, network, IPC and UTS namespaces, in which sandbox_job.py runs as PID 1, builds a root
that holds only the interpreter, read-only, and runs the program without any capability, with
rlimits (sandbox_job.py says how). Two mechanisms (MECHANISMS), the first that works is used:
as root, the program runs under a fresh uid; otherwise the namespaces sit in a new user namespace
(`unshare --user --map-root-user`), where the program is uid 0 with no capabilities, and the
caller's uid outside. When PID 1 exits (the job returned, its alarm rang, or the scorer killed
it) the kernel kills every process left in the namespace. The scorer reads back a capped number
of bytes and sees nothing else of the job. Not covered: kernel exploits, side channels, CPU
contention (docs/llm_eval.md, "Sandbox").

Unisolated (only when the caller accepts the risk): a plain subprocess in its own session with
the same limits and a guard hiding destructive os functions, which stops mistakes, not attacks.
"""

import concurrent.futures
import functools
import json
import math
import os
import random
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import NamedTuple

from compgen_jax.llm_eval import sandbox_job

_GRACE_S = 1.0  # PID 1's alarm rings this long after the scorer's own deadline
_MESSAGE_CHARS = 300
ROOT, USER_NAMESPACE = "root", "user_namespace"
# What each mechanism puts around the namespaces; rows name the one that scored them.
MECHANISMS = {ROOT: ["--mount"], USER_NAMESPACE: ["--user", "--map-root-user", "--mount"]}
HOW_TO_ISOLATE = ("run the scorer on Linux with util-linux `unshare`, as root or where "
                  "unprivileged user namespaces are allowed (docs/llm_eval.md, 'Sandbox')")
# Kernel settings that switch unprivileged user namespaces off: {sysctl: (that value, one that
# allows them)}; AppArmor's is Ubuntu's (23.10 on).
USERNS_SETTINGS = {"kernel.unprivileged_userns_clone": ("0", "1"),
                   "user.max_user_namespaces": ("0", "a positive number"),
                   "kernel.apparmor_restrict_unprivileged_userns": ("1", "0")}


class Job(NamedTuple):
  program: str
  entry_point: str
  inputs: list  # argument lists: entry_point(*args)


class Result(NamedTuple):
  status: str  # "ok" (exactly one output per input), "error" or "timeout"
  outputs: list  # sandbox_job.encode()d return values of the inputs that finished, in order
  message: str | None


@functools.cache
def _choose() -> tuple[str | None, str | None]:
  """(the mechanism jobs run under, None) or (None, why none works), checked once by running a
  job that needs the standard library and its C extensions: root's first when root (it also
  gives the job a uid of its own), then the user namespace."""
  if sys.platform != "linux":
    return None, f"Linux namespaces are needed, this is {sys.platform}"
  if shutil.which("unshare") is None:
    return None, "util-linux `unshare` is not installed"
  probe = Job("import decimal\ndef f():\n  return int(decimal.Decimal(1))\n", "f", [[]])
  problem = None
  for mechanism in ([ROOT] if os.geteuid() == 0 else []) + [USER_NAMESPACE]:
    result, stderr = _execute(probe, 10.0, 256, 1 << 20, mechanism)
    if result == Result("ok", [1], None):
      return mechanism, None
    problem = f"a test job failed ({(stderr.strip().splitlines() or [result.message])[-1]})"
  return None, userns_refusal(_read_settings()) or problem


def mechanism() -> str | None:
  """The mechanism isolated jobs run under here (ROOT or USER_NAMESPACE), None if none works."""
  return _choose()[0]


def isolation_problem() -> str | None:
  """Why jobs cannot run isolated on this machine (None if they can)."""
  return _choose()[1]


def _read_settings() -> dict[str, str]:
  values = {}
  for name in USERNS_SETTINGS:
    try:
      with open("/proc/sys/" + name.replace(".", "/")) as f:
        values[name] = f.read().strip()
    except OSError:  # the setting does not exist on this kernel
      pass
  return values


def userns_refusal(values: dict[str, str]) -> str | None:
  """The kernel setting among `values` ({sysctl: value}) that forbids an ordinary user's
  namespaces, in one line with the value that would allow them; None if none does."""
  for name, (off, allow) in USERNS_SETTINGS.items():
    if values.get(name) == off:
      return (f"unprivileged user namespaces are disabled ({name} = {off}); setting it to "
              f"{allow}, or running as root, allows them")
  return None


def run(job: Job, timeout_s: float, memory_mb: int, output_mb: int = 64,
        isolated: bool = True) -> Result:
  """Runs one job; it is killed after timeout_s seconds or output_mb MiB of results.
  isolated=False runs it without namespaces (the caller accepts the risk)."""
  if isolated and isolation_problem():
    raise RuntimeError(f"cannot isolate generated code: {isolation_problem()}; {HOW_TO_ISOLATE}")
  return _execute(job, timeout_s, memory_mb, output_mb << 20,
                  mechanism() if isolated else None)[0]


def run_many(jobs: list[Job], timeout_s: float, memory_mb: int, workers: int,
             output_mb: int = 64, isolated: bool = True) -> list[Result]:
  """run() over jobs with `workers` jobs at a time; results in job order."""
  with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
    return list(pool.map(lambda job: run(job, timeout_s, memory_mb, output_mb, isolated), jobs))


def _execute(job: Job, timeout_s: float, memory_mb: int, output_bytes: int,
             mechanism: str | None) -> tuple[Result, str]:
  """(the job's Result, what the launcher wrote on stderr); mechanism None: unisolated."""
  isolated = mechanism is not None
  # uid 0: stay uid 0 of the user namespace, without capabilities (no other uid is mapped there)
  uid = random.SystemRandom().randrange(1 << 20, 1 << 30) if mechanism == ROOT else 0
  request = dict(job._asdict(), memory_mb=memory_mb, cpu_s=math.ceil(timeout_s) + 1,
                 wall_s=timeout_s + _GRACE_S, uid=uid)
  script = [sys.executable, "-s", "-P", os.path.abspath(sandbox_job.__file__)]
  with (tempfile.TemporaryDirectory(prefix="sandbox_", ignore_cleanup_errors=True) as directory,
        tempfile.TemporaryFile() as stderr):
    with open(os.path.join(directory, "request.json"), "w", encoding="utf-8") as f:
      json.dump(request, f)
    # -s -P (no user site, no script or cwd on sys.path) is -I minus -E: -E would drop
    # PYTHONHASHSEED, and a fixed seed makes str-set iteration orders agree between the
    # reference run and the candidate run.
    if isolated:
      command = [shutil.which("unshare"), *MECHANISMS[mechanism], "--net", "--ipc", "--uts",
                 "--pid", "--fork", "--kill-child", *script, "isolated", directory]
    else:
      command = [*script, "unisolated", directory]
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=stderr, cwd=directory, start_new_session=True,
                            env=_environment("/tmp" if isolated else directory))
    try:
      out, ended = _read(proc, time.monotonic() + timeout_s, output_bytes)
    finally:
      _kill(proc, isolated)
    stderr.seek(0)
    message = stderr.read(4000).decode("utf-8", "replace")
  lines = _parse(out.decode("utf-8", "replace"))
  return _result(lines, len(job.inputs), ended, proc.returncode, timeout_s, output_bytes), message


def _environment(home: str) -> dict:
  return {"PATH": "/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8",
          "PYTHONHASHSEED": "0", "PYTHONIOENCODING": "utf-8", "OMP_NUM_THREADS": "1",
          "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _read(proc: subprocess.Popen, deadline: float, cap: int) -> tuple[bytearray, str]:
  """At most cap bytes of the job's results, and how reading ended: "eof" (every process
  holding the pipe is gone), "exited" (unisolated: the job returned, what it started holds the
  pipe), "timeout" or "flood"."""
  out, fd = bytearray(), proc.stdout.fileno()
  with selectors.DefaultSelector() as selector:
    selector.register(fd, selectors.EVENT_READ)
    while True:
      left = deadline - time.monotonic()
      if left <= 0:
        return out, "timeout"
      if not selector.select(min(left, 0.2)):
        if proc.poll() is not None:
          return out, "exited"
        continue
      chunk = os.read(fd, 1 << 16)
      if not chunk:
        return out, "eof"
      out += chunk
      if len(out) > cap:
        del out[cap:]
        return out, "flood"


def _kill(proc: subprocess.Popen, isolated: bool) -> None:
  """Kills the job and returns once it is gone: isolated, its PID 1 (the kernel then kills the
  rest of the namespace, and `unshare` exits after that), else the job's process group."""
  if not isolated:
    targets = [-proc.pid]
  elif proc.poll() is None:
    try:
      with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
        targets = [int(pid) for pid in f.read().split()] or [proc.pid]
    except OSError:  # no such file: `unshare` goes, and PID 1 with it (--kill-child)
      targets = [proc.pid]
  else:
    targets = []  # `unshare` exits after its PID 1, so the namespace is already empty
  for pid in targets:
    try:
      os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
      pass
  deadline = time.monotonic() + 5
  with selectors.DefaultSelector() as selector:
    selector.register(proc.stdout.fileno(), selectors.EVENT_READ)
    while time.monotonic() < deadline and selector.select(deadline - time.monotonic()):
      if not os.read(proc.stdout.fileno(), 1 << 16):
        break
  proc.stdout.close()
  try:
    proc.wait(max(deadline - time.monotonic(), 0.1))
  except subprocess.TimeoutExpired:
    proc.kill()
    proc.wait()


def _parse(out: str) -> list[dict]:
  lines = []
  for line in out.splitlines():
    try:
      value = json.loads(line)
    except (ValueError, RecursionError):
      continue  # a line cut by the kill, or garbage
    if isinstance(value, dict) and len(value) == 1 and set(value) <= {"out", "error", "done"}:
      lines.append(value)
  return lines


def _result(lines: list[dict], num_inputs: int, ended: str, returncode: int | None,
            timeout_s: float, output_bytes: int) -> Result:
  """The job's verdict from its result lines: "ok" needs exactly one output per input and a
  final "done", so exiting early or forging lines is an error, never a pass."""
  outputs = [line["out"] for line in lines if "out" in line]
  errors = [line["error"] for line in lines if "error" in line]
  if len(outputs) > num_inputs:
    return Result("error", outputs[:num_inputs], "more results than inputs")
  if errors:
    return Result("error", outputs, str(errors[0])[:_MESSAGE_CHARS])
  if ended == "flood":
    return Result("error", outputs, f"wrote more than {output_bytes >> 20} MiB of results")
  if lines and "done" in lines[-1] and len(outputs) == num_inputs:
    return Result("ok", outputs, None)
  if ended == "timeout":
    return Result("timeout", outputs, f"timed out after {timeout_s:g} s")
  if returncode is not None and returncode < 0:
    return Result("error", outputs, f"killed by {signal.Signals(-returncode).name}")
  if returncode is not None and returncode > 128 and returncode - 128 in signal.valid_signals():
    return Result("error", outputs, f"killed by {signal.Signals(returncode - 128).name}")
  return Result("error", outputs, f"exited with code {returncode} before finishing")


# Why a job failed, by the exception that ended its program (sandbox_job writes "Type: message"):
# the kinds scoring rows report. Anything else the program raised is an "exception".
FAILURES = ("assertion", "exception", "syntax", "timeout", "memory", "output_limit", "exit")
_RAISED = {"AssertionError": "assertion", "MemoryError": "memory", "SyntaxError": "syntax",
           "IndentationError": "syntax", "TabError": "syntax", "SystemExit": "exit"}


def failure_kind(result: Result) -> str | None:
  """One of FAILURES for a job that did not finish ("ok"), None for one that did: "exit" is a
  program that left before finishing (sys.exit, os._exit, a fatal signal, forged result lines);
  CPU-time exhaustion (SIGXCPU) is a "timeout"."""
  message = result.message or ""
  if result.status == "ok":
    return None
  if result.status == "timeout" or message == "killed by SIGXCPU":
    return "timeout"
  if message.startswith("wrote more than"):
    return "output_limit"
  if message.startswith(("killed by", "exited with code", "more results than")):
    return "exit"
  return _RAISED.get(message.split(":", 1)[0], "exception")

