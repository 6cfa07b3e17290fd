"""The sweep report's sections on hand-made rows whose right answer is known: data scaling, the
scaling law's exponent interval, (partial) decodability, per-layer decodability, task support,
model size and the encoding table, the tasks-needed ordering, and claims.json (rendered and
regenerated). Transformer vs MLP: tests/test_report_students.py; encoding nonlinearity:
tests/test_report_encodings.py. The rules themselves: tests/test_verdicts.py."""

import json
import math
import os

import numpy as np
import pytest
from scipy import stats

from compgen_jax.analysis import (
  aggregate,
  correlations,
  sections_data,
  sections_encodings,
  sections_law,
  sections_layers,
  sections_model,
  sweep_report,
)
from compgen_jax.analysis import claims as claims_table
from compgen_jax.analysis import sections_support as support
from compgen_jax.analysis.aggregate import Metric
from compgen_jax.tasks import combinatorics

R2 = (Metric("ood/r2", "OOD R^2", "ood_r2", "id/r2"),)


# ------------------------------------------------------------------------------------------
# Sections on hand-made rows


def _data_rows(rng, means_by_mk: dict, sd=0.01, seeds=3, id_r2=0.95) -> list[dict]:
  return [{"task.num_modules": M, "task.max_hotness": K, "n_train": n, "frac_ood": 0.5,
           "seed": s, "ood/r2": m + rng.normal(0, sd), "id/r2": id_r2, "program": f"M{M}"}
          for (M, K), curve in means_by_mk.items() for n, m in curve for s in range(seeds)]


def _claim(claims, start):
  return next(c for c in claims if c["claim"].startswith(start))


def test_data_scaling_verdicts(tmp_path):
  rng = np.random.default_rng(4)
  up = [(8, 0.5), (16, 0.7), (32, 0.96)]
  text, claims = sections_data.data_scaling(_data_rows(rng, {(5, 2): up, (6, 2): up}), R2,
                                            str(tmp_path))
  rises = _claim(claims, "OOD R^2 rises")
  assert rises["verdict"] == "shown" and rises["seeds"] == 3
  assert rises["figure"] == "data_scaling_ood_r2.png" and (tmp_path / rises["figure"]).exists()
  assert rises["note"] == "id/r2 >= 0.9 in 18 of 18 runs"
  # the rules before the numbers
  assert text.index("**Rules:**") < text.index("**This run:**") < text.index("| M | K | points")
  assert "ID R^2 | OOD R^2 | ID - OOD" in text
  assert "mean ± s.d. over 3 seeds" in text
  dip = [(8, 0.5), (16, 0.8), (32, 0.6)]
  _, claims = sections_data.data_scaling(_data_rows(rng, {(5, 2): up, (6, 2): dip}), R2,
                                         str(tmp_path))
  assert _claim(claims, "OOD R^2 rises")["verdict"] == "partial"
  text, claims = sections_data.data_scaling(_data_rows(rng, {(5, 2): up}, seeds=1), R2,
                                            str(tmp_path))
  assert {c["verdict"] for c in claims} == {"not judged"}
  assert "one seed, no error bars" in text


def _law_rows(rng, exponent: float, noise: float, Ms=(5, 6, 7, 8, 9), seeds=2) -> list[dict]:
  """OOD / ID linear in log n_train per (M, K), crossing 0.9 at n* = 0.5 T^exponent (times a
  lognormal factor of s.d. `noise` per setting)."""
  rows = []
  for M in Ms:
    T = combinatorics.num_tasks(M, 3)
    n_star = 0.05 * T**exponent * math.exp(rng.normal(0, noise))
    for n in np.geomspace(n_star / 4, n_star * 4, 5):
      rows += [{"student.name": "mlp", "task.num_modules": M, "task.max_hotness": 3,
                "n_train": float(n), "seed": s, "id/r2": 0.9,
                "ood/r2": 0.9 * (0.9 + 0.1 * math.log(n / n_star)) + 1e-4 * s}
               for s in range(seeds)]
  return rows


@pytest.mark.parametrize("exponent, noise, Ms, verdict", [
    (0.6, 0.02, (5, 6, 7, 8, 9), "shown"),
    (1.2, 0.02, (5, 6, 7, 8, 9), "not shown"),
    (0.9, 0.5, (5, 6, 7), "not judged"),  # 3 points, noisy: the interval holds 1
])
def test_scaling_law_exponent_interval(tmp_path, exponent, noise, Ms, verdict):
  rng = np.random.default_rng(5)
  text, claims = sections_law.scaling_law(_law_rows(rng, exponent, noise, Ms), R2,
                                           str(tmp_path))
  (claim,) = claims
  assert claim["verdict"] == verdict, claim
  fit = text.split("tasks needed = ", 1)[1]
  assert abs(float(fit.split("T^")[1].split(",")[0]) - exponent) < (0.05 if noise < 0.1 else 1)
  assert "fixed before the data" in text and text.index("Rules:") < text.index("tasks needed =")


