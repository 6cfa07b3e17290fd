"""Runs untrusted generated code: one throwaway, isolated process tree per job, JSON in and out.

Isolated (the default; Linux, root, util-linux `unshare`): each job is one `unshare` call with new
mount, PID, network, IPC and UTS namespaces. This file runs as PID 1 there: it mounts a new root
on a tmpfs holding read-only, nosuid views of /usr (and the merged /bin, /lib...), the Python
prefixes and four /dev nodes, a fresh /proc (the job's processes only) and a small private /tmp,
chroots into it and forks the job's process, which drops to a fresh unprivileged uid with
no_new_privs, sets rlimits (processes, memory, CPU, file size, open files, no core), execs the
program and writes one JSON line per input. When PID 1 exits (the job returned, its wall-clock
alarm rang, or the scorer killed `unshare`, which takes PID 1 with it) the kernel kills every
process left in the namespace. The scorer reads back a capped number of bytes and never sees
anything else of the job. Not covered: kernel exploits, side channels, CPU contention.

Unisolated (only when the caller accepts the risk): a plain subprocess in its own session with
the same limits and a guard hiding destructive os functions, which stops mistakes, not attacks.
Standard library only: the job imports nothing else.
"""

import concurrent.futures
import copy
import ctypes
import functools
import json
import math
import os
import random
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import NamedTuple

_FILE_BYTES = 16 << 20  # RLIMIT_FSIZE: scratch files only; results travel over a pipe
_SCRATCH = "size=64m,nr_inodes=4096"  # the job's /tmp
_PROCESSES = 16  # RLIMIT_NPROC (threads count) of the job's uid, which nothing else uses
_OPEN_FILES = 256
_GRACE_S = 1.0  # PID 1's alarm rings this long after the scorer's own deadline
_BIG_INT_BITS = 10_000  # ints this long go as hex: decimal str() is capped at 4300 digits
_MESSAGE_CHARS = 300
_SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
_DEVICES = ("null", "zero", "random", "urandom")
_GUARDED_OS = ("kill", "killpg", "system", "fork", "forkpty", "setsid", "setpgid",
               "remove", "unlink", "removedirs", "rmdir", "rename", "renames", "replace",
               "truncate", "chmod", "chown", "fchmod", "fchown", "lchown", "chroot", "setuid",
               "chdir", "fchdir")
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND = 32, 4096
_PR_SET_NO_NEW_PRIVS = 38
HOW_TO_ISOLATE = ("run the scorer as root on Linux with util-linux `unshare` installed "
                  "(docs/composition.md, 'Sandbox')")


class Job(NamedTuple):
  program: str
  entry_point: str
  inputs: list  # argument lists: entry_point(*args)


class Result(NamedTuple):
  status: str  # "ok" (exactly one output per input), "error" or "timeout"
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


@functools.cache
def isolation_problem() -> str | None:
  """Why jobs cannot run isolated on this machine (None if they can): checked once by running a
  trivial job."""
  if sys.platform != "linux":
    return f"Linux namespaces are needed, this is {sys.platform}"
  if shutil.which("unshare") is None:
    return "util-linux `unshare` is not installed"
  if os.geteuid() != 0:
    return "the job's namespaces and uid switch need root"
  result, stderr = _execute(Job("def f():\n  return 1\n", "f", [[]]), 10.0, 256, 1 << 20, True)
  if result != Result("ok", [1], None):
    return f"a test job failed ({(stderr.strip().splitlines() or [result.message])[-1]})"
  return None


def run(job: Job, timeout_s: float, memory_mb: int, output_mb: int = 64,
        isolated: bool = True) -> Result:
  """Runs one job; it is killed after timeout_s seconds or output_mb MiB of results.
  isolated=False runs it without namespaces (the caller accepts the risk)."""
  if isolated and isolation_problem():
    raise RuntimeError(f"cannot isolate generated code: {isolation_problem()}; {HOW_TO_ISOLATE}")
  return _execute(job, timeout_s, memory_mb, output_mb << 20, isolated)[0]


def run_many(jobs: list[Job], timeout_s: float, memory_mb: int, workers: int,
             output_mb: int = 64, isolated: bool = True) -> list[Result]:
  """run() over jobs with `workers` jobs at a time; results in job order."""
  with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
    return list(pool.map(lambda job: run(job, timeout_s, memory_mb, output_mb, isolated), jobs))


def _execute(job: Job, timeout_s: float, memory_mb: int, output_bytes: int,
             isolated: bool) -> tuple[Result, str]:
  """(the job's Result, what the launcher wrote on stderr)."""
  request = dict(job._asdict(), memory_mb=memory_mb, cpu_s=math.ceil(timeout_s) + 1,
                 wall_s=timeout_s + _GRACE_S, uid=random.SystemRandom().randrange(1 << 20, 1 << 30))
  script = [sys.executable, "-s", "-P", os.path.abspath(__file__)]
  with (tempfile.TemporaryDirectory(prefix="sandbox_", ignore_cleanup_errors=True) as directory,
        tempfile.TemporaryFile() as stderr):
    with open(os.path.join(directory, "request.json"), "w", encoding="utf-8") as f:
      json.dump(request, f)
    # -s -P (no user site, no script or cwd on sys.path) is -I minus -E: -E would drop
    # PYTHONHASHSEED, and a fixed seed makes str-set iteration orders agree between the
    # reference run and the candidate run.
    if isolated:
      command = ["unshare", "--mount", "--net", "--ipc", "--uts", "--pid", "--fork",
                 "--kill-child", *script, "isolated", directory]
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


