"""The toys' claims rows (letters/claims.py, images/claims.py) on planted rows: which runs each
claim reads, its verdict by the registered rules (intervals recomputed here with scipy), both
readings, and the post-hoc mark; the records are in the claims table's format."""

import json
import math

import numpy as np
from scipy import stats

from compgen_jax.analysis import claims as claims_table
from compgen_jax.analysis import verdicts
from compgen_jax.images import analysis as images_analysis
from compgen_jax.images import claims as images_claims
from compgen_jax.letters import claims as letters_claims

T2 = stats.t.ppf(0.975, 2)  # three seeds


def _t_interval(values) -> tuple[float, float]:
  x = np.asarray(values, np.float64)
  half = T2 * x.std(ddof=1) / math.sqrt(x.size)
  return x.mean() - half, x.mean() + half


def _cfg(preset="authors", layout="position", init="independent", model_init="gpt2"):
  return {"preset": preset, "data": {"layout": layout}, "init": init,
          "model": {"init": model_init}}


def _length_rows(comp: dict, single=1.0, joint=0.0) -> list[dict]:
  """Length rows 1..32 for 3 seeds: comp {length: [per seed]} (1.0 elsewhere), the single
  models (background, one expert) at `single` and the joint model at `joint`."""
  rows = []
  for n in range(1, 33):
    for s in range(3):
      rows += [{"model": m, "length": n, "seed": s, "exact_match": v} for m, v in (
          ("background", single), ("A>B", single), ("joint", joint),
          ("composition", comp.get(n, [1.0] * 3)[s]))]
  return rows


def _sub(pairs: dict) -> list[dict]:
  return [{"pair": p, "seed": s, "exact_match": v} for p, em in pairs.items()
          for s, v in enumerate(em)]


def _runs() -> dict:
  return {
      "authors_position_gpt2": {
          "config": _cfg(), "substitution": _sub({"A>B,C>D": [1.0, 1.0, 1.0],
                                                  "A>K,M>B": [0.8, 0.82, 0.81]}),
          "length": _length_rows({16: [0.9, 0.9, 0.9], 20: [0.9, 0.8, 0.85]})},
      "authors_position_independent": {
          "config": _cfg(model_init="flax"), "substitution": _sub({"A>B,C>D": [1.0] * 3}),
          "length": _length_rows({n: [0.5, 0.6, 0.7] for n in range(17, 33)})},
      "authors_aligned_k_experts": {
          "config": _cfg(layout="aligned", model_init="flax"),
          "k_experts": [{"k": k, "seed": s, "exact_match": v, "max_p_eos_elsewhere": 0.1 * k}
                        for k, em in ((1, [1.0] * 3), (2, [1.0] * 3), (3, [0.95, 0.5, 0.3]),
                                      (4, [0.0, 0.01, 0.0])) for s, v in enumerate(em)]},
      # not the authors' preset: read by no claim
      "quick_full": {"config": _cfg(preset="quick"), "substitution": _sub({"A>B,C>D": [0.1] * 3}),
                     "k_experts": [{"k": 2, "seed": s, "exact_match": 0.0,
                                    "max_p_eos_elsewhere": 1.0} for s in range(3)]},
  }


def test_letters_claims_follow_the_rules_on_planted_rows(tmp_path):
  exact, length, k = letters_claims.claims(_runs())
  # 100 %: 3 (run, pair) settings of the authors preset (quick_full left out); A>K,M>B's
  # interval lies below NEAR_ONE, the others' are exactly 1 (p = 0, so a yes survives Holm)
  assert _t_interval([0.8, 0.82, 0.81])[1] < 0.95
  assert exact["verdict"] == verdicts.PARTIAL and "3 (run, pair) settings" in exact["ours"]
  assert "0.810 to 1.000" in exact["ours"] and "2 of 3 yes" in exact["ours"]
  # against the paper: the own setting's per-seed mean over both pairs, 0.905 on average
  per_seed = np.mean([[1.0, 1.0, 1.0], [0.8, 0.82, 0.81]], axis=0)
  low, high = _t_interval(per_seed)
  assert f"ours {per_seed.mean():.3f} [{low:.3f}, {high:.3f}]" in exact["against_paper"]
  assert f"short by {1 - per_seed.mean():.3f}" in exact["against_paper"]
  # composition: single models on their own tasks (the joint model left out) against the
  # composition at length 16, over the two authors runs with length rows (6 run-seeds)
  assert "ID 1.000, OOD 0.950 ± 0.055" in exact["composition"]
  assert "over 6 runs" in exact["composition"]
  # every length: 30 of 32 lengths clear NEAR_ONE; 16 lies below it (0.9 on every seed), 20
  # is not told apart from it
  assert _t_interval([0.9, 0.8, 0.85])[1] > 0.95
  assert length["verdict"] == verdicts.PARTIAL and "30 of 32 yes, 1 not judged" in length["ours"]
  untrained = np.array([[1.0] * 15 + [v] for v in (0.9, 0.8, 0.85)]).mean(axis=1)
  low, high = _t_interval(untrained)
  assert f"ours {untrained.mean():.3f} [{low:.3f}, {high:.3f}]" in length["against_paper"]
  assert "with flax's init, authors_position_independent: 0.600" in length["ours"]
  # k experts: k = 3 vs k = 2 paired by seed reaches 0 (no), k = 4 lies above (yes) -> partial
  d3, d4 = 1 - np.array([0.95, 0.5, 0.3]), 1 - np.array([0.0, 0.01, 0.0])
  assert _t_interval(d3)[0] < 0 < _t_interval(d4)[0]
  assert k["verdict"] == verdicts.PARTIAL and "1 of 2 yes" in k["ours"]
  assert "k = 4: 0.4" in k["composition"] and "k = 1 (one expert" in k["composition"]
  assert k["against_paper"] == "the paper gives a direction, no value: ours agrees in part"
  for c in (exact, length, k):
    assert c["experiment"] == "letters" and letters_claims.POST_HOC in c["claim"]
  # the claims table reads them
  (tmp_path / "letters").mkdir()
  for png in ("em.png", "length.png"):
    (tmp_path / "letters" / png).write_bytes(b"png")
  (tmp_path / "letters" / "claims.json").write_text(claims_table.claims_json([exact, length, k]))
  assert len(claims_table.read_claims(str(tmp_path / "letters" / "claims.json"))) == 3


