"""Hostile completions through the real HumanEval+ scorer (evalplus.HUMANEVAL_PLUS.score): each
is scored as a failure and contained, and the machine is left as it was (issue 20).

Where a control is harmless (it only reads, or writes into the test's own directory), the same
attack is also run unisolated, where it must succeed: that shows the attack is a real one. The
process attacks are bounded (a few sleeps, 200 fork attempts against RLIMIT_NPROC)."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest

from compgen_jax.llm_eval import evalplus, sandbox, sandbox_job
from compgen_jax.types import ConfigError
from tests.helpers import REPO
from tests.test_sandbox import processes_with

isolation = sandbox.isolation_problem()
needs_isolation = pytest.mark.skipif(
    isolation is not None, reason=f"no sandbox isolation here: {isolation}")
PROMPT = ('from typing import List\n\n\ndef has_close_elements(numbers: List[float], threshold: '
          'float) -> bool:\n    """Whether any two numbers are closer than threshold."""\n')
CANONICAL = ("    return any(abs(a - b) < threshold for i, a in enumerate(numbers)\n"
             "               for b in numbers[i + 1:])\n")
BASE = [[[1.0, 2.0, 3.0], 0.5], [[1.0, 2.8, 3.0], 0.3]]  # False, True
PLUS = [[[1.0, 2.0, 3.9, 4.0], 0.2], [[5.0], 1.0]]  # True, False
WRONG = "    return 0\n"


@pytest.fixture
def bench(tmp_path):
  """(dataset path, settings) of a one-problem HumanEval+ file shaped like HumanEval/0."""
  path = tmp_path / "HumanEvalPlus.jsonl"
  path.write_text(json.dumps(dict(task_id="HumanEval/0", prompt=PROMPT, entry_point=
                                  "has_close_elements", canonical_solution=CANONICAL,
                                  base_input=BASE, plus_input=PLUS)) + "\n")
  settings = evalplus.default_settings()
  settings.update(path=str(path), timeout_s=5.0, memory_mb=512)
  return str(path), settings


def score(settings, *bodies):
  """The scorer's rows for completions of the problem (function bodies)."""
  problems = evalplus.HUMANEVAL_PLUS.load(settings)
  return evalplus.HUMANEVAL_PLUS.score(problems * len(bodies), list(bodies), settings)


def failed(row) -> bool:
  return row["status"] != "pass" and not row["correct"] and not row["plus"]


def unisolated(monkeypatch, settings):
  """The settings, forced through the unisolated fallback (for the harmless controls)."""
  monkeypatch.setattr(sandbox, "isolation_problem", lambda: "forced off for a control")
  settings.allow_unisolated = True
  return settings


def body(code: str) -> str:
  return "".join(f"    {line}\n" for line in code.strip("\n").splitlines())


# Scores one completion in a fresh process (its own environment, its own peak memory), isolated
# and, for a control, unisolated; argv: settings JSON, the completion, the modes.
SCRIPT = """
import json, resource, sys
from compgen_jax.llm_eval import evalplus, sandbox
from tests.test_sandbox_attacks import score
settings = evalplus.default_settings()
settings.update(json.loads(sys.argv[1]))
for mode in sys.argv[3].split(","):
  if mode == "unisolated":
    sandbox.isolation_problem = lambda: "forced off for a control"
    settings.allow_unisolated = True
  before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
  [row] = score(settings, sys.argv[2])
  grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
  print(json.dumps(dict(row=row, grown_mb=grown_mb)))
"""


def score_elsewhere(settings, completion: str, modes=("isolated",), **env) -> list[dict]:
  proc = subprocess.run(
      [sys.executable, "-c", SCRIPT, json.dumps(settings.to_dict()), completion, ",".join(modes)],
      capture_output=True, text=True, timeout=120, cwd=REPO,
      env=dict(os.environ, PYTHONPATH=REPO, **env))
  assert proc.returncode == 0, proc.stderr[-2000:]
  return [json.loads(line) for line in proc.stdout.splitlines()]


def test_the_canonical_solution_passes_and_a_wrong_one_fails(bench):
  _, settings = bench
  settings.allow_unisolated = isolation is not None
  right, wrong = score(settings, CANONICAL, WRONG)
  assert right["status"] == "pass" and right["isolated"] == (isolation is None)
  assert failed(wrong)


