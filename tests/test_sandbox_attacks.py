"""Hostile completions through the real HumanEval+ scorer (evalplus.HUMANEVAL_PLUS.score) that go
after files and secrets: each is scored as a failure and contained, and the machine is left as
it was (issue 20); the processes, signals and network attacks are in
test_sandbox_attacks_processes.py.

Where a control is harmless (it only reads, or writes into the test's own directory), the same
attack is also run unisolated, where it must succeed: that shows the attack is a real one."""

import json
import os
import subprocess
import sys
import uuid

import pytest

from compgen_jax.llm_eval import evalplus, sandbox
from compgen_jax.types import ConfigError
from tests.helpers import REPO
from tests.sandbox_bench import (
  CANONICAL,
  EXPECTED,
  WRONG,
  body,
  contained,
  failed,
  isolation,
  make_bench,
  needs_isolation,
  score,
  score_elsewhere,
  unisolated,
)


@pytest.fixture
def bench(tmp_path):
  """(dataset path, settings) of the one-problem HumanEval+ file (sandbox_bench.make_bench)."""
  return make_bench(tmp_path)


def test_the_canonical_solution_passes_and_a_wrong_one_fails(bench):
  _, settings = bench
  settings.allow_unisolated = isolation is not None
  right, wrong = score(settings, CANONICAL, WRONG)
  assert right["status"] == "pass" and right["isolated"] == (isolation is None)
  assert right["sandbox"] == (EXPECTED if isolation is None else "none")
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
  assert contained(row) and "not found" in row["message"]
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
  assert contained(poison) and "got 0" in poison["message"] and contained(later)
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
  assert contained(row)
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
  assert contained(row) and "host-" not in row["message"]
  assert row["message"].endswith("PermissionError FileNotFoundError -1 PermissionError")
  [control] = score(unisolated(monkeypatch, settings), attack)
  assert secret.read_text() in control["message"]


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
  assert contained(row) and "found" in row["message"] and secret not in json.dumps(row)
  assert secret in control["message"]  # the scorer's /proc/<pid>/environ, unisolated


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
  assert right["sandbox"] == wrong["sandbox"] == "none"


def test_binary_refuses_without_isolation_in_one_line(tmp_path):
  # No `unshare` on PATH: train.py stops at the llm validation, before any model is read.
  proc = subprocess.run(
      [sys.executable, os.path.join(REPO, "experiments", "train.py"),
       "--config=configs/llm.py:tiny", f"--workdir={tmp_path / 'w'}"],
      capture_output=True, text=True, cwd=REPO, timeout=300,
      env=dict(os.environ, PATH=str(tmp_path)))
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert "allow_unisolated" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
  assert not (tmp_path / "w").exists()