def test_decodability_partial_correlation_can_say_no(tmp_path):
  rng = np.random.default_rng(6)
  n = np.repeat([8.0, 16.0, 32.0, 64.0], 10)
  fit = 0.2 * np.log(n)
  base = {"task.num_modules": 8, "task.max_hotness": 2, "program": "p", "encoding.name": "id"}
  # Decodability and OOD both follow how well the students fit (ID), independently noisy given
  # it: a strong r that the partial r given ID takes away.
  rows = [{**base, "n_train": ni, "seed": i, "id/r2": f + rng.normal(0, 0.005),
           "z/best/ood_r2": f + rng.normal(0, 0.02), "ood/r2": f + rng.normal(0, 0.02)}
          for i, (ni, f) in enumerate(zip(n, fit, strict=True))]
  text, (claim,) = sections_model.decodability(rows, R2, str(tmp_path))
  assert "(partial r of task decodability with OOD R^2 given ID R^2): **no**" in text
  assert claim["verdict"] == "not shown" and "Pearson r = 0.9" in claim["ours"]
  assert "40 clusters" in claim["ours"]  # (program, seed): every run its own here
  ours = correlations.correlation([r["z/best/ood_r2"] for r in rows],
                                 [r["ood/r2"] for r in rows])
  assert ours.r == pytest.approx(stats.pearsonr([r["z/best/ood_r2"] for r in rows],
                                                [r["ood/r2"] for r in rows]).statistic)
  # OOD driven by decodability itself, beyond the fit: the partial r stays strong.
  for r in rows:
    r["ood/r2"] = r["z/best/ood_r2"] + rng.normal(0, 0.005)
  _, (claim,) = sections_model.decodability(rows, R2, str(tmp_path))
  assert claim["verdict"] == "shown"


def _layer_rows(fail_profiles, succeed_profiles) -> list[dict]:
  rows = []
  for ok, profiles in ((False, fail_profiles), (True, succeed_profiles)):
    for i, profile in enumerate(profiles):
      rows.append({"encoding.name": "identity", "student.mlp.depth": len(profile), "seed": i,
                   "student.name": "mlp", "student.mlp.width": 64,
                   "program": "p", "n_train": 10, "id/r2": 0.95, "ood/r2": 0.9 if ok else 0.4,
                   "z/input/ood_r2": 1.0, "z/readout/ood_r2": 0.1, "z/best/ood_r2": max(profile),
                   **{f"z/dense_{j}/ood_r2": v for j, v in enumerate(profile)}})
  return rows


def test_layers_failing_runs_lose_the_constituents(tmp_path):
  fail = [(0.9, 0.6, 0.4), (0.88, 0.62, 0.38), (0.91, 0.58, 0.42)]
  succeed = [(0.95, 0.94, 0.93), (0.96, 0.95, 0.95)]
  text, (claim,) = sections_layers.layers(_layer_rows(fail, succeed), R2, str(tmp_path))
  assert claim["verdict"] == "shown" and (tmp_path / claim["figure"]).exists()
  assert sections_layers.hidden_layers(_layer_rows(fail, succeed)) == [
      "dense_0", "dense_1", "dense_2"]
  assert "| mlp 3x64 | failing | 3 |" in text and "dense_2: 0.400 ± 0.020" in text
  flat = [(0.6, 0.61, 0.6), (0.58, 0.6, 0.59), (0.61, 0.6, 0.62)]
  _, (claim,) = sections_layers.layers(_layer_rows(flat, succeed), R2, str(tmp_path))
  assert claim["verdict"] == "not shown"  # lower than succeeding runs, but no loss with depth
  # issue 57: succeeding runs that lose as much with depth leave nothing to the failing ones
  both = [(0.95, 0.7, 0.45), (0.96, 0.72, 0.47)]
  text, (claim,) = sections_layers.layers(_layer_rows(fail, both), R2, str(tmp_path))
  did = np.mean([p[-1] - p[0] for p in both]) - np.mean([p[-1] - p[0] for p in fail])
  assert claim["verdict"] == "not shown" and f"succeeding - failing {did:+.3f}" in claim["ours"]
  # judged within each (M, K): a cell with one group only is not testable
  rows = _layer_rows(fail, succeed)
  for r in rows:
    r.update({"task.num_modules": 8, "task.max_hotness": 2 if r["ood/r2"] < 0.9 else 3})
  _, (claim,) = sections_layers.layers(rows, R2, str(tmp_path))
  assert claim["verdict"] == "not testable here" and "M=8, K=2: not testable (3 failing, 0 " \
      "succeeding)" in claim["ours"]
  for few in (_layer_rows(fail[:1], succeed), _layer_rows(fail, succeed[:1])):
    _, (claim,) = sections_layers.layers(few, R2, str(tmp_path))
    assert claim["verdict"] == "not testable here"
  # Runs of an architecture that does not fit are left out: nothing to compare.
  unfit = [{**r, "id/r2": 0.5} for r in _layer_rows(fail, succeed)]
  text, (claim,) = sections_layers.layers(unfit, R2, str(tmp_path))
  assert claim["verdict"] == "not testable here" and "no architecture fits" in claim["note"]
  unprobed = [{k: v for k, v in r.items() if not k.startswith("z/")}
              for r in _layer_rows(fail, succeed)]
  text, (claim,) = sections_layers.layers(unprobed, R2, str(tmp_path))
  assert text == "" and claim["verdict"] == "not judged" and claim["figure"] is None


