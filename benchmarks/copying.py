"""In-context copying of a Gemma-2 export (lm_train/copying.py; measured:
results/cpu/llm_cpu_pilot/NOTES.md): greedy
next-token accuracy on held-out repeat documents (`line\\nline`, lines from llm_data's
repeated_passages at --seed), on the second copy's tokens against the first copy's.

  python benchmarks/copying.py --export=W/background/export/seed_0 --data_dir=W/data
  python benchmarks/copying.py --export=E --data_dir=D --count=64 --seed=99

Prints the two accuracies; second >> first means the model copies in context. A missing export,
tokenizer or corpus is a one-line error (exit status 2) before any forward pass.
"""

from absl import app, flags

from compgen_jax import cli
from compgen_jax.lm_train import copying

_EXPORT = flags.DEFINE_string("export", None, "Gemma-2 HF directory (config.json, "
                              "*.safetensors), e.g. <workdir>/background/export/seed_0",
                              required=True)
_DATA = flags.DEFINE_string("data_dir", None, "llm_data's directory (prose.jsonl for the lines, "
                            "tokenizer.model), e.g. <llm_study workdir>/data", required=True)
_COUNT = flags.DEFINE_integer("count", copying.COUNT, "repeat documents")
_SEED = flags.DEFINE_integer("seed", copying.SEED, "repeated_passages' seed (training reads 0)")
_BATCH = flags.DEFINE_integer("batch", copying.BATCH, "documents per forward")


def main(argv):
  del argv
  with cli.user_errors():
    r = copying.measure(_EXPORT.value, _DATA.value, _COUNT.value, _SEED.value, _BATCH.value)
  print(f"{_EXPORT.value}: {_COUNT.value} repeat docs (seed {_SEED.value}): "
        f"second copy {r.second:.3f}, first copy {r.first:.3f}")


if __name__ == "__main__":
  app.run(main)
