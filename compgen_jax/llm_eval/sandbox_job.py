"""What runs inside a sandbox job (sandbox.py starts this file as a script): standard library only.

Isolated, this is PID 1 of the job's namespaces: it mounts the job's root on a tmpfs (read-only,
nosuid views of /usr and the merged /bin, /lib..., the Python prefixes, four /dev nodes; a fresh
/proc; a private /tmp), pivots the mount namespace onto it (the host's file system leaves the
namespace), chroots into it and forks the job's process, which sets no_new_privs and loses every
capability: as root by dropping to a fresh unprivileged uid, in a user namespace (no root) by
emptying its capability sets (its uid there is 0, outside the caller's). It then sets its
rlimits and runs the program on each input, one JSON line per result.
PID 1 waits for it and exits, at the latest when its wall-clock alarm rings; the kernel then
kills whatever is left in the namespace. Unisolated, only the job's process runs, with the same
limits and a guard hiding destructive os functions (damage control).
"""

import copy
import ctypes
import json
import os
import resource
import shutil
import signal
import subprocess
import sys

PROCESSES = 16  # RLIMIT_NPROC (threads count) of the job's uid, which nothing else uses
FILE_BYTES = 16 << 20  # RLIMIT_FSIZE: scratch files only; results travel over a pipe
_SCRATCH = "size=64m,nr_inodes=4096"  # the job's /tmp
_OPEN_FILES = 256
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
_PR_SET_NO_NEW_PRIVS, _PR_CAPBSET_DROP, _PR_SET_SECUREBITS = 38, 24, 28
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
# NOROOT, NO_SETUID_FIXUP, KEEP_CAPS off and NO_CAP_AMBIENT_RAISE, each locked: uid 0 regains no
# capability on execve, and nothing the job does can undo that.
_SECUREBITS = 0b11101111
_CAP_VERSION_3 = 0x20080522
# syscall numbers: glibc has no wrapper for pivot_root, and capset's lives in libcap
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
_CAPSET = {"x86_64": 126, "aarch64": 91}
_MNT_DETACH = 2
# The kernel keyring is not namespaced: a job would share the scorer's session keyring (and, in
# a user namespace, its uid's keys), so add_key, request_key and keyctl fail with EPERM (seccomp;
# docker's default profile does the same). {machine: (AUDIT_ARCH, those syscall numbers)}
_KEYRING_SYSCALLS = {"x86_64": (0xC000003E, (248, 249, 250)),
                     "aarch64": (0xC00000B7, (217, 218, 219))}
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2


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
  # Keep the source's nodev / noexec: in a user namespace they are locked, and a remount that
  # dropped them would fail.
  kept = os.statvfs(source).f_flag & (os.ST_NODEV | os.ST_NOEXEC)  # = MS_NODEV | MS_NOEXEC
  _mount("", target, "", _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | flags | kept)


