"""In-context copying (lm_train/copying.py, benchmarks/copying.py): an oracle that predicts only
the second copy scores 1 / 0 through the real tokenizer; the batched, padded forward equals a
per-document forward (results/cpu/llm_cpu_pilot/NOTES.md's snippet) on a tiny random Gemma-2;
missing files are one-line errors before any forward pass."""

import os
import re
import shutil
import subprocess
import sys

import jax
import numpy as np
import pytest

from compgen_jax.llm_data import build
from compgen_jax.lm import gemma2, hf_export
from compgen_jax.lm_train import copying
from compgen_jax.types import CheckpointError, ConfigError, DataError
from tests.helpers import REPO

COUNT = 5  # with batch 2: two full batches and a padded one


@pytest.fixture(scope="module")
def export(tmp_path_factory, tiny_llm_data):
  """A random Gemma-2 on the tiny data's tokenizer, written as an export (weights scaled up so
  its argmaxes are clear: padding cannot flip one by rounding), from the first key whose model
  hits some next tokens in both copies (by the per-document reading, not the measure under
  test), so the accuracies compared below are not all zero; which key does depends on the tiny
  data's tokenizer."""
  cfg, data_dir = tiny_llm_data
  c = gemma2.Gemma2Config(
      vocab_size=cfg.tokenizer.vocab_size, width=16, num_layers=2, num_heads=2, num_kv_heads=1,
      head_dim=8, mlp_dim=32, rms_eps=1e-6, rope_base=10_000.0, query_pre_attn_scalar=8.0,
      attn_softcap=50.0, final_softcap=30.0, sliding_window=16, sliding_layers=(True, False),
      bos_id=2, eos_id=1, pad_id=0)
  path = str(tmp_path_factory.mktemp("copying") / "export")
  for key in range(1, 50):
    params = jax.tree.map(lambda x: 3.0 * x, gemma2.init_params(c, jax.random.key(key)))
    hf_export.write(path, c, params, os.path.join(data_dir, build.TOKENIZER))
    model, loaded = gemma2.load(path)
    lines, sp = _lines_and_sp(data_dir, model)
    first, second, _ = _per_document(model, loaded, copying.documents(sp, model.bos_id, lines))
    if first > 0 and second > 0:
      return path
  raise AssertionError("no key in 1..49 gives a random model that hits both copies")


def _lines_and_sp(data_dir, model):
  return (build.repeated_passages(data_dir, count=COUNT, seed=copying.SEED),
          gemma2.load_tokenizer(data_dir, model))


def test_documents_are_the_training_format(tiny_llm_data, export):
  _, data_dir = tiny_llm_data
  model, _ = gemma2.load(export)
  lines, sp = _lines_and_sp(data_dir, model)
  for line, doc in zip(lines, copying.documents(sp, model.bos_id, lines), strict=True):
    assert doc.tokens[0] == model.bos_id
    assert sp.decode(doc.tokens[1:]) == line + "\n" + line
    assert doc.copy_len == len(sp.encode(line))
  with pytest.raises(DataError, match="token"):
    copying.documents(sp, model.bos_id, [""])


def test_an_oracle_of_the_second_copy_scores_one_and_zero(tiny_llm_data, export):
  """Logits whose argmax is the true next token exactly where that token lies after the
  newline (found from the text, not from the measure's windows), a wrong token elsewhere."""
  _, data_dir = tiny_llm_data
  model, _ = gemma2.load(export)
  lines, sp = _lines_and_sp(data_dir, model)
  docs = copying.documents(sp, model.bos_id, lines)
  after_newline = {}  # document -> index of its first token after the newline's token
  for doc in docs:
    k = next(i for i in range(1, len(doc.tokens)) if "\n" in sp.decode(doc.tokens[1:i + 1]))
    after_newline[tuple(doc.tokens)] = k + 1
  calls = []

  def oracle(tokens_BxL, valid_BxL):
    calls.append(tokens_BxL.shape)
    logits = np.zeros((*tokens_BxL.shape, model.vocab_size), np.float32)
    for b, (row, valid) in enumerate(zip(tokens_BxL, valid_BxL, strict=True)):
      real = [int(t) for t in row[valid]]
      start = after_newline[tuple(real)]
      for i in range(len(real) - 1):
        target = real[i + 1]
        logits[b, i, target if i + 1 >= start else (target + 1) % model.vocab_size] = 1.0
    return logits

  got = copying.accuracy(oracle, docs, model.pad_id, batch=2)
  assert got == copying.Copying(first=0.0, second=1.0)
  width = max(len(d.tokens) for d in docs)
  assert calls == [(2, width)] * 3  # one shape: one compile of a jitted model


def _per_document(model, params, docs):
  """results/cpu/llm_cpu_pilot/NOTES.md's computation: one unpadded forward per document."""
  firsts, seconds, predictions = [], [], []
  for doc in docs:
    toks = np.asarray([doc.tokens], np.int32)
    logits = model.apply(params, toks, None, np.ones_like(toks, bool))[0]
    pred = np.asarray(logits.argmax(-1))[0]
    ok = pred[:-1] == toks[0, 1:]
    n = doc.copy_len
    firsts.append(ok[1:n].mean())
    seconds.append(ok[len(ok) - n + 1:].mean())
    predictions.append(pred)
  return float(np.mean(firsts)), float(np.mean(seconds)), predictions


