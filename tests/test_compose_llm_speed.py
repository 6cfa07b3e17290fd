"""benchmarks/compose_llm_speed.py end to end at toy sizes (the times are never checked): the
physical limit is the sum of the single-model decodes; --hf without torch is one line naming
the make target; speculative rows on checkpoints record each call's acceptance."""

import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

from compgen_jax import metric_writer
from tests.helpers import REPO


def _bench(*args: str) -> subprocess.CompletedProcess:
  return subprocess.run(
      [sys.executable, os.path.join(REPO, "benchmarks", "compose_llm_speed.py"), *args],
      capture_output=True, text=True, cwd=REPO, timeout=300,
      env=dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=REPO))


def test_the_limit_is_the_sum_of_the_single_decodes():
  batch, new = 2, 3
  out = _bench(f"--batch={batch}", f"--new_tokens={new}", "--prompt_len=8",
               "--min_prompt_len=4", "--repeats=1")
  assert out.returncode == 0, out.stderr[-3000:]
  rows = {}
  for line in out.stdout.splitlines():
    cells = [c.strip() for c in line.split("|")]
    if len(cells) == 5 and cells[0] == str(batch) and re.fullmatch(r"[\d.]+", cells[3]):
      rows[cells[1]] = (int(cells[2]), float(cells[3]), float(cells[4]))
  singles = [rows[n] for n in ("background alone", "expert 1 alone", "expert 2 alone")]
  limit = rows["physical limit: the 3 alone, summed"]
  assert all(k == 1 for k, _, _ in singles) and limit[0] == rows["composed (ours)"][0] == 3
  # one round: the limit is the sum of the three times (each printed to 1 ms)
  assert limit[1] == pytest.approx(sum(s for _, s, _ in singles), abs=2e-3)
  for _, sec, per_second in [*singles, limit, rows["composed (ours)"]]:  # B x N tokens each
    assert batch * new / (sec + 5e-4) * 0.995 <= per_second <= batch * new / max(sec - 5e-4, 1e-9)
  assert f"{batch}: composed / physical limit" in out.stdout


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None,
                    reason="torch is installed: --hf would run")
def test_hf_without_torch_is_one_line_naming_the_make_target():
  out = _bench("--hf")
  assert out.returncode == 2
  assert out.stderr.startswith("error: ") and out.stderr.count("\n") == 1, out.stderr
  assert "make venv-hf" in out.stderr and "torch" in out.stderr


def test_speculative_rows_on_checkpoints_record_each_calls_acceptance(tiny_models, tmp_path):
  """--checkpoints / --prompts / --out: one row, the first --batch prompts' drafts drafted and
  accepted, the call's acceptance their ratio, the greedy tokens equal to plain decoding's."""
  _, paths, _ = tiny_models
  prompts, out = tmp_path / "prompts.jsonl", tmp_path / "rows.jsonl"
  prompts.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in
                             ["Question: what is 2 + 3?\nAnswer:", "def add(a, b):", "unused"]))
  run = _bench("--checkpoints=" + ",".join(paths[n] for n in ("base", "math", "coding")),
               f"--prompts={prompts}", "--batch=2", "--new_tokens=6", "--draft_len=2",
               "--repeats=1", f"--out={out}")
  assert run.returncode == 0, run.stderr[-3000:]
  (row,) = metric_writer.read_rows(str(out))
  assert (row["setting"], row["batch"], row["same_tokens"]) == ("checkpoints", 2, True)
  assert len(row["drafted_B"]) == 2 and len(row["plain_s"]) == len(row["speculative_s"]) == 1
  assert row["acceptance"] == sum(row["accepted_B"]) / sum(row["drafted_B"])
  assert all(d % 2 == 0 and 0 <= a <= d for a, d in zip(row["accepted_B"], row["drafted_B"],
                                                        strict=True))