def test_task_support_one_seed_is_not_judged(tmp_path):
  rows = [{"task.support": s, "task.max_hotness": 2, "frac_ood": 0.5, "n_train": 10,
           "n_ood": 5, "seed": 0, "ood/r2": v, "id/r2": 0.95}
          for s, v in (("random", 0.9), ("non_compositional", 0.2))]
  text, (claim,) = support.task_support(rows, R2, str(tmp_path))
  assert claim["verdict"] == "not judged" and "one seed, no error bars" in text


# ------------------------------------------------------------------------------------------
# claims.json and determinism


def test_render_writes_claims_json_and_regenerates_byte_identically(tmp_path):
  rng = np.random.default_rng(7)
  rows = _data_rows(rng, {(5, 2): [(8, 0.5), (16, 0.7)]})
  for r in rows:
    r["workdir"] = str(tmp_path / "wd")
  index = {"spec": "configs/sweeps/data_scaling.py:cpu", "name": "d", "base": "b",
           "launcher": "local", "updated": "-", "sweep_dir": str(tmp_path), "programs": []}
  outputs = []
  for out in ("a", "b"):
    out_dir = str(tmp_path / out)
    text = sweep_report.render(index, rows, out_dir, str(tmp_path))
    files = {f: open(os.path.join(out_dir, f), "rb").read() for f in sorted(os.listdir(out_dir))}
    outputs.append((text, files))
  assert outputs[0] == outputs[1]
  raw = outputs[0][1]["claims.json"]
  claims = json.loads(raw)
  assert raw.endswith(b"\n") and raw == (json.dumps(claims, sort_keys=True, indent=1,
                                                    ensure_ascii=False) + "\n").encode()
  assert claims and all(set(c) == set(claims_table.CLAIM_KEYS) for c in claims)
  assert {c["experiment"] for c in claims} == {"data_scaling"}
  assert all(c["verdict"] in ("shown", "partial", "not shown", "not judged") for c in claims)
  assert all(isinstance(c["seeds"], int) for c in claims)
  assert "2 points: one comparison" in outputs[0][0]


def _model_rows(rng, seeds: int, slope: float = 0.1) -> list[dict]:
  return [{"encoding.name": enc, "student.mlp.depth": d, "student.mlp.width": w, "seed": s,
           "program": f"{enc}_{d}_{w}", "n_train": 522, "task.num_modules": 16,
           "task.max_hotness": 3, "frac_ood": 0.25, "id/r2": 0.97,
           "ood/r2": 0.5 + slope * (np.log2(w / 32) + d / 2) + rng.normal(0, 0.005),
           "z/best/ood_r2": 0.9, "z/input/ood_r2": 1.0}
          for enc in ("identity", "few_shot") for d in (2, 4) for w in (32, 64, 128)
          for s in range(seeds)]


