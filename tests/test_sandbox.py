"""The sandbox that runs generated code: timeouts, memory limits, JSON results, throwaway cwd."""

import json
import os
import time

from compgen_jax.llm_eval import sandbox
from compgen_jax.llm_eval.sandbox import Job


def run(program, inputs=((),), entry_point="f", timeout_s=2.0, memory_mb=512):
  return sandbox.run(Job(program, entry_point, [list(i) for i in inputs]), timeout_s, memory_mb)


def gone(pid: int) -> bool:
  """No such process, or a zombie whose parent was killed (no init may reap it here)."""
  deadline = time.monotonic() + 3
  while time.monotonic() < deadline:
    try:
      with open(f"/proc/{pid}/stat") as f:
        if f.read().split(")")[-1].split()[0] == "Z":
          return True
    except FileNotFoundError:
      return True
    time.sleep(0.05)
  return False


def test_infinite_loop_times_out():
  start = time.monotonic()
  result = run("def f():\n  while True:\n    pass\n", timeout_s=1.0)
  assert result.status == "timeout" and result.outputs == []
  assert time.monotonic() - start < 2.0


def test_timeout_kills_forked_children(tmp_path):
  # The guard hides os.fork; posix.fork shows that it is no security boundary, and that the
  # process-group kill still reaches what the program started.
  program = ("import posix, time\ndef f(path):\n  pid = posix.fork()\n  if pid == 0:\n"
             "    time.sleep(60)\n    posix._exit(0)\n  open(path, 'w').write(str(pid))\n"
             "  {}\n")
  start = time.monotonic()
  hung = run(program.format("time.sleep(60)"), [[str(tmp_path / "a")]], timeout_s=1.0)
  assert hung.status == "timeout" and time.monotonic() - start < 3.0
  assert gone(int((tmp_path / "a").read_text()))
  # A child still holding the result pipe after the program returned: results are kept.
  returned = run(program.format("return 1"), [[str(tmp_path / "b")]], timeout_s=1.0)
  assert returned == sandbox.Result("ok", [1], None)
  assert gone(int((tmp_path / "b").read_text()))


def test_memory_limit_turns_allocation_into_an_error():
  result = run("def f():\n  return len(bytearray(1 << 34))\n", memory_mb=256)
  assert result.status == "error" and "MemoryError" in result.message
  grown = run("def f():\n  x = []\n  while True:\n    x.append([0] * 100000)\n", memory_mb=256)
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


def test_working_directory_is_a_throwaway(tmp_path):
  keep = tmp_path / "keep.txt"
  keep.write_text("precious")
  program = ("import os, shutil\ndef f(keep):\n  open('scratch.txt', 'w').write('x')\n"
             "  try:\n    shutil.rmtree(os.path.dirname(keep))\n  except TypeError:\n"
             "    pass\n  return os.getcwd()\n")
  result = run(program, [[str(keep)]])
  assert result.status == "ok", result.message
  cwd = result.outputs[0]
  assert cwd != os.getcwd() and not os.path.exists(cwd)
  assert not os.path.exists("scratch.txt") and keep.read_text() == "precious"


def test_parallel_workers_match_one_worker():
  jobs = [Job(f"def f(n):\n  return [n] * {k} if {k} % 3 else 1 // 0\n", "f", [[k], [k + 1]])
          for k in range(6)]
  one = sandbox.run_many(jobs, 2.0, 512, workers=1)
  many = sandbox.run_many(jobs, 2.0, 512, workers=3)
  assert one == many
  assert [r.status for r in one] == ["error", "ok", "ok"] * 2