def _build_root(top: str, uid: int) -> None:
  """The job's whole file system, in a tmpfs over top: what the interpreter needs, read-only,
  under top/jail."""
  _mount("tmpfs", top, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=1m,mode=755")
  root = f"{top}/jail"
  os.mkdir(root)
  for name in _SYSTEM_DIRS:
    host = "/" + name
    if os.path.islink(host):  # merged /usr: /bin -> usr/bin
      os.symlink(os.readlink(host), root + host)
    elif os.path.isdir(host):
      _bind(host, root + host)
  # The scratch /tmp first: a venv or interpreter that lives under the host's /tmp (a clone in
  # /tmp) is then bound on top of it rather than hidden by it.
  os.mkdir(f"{root}/tmp")
  _mount("tmpfs", f"{root}/tmp", "tmpfs", _MS_NOSUID | _MS_NODEV,
         f"{_SCRATCH},mode=700,uid={uid},gid={uid}")
  # At the paths sys.path was built from (a venv and its base interpreter), which may be
  # mounts of their own.
  for prefix in sorted({os.path.abspath(sys.prefix), os.path.abspath(sys.base_prefix)}):
    if prefix == "/":
      raise OSError("Python's prefix is /: refusing to show the job the whole machine")
    if prefix != "/usr":
      _bind(prefix, root + prefix)
  os.mkdir(f"{root}/dev")
  for name in _DEVICES:
    _bind(f"/dev/{name}", f"{root}/dev/{name}", flags=0)
  os.mkdir(f"{root}/proc")
  _mount("proc", f"{root}/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
  if os.path.exists(f"{root}/proc/keys"):  # the keys' names, hidden as docker hides them
    _mount("/dev/null", f"{root}/proc/keys", "", _MS_BIND)
  _mount("", top, "", _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)


def _enter(top: str) -> None:
  """Makes top the root of the mount namespace, the host's file system leaving it altogether,
  and chroots into top/jail: chrooted, the job cannot make a user namespace (where it would have
  CAP_SYS_CHROOT), and there is nothing above the jail to climb to."""
  os.chdir(top)
  number = _PIVOT_ROOT.get(os.uname().machine)
  if number is None:
    raise OSError(f"pivot_root: syscall number unknown on {os.uname().machine}")
  _libc_call("syscall", number, b".", b".")  # the old root now lies on top of the new one
  _libc_call("umount2", b".", _MNT_DETACH)
  os.chdir("/")
  os.chroot("/jail")
  os.chdir("/tmp")


def _init(directory: str) -> None:
  """PID 1 of the job's namespaces: builds the root, starts the job, waits for it (reaping
  orphans) and exits with its status, at the latest when its wall-clock alarm rings."""
  with open(os.path.join(directory, "request.json"), encoding="utf-8") as f:
    request = json.load(f)
  # PID 1 gets no default signal actions, so the alarm needs a handler.
  signal.signal(signal.SIGALRM, lambda *_: os._exit(124))
  signal.setitimer(signal.ITIMER_REAL, request["wall_s"])
  _build_root(directory, request["uid"])
  _enter(directory)
  pid = os.fork()
  if pid == 0:
    try:
      _libc_call("prctl", _PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
      if request["uid"]:  # root's mechanism; 0: a user namespace, where only 0 is mapped
        _switch_uid(request["uid"])
      else:
        _drop_capabilities()
      _deny_keyring()
    except BaseException as e:
      print(f"sandbox: dropping privileges failed: {e}", file=sys.stderr, flush=True)
      os._exit(1)
    _job(request, isolated=True)
  while True:
    reaped, status = os.wait()
    if reaped == pid:
      code = os.waitstatus_to_exitcode(status)
      os._exit(code if code >= 0 else 128 - code)


def _switch_uid(uid: int) -> None:
  """As root: every capability goes with the switch to a uid nothing else uses."""
  os.setgroups([])
  os.setresgid(uid, uid, uid)
  os.setresuid(uid, uid, uid)


def _drop_capabilities() -> None:
  """In a user namespace (only the caller's uid is mapped, so there is no other uid to switch
  to): empties the bounding, ambient, effective, permitted and inheritable sets, locks the
  securebits, and checks the kernel's own account of the result."""
  _libc_call("prctl", _PR_SET_SECUREBITS, _SECUREBITS, 0, 0, 0)
  cap = 0
  while ctypes.CDLL(None).prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:  # EINVAL past the last
    cap += 1
  _libc_call("prctl", _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
  number = _CAPSET.get(os.uname().machine)
  if number is None:
    raise OSError(f"capset: syscall number unknown on {os.uname().machine}")
  header = (ctypes.c_uint32 * 2)(_CAP_VERSION_3, 0)
  _libc_call("syscall", number, header, (ctypes.c_uint32 * 6)())  # 2 x (eff, perm, inh) = 0
  with open("/proc/self/status") as f:
    sets = dict(line.split(":\t") for line in f.read().splitlines() if line.startswith("Cap"))
  if cap == 0 or any(int(value, 16) for value in sets.values()):
    raise OSError(f"capabilities left after dropping them: {sets}")


def _deny_keyring() -> None:
  """A seccomp filter: the keyring syscalls (_KEYRING_SYSCALLS) and any x32 call fail with
  EPERM, a call of another architecture kills the process, the rest is allowed."""
  if os.uname().machine not in _KEYRING_SYSCALLS:
    raise OSError(f"seccomp: syscall numbers unknown on {os.uname().machine}")
  arch, numbers = _KEYRING_SYSCALLS[os.uname().machine]
  load, equal, at_least, ret = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ/JGE|K, BPF_RET
  deny = 5 + len(numbers)  # index of the EPERM return; the kill follows it
  program = [(load, 0, 0, 4), (equal, 0, deny - 1, arch), (load, 0, 0, 0),
             (at_least, deny - 4, 0, 0x40000000)]  # x32's numbers have bit 30 set
  program += [(equal, deny - 5 - i, 0, n) for i, n in enumerate(numbers)]
  program += [(ret, 0, 0, 0x7FFF0000), (ret, 0, 0, 0x50000 | 1), (ret, 0, 0, 0x80000000)]

  class Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                ("k", ctypes.c_uint32)]

  class Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Filter))]

  filters = (Filter * len(program))(*[Filter(*op) for op in program])
  _libc_call("prctl", _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER,
             ctypes.byref(Program(len(program), filters)), 0, 0)


def _limit(memory_mb: int, cpu_s: int, isolated: bool) -> None:
  limits = [(resource.RLIMIT_AS, memory_mb << 20), (resource.RLIMIT_CPU, cpu_s),
            (resource.RLIMIT_FSIZE, FILE_BYTES), (resource.RLIMIT_CORE, 0),
            (resource.RLIMIT_NOFILE, _OPEN_FILES)]
  if isolated:  # unisolated, the uid is the scorer's
    limits.append((resource.RLIMIT_NPROC, PROCESSES))
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
    request = json.load(f)
  _job(request, isolated=False)


if __name__ == "__main__":
  _main(*sys.argv[1:])