def test_model_size_and_encoding_table(tmp_path):
  rng = np.random.default_rng(8)
  text, claims = sections_model.model_size(_model_rows(rng, 3), R2, str(tmp_path))
  assert [c["verdict"] for c in claims] == ["shown", "shown"]  # width, then depth
  assert "| identity | width 32 | depth | 3 | yes | 2 points: one comparison" in text
  _, claims = sections_model.model_size(_model_rows(rng, 3, slope=0.0), R2, str(tmp_path))
  assert [c["verdict"] for c in claims] == ["not shown", "not shown"]  # flat: noise only
  _, claims = sections_model.model_size(_model_rows(rng, 1), R2, str(tmp_path))
  assert [c["verdict"] for c in claims] == ["not judged", "not judged"]
  # The cpu preset's shape: depth 2 only at the widest width (one point: not a width curve).
  rows = [r for r in _model_rows(rng, 3)
          if r["student.mlp.depth"] == 4 or r["student.mlp.width"] == 128]
  text, claims = sections_model.model_size(rows, R2, str(tmp_path))
  assert [c["verdict"] for c in claims] == ["shown", "shown"]
  assert "| identity | depth 2 | width |" not in text
  text, claims = sections_encodings.encoding_table(_model_rows(rng, 3), R2, str(tmp_path))
  few = _claim(claims, "few-shot")
  assert few["paper"] == "OOD 0.97, task decoder 0.90, input decoder -0.23"
  # OOD 0.5 + 0.1 * (2 + 2) = 0.9, the bar itself: not judged; task decoder 0.9 exactly: yes
  assert few["verdict"] == "partial"
  assert "MLP 4x128" in few["note"] and (tmp_path / "encoding_table.png").exists()


def test_model_size_extrapolates_width_and_claims_only_swept_axes(tmp_path):
  # encoding_width's shape: one depth. Seed means exactly 0.60 / 0.70 / 0.75 (seeds at +-0.002).
  means = {"invertible": {128: 0.60, 256: 0.70, 512: 0.75},
           "few_shot": {128: 0.40, 256: 0.50, 512: 0.49}}
  rows = [{"encoding.name": enc, "student.mlp.depth": 4, "student.mlp.width": w, "seed": s,
           "id/r2": 0.95, "ood/r2": m + (0.002 if s else -0.002)}
          for enc, curve in means.items() for w, m in curve.items() for s in range(2)]
  text, claims = sections_model.model_size(rows, R2, str(tmp_path))
  # No depth is swept: a width claim alone, and no depth verdict line.
  assert [c["claim"] for c in claims] == [
      "OOD R^2 rises with the student's width, for every encoding"]
  assert "rises with depth" not in text
  # By hand: +0.05 per doubling from 0.75 at 512 reaches 0.9 three doublings later, at 4096; a
  # last doubling that lost ground never gets there.
  assert "| 0.050 | 4,096 |" in text.split("| invertible | depth 4 | width |")[1].splitlines()[0]
  assert "| -0.010 | never |" in text.split("| few_shot | depth 4 | width |")[1].splitlines()[0]


def test_fewer_tasks_needed():
  def c(*xs, bound=False):
    return [aggregate.Crossing(x, bound) for x in xs]
  nan = math.nan
  assert sections_data.fewer_needed(c(10, 11, 12), c(40, 44, 38)).ok is True
  assert sections_data.fewer_needed(c(40, 44, 38), c(10, 11, 12)).ok is False
  assert sections_data.fewer_needed(c(10, 40), c(12, 38)).ok is False  # noise only
  assert sections_data.fewer_needed(c(10, 11), c(nan, nan)).ok is True  # b never reaches it
  assert sections_data.fewer_needed(c(nan, nan), c(10, 11)).ok is False
  assert sections_data.fewer_needed(c(nan, nan), c(nan, nan)).ok is None
  assert sections_data.fewer_needed(c(10, nan), c(nan, nan)).ok is None  # a mix
  assert sections_data.fewer_needed(c(10, 11), c(20, 20, bound=True)).ok is None
  assert sections_data.fewer_needed(c(10), c(40)).ok is None  # one seed


def test_data_scaling_keeps_widths_apart(tmp_path):
  rng = np.random.default_rng(10)
  rows = []
  for width, offset in ((32, 0.0), (128, 0.2)):  # the wider student 0.2 higher everywhere
    part = _data_rows(rng, {(16, 3): [(8, 0.4 + offset), (16, 0.5 + offset),
                                       (32, 0.6 + offset)]})
    rows += [{**r, "student.mlp.width": width, "student.mlp.depth": 4} for r in part]
  text, claims = sections_data.data_scaling(rows, R2, str(tmp_path))
  assert "| 16 | 3 | 32 | 3 | 3 | yes |" in text and "| 16 | 3 | 128 | 3 | 3 | yes |" in text
  assert "| 16 | 3 | 696 | 32 | 8 | 0.500 |" in text  # frac_ood cell follows n_train
  assert _claim(claims, "OOD R^2 rises with the student's width")["verdict"] == "shown"
  pooled = [{**r, "student.mlp.width": 64} for r in rows]  # one width: no trend claim
  _, claims = sections_data.data_scaling(pooled, R2, str(tmp_path))
  assert not [c for c in claims if "width" in c["claim"]]

