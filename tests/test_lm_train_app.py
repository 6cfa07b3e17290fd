"""lm_train as an application on llm_data's corpus (issue 38): a test-sized background trained
on prose + python through experiments/train.py and exported, an expert fine-tuned from that
export on one skill with the loss on the answers only, report.py --dir writing the report; bad
llm_data fields refused before anything is built or written."""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest
import sentencepiece as spm

from compgen_jax import apps, metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.llm_data import build
from compgen_jax.lm_train import experiment, family, llm_corpus
from compgen_jax.training import loop
from compgen_jax.types import ConfigError
from tests.helpers import REPO, load_config

pytestmark = pytest.mark.xdist_group("lm_train_app")  # one worker builds the module's `background`


def _binary(name: str, *args: str) -> str:
  out = subprocess.run([sys.executable, os.path.join(REPO, "experiments", name), *args],
                       capture_output=True, text=True, cwd=REPO, timeout=600)
  assert out.returncode == 0, out.stderr[-3000:]
  return out.stdout


@pytest.fixture(scope="module")
def background(tiny_llm_data, tmp_path_factory):
  """(config, workdir) of the test background, trained and exported by the training binary."""
  data_dir = tiny_llm_data[1]
  workdir = str(tmp_path_factory.mktemp("lm_app") / "background")
  stdout = _binary("train.py", "--config=configs/lm_train.py:test_background",
                   f"--config.corpus.data_dir={data_dir}", f"--workdir={workdir}")
  assert experiment.export_dir(workdir, 0) in stdout  # the summary names the export
  return load_config("lm_train", "test_background", **{"corpus.data_dir": data_dir}), workdir


def _expert(data_dir: str, init_from: str, **overrides):
  return load_config("lm_train", "test_expert_arith", init_from=init_from,
                     **{"corpus.data_dir": data_dir, **overrides})


def test_the_answer_mask_covers_exactly_the_answer_tokens(tiny_llm_data, background):
  data_dir = tiny_llm_data[1]
  sp = spm.SentencePieceProcessor(model_file=os.path.join(data_dir, build.TOKENIZER))
  records = metric_writer.read_rows(os.path.join(data_dir, build.split_file("arith", "train")))
  cfg = _expert(data_dir, experiment.export_dir(background[1], 0))
  docs, masks = llm_corpus.tokenized(cfg)
  assert len(docs) == len(records)
  for doc, mask, record in zip(docs, masks, records, strict=True):
    doc, mask = np.asarray(doc), np.asarray(mask)
    # the masked-in tokens read back as the worked answer, the rest as the benchmark's prompt
    assert sp.decode(doc[mask == 1].tolist()) == " " + record["answer"]
    assert sp.decode(doc[mask == 0].tolist()) == f"Question: {record['question']}\nAnswer:"
    assert mask[0] == 0 and mask[-1] == 1 and np.all(np.diff(mask) >= 0)  # one prompt, answer
  # without answer_only every token counts; the background's sources count everything too
  whole = llm_corpus.tokenized(_expert(data_dir, "x", **{"corpus.answer_only": False}))
  assert whole[0] == docs and all(set(m) == {1} for m in whole[1])
  assert all(set(m) == {1} for m in llm_corpus.tokenized(background[0])[1])


def test_held_out_documents_are_disjoint_and_the_rest_train(background):
  cfg = background[0]
  docs, _ = llm_corpus.tokenized(cfg)
  (train, _), (held, _) = llm_corpus.documents(cfg)
  assert len(held) == cfg.corpus.num_held_out and len(train) + len(held) == len(docs)
  assert sorted(map(tuple, train + held)) == sorted(map(tuple, docs))


def test_expert_starts_at_the_background_and_report_binary_writes_its_report(
    tiny_llm_data, background, tmp_path):
  bg_cfg, bg_dir = background
  trained = experiment.trained_params(bg_cfg, bg_dir)
  cfg = _expert(tiny_llm_data[1], experiment.export_dir(bg_dir, 0))
  fam = family.family(cfg, *experiment.packed(cfg), experiment.start_params(cfg))
  start = loop.jitted_init(fam.init_one)(*fam.inputs)
  for got, want in zip(jax.tree.leaves(start.params), jax.tree.leaves(trained), strict=True):
    np.testing.assert_array_equal(got[0], want[0])  # bit for bit the background's weights
  np.testing.assert_array_equal(start.step, 0)
  workdir = str(tmp_path / "expert")
  summary = apps.of_config(cfg).run(cfg, workdir)
  assert experiment.export_dir(workdir, 0) in summary
  # the export carries llm_data's tokenizer, byte for byte
  with open(os.path.join(experiment.export_dir(workdir, 0), build.TOKENIZER), "rb") as a, \
      open(os.path.join(tiny_llm_data[1], build.TOKENIZER), "rb") as b:
    assert a.read() == b.read()
  path = _binary("report.py", f"--dir={workdir}").strip().splitlines()[-1]
  assert path == os.path.join(workdir, workdir_lib.REPORT_FILE)
  text = open(path).read()
  rows = metric_writer.read_rows(os.path.join(workdir, workdir_lib.METRICS_FILE))
  last = rows[-1]
  assert f"sources arith of {tiny_llm_data[1]} (loss on the answers only)" in text
  assert f"fine-tuned from {cfg.init_from}" in text
  assert f"{last['train/loss']:.4g}" in text and f"{last['eval/loss']:.4g}" in text
  assert [r["step"] for r in rows] == list(range(10, cfg.train.num_steps + 1, 10))
  assert os.path.isfile(os.path.join(workdir, workdir_lib.CURVES_FILE))


@pytest.mark.parametrize("overrides, field", [
    ({"model.vocab_size": 400}, "model.vocab_size"),
    ({"init_from": ""}, "init_from"),
    ({"corpus.data_dir": ""}, "corpus.data_dir"),
    ({"corpus.sources": ("arith", "poems")}, "corpus.sources"),
    ({"corpus.tokenizer": "/tmp/tokenizer.model"}, "corpus.tokenizer"),
    ({"data.arith.num_train": 0}, "data.arith.num_train"),
])
def test_bad_llm_data_fields_are_refused_before_anything_is_written(overrides, field, tmp_path):
  cfg = load_config("lm_train", "test_expert_arith", **{
      "corpus.data_dir": str(tmp_path / "data"), "init_from": str(tmp_path), **overrides})
  with pytest.raises(ConfigError, match=f"config field '{field}'"):
    experiment.train(cfg, str(tmp_path / "w"))
  assert sorted(os.listdir(tmp_path)) == []


def test_saved_config_records_the_corpus_it_trained_on(background):
  cfg, workdir = background
  saved = json.load(open(os.path.join(workdir, workdir_lib.CONFIG_FILE)))
  assert saved["corpus"]["source"] == "llm_data"
  assert saved["data"] == json.loads(json.dumps(workdir_lib.config_dict(cfg)))["data"]
