"""Input-decoder R^2 of the invertible encoding for each init scale and layer count: the ridge
probe of experiments/probe.py (probes.make_probe, layer 'input' = phi(z) -> z) on freshly
initialised runs, over the config's seeds. Prints a markdown table (docs/evaluation.md).

  python benchmarks/invertible_calibration.py                     # M=16, K=3, frac_ood 0.25
  python benchmarks/invertible_calibration.py --scales=0.1,1.1 --layers=3,4

The input decoder reads phi(z) only, so no student is trained: the student is shrunk to one
narrow layer to keep the forward pass cheap (the encoding and probe streams do not depend on it).
"""

import jax
import numpy as np
from absl import app, flags
from ml_collections import config_flags

from compgen_jax.scaling import activations, probes, runs
from compgen_jax.scaling import train as scaling_train

_CONFIG = config_flags.DEFINE_config_file("config", "configs/hyperteacher.py:paper",
                                          "Base config (task, probe and seeds).")
_SCALES = flags.DEFINE_list("scales", ["0.1", "0.5", "0.9", "1.0", "1.05", "1.1", "1.2", "1.5"],
                            "encoding.inn_init_scale values.")
_LAYERS = flags.DEFINE_list("layers", ["3"], "encoding.inn_layers values.")


def input_decoder_r2(cfg) -> dict[str, np.ndarray]:
  """{'id', 'ood': [R]}: the input decoder's R^2 (lambda = the first probe.lambdas) per run."""
  cfg = cfg.copy_and_resolve_references()
  with cfg.unlocked():
    cfg.encoding.name = "invertible"
    cfg.student.name = "mlp"
    cfg.student.mlp.update(width=8, depth=1, widths=())
  grid = runs.precompute_splits(cfg, runs.run_grid(cfg))
  states = scaling_train.make_init(cfg)(*runs.run_inputs(cfg, grid))
  result = probes.make_probe(cfg)(states, scaling_train.task_bits(cfg))
  names = activations.layer_names(jax.tree.map(lambda a: jax.ShapeDtypeStruct(
      a.shape[1:], a.dtype), states), cfg)
  layer = names.index(activations.INPUT_LAYER)
  return {split: np.asarray(result[f"z/{split}"])[:, layer, 0] for split in probes.SPLITS}


def main(argv):
  del argv
  base = _CONFIG.value
  print(f"M={base.task.num_modules}, K={base.task.max_hotness}, frac_ood={base.task.frac_ood}, "
        f"{base.num_seeds} encoder seeds from {base.seed}, {base.probe.num_tasks} probe tasks, "
        f"lambda {base.probe.lambdas[0]}\n")
  print("| inn_layers | inn_init_scale | input-decoder R^2, ID: mean +- sd (min-max) | OOD: mean |")
  print("|---|---|---|---|")
  for layers in _LAYERS.value:
    for scale in _SCALES.value:
      cfg = base.copy_and_resolve_references()
      cfg.encoding.update(inn_layers=int(layers), inn_init_scale=float(scale))
      r2 = input_decoder_r2(cfg)
      id_r2 = r2["id"]
      print(f"| {layers} | {scale} | {id_r2.mean():.3f} +- {id_r2.std(ddof=1):.3f} "
            f"({id_r2.min():.3f}-{id_r2.max():.3f}) | {r2['ood'].mean():.3f} |", flush=True)


if __name__ == "__main__":
  app.run(main)
