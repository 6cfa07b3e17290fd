"""Pilot (issue 55): each model's answers in the benchmark's format on the validation split,
computed from the committed per-problem rows by the scorers' own definitions (llm_eval: gsm8k
strict "#### n", exact_match's non-empty first line, evalplus._has_body of the sanitized
program), since these rows were scored before the scorers wrote `format_valid`.

  python results/cpu/llm_recipes_pilot/long/format_check.py
"""
import json
import os

from compgen_jax.llm_eval import evalplus, exact_match, gsm8k

HERE = os.path.dirname(os.path.abspath(__file__))


def _valid(bench: str, row: dict) -> bool:
  if bench == "arith":
    return gsm8k.extract_strict(row["completion"]) is not None
  if bench == "strings":
    return bool(exact_match.answer_of(row["completion"]))
  # the sanitized program's last definition is the entry point it was scored against
  names = [line.split("(")[0][4:] for line in row["extracted"].splitlines()
           if line.startswith("def ")]
  return bool(names) and evalplus._has_body(row["extracted"], names[-1])


def main() -> None:
  print("| recipe | system | arith | funcs | strings | cross |\n|---|---|---|---|---|---|")
  for recipe in ("full", "replay_kl"):
    base = os.path.join(HERE, recipe, "score_validation")
    for system in ("base", "arith", "funcs", "strings"):
      cells = []
      for bench in ("arith", "funcs", "strings", "cross"):
        with open(os.path.join(base, bench, f"{system}.jsonl")) as f:
          rows = [json.loads(line) for line in f]
        cells.append(f"{100 * sum(_valid(bench, r) for r in rows) / len(rows):.1f}")
      print(f"| {recipe} | {system} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
  main()
