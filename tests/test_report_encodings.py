"""The encoding-nonlinearity report section on hand-made rows whose right answer is known: OOD
planted to follow the input decoder gives a strong correlation, a flat OOD does not, and rows
without the init scale give no section. The encoding table: tests/test_report_sections.py."""

import numpy as np

from compgen_jax.analysis import sections_encodings
from compgen_jax.analysis.aggregate import Metric

R2 = (Metric("ood/r2", "OOD R^2", "ood_r2", "id/r2"),)


def test_encoding_nonlinearity_section(tmp_path):
  # OOD planted to follow the input decoder (0.999 -> 0.37 as the scale grows); then flat.
  rng = np.random.default_rng(11)
  inputs = {0.1: 0.999, 0.9: 0.71, 1.05: 0.57, 1.5: 0.37}
  rows = [{"encoding.name": "invertible", "encoding.inn_init_scale": s, "seed": seed,
           "id/r2": 0.95, "ood/r2": 0.5 + 0.4 * d + rng.normal(0, 0.005),
           "z/input/ood_r2": d + rng.normal(0, 0.005), "z/best/ood_r2": 0.8}
          for s, d in inputs.items() for seed in range(2)]
  text, claims = sections_encodings.encoding_nonlinearity(rows, R2, str(tmp_path))
  assert claims == []  # not a claim of the paper
  assert "OOD R^2 falls with the encoding's linear decodability" in text
  assert "across runs): **yes**" in text
  assert "| invertible | 1.050 | 0.5" in text and (tmp_path / "nonlinearity_ood_r2.png").exists()
  flat = [{**r, "ood/r2": 0.77 + rng.normal(0, 0.005)} for r in rows]
  text, _ = sections_encodings.encoding_nonlinearity(flat, R2, str(tmp_path))
  assert "across runs): **no**" in text
  assert sections_encodings.encoding_nonlinearity(
      [{k: v for k, v in r.items() if k != "encoding.inn_init_scale"} for r in rows],
      R2, str(tmp_path)) == ("", [])
