"""Gemma-2 language models trained through the engine (compgen_jax/lm_train, configs/lm_train.py:
test): they learn a repetitive stream, a seed of the vmapped program is the solo run, a resumed
run ends bit-identical to an uninterrupted one, a fine-tune starts exactly at the exported
background, and an export (with the tokenizer it was trained with) loads through gemma2.load
with the trained logits."""

import inspect
import json
import math
import os
import textwrap

import jax
import numpy as np
import pytest
import sentencepiece as spm

from compgen_jax import checkpointing, metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.lm import gemma2, tokenizer
from compgen_jax.lm.model import forward
from compgen_jax.lm_train import experiment, family
from compgen_jax.lm_train import model as model_lib
from compgen_jax.training import loop
from tests.helpers import load_config

pytestmark = pytest.mark.xdist_group("lm_train_loop")  # one worker builds the module's `background`


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  """A tokenizer trained (lm.tokenizer) on standard-library source to the test preset's
  vocabulary, and jsonl corpora of that source: documents split at blank lines, each trained on
  its second half only (a loss mask, as answers after prompts)."""
  d = tmp_path_factory.mktemp("corpus")
  texts = [inspect.getsource(m) for m in (textwrap, json.decoder, json.encoder)]
  tok = str(d / "tokenizer.model")
  tokenizer.train(tok, texts, load_config("lm_train", "test").model.vocab_size)
  sp = spm.SentencePieceProcessor(model_file=tok)
  paths = {}
  for name, part in (("path", texts[:2]), ("held_out_path", texts[2:])):
    paths[name] = str(d / f"{name}.jsonl")
    with open(paths[name], "w") as f:
      for doc in "\n".join(part).split("\n\n"):
        ids = sp.encode(doc)
        if ids:
          f.write(json.dumps({"tokens": ids, "loss_mask": [int(i >= len(ids) // 2)
                                                           for i in range(len(ids))]}) + "\n")
  return tok, paths


@pytest.fixture(scope="module")
def background(tmp_path_factory, corpus):
  """The test preset (2 seeds, 200 steps on synthetic progressions), trained and exported with
  the corpus's tokenizer."""
  workdir = str(tmp_path_factory.mktemp("lm") / "background")
  cfg = load_config("lm_train", "test", **{"corpus.tokenizer": corpus[0]})
  experiment.train(cfg, workdir)
  return cfg, workdir


def _rows(workdir: str) -> list[dict]:
  return metric_writer.read_rows(os.path.join(workdir, workdir_lib.METRICS_FILE))


def test_it_learns_the_repetitive_stream(background):
  cfg, workdir = background
  rows, uniform = _rows(workdir), math.log(cfg.model.vocab_size)
  for seed in range(cfg.num_seeds):
    first, *_, last = [r for r in rows if r["seed"] == seed]
    assert first["step"] == cfg.train.log_every and last["step"] == cfg.train.num_steps
    assert first["train/loss"] > 0.8 * uniform  # it starts near uniform (init std 0.02)
    assert last["train/loss"] < 0.5 * uniform and last["eval/loss"] < 0.5 * uniform
  assert [r["step"] for r in rows if "eval/loss" in r and r["seed"] == 0] == [100, 200]
  assert checkpointing.available_steps(
      os.path.join(workdir, workdir_lib.CHECKPOINT_DIR)) == [100, 200]


def test_resumed_run_equals_uninterrupted(background, tmp_path):
  cfg, full = background
  part = str(tmp_path / "part")
  experiment.train(cfg, part, stop_after=100)
  assert not os.path.exists(experiment.export_dir(part, 0))  # exported only when finished
  assert checkpointing.available_steps(os.path.join(part, workdir_lib.CHECKPOINT_DIR)) == [100]
  experiment.train(cfg, part)
  read = lambda d: open(os.path.join(d, workdir_lib.METRICS_FILE)).read()  # noqa: E731
  assert read(part) == read(full)
  for a, b in zip(jax.tree.leaves(experiment.trained_params(cfg, part)),
                  jax.tree.leaves(experiment.trained_params(cfg, full)), strict=True):
    np.testing.assert_array_equal(a, b)


def test_a_seed_of_the_program_is_its_solo_run(background, tmp_path):
  cfg, full = background
  solo_cfg = load_config("lm_train", "test", num_seeds=1)
  solo = str(tmp_path / "solo")
  experiment.train(solo_cfg, solo)
  # vmapped runs compile to other XLA loops than one run's: float32 rounding apart
  for a, b in zip(jax.tree.leaves(experiment.trained_params(solo_cfg, solo)),
                  jax.tree.leaves(experiment.trained_params(cfg, full)), strict=True):
    np.testing.assert_allclose(a[0], b[0], rtol=1e-3, atol=1e-4)
  want = [r for r in _rows(full) if r["seed"] == 0]
  for row, ref in zip(_rows(solo), want, strict=True):
    np.testing.assert_allclose(row["train/loss"], ref["train/loss"], rtol=1e-4)


def test_finetune_starts_at_the_exported_background(background, corpus, tmp_path):
  cfg, workdir = background
  trained = experiment.trained_params(cfg, workdir)
  ft = load_config("lm_train", "test", init_from=experiment.export_dir(workdir, 1), **{
      "corpus.source": "jsonl", "corpus.tokenizer": corpus[0],
      **{f"corpus.{k}": v for k, v in corpus[1].items()}})
  fam = family.family(ft, *experiment.packed(ft), experiment.start_params(ft))
  start = loop.jitted_init(fam.init_one)(*fam.inputs)
  for got, want in zip(jax.tree.leaves(start.params), jax.tree.leaves(trained), strict=True):
    for s in range(ft.num_seeds):  # every seed starts at background seed 1, bit for bit
      np.testing.assert_array_equal(got[s], want[1])
  np.testing.assert_array_equal(start.step, 0)
  # trained on the answer halves only: the batches' targets are about half their tokens
  rows = experiment.train(ft, str(tmp_path / "ft"))
  row_targets = ft.train.batch_size * (ft.corpus.seq_len - 1)
  assert all(r["step"] == ft.train.num_steps for r in rows)
  assert all(0.3 < r["train/targets"] / row_targets < 0.7 for r in rows)


def test_export_loads_through_gemma2_with_the_trained_logits(background):
  cfg, workdir = background
  trained = experiment.trained_params(cfg, workdir)
  trained_model = gemma2.make_model(model_lib.gemma_config(cfg.model))
  text = "def wrap(text, width=70):"
  for s in range(cfg.num_seeds):
    model, params = gemma2.load(experiment.export_dir(workdir, s), dtype=np.float32)
    sp = gemma2.load_tokenizer(experiment.export_dir(workdir, s), model)  # the trained one's
    tokens = np.asarray([[model.bos_id, *sp.encode(text)]], np.int32)
    assert sp.decode(tokens[0, 1:].tolist()) == text
    mine = jax.tree.map(lambda a, s=s: a[s], trained)
    np.testing.assert_array_equal(forward(model, params, tokens),
                                  forward(trained_model, mine, tokens))
