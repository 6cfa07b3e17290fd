"""Hostile completions through the real HumanEval+ scorer that go after processes, signals, the
network and the result channel: each is scored as a failure and contained (issue 20). The
process attacks are bounded (a few sleeps, 200 fork attempts against RLIMIT_NPROC)."""

import os
import re
import signal
import socket
import time
import uuid

import pytest

from compgen_jax.llm_eval import sandbox_job
from tests.sandbox_bench import (
  CANONICAL,
  EXPECTED,
  body,
  contained,
  make_bench,
  needs_isolation,
  score,
  score_elsewhere,
)
from tests.test_sandbox import processes_with


@pytest.fixture
def bench(tmp_path):
  """(dataset path, settings) of the one-problem HumanEval+ file (sandbox_bench.make_bench)."""
  return make_bench(tmp_path)


@needs_isolation
def test_what_a_job_starts_dies_with_it(bench):
  # Detached children (fork, setsid, exec sleep with a marker) after a return and after a
  # timeout: none is alive when the scorer returns.
  _, settings = bench
  marker = f"{time.time() % 1000:.6f}"
  attack = body(f"""
import os, posix, time
for _ in range(5):
    if posix.fork() == 0:
        posix.setsid()
        if posix.fork() == 0:
            os.execv('/bin/sleep', ['sleep', '{marker}'])
        posix._exit(0)
time.sleep(0.3)
""")
  settings.timeout_s = 1.5
  returned, hung = score(settings, attack + "    return 0\n", attack + "    time.sleep(60)\n")
  assert contained(returned) and hung["status"] == "timeout" and hung["sandbox"] == EXPECTED
  assert processes_with(f"sleep\0{marker}") == []


@needs_isolation
def test_a_result_flood_costs_the_scorer_nothing(bench):
  # 100 MB per input on every descriptor the results could travel on.
  _, settings = bench
  attack = body("""
import os
for fd in range(3, 10):
    try:
        for _ in range(100):
            os.write(fd, b'x' * (1 << 20))
    except OSError:
        pass
return False
""")
  settings.output_mb = 4
  [report] = score_elsewhere(settings, attack)
  assert contained(report["row"]) and "more than 4 MiB" in report["row"]["message"]
  assert report["grown_mb"] < 64  # the flood: 400 MB for the first input alone


@needs_isolation
def test_forks_are_bounded(bench):
  _, settings = bench
  marker = f"{time.time() % 1000:.6f}"
  attack = body(f"""
import os, posix
n = 0
for _ in range(200):
    try:
        if posix.fork() == 0:
            os.execv('/bin/sleep', ['sleep', '{marker}'])
        n += 1
    except OSError:
        pass
raise ValueError(f'forked {{n}}')
""")
  [row] = score(settings, attack)
  forked = int(re.search(r"forked (\d+)", row["message"]).group(1))
  assert contained(row) and 0 < forked < sandbox_job.PROCESSES
  assert processes_with(f"sleep\0{marker}") == []


@needs_isolation
def test_cannot_signal_the_scorer_or_change_another_result(bench):
  _, settings = bench
  received = []
  previous = signal.signal(signal.SIGUSR1, lambda *_: received.append(1))
  try:
    attack = body(f"""
import os, signal
for pid in ({os.getpid()}, os.getppid(), 1, -1):
    try:
        os.kill(pid, signal.SIGUSR1)
    except OSError:
        pass
try:
    os.kill(-1, signal.SIGKILL)  # every process the job may signal
except OSError:
    pass
return 0
""")
    rows = score(settings, attack, CANONICAL, attack, CANONICAL)
    time.sleep(0.2)
  finally:
    signal.signal(signal.SIGUSR1, previous)
  assert received == []
  assert contained(rows[0]) and contained(rows[2])
  assert rows[1]["status"] == rows[3]["status"] == "pass"


