"""Every committed sweep report regenerates byte for byte from the repository alone: for each
results/cpu/<experiment>/ (and rerun, results/cpu/reruns/<machine>/<experiment>/) whose
index.json has programs with committed workdir files, the report of the sweep's binary written
afresh into a temp dir equals the committed one (train.py sweeps: REPORT.md and claims.json;
image sweeps: report.md and claims.json); a committed rerun's comparison is current."""

import difflib
import glob
import os
import shutil
import subprocess
import sys

import pytest

from compgen_jax import apps
from compgen_jax import workdir as workdir_lib
from compgen_jax.analysis import claims, rerun, sweep_report
from compgen_jax.images import report as images_report
from compgen_jax.sweeps import spec
from tests import helpers
from tests.helpers import REPO

# collected first (tests/conftest.py); with test_sweep_report.py on one worker (--dist=loadgroup),
# so the session's tiny sweep (conftest.tiny_sweep, ~50 s) is made once
pytestmark = [pytest.mark.heavy, pytest.mark.xdist_group("tiny_sweep")]

RESULTS = os.path.join(REPO, "results", "cpu")
COMPARED = {"scaling": (sweep_report.REPORT_FILE, sweep_report.CLAIMS_FILE),
            "images": (images_report.REPORT_FILE, images_report.CLAIMS_FILE)}  # per application


def has_rows(sweep_dir: str) -> bool:
  """The index lists a trained program whose workdir files are here (committed)."""
  index = workdir_lib.read_index(sweep_dir)
  return any(os.path.isfile(os.path.join(workdir_lib.located(sweep_dir, index, e["workdir"]),
                                         helpers.COMMITTED_WORKDIR_FILES[0]))
             for e in index.get("programs", []) if sweep_report.trained(e))


def committed_sweeps(results_dir: str = RESULTS) -> list[str]:
  """The sweep dirs with rows, relative to results_dir: <experiment> and reruns/<machine>/
  <experiment>."""
  found = [p for pattern in (("*",), (claims.RERUNS_DIR, "*", "*"))
           for p in sorted(glob.glob(os.path.join(results_dir, *pattern, workdir_lib.INDEX_FILE)))]
  return [os.path.relpath(os.path.dirname(p), results_dir) for p in found
          if has_rows(os.path.dirname(p))]


def committed_reruns(results_dir: str = RESULTS) -> list[str]:
  return sorted(os.listdir(os.path.join(results_dir, claims.RERUNS_DIR))
                if os.path.isdir(os.path.join(results_dir, claims.RERUNS_DIR)) else [])


def _snapshot(directory: str) -> dict:
  return {os.path.relpath(os.path.join(root, name), directory):
          os.stat(os.path.join(root, name)).st_mtime_ns
          for root, _, names in os.walk(directory) for name in names}


def regenerate_and_compare(sweep_dir: str, out_dir: str) -> None:
  """Writes the sweep's report into out_dir and asserts REPORT.md and claims.json equal the
  sweep dir's byte for byte (a diff in the message otherwise); the sweep dir is not touched."""
  before = _snapshot(sweep_dir)
  app = apps.of_sweep_dir(sweep_dir).name
  apps.APPS[app].report(sweep_dir, out_dir)
  assert _snapshot(sweep_dir) == before, "regenerating wrote into the sweep dir"
  for name in COMPARED[app]:
    committed, fresh = os.path.join(sweep_dir, name), os.path.join(out_dir, name)
    assert os.path.exists(committed), f"{committed} is not committed; regenerate it"
    with open(committed) as a, open(fresh) as b:
      old, new = a.read(), b.read()
    diff = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                        committed, "regenerated", n=1))
    assert old == new, f"{committed} differs from its regeneration:\n{diff[:4000]}"


def test_at_least_one_committed_sweep_has_rows():
  assert committed_sweeps(), (
      f"no results/cpu/<experiment>/index.json has programs with committed workdir files "
      f"({', '.join(helpers.COMMITTED_WORKDIR_FILES)}), so no report can be regenerated")