def test_batched_equals_one_forward_per_document(tiny_llm_data, export):
  _, data_dir = tiny_llm_data
  model, params = gemma2.load(export)
  lines, sp = _lines_and_sp(data_dir, model)
  docs = copying.documents(sp, model.bos_id, lines)
  first, second, predictions = _per_document(model, params, docs)
  assert first > 0 and second > 0  # the fixture's precondition: a window off by one would show
  batched = []
  forward = copying.model_logits(model, params)

  def recording(tokens_BxL, valid_BxL):
    logits = forward(tokens_BxL, valid_BxL)
    batched.extend(np.asarray(logits.argmax(-1)))
    return logits

  got = copying.accuracy(recording, docs, model.pad_id, batch=2)
  for doc, want, pred in zip(docs, predictions, batched, strict=False):  # padded rows left out
    np.testing.assert_array_equal(pred[:len(doc.tokens)], want)
  assert (got.first, got.second) == (first, second)
  assert copying.measure(export, data_dir, count=COUNT, batch=2) == got
  assert copying.measure(export, data_dir, count=COUNT, batch=COUNT + 3) == got


def test_missing_or_other_tokenizer_or_bad_count_fails_before_any_forward(tiny_llm_data, export,
                                                                 tmp_path):
  _, data_dir = tiny_llm_data
  shutil.copy(os.path.join(data_dir, build.PROSE), tmp_path / build.PROSE)
  with pytest.raises(CheckpointError, match="tokenizer.model"):
    copying.measure(export, str(tmp_path))
  with pytest.raises(ConfigError, match="count"):
    copying.measure(export, data_dir, count=0)
  other = tmp_path / "other_export"
  shutil.copytree(export, other)
  with open(other / build.TOKENIZER, "ab") as f:  # the same vocabulary, other bytes
    f.write(b"\0")
  with pytest.raises(CheckpointError, match="differs"):
    copying.measure(str(other), data_dir)


def _bench(*args: str) -> subprocess.CompletedProcess:
  return subprocess.run(
      [sys.executable, os.path.join(REPO, "benchmarks", "copying.py"), *args],
      capture_output=True, text=True, cwd=REPO, timeout=120,
      env=dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=REPO))


def test_the_binary_prints_the_measure_and_names_a_missing_export(tiny_llm_data, export,
                                                                  tmp_path):
  _, data_dir = tiny_llm_data
  out = _bench(f"--export={export}", f"--data_dir={data_dir}", f"--count={COUNT}", "--batch=2")
  assert out.returncode == 0, out.stderr[-3000:]
  want = copying.measure(export, data_dir, count=COUNT, batch=2)
  assert re.search(rf"second copy {want.second:.3f}, first copy {want.first:.3f}$",
                   out.stdout.strip()), out.stdout
  missing = tmp_path / "no_export"
  out = _bench(f"--export={missing}", f"--data_dir={data_dir}")
  assert out.returncode == 2
  assert out.stderr.startswith("error: ") and out.stderr.count("\n") == 1, out.stderr
  assert str(missing / "config.json") in out.stderr


def _background(data_dir, **overrides):
  from tests.helpers import load_config
  return load_config("lm_train", "test_background", **{
      "corpus.data_dir": data_dir, "corpus.sources": ("repeat", "prose"), "evals.every": 20,
      "evals.copying": True, **overrides})


def test_copying_measured_in_training_is_the_benchmarks_and_stops_training(
    tiny_llm_data, tmp_path):
  """evals.copying: the engine's jitted evaluation of the held-out repeat documents equals
  copying.measure (batched on the host) on the export of the same step; evals.stop_copying at
  step 20's second-copy accuracy ends training there, exported from step 20's checkpoint, and
  a re-run trains no further."""
  from compgen_jax import checkpointing, metric_writer
  from compgen_jax import workdir as workdir_lib
  from compgen_jax.lm_train import experiment

  data_dir = tiny_llm_data[1]
  cfg = _background(data_dir)
  full = str(tmp_path / "full")
  experiment.train(cfg, full)
  rows = metric_writer.read_rows(os.path.join(full, workdir_lib.METRICS_FILE))
  evals = {r["step"]: r for r in rows if "eval/copy_second" in r}
  assert sorted(evals) == [20, 40]
  got = copying.measure(experiment.export_dir(full, 0), data_dir, batch=7)
  assert evals[40]["eval/copy_second"] == pytest.approx(got.second, abs=1e-6)
  assert evals[40]["eval/copy_first"] == pytest.approx(got.first, abs=1e-6)
  threshold = evals[20]["eval/copy_second"]
  assert 0 < threshold < 1
  stop = _background(data_dir, **{"evals.stop_copying": threshold})
  early = str(tmp_path / "early")
  final = experiment.train(stop, early)
  assert [r["step"] for r in final] == [20]
  assert metric_writer.read_rows(os.path.join(early, workdir_lib.METRICS_FILE)) == [
      r for r in rows if r["step"] <= 20]
  assert checkpointing.available_steps(os.path.join(early, workdir_lib.CHECKPOINT_DIR)) == [20]
  at20 = copying.measure(experiment.export_dir(early, 0), data_dir)
  assert at20.second == pytest.approx(threshold, abs=1e-6)
  assert experiment.train(stop, early) == final  # ended: resumes to nothing more
  from compgen_jax.lm_train import report
  text = open(report.write(early)).read()
  assert f"20 steps (stopped early: second-copy accuracy reached evals.stop_copying " \
      f"{threshold}; at most 40)" in text
  for bad, field in (({"evals.stop_copying": 0.5, "evals.copying": False}, "stop_copying"),
                     ({"evals.stop_copying": 1.5}, "stop_copying")):
    with pytest.raises(ConfigError, match=field):
      experiment.train(_background(data_dir, **bad), str(tmp_path / "bad"))
    assert not os.path.exists(tmp_path / "bad")
