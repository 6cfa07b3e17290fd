"""The sandbox that runs generated code: timeouts, memory limits, JSON results, throwaway cwd.

Isolated where the machine allows it (tests/test_sandbox_attacks.py holds the attacks); what
needs the isolation is marked, the rest also runs the unisolated fallback."""

import json
import os
import subprocess
import sys
import time

import pytest

from compgen_jax.llm_eval import sandbox
from compgen_jax.llm_eval.sandbox import Job
from tests.helpers import REPO

ISOLATED = sandbox.isolation_problem() is None
PREFIXES = (sys.prefix, sys.base_prefix)
needs_isolation = pytest.mark.skipif(
    not ISOLATED, reason=f"no sandbox isolation here: {sandbox.isolation_problem()}")


def run(program, inputs=((),), entry_point="f", timeout_s=2.0, memory_mb=512, **kwargs):
  kwargs.setdefault("isolated", ISOLATED)
  return sandbox.run(Job(program, entry_point, [list(i) for i in inputs]), timeout_s, memory_mb,
                     **kwargs)


def processes_with(marker: str) -> list[int]:
  """The host's live processes whose command line holds marker (zombies have none)."""
  pids = []
  for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
      with open(f"/proc/{pid}/cmdline", "rb") as f:
        if marker.encode() in f.read():
          pids.append(int(pid))
    except OSError:
      pass
  return pids


def test_infinite_loop_times_out():
  start = time.monotonic()
  result = run("def f():\n  while True:\n    pass\n", timeout_s=1.0)
  assert result.status == "timeout" and result.outputs == []
  assert time.monotonic() - start < 2.0


@needs_isolation
def test_what_the_job_started_dies_with_it():
  # A detached child (fork, setsid, exec sleep) marked in its command line: it must be gone when
  # run() returns, after a timeout and after a normal return (results kept though it held the
  # result pipe).
  marker = f"{time.time() % 1000:.6f}"
  program = ("import os, posix, time\ndef f():\n  if posix.fork() == 0:\n    posix.setsid()\n"
             f"    os.execv('/bin/sleep', ['sleep', '{marker}'])\n  time.sleep(0.2)\n  {{}}\n")
  start = time.monotonic()
  hung = run(program.format("time.sleep(60)"), timeout_s=1.0)
  assert hung.status == "timeout" and time.monotonic() - start < 3.0
  assert processes_with(f"sleep\0{marker}") == []
  returned = run(program.format("return 1"), timeout_s=2.0)
  assert returned == sandbox.Result("ok", [1], None)
  assert processes_with(f"sleep\0{marker}") == []


@needs_isolation
def test_a_job_dies_even_when_the_scorer_is_killed():
  # PID 1's own alarm ends the namespace timeout_s + 1 s after it started.
  marker = f"{time.time() % 1000:.6f}"
  program = f"import os\ndef f():\n  os.execv('/bin/sleep', ['sleep', '{marker}'])\n"
  scorer = subprocess.Popen([sys.executable, "-c", (
      "from compgen_jax.llm_eval import sandbox\n"
      f"sandbox.run(sandbox.Job({program!r}, 'f', [[]]), 2.0, 256)\n")], cwd=REPO,
      env=dict(os.environ, PYTHONPATH=REPO))
  deadline = time.monotonic() + 10
  while not processes_with(f"sleep\0{marker}") and time.monotonic() < deadline:
    time.sleep(0.05)
  assert processes_with(f"sleep\0{marker}"), "the job never started"
  scorer.kill()
  scorer.wait()
  time.sleep(0.5)
  assert processes_with(f"sleep\0{marker}")  # orphaned, still running
  deadline = time.monotonic() + 5
  while processes_with(f"sleep\0{marker}") and time.monotonic() < deadline:
    time.sleep(0.05)
  assert processes_with(f"sleep\0{marker}") == []


def test_memory_limit_turns_allocation_into_an_error():
  # A generous wall limit: on a loaded 2-core CI machine growing to 256 MiB once took over 2 s and
  # ended as a timeout. The loop stops at 1.6 GB, so without the limit it returns "ok" and fails.
  result = run("def f():\n  return len(bytearray(1 << 34))\n", memory_mb=256, timeout_s=30.0)
  assert result.status == "error" and "MemoryError" in result.message
  grown = run("def f():\n  x = []\n  for _ in range(2000):\n    x.append([0] * 100000)\n",
              memory_mb=256, timeout_s=30.0)
  assert grown.status == "error" and "MemoryError" in grown.message


def test_results_are_json_and_compare_by_value():
  program = ("import math\nclass Point:\n  def __repr__(self):\n    return 'Point()'\n"
             "def f(words):\n  print('noise'); print('more', file=__import__('sys').stderr)\n"
             "  return set(words), (1, 2.5), {3: 'a', 'x': None}, Point(), math.nan, 7 ** 9000\n")
  forward = run(program, [[["b", "a", "c"]]])
  backward = run(program, [[["c", "b", "a"]]])
  assert forward.status == "ok" and forward.outputs == backward.outputs
  words, pair, mapping, point, nan, big = forward.outputs[0]
  assert words == {"__set__": ["a", "b", "c"]} and pair == [1, 2.5]
  assert mapping == {"__dict__": [["x", None], [3, "a"]]}  # pairs sorted by their JSON
  assert point == {"__repr__": "Point()"}
  assert nan != nan and big == {"__int__": hex(7 ** 9000)}
  json.dumps(forward.outputs)