# (add_key, keyctl) syscall numbers: the keyring has no libc wrapper.
KEYRING = {"x86_64": (248, 250), "aarch64": (217, 219)}


@needs_isolation
@pytest.mark.skipif(os.uname().machine not in KEYRING, reason="keyring syscalls unknown here")
def test_cannot_read_the_scorer_keyring(bench):
  # A key in the scorer's session keyring (the kernel keyring is not namespaced), as a Kerberos
  # ticket would be, sought by keyctl and in /proc/keys.
  _, settings = bench
  secret = f"planted-{uuid.uuid4().hex}"
  add_key, keyctl = KEYRING[os.uname().machine]
  plant = (f"import ctypes\nlibc = ctypes.CDLL(None)\n"
           f"assert libc.syscall({keyctl}, 1, b'compgen-test') > 0\n"  # a session keyring
           f"assert libc.syscall({add_key}, b'user', b'compgen-planted', {secret.encode()!r}, "
           f"{len(secret)}, -3) > 0\n")
  attack = body(f"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
got = [line[-30:] for line in open('/proc/keys') if 'compgen' in line]
for ring in (-3, -4, -5):  # session, user, user session
    key = libc.syscall({keyctl}, 10, ring, b'user', b'compgen-planted', 0)  # KEYCTL_SEARCH
    buf = ctypes.create_string_buffer(200)
    n = libc.syscall({keyctl}, 11, key, buf, 200)  # KEYCTL_READ
    got.append(buf.raw[:max(n, 0)].decode() or f'errno {{ctypes.get_errno()}}')
raise ValueError(' '.join(got))
""")
  row, control = (r["row"] for r in score_elsewhere(
      settings, attack, ("isolated", "unisolated"), prelude=plant))
  assert contained(row) and "errno 1" in row["message"]  # EPERM: the call itself is refused
  assert "planted" not in row["message"]
  assert secret in control["message"] and "compgen-planted" in control["message"]


@needs_isolation
def test_has_no_network(bench):
  _, settings = bench
  with socket.socket() as listener:
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.5)
    attack = body(f"""
import socket
got = []
for family, address in ((socket.AF_INET, ('127.0.0.1', {listener.getsockname()[1]})),
                        (socket.AF_INET6, ('::1', {listener.getsockname()[1]}))):
    try:
        socket.create_connection(address, timeout=1).sendall(b'hello')
        got.append('connected')
    except OSError as e:
        got.append(type(e).__name__)
try:
    server = socket.socket()
    server.bind(('127.0.0.1', 0))
    server.listen()
    got.append('listening')
except OSError as e:
    got.append(type(e).__name__)
raise ValueError(' '.join(got))
""")
    [row] = score(settings, attack)
    with pytest.raises(TimeoutError):
      listener.accept()
  assert contained(row) and "connected" not in row["message"]


@needs_isolation
def test_forged_passes_are_failures(bench):
  _, settings = bench
  forge = "import os\nfor fd in range(3, 10):\n    try:\n        os.write(fd, {!r})\n" \
          "    except OSError:\n        pass\n"
  attacks = [
      # a forged finished run, then an exit before the real results
      forge.format(b'{"out": false}\n' * 4 + b'{"done": true}\n') + "os._exit(0)",
      # one forged output per input ahead of the real ones
      forge.format(b'{"out": true}\n' * 4) + "return True",
      # the result writer's own json and encode replaced
      "import json, sys\njson.dumps = lambda *a, **k: '{\"out\": true}'\nreturn True",
      "import sys\nsys.modules['__main__'].encode = lambda x: True\nreturn True",
      # an answer equal to everything, and exits that skip the results
      "class Any:\n    def __eq__(self, other):\n        return True\nreturn Any()",
      "raise SystemExit(0)",
      "import builtins\nbuiltins.BaseException = object\nimport os\nos._exit(0)",
  ]
  rows = score(settings, *[body(a) for a in attacks])
  assert [row["status"] for row in rows if not contained(row)] == []