def test_letters_claims_without_rows_are_not_judged():
  records = letters_claims.claims({"quick_full": _runs()["quick_full"]})
  assert [c["verdict"] for c in records] == [verdicts.NOT_JUDGED] * 3


def _image_rows(programs: dict) -> list[dict]:
  """programs {name: {coverage: [per seed success]}}; ID success 0.8 - coverage, decodability
  the success plus a small per-run offset."""
  rows = []
  for p, (name, levels) in enumerate(programs.items()):
    for c, success in levels.items():
      for s, v in enumerate(success):
        rows.append({"program": name, "seed": s, "coverage": c, "ood/success": v,
                     "id/success": 0.8 - c + 0.01 * ((s + p) % 3),
                     images_analysis.DECODABILITY[0]: v + 5e-4 * ((3 * s + p + c * 8) % 5)})
  return rows


def test_images_claims_follow_the_rules_on_planted_rows():
  rising = {0.125: [0.1, 0.11, 0.12], 0.25: [0.3, 0.31, 0.32], 0.5: [0.5, 0.52, 0.51]}
  dipping = {0.125: [0.1, 0.11, 0.12], 0.25: [0.05, 0.31, 0.32], 0.5: [0.4, 0.42, 0.41]}
  rows = _image_rows({"width-256": dipping, "width-512": rising})
  rises, decodable = images_claims.claims(rows, "s.png", "d.png")
  assert rises["verdict"] == verdicts.PARTIAL  # width-512 rises, width-256's seed 0 falls
  assert "width-256: 3 points" in rises["note"] and "seed 0 at step 1" in rises["note"]
  assert "width-512: 0.110 -> 0.310 -> 0.510 (rises)" in rises["ours"]
  assert "width-256: 0.110 -> 0.227 -> 0.410 (not shown: 3 points" in rises["ours"]
  assert "ID success by coverage width-256: 0.685 -> 0.560 -> 0.310" in rises["composition"]
  assert "it falls at every width" in rises["composition"]
  low, high = _t_interval([0.5, 0.52, 0.51])
  assert f"ours 0.510 [{low:.3f}, {high:.3f}] (width-512)" in rises["against_paper"]
  # 2 programs x 3 seeds = 6 clusters: fewer than MIN_CLUSTERS, so not judged
  assert decodable["verdict"] == verdicts.NOT_JUDGED
  assert "6 (program, seed) clusters" in decodable["against_paper"]
  for c in (rises, decodable):
    assert c["experiment"] == "images" and images_claims.POST_HOC in c["claim"]
    json.dumps(c)


def test_images_decodability_is_judged_on_the_partial_r_given_id():
  levels = {0.125: [0.1, 0.2, 0.15], 0.25: [0.3, 0.35, 0.4], 0.5: [0.5, 0.6, 0.55]}
  rows = _image_rows({f"w{i}": levels for i in range(4)})  # 12 (program, seed) clusters
  decodable = images_claims.decodability_claim(rows, "d.png")
  x, y, z = (np.array([r[k] for r in rows]) for k in (images_analysis.DECODABILITY[0],
                                                      "ood/success", "id/success"))
  design = np.stack([np.ones_like(z), z], 1)
  resid = lambda v: v - design @ np.linalg.lstsq(design, v, rcond=None)[0]
  partial = np.corrcoef(resid(x), resid(y))[0, 1]
  assert f"given ID: r = {partial:.3f} [" in decodable["ours"]
  assert "12 clusters" in decodable["ours"]
  assert partial > 0.99 and decodable["verdict"] == verdicts.SHOWN