def test_inputs_are_copied_and_errors_reported():
  program = "def f(xs):\n  xs.append(1)\n  return len(xs)\n"
  assert run(program, [[[0]], [[0, 0]]]).outputs == [2, 3]
  crash = run("def f(x):\n  return 1 // x\n", [[1], [0], [2]])
  assert crash.status == "error" and crash.outputs == [1] and "ZeroDivisionError" in crash.message
  assert run("def f(:\n").status == "error"
  assert "not defined" in run("def g():\n  return 1\n").message
  assert run("import sys\ndef f():\n  sys.exit(3)\n").status == "error"


def test_forged_result_lines_are_never_ok():
  # The program shares a process with the code writing results (fd 3): an early exit after a
  # forged "done", extra outputs, or junk lines must not read as a finished job.
  write = "import os\ndef f(x):\n  os.write(3, {!r})\n  {}\n"
  early = run(write.format(b'{"out": 1}\n{"done": true}\n', "os._exit(0)"), [[1], [2]])
  assert early.status == "error" and early.outputs == [1]
  extra = run(write.format(b'{"out": 7}\n', "return 7"), [[1]])
  assert extra == sandbox.Result("error", [7], "more results than inputs")
  junk = run(write.format(b'[1]\n5\n{"out": 1, "done": true}\n' + b"[" * 100000 + b"\n",
                          "return x"), [[1]])
  assert junk == sandbox.Result("ok", [1], None)


def test_result_bytes_are_capped():
  flood = run("import os\ndef f():\n  for _ in range(40):\n    os.write(3, b'x' * (1 << 20))\n",
              output_mb=2)
  assert flood.status == "error" and "more than 2 MiB" in flood.message


def test_working_directory_is_a_throwaway(tmp_path):
  keep = tmp_path / "keep.txt"
  keep.write_text("precious")
  program = ("import os, shutil\ndef f(keep):\n  open('scratch.txt', 'w').write('x')\n"
             "  try:\n    shutil.rmtree(os.path.dirname(keep))\n  except (TypeError, OSError):\n"
             "    pass\n  return os.getcwd(), os.path.exists(keep)\n")
  result = run(program, [[str(keep)]])
  assert result.status == "ok", result.message
  cwd, saw_keep = result.outputs[0]
  assert not os.path.exists(os.path.join(cwd, "scratch.txt")) and keep.read_text() == "precious"
  assert saw_keep is not ISOLATED  # isolated, the host's files are out of sight


def test_unisolated_fallback_runs_the_same_jobs():
  program = "import os\ndef f(n):\n  return [n] * n\n"
  isolated = run(program, [[2], [3]])
  assert run(program, [[2], [3]], isolated=False) == isolated == sandbox.Result(
      "ok", [[2, 2], [3, 3, 3]], None)
  guarded = run("import os\ndef f():\n  return os.unlink is None\n", isolated=False)
  assert guarded.outputs == [True]  # damage control against mistakes, not a boundary


@needs_isolation
def test_isolated_job_sees_only_the_interpreter():
  program = ("import os, sys\ndef f():\n  return sorted(os.listdir('/')), os.listdir('/proc'), "
             "os.getuid(), os.listdir('/tmp'), sys.prefix, open('/proc/self/status').read()\n")
  (top, proc, uid, scratch, prefix, status), = run(program).outputs
  assert set(top) <= {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "dev", "proc",
                      "tmp", *[os.path.abspath(p).split("/")[1] for p in PREFIXES]}
  # The private /tmp is empty but for the mount points of prefixes under the host's /tmp.
  under_tmp = {os.path.abspath(p).split("/")[2] for p in PREFIXES
               if os.path.abspath(p).startswith("/tmp/")}
  assert os.path.isdir(prefix) and set(scratch) == under_tmp
  assert sorted(int(p) for p in proc if p.isdigit()) == [1, 2]  # PID 1 and the job
  # No capability left: as root by a fresh uid, in a user namespace by emptying every set (uid 0
  # there is the caller outside, the only uid mapped).
  caps = dict(line.split(":\t") for line in status.splitlines() if line.startswith("Cap"))
  assert {name for name, bits in caps.items() if int(bits, 16)} == (
      {"CapBnd"} if sandbox.mechanism() == sandbox.ROOT else set())
  assert uid not in (0, os.getuid()) if sandbox.mechanism() == sandbox.ROOT else uid == 0


def test_parallel_workers_match_one_worker():
  jobs = [Job(f"def f(n):\n  return [n] * {k} if {k} % 3 else 1 // 0\n", "f", [[k], [k + 1]])
          for k in range(6)]
  one = sandbox.run_many(jobs, 2.0, 512, workers=1, isolated=ISOLATED)
  many = sandbox.run_many(jobs, 2.0, 512, workers=3, isolated=ISOLATED)
  assert one == many
  assert [r.status for r in one] == ["error", "ok", "ok"] * 2
