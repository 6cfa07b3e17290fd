"""Training a SentencePiece tokenizer.model of the kind lm/loading.py reads and hf_export writes:
Gemma's special ids, byte fallback (every string encodes), no normalisation (text round-trips).
"""

import io
import os

import sentencepiece as spm


def train(path: str, texts: list[str], vocab_size: int) -> None:
  """A byte-fallback BPE model at `path` with Gemma's special ids (pad 0, eos 1, bos 2, unk 3),
  trained on the non-blank lines of `texts`; the same texts give the same bytes (the model is
  written from memory, so no temporary file name is recorded in it)."""
  lines = [line for t in texts for line in t.splitlines() if line.strip()]
  model = io.BytesIO()
  spm.SentencePieceTrainer.train(
      sentence_iterator=iter(lines), model_writer=model, vocab_size=vocab_size,
      model_type="bpe", byte_fallback=True, pad_id=0, eos_id=1, bos_id=2, unk_id=3,
      hard_vocab_limit=False, normalization_rule_name="identity", add_dummy_prefix=False,
      remove_extra_whitespaces=False, split_digits=True, num_threads=1, minloglevel=2)
  tmp = path + ".tmp"  # written whole, then renamed: a kill leaves no torn model at `path`
  with open(tmp, "wb") as f:
    f.write(model.getvalue())
  os.replace(tmp, path)