# ------------------------------------------------------ inside the job (this file as a script) --

def _libc_call(name: str, *args) -> None:
  libc = ctypes.CDLL(None, use_errno=True)
  if getattr(libc, name)(*args) != 0:
    errno = ctypes.get_errno()
    raise OSError(errno, f"{name}{args}: {os.strerror(errno)}")


def _mount(source: str, target: str, fstype: str, flags: int, data: str = "") -> None:
  _libc_call("mount", source.encode(), target.encode(), fstype.encode(), ctypes.c_ulong(flags),
             data.encode())


def _bind(source: str, target: str, flags: int = _MS_NODEV) -> None:
  """A read-only, nosuid view of source at target (a directory or a device node)."""
  if os.path.isdir(source):
    os.makedirs(target, exist_ok=True)
  else:
    open(target, "w").close()
  _mount(source, target, "", _MS_BIND)
  _mount("", target, "", _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | flags)


def _build_root(root: str, uid: int) -> None:
  """The job's whole file system, on a tmpfs over root: what the interpreter needs, read-only."""
  _mount("tmpfs", root, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=1m,mode=755")
  for name in _SYSTEM_DIRS:
    host = "/" + name
    if os.path.islink(host):  # merged /usr: /bin -> usr/bin
      os.symlink(os.readlink(host), root + host)
    elif os.path.isdir(host):
      _bind(host, root + host)
  # At the paths sys.path was built from (a venv and its base interpreter, unless under /usr).
  for prefix in sorted({os.path.abspath(sys.prefix), os.path.abspath(sys.base_prefix)}):
    if prefix == "/":
      raise OSError("Python's prefix is /: refusing to show the job the whole machine")
    if prefix.split("/")[1] not in _SYSTEM_DIRS:
      _bind(prefix, root + prefix)
  os.mkdir(f"{root}/dev")
  for name in _DEVICES:
    _bind(f"/dev/{name}", f"{root}/dev/{name}", flags=0)
  os.mkdir(f"{root}/proc")
  _mount("proc", f"{root}/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
  os.mkdir(f"{root}/tmp")
  _mount("tmpfs", f"{root}/tmp", "tmpfs", _MS_NOSUID | _MS_NODEV,
         f"{_SCRATCH},mode=700,uid={uid},gid={uid}")
  _mount("", root, "", _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)


def _init(directory: str) -> None:
  """PID 1 of the job's namespaces: builds the root, starts the job, waits for it (reaping
  orphans) and exits with its status, at the latest when its wall-clock alarm rings."""
  with open(os.path.join(directory, "request.json"), encoding="utf-8") as f:
    request = json.load(f)
  # PID 1 gets no default signal actions, so the alarm needs a handler.
  signal.signal(signal.SIGALRM, lambda *_: os._exit(124))
  signal.setitimer(signal.ITIMER_REAL, request["wall_s"])
  _build_root(directory, request["uid"])
  os.chroot(directory)
  os.chdir("/tmp")
  pid = os.fork()
  if pid == 0:
    try:
      uid = request["uid"]
      _libc_call("prctl", _PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
      os.setgroups([])
      os.setresgid(uid, uid, uid)
      os.setresuid(uid, uid, uid)  # every capability goes with root
    except BaseException as e:
      print(f"sandbox: dropping privileges failed: {e}", file=sys.stderr, flush=True)
      os._exit(1)
    _job(request, isolated=True)
  while True:
    reaped, status = os.wait()
    if reaped == pid:
      code = os.waitstatus_to_exitcode(status)
      os._exit(code if code >= 0 else 128 - code)


def _limit(memory_mb: int, cpu_s: int, isolated: bool) -> None:
  limits = [(resource.RLIMIT_AS, memory_mb << 20), (resource.RLIMIT_CPU, cpu_s),
            (resource.RLIMIT_FSIZE, _FILE_BYTES), (resource.RLIMIT_CORE, 0),
            (resource.RLIMIT_NOFILE, _OPEN_FILES)]
  if isolated:  # unisolated, the uid is the scorer's
    limits.append((resource.RLIMIT_NPROC, _PROCESSES))
  for kind, value in limits:
    _, hard = resource.getrlimit(kind)
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(kind, (value, value))


def _guard() -> None:
  """Unisolated only: hides functions that delete files, signal or spawn processes (evalplus's
  reliability_guard in spirit); a mistaken rmtree then raises TypeError instead of deleting."""
  for name in _GUARDED_OS:
    if hasattr(os, name):
      setattr(os, name, None)
  shutil.rmtree = shutil.move = shutil.chown = None
  subprocess.Popen = None


def _job(request: dict, isolated: bool) -> None:
  """Runs the program on each input, one JSON line per result on the original stdout."""
  sys.set_int_max_str_digits(0)  # inputs may hold long ints
  results = os.fdopen(os.dup(1), "w", encoding="utf-8")
  quiet = os.open(os.devnull, os.O_RDWR)
  for fd in (0, 1, 2):  # the program's prints must not corrupt the result stream
    os.dup2(quiet, fd)
  _limit(request["memory_mb"], request["cpu_s"], isolated)
  if not isolated:
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


def _main(mode: str, directory: str) -> None:
  if mode == "isolated":
    _init(directory)
  with open(os.path.join(directory, "request.json"), encoding="utf-8") as f:
    _job(json.load(f), isolated=False)


if __name__ == "__main__":
  _main(*sys.argv[1:])