@needs_isolation
def test_cannot_read_the_reference_solution(bench, monkeypatch):
  # The dataset path given outright, and whatever .jsonl any visible command line names.
  path, settings = bench
  attack = body(f"""
import glob, json
paths = [{path!r}]
for c in glob.glob('/proc/*/cmdline'):
    try:
        paths += [a for a in open(c, 'rb').read().decode().split(chr(0)) if a.endswith('.jsonl')]
    except OSError:
        pass
for p in paths:
    try:
        r = json.loads(open(p).readline())
    except OSError:
        continue
    ns = {{}}
    exec(r['prompt'] + r['canonical_solution'], ns)
    return ns[r['entry_point']](numbers, threshold)
return 'not found'
""")
  [row] = score(settings, attack)
  assert failed(row) and "not found" in row["message"]
  [control] = score(unisolated(monkeypatch, settings), attack)
  assert control["status"] == "pass" and control["isolated"] is False


@needs_isolation
def test_cannot_poison_the_expected_outputs(bench, tmp_path, monkeypatch):
  # The old cache file, and anything named *_expected.json under the workdir: a forged "all
  # zeros" must not make a later wrong answer pass.
  _, settings = bench
  cache = tmp_path / "w" / "humaneval_plus" / "cache"
  cache.mkdir(parents=True)
  attack = body(f"""
import glob, json, os
forged = {{'k': [0, 0, 0, 0]}}
targets = [{str(cache / "humaneval_plus_expected.json")!r}]
targets += glob.glob({str(tmp_path / "w")!r} + '/**/*_expected.json', recursive=True)
wrote = 0
for t in targets:
    try:
        json.dump(forged, open(t, 'w'))
        wrote += 1
    except OSError:
        pass
return wrote
""")
  poison, later = score(settings, attack, WRONG)
  assert failed(poison) and "got 0" in poison["message"] and failed(later)
  assert os.listdir(cache) == []
  # Unisolated the file can be written, and still nothing reads it.
  poison, later = score(unisolated(monkeypatch, settings), attack, WRONG)
  assert os.listdir(cache) == ["humaneval_plus_expected.json"] and failed(later)


@needs_isolation
def test_cannot_write_or_delete_outside_its_directory(bench, tmp_path):
  _, settings = bench
  victims = {name: tmp_path / name for name in ("a.txt", "b.txt", "c.txt")}
  for name, victim in victims.items():
    victim.write_text(f"precious {name}")
  created = [tmp_path / "new1.txt", tmp_path / "new2.txt", tmp_path / "new3.txt"]
  escape = f"/tmp/sandbox-escape-{uuid.uuid4().hex}"
  attack = body(f"""
import os, posix, subprocess
done = []
def attempt(name, action):
    try:
        action()
        done.append(name)
    except Exception:
        pass
attempt('open', lambda: open({str(created[0])!r}, 'w').write('x'))
attempt('unlink', lambda: posix.unlink({str(victims['a.txt'])!r}))
attempt('tmp', lambda: open({escape!r}, 'w').write('x'))
def spawn():
    pid = os.posix_spawn('/bin/sh', ['sh', '-c', 'echo x > {created[1]}; rm -f {victims['b.txt']}'],
                         {{}})
    os.waitpid(pid, 0)
attempt('spawn', spawn)
attempt('shell', lambda: subprocess.run(['/bin/sh', '-c', 'echo x > {created[2]}; '
                                         ': > {victims['c.txt']}; echo x > {escape}']))
return ' '.join(done)
""")
  [row] = score(settings, attack)
  assert failed(row)
  assert "tmp" in row["message"] and "shell" in row["message"]  # it ran, in its own /tmp
  for name, victim in victims.items():
    assert victim.read_text() == f"precious {name}"
  assert not any(path.exists() for path in created) and not os.path.exists(escape)


