"""evalplus's per-task exceptions, re-implemented from its documented behaviour.

MBPP+ stores inputs as JSON, and evalplus turns some back into tuples, sets or complex numbers
before calling the function (evalplus/data/mbpp.py, `mbpp_deserialize_inputs`); without that,
reference solutions that hash or concatenate tuples fail. A few tasks are judged by a special
oracle instead of equality (evalplus/eval/_special_oracle.py and `unsafe_execute`).
"""

import json
import math

# Input conversions, as expressions over `inp` (one input's argument list), run in the sandbox.
_DEEP_TUPLE = ("(lambda f: f(f, inp))(lambda f, x: tuple(f(f, y) for y in x) "
               "if isinstance(x, list) else x)")
CONVERSIONS = {
    "args": "[tuple(a) for a in inp]",
    "arg_items": "[[tuple(x) for x in a] for a in inp]",
    "first_items": "[[tuple(x) for x in inp[0]], inp[1]]",
    "second": "[inp[0], tuple(inp[1])]",
    "first_sets": "[[set(x) if isinstance(x, list) and len(x) else {} for x in inp[0]]]",
    "float_complex": "[float(inp[0]), complex(inp[1])]",
    "first": "[tuple(inp[0]), inp[1]]",
    "args_and_items": "[tuple(tuple(x) for x in a) for a in inp]",
    "first_mixed": "[tuple(tuple(x) if isinstance(x, list) else x for x in inp[0])]",
    "first_of_3": "[tuple(inp[0]), inp[1], inp[2]]",
    "dict_values": "[{k: tuple(v) for k, v in inp[0].items()}] + inp[1:]",
    "complex": "[complex(inp[0])]",
    "deep": _DEEP_TUPLE,
}
_MBPP_TASKS = {
    "args": (2, 116, 132, 143, 222, 261, 273, 394, 399, 421, 424, 429, 470, 560, 579, 596, 616,
             630, 726, 740, 744, 809),
    "arg_items": (63, 64, 70, 94, 120, 237, 272, 299, 400, 409, 417, 438, 473, 614, 780),
    "first_items": (75, 413, 444, 753), "second": (106, 750), "first_sets": (115,),
    "float_complex": (124,), "first": (250, 405, 446, 617, 720, 763, 808),
    "args_and_items": (259, 401, 445), "first_mixed": (278,), "first_of_3": (307,),
    "dict_values": (722,), "complex": (252,), "deep": (580, 615, 791),
}
_MBPP_KIND = {number: kind for kind, numbers in _MBPP_TASKS.items() for number in numbers}
# Oracles by entry point: MBPP+ tasks whose reference output is one of several right answers.
_MBPP_ORACLES = {
    "are_equivalent": "always", "sum_div": "or_zero", "surface_Area": "surface_area",
    "digit_distance_nums": "digit_distance", "check_str": "not_none",
    "text_match_three": "not_none", "text_starta_endb": "not_none",
    **{name: "set_eq" for name in ("similar_elements", "find_char_long", "common_in_nested_lists",
                                   "extract_singly", "larg_nnum", "intersection_array",
                                   "find_dissimilar", "Diff")},
}
CALL = "__compgen_call__"


def conversion(dataset: str, task_id: str) -> str | None:
  """The CONVERSIONS key evalplus applies to this task's inputs, if any."""
  if dataset != "mbpp" or not task_id.rsplit("/", 1)[-1].isdigit():
    return None
  return _MBPP_KIND.get(int(task_id.rsplit("/", 1)[-1]))


def oracle(dataset: str, entry_point: str) -> str | None:
  if dataset == "humaneval" and entry_point == "find_zero":  # HumanEval/32: any root will do
    return "poly_root"
  return _MBPP_ORACLES.get(entry_point) if dataset == "mbpp" else None


def wrap(program: str, entry_point: str, kind: str | None) -> tuple[str, str]:
  """(program, entry point) that converts each input before calling the real entry point."""
  if kind is None:
    return program, entry_point
  return (f"{program}\n\n\ndef {CALL}(*inp):\n  inp = list(inp)\n"
          f"  return {entry_point}(*({CONVERSIONS[kind]}))\n", CALL)


def poly_root(out, args: list, atol: float) -> bool:
  """|sum_i xs[i] out^i| <= atol, xs = the input coefficients."""
  return abs(sum(c * math.pow(out, i) for i, c in enumerate(args[0]))) <= atol


def judge(kind: str, exact: bool, out, expected, args: list, atol: float) -> bool:
  """evalplus's verdict for a task with a special oracle, before its float tolerance."""
  if kind == "always":
    return True
  if kind == "or_zero":
    return exact or out == 0
  if kind == "surface_area":
    return exact or abs(out - _surface_area(*args)) <= atol
  if kind == "digit_distance":
    return exact or out == _digit_distance(*args)
  if kind == "set_eq":
    return _as_set(out) == _as_set(expected)
  if kind == "not_none":
    return out == expected if isinstance(out, bool) else expected == (out is not None)
  raise ValueError(f"unknown oracle {kind!r}")


def _surface_area(base_edge, height):
  """Square pyramid with `height` from base to apex (the reading Mbpp/581's tests allow)."""
  slant = math.sqrt((base_edge / 2) ** 2 + height ** 2)
  return round(base_edge ** 2 + 2 * base_edge * slant)


def _digit_distance(a, b) -> int:
  """Sum of per-digit distances, the shorter number left-padded with zeros."""
  width = max(len(str(a)), len(str(b)))
  return sum(abs(int(x) - int(y)) for x, y in zip(str(a).zfill(width), str(b).zfill(width),
                                                   strict=True))


def _as_set(encoded) -> set:
  """set(x) of a sandbox-encoded value, elements keyed by their JSON (lists are unhashable)."""
  if isinstance(encoded, dict) and "__set__" in encoded:
    items = encoded["__set__"]
  elif isinstance(encoded, dict) and "__dict__" in encoded:
    items = [key for key, _ in encoded["__dict__"]]
  elif isinstance(encoded, str | list):
    items = list(encoded)
  else:
    raise TypeError(f"not iterable: {encoded!r}")
  return {json.dumps(item, sort_keys=True) for item in items}
