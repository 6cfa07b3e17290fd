"""Every student learns on the tiny hyperteacher preset, and exposes activations for probes."""

import jax
import numpy as np
import pytest

from compgen_jax.scaling import activations, runs
from compgen_jax.scaling import train as scaling_train
from compgen_jax.scaling.state import init_run
from tests.helpers import load_config

# The transformer gets a warm-up, a larger step and 400 steps for margin (id R^2 about 0.8; the
# preset's constant 3e-3 over 200 steps gives about 0.6). The identity-encoding MLP is in
# test_training. Few cases: each is a compile of its own.
TRANSFORMER = {"student.name": "transformer", "optim.learning_rate": 1e-2,
               "optim.schedule": "warmup_cosine", "optim.warmup_steps": 50,
               "train.num_steps": 400}
CASES = {
    "transformer_language": {**TRANSFORMER, "encoding.name": "language"},
    "hypernetwork": {"student.name": "hypernetwork"},
    "mlp_language": {"encoding.name": "language"},  # a bag of token counts
}


def _untrained_id_r2(cfg) -> float:
  keys, hparams = runs.run_inputs(cfg, runs.run_grid(cfg))
  states = scaling_train.make_init(cfg)(keys, hparams)
  # The loop's cached evaluator: the same compiled program that scored the trained runs.
  bits_T = scaling_train.task_bits(cfg)
  return float(np.mean(scaling_train.make_evaluate(cfg)(states, bits_T)["id/r2"]))


@pytest.mark.parametrize("case", list(CASES))
def test_student_learns(case, tmp_path):
  cfg = load_config("hyperteacher", "tiny", **CASES[case])
  rows = scaling_train.train_and_evaluate(cfg, str(tmp_path))
  trained = float(np.mean([r["id/r2"] for r in rows]))
  untrained = _untrained_id_r2(cfg)
  assert trained > 0.3, (case, trained)
  assert trained > untrained + 0.3, (case, trained, untrained)
  assert np.all(np.isfinite([r["ood/r2"] for r in rows]))


LAYERS = {"mlp": ("dense_0", "dense_1", "readout"),
          "transformer": ("block_0", "block_1", "ln_final"),
          "hypernetwork": ("generated", "hidden", "readout")}


@pytest.mark.parametrize("encoding", ["identity", "language"])
@pytest.mark.parametrize("student", list(LAYERS))
def test_probes_see_every_layer(student, encoding):
  cfg = load_config("hyperteacher", "tiny", **{"student.name": student, "encoding.name": encoding})
  hparams = {"frac_ood": 0.25, "learning_rate": 1e-3, "weight_decay": 0.0}
  split = jax.tree.map(lambda a: a[0], runs.host_splits(
      cfg, *runs.run_inputs(cfg, runs.run_grid(cfg)[:1])))
  state = jax.eval_shape(lambda k: init_run(k, hparams, cfg, split), jax.random.key(0))
  assert activations.layer_names(state, cfg) == (activations.INPUT_LAYER, *LAYERS[student])