@pytest.mark.parametrize("experiment", committed_sweeps())
def test_committed_report_regenerates(experiment, tmp_path):
  regenerate_and_compare(os.path.join(RESULTS, experiment), str(tmp_path / "out"))


def test_regeneration_mechanics_on_the_tiny_sweep(tiny_sweep, tmp_path):
  # The tiny sweep as it would be committed: its report written in place, small files only.
  committed = helpers.committed_copy(tiny_sweep, str(tmp_path / "results" / "data_scaling"))
  apps.APPS["scaling"].report(committed)
  assert claims.read_claims(os.path.join(committed, sweep_report.CLAIMS_FILE))  # the format
  assert committed_sweeps(str(tmp_path / "results")) == ["data_scaling"]
  regenerate_and_compare(committed, str(tmp_path / "out"))
  # A stale committed report fails, with the differing line.
  with open(os.path.join(committed, "REPORT.md"), "a") as f:
    f.write("stale\n")
  with pytest.raises(AssertionError, match=r"\+\+\+ regenerated[\s\S]*-stale"):
    regenerate_and_compare(committed, str(tmp_path / "again"))
  # A sweep dir whose workdir files were not committed has nothing to regenerate.
  bare = str(tmp_path / "results" / "bare")
  os.makedirs(bare)
  shutil.copy(os.path.join(committed, workdir_lib.INDEX_FILE), bare)
  assert committed_sweeps(str(tmp_path / "results")) == ["data_scaling"]


@pytest.mark.parametrize("machine", committed_reruns())
def test_a_committed_reruns_comparison_is_current(machine):
  # what experiments/rerun_diff.py --rerun=results/cpu/reruns/<machine> makes of the rows
  rerun_dir = os.path.join(RESULTS, claims.RERUNS_DIR, machine)
  text, _ = rerun.render(rerun.compare(RESULTS, rerun_dir))
  with open(os.path.join(rerun_dir, rerun.DIFF_FILE)) as f:
    assert f.read() == text, f"{rerun_dir}/{rerun.DIFF_FILE} is stale: run experiments/" \
        f"rerun_diff.py --rerun=results/cpu/reruns/{machine} --out=..."


def test_the_claims_table_is_current():
  # results/cpu/claims.json and the README's table are what experiments/claims.py makes of the
  # committed <experiment>/claims.json files.
  for path, text in zip((claims.CLAIMS_FILE, claims.README_FILE), claims.render(RESULTS),
                        strict=True):
    with open(os.path.join(RESULTS, path)) as f:
      assert f.read() == text, f"results/cpu/{path} is stale: run make claims-cpu"


def test_a_moved_sweep_dir_gives_the_same_report(tiny_sweep, tmp_path):
  # A clone of results/ holds index.json and the programs' small files, elsewhere.
  index = workdir_lib.read_index(tiny_sweep)
  assert {e["workdir"] for e in index["programs"]} == {p.name for p in spec.load(
      f"{REPO}/configs/sweeps/data_scaling.py:tiny", tiny_sweep).programs}  # relative
  original = _read(apps.APPS["scaling"].report(tiny_sweep, str(tmp_path / "original")))
  moved = helpers.committed_copy(tiny_sweep, str(tmp_path / "elsewhere" / "data_scaling"))
  assert not os.path.exists(os.path.join(moved, index["programs"][0]["workdir"], "checkpoints"))
  done = subprocess.run([sys.executable, os.path.join(REPO, "experiments", "report.py"),
                         f"--sweep_dir={moved}"], capture_output=True, text=True, cwd=REPO)
  assert done.returncode == 0, done.stderr[-2000:]
  assert _read(os.path.join(moved, "REPORT.md")) == original
  assert "experiments/probe.py" in original and "| 5 | 2 |" in original
  for figure in ("data_scaling_ood_r2.png", "decodability_ood_r2.png"):
    with open(tmp_path / "original" / figure, "rb") as a, open(f"{moved}/{figure}", "rb") as b:
      assert a.read() == b.read(), figure


def _read(path: str) -> str:
  with open(path) as f:
    return f.read()
