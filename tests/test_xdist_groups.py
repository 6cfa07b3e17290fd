"""`make test` runs with --dist=loadgroup: the tests of one xdist_group (a module whose fixture is
built once, modules sharing a session fixture such as the tiny sweep) must run on one worker.
pytest-xdist groups a test by suffixing its node id with "@<group>" on the worker; pytest 9.2
moved the node id elsewhere, so the suffix (and every group) silently vanished and each worker
built the shared fixtures again. This fails if an upgrade does that again."""

import os
import shlex
import subprocess
import sys

import pytest

from tests.helpers import REPO

pytestmark = pytest.mark.xdist_group("xdist_groups")


def test_a_grouped_test_carries_its_group_in_the_id_the_scheduler_reads(request):
  if not getattr(request.config.option, "loadgroup", False):
    pytest.skip("checks pytest -n N --dist=loadgroup, as make test runs it")
  assert request.node.nodeid.endswith("@xdist_groups"), request.node.nodeid


def _make_test_pytest_args() -> list[str]:
  """The pytest options of the Makefile's `test` recipe (what `make test` and CI run)."""
  with open(os.path.join(REPO, "Makefile")) as f:
    recipe = [line for line in f if "bin/pytest " in line and "--dist=" in line]
  assert len(recipe) == 1, recipe
  args = shlex.split(recipe[0].split("bin/pytest", 1)[1])
  assert args[-1] == "tests", args
  return args[:-1]


def test_a_crashed_worker_fails_the_run_instead_of_hanging_it(tmp_path):
  """pytest-xdist 3.8's loadgroup scheduler hangs for good when it replaces a crashed worker
  (pytest-dev/pytest-xdist#1323, #1327, #1378): a segfault in one test kept a CI run busy until
  its 90-minute limit. With the Makefile's options the crash is one failed test and the run ends."""
  (tmp_path / "pytest.ini").write_text("[pytest]\n")
  (tmp_path / "test_grouped.py").write_text(
      "import os, time, pytest\n"
      "pytestmark = pytest.mark.xdist_group('g')\n"
      "def test_before(): time.sleep(0.5)\n"
      "def test_crashes(): os._exit(1)\n"
      "def test_after(): pass\n")
  (tmp_path / "test_other.py").write_text(
      "import time\n"
      "def test_slow(): time.sleep(2)\n"
      "def test_quick(): pass\n")
  result = subprocess.run(
      [sys.executable, "-m", "pytest", *_make_test_pytest_args(), "-p", "no:cacheprovider",
       str(tmp_path)],
      cwd=tmp_path, capture_output=True, text=True, timeout=180)
  assert result.returncode == 1, result.stdout[-3000:]
  assert "crashed while running 'test_grouped.py::test_crashes" in result.stdout, \
      result.stdout[-3000:]