@needs_isolation
def test_cannot_leave_its_root(bench, tmp_path, monkeypatch):
  # A world-readable host file, sought through /proc/1/root, a user namespace (where the job
  # would hold CAP_SYS_CHROOT) and the classic chroot escape.
  _, settings = bench
  secret = tmp_path / "secret.txt"
  secret.write_text(f"host-{uuid.uuid4().hex}")
  os.chmod(tmp_path, 0o755)
  attack = body(f"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
got = []
for path in ('/proc/1/root' + {str(secret)!r}, {str(secret)!r}):
    try:
        got.append(open(path).read())
    except OSError as e:
        got.append(type(e).__name__)
got.append(str(libc.unshare(0x10000000 | 0x00020000)))  # CLONE_NEWUSER | CLONE_NEWNS
try:
    os.mkdir('/tmp/x')
    os.chroot('/tmp/x')
    for _ in range(20):
        os.chdir('..')
    os.chroot('.')
    got.append(open({str(secret)!r}).read())
except (OSError, TypeError) as e:  # TypeError: the unisolated guard's os.chroot = None
    got.append(type(e).__name__)
raise ValueError(' '.join(got))
""")
  [row] = score(settings, attack)
  assert failed(row) and "host-" not in row["message"]
  assert row["message"].endswith("PermissionError FileNotFoundError -1 PermissionError")
  [control] = score(unisolated(monkeypatch, settings), attack)
  assert secret.read_text() in control["message"]


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
  assert failed(returned) and hung["status"] == "timeout"
  assert processes_with(f"sleep\0{marker}") == []


@needs_isolation
def test_cannot_read_the_scorer_environment(bench):
  # Planted in the scorer's own environment, as a token or a key would be.
  _, settings = bench
  secret = f"planted-{uuid.uuid4().hex}"
  attack = body("""
import glob, os
found = [v for v in os.environ.values() if 'planted-' in v]
for e in glob.glob('/proc/*/environ') + ['/proc/1/environ']:
    try:
        found += [v for v in open(e, 'rb').read().decode().split(chr(0)) if 'planted-' in v]
    except OSError:
        pass
raise ValueError('found ' + ' '.join(found))
""")
  row, control = (r["row"] for r in score_elsewhere(
      settings, attack, ("isolated", "unisolated"), COMPGEN_PLANTED=secret))
  assert failed(row) and "found" in row["message"] and secret not in json.dumps(row)
  assert secret in control["message"]  # the scorer's /proc/<pid>/environ, unisolated


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
  assert failed(report["row"]) and "more than 4 MiB" in report["row"]["message"]
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
  assert failed(row) and 0 < forked < sandbox_job.PROCESSES
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
  assert failed(rows[0]) and failed(rows[2])
  assert rows[1]["status"] == rows[3]["status"] == "pass"


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
  assert failed(row) and "connected" not in row["message"]


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
  assert [row["status"] for row in rows if not failed(row)] == []


def test_refuses_to_run_unisolated_unless_told(bench, monkeypatch):
  _, settings = bench
  monkeypatch.setattr(sandbox, "isolation_problem", lambda: "no namespaces in this test")
  with pytest.raises(ConfigError) as error:
    evalplus.HUMANEVAL_PLUS.validate(settings, "benchmarks.humaneval_plus")
  assert error.value.field == "benchmarks.humaneval_plus.allow_unisolated"
  assert "no namespaces in this test" in str(error.value) and "\n" not in str(error.value)
  with pytest.raises(ConfigError):
    score(settings, CANONICAL)
  settings.allow_unisolated = True
  evalplus.HUMANEVAL_PLUS.validate(settings, "benchmarks.humaneval_plus")
  right, wrong = score(settings, CANONICAL, WRONG)
  assert right["status"] == "pass" and failed(wrong)
  assert right["isolated"] is wrong["isolated"] is False


def test_binary_refuses_without_isolation_in_one_line(tmp_path):
  # No `unshare` on PATH: the llm binary stops at validation, before any model is read.
  proc = subprocess.run(
      [sys.executable, os.path.join(REPO, "experiments", "llm_compose.py"),
       "--config=configs/llm.py:tiny", f"--workdir={tmp_path / 'w'}"],
      capture_output=True, text=True, cwd=REPO, timeout=300,
      env=dict(os.environ, PATH=str(tmp_path)))
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert "allow_unisolated" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
  assert not (tmp_path / "w").exists()
