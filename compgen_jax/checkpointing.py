"""orbax CheckpointManager over a run-stacked state pytree; clear errors for bad checkpoints."""

import json
import os

import jax
import numpy as np
import orbax.checkpoint as ocp
from etils import epath
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from compgen_jax import files
from compgen_jax.types import CheckpointError, PyTree

# In each step directory: every file orbax wrote there and its size. A restore checks them first:
# orbax meeting a missing or truncated file fails with its reads still in flight, and their
# errors print hundreds of lines ("Exception ignored in coroutine") after the real one.
FILES = "compgen_files.json"


def manager(directory: str, max_to_keep: int | None = None, create: bool = True):
  """A CheckpointManager writing `directory/<step>` (absolute path, as orbax needs)."""
  options = ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=create)
  return ocp.CheckpointManager(os.path.abspath(directory), options=options)


def save(mngr: ocp.CheckpointManager, step: int, state: PyTree) -> None:
  """Saves `state` at `step` and waits, so a crash later never leaves a half-written latest."""
  mngr.save(int(step), args=ocp.args.StandardSave(state), force=True)
  mngr.wait_until_finished()
  if jax.process_index() == 0:
    step_dir = os.path.join(str(mngr.directory), str(int(step)))
    files.write_json(os.path.join(step_dir, FILES), _file_sizes(step_dir), indent=0,
                     sort_keys=True)


def _file_sizes(step_dir: str) -> dict[str, int]:
  sizes = {}
  for root, _, names in os.walk(step_dir):
    for name in names:
      full = os.path.join(root, name)
      if name not in (FILES, FILES + ".tmp"):
        sizes[os.path.relpath(full, step_dir)] = os.path.getsize(full)
  return sizes


def _damaged_files(directory: str, step: int) -> list[str]:
  """Files of the step's list (FILES) that are missing or of another size; [] when intact or
  when the checkpoint has no list (written before it existed)."""
  step_dir = os.path.join(directory, str(step))
  try:
    with open(os.path.join(step_dir, FILES)) as f:
      want = json.load(f)
  except (OSError, ValueError):
    return []
  have = _file_sizes(step_dir)
  return [f"{name} ({'missing' if name not in have else f'{have[name]} bytes, not {size}'})"
          for name, size in sorted(want.items()) if have.get(name) != size]


def _restore_step(mngr, directory: str, abstract_state: PyTree, step: int) -> PyTree:
  """orbax's restore of `step`, after checking its files (CheckpointError naming them)."""
  damaged = _damaged_files(directory, step)
  if damaged:
    shown = ", ".join(damaged[:3]) + (f" and {len(damaged) - 3} more" if len(damaged) > 3 else "")
    raise CheckpointError(f"damaged files: {shown}")
  _check_stored_shapes(directory, step, abstract_state)
  return mngr.restore(step, args=ocp.args.StandardRestore(abstract_state))


class ShapeMismatch(CheckpointError):
  """The stored leaves differ from the config's state (raised before any array is read)."""


def _leaf_shapes(tree: PyTree) -> dict[str, tuple[int, ...]]:
  """{"a/b/0": shape} of every leaf; namedtuple fields, dict keys and list indices alike."""
  def name(key) -> str:
    for attribute in ("key", "name", "idx"):
      if hasattr(key, attribute):
        return str(getattr(key, attribute))
    return str(key)
  return {"/".join(map(name, path)): tuple(leaf.shape)
          for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]}


def _check_stored_shapes(directory: str, step: int, abstract_state: PyTree) -> None:
  """CheckpointError when the step's stored leaves differ from `abstract_state`'s, read from
  its metadata before any array: orbax restoring another shape fails with its reads in flight,
  and those print tracebacks from its threads long after the error (formatting a traceback
  parses source, which races with ast.parse elsewhere in the process on Python 3.11)."""
  handler = ocp.StandardCheckpointHandler()  # the item's own metadata: no step-metadata warning
  try:
    stored = _leaf_shapes(handler.metadata(
        epath.Path(os.path.abspath(directory), str(step), "default")).tree)
  except Exception:  # noqa: BLE001 - unreadable metadata: the restore reports the damage
    return
  finally:
    handler.close()
  want = _leaf_shapes(abstract_state)
  if stored != want:
    differ = sorted(k for k in set(stored) | set(want) if stored.get(k) != want.get(k))
    shown = "; ".join(f"{k}: stored {stored.get(k, 'absent')}, config {want.get(k, 'absent')}"
                      for k in differ[:3]) + (f" and {len(differ) - 3} more"
                                               if len(differ) > 3 else "")
    raise ShapeMismatch(f"checkpoint {directory!r} step {step} does not match the config's "
                        f"state shapes ({shown})")


def available_steps(directory: str) -> list[int]:
  """Finalised checkpoint steps in `directory` (empty when there are none)."""
  if not os.path.isdir(directory):
    return []
  return sorted(manager(directory, create=False).all_steps())


def restore(directory: str, abstract_state: PyTree, step: int | None = None) -> tuple[int, PyTree]:
  """Restores the checkpoint at `step` (default latest) against `abstract_state`.

  Leaves of `abstract_state` without a sharding are restored replicated over all devices, so a
  checkpoint written with any device count restores onto this one (orbax would otherwise reuse
  the writer's device layout). Raises CheckpointError naming the path when it is missing, corrupt
  or of another shape.
  """
  abstract_state = jax.tree.map(_placed, abstract_state)
  steps = available_steps(directory)
  if not steps:
    raise CheckpointError(f"no checkpoint found in {directory!r}")
  step = steps[-1] if step is None else int(step)
  if step not in steps:
    raise CheckpointError(f"no checkpoint for step {step} in {directory!r}; available: {steps}")
  mngr = manager(directory, create=False)
  try:
    state = _restore_step(mngr, directory, abstract_state, step)
  except ShapeMismatch:  # the config's fault, not the checkpoint's: no older step helps
    raise
  except Exception as e:  # orbax raises many types for corrupt or mismatched trees
    raise CheckpointError(
        f"checkpoint {directory!r} step {step} could not be restored (corrupt, or written by an "
        f"incompatible config): {type(e).__name__}: {' '.join(str(e).split())[:300]}. "
        f"{_earlier_intact(mngr, directory, abstract_state, [s for s in steps if s < step])}"
    ) from e
  return step, state


def _placed(leaf: jax.ShapeDtypeStruct) -> jax.ShapeDtypeStruct:
  if getattr(leaf, "sharding", None) is not None:
    return leaf
  replicated = NamedSharding(Mesh(np.asarray(jax.devices()), ("devices",)), PartitionSpec())
  return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=replicated)


def _earlier_intact(mngr, directory: str, abstract_state: PyTree, earlier: list[int]) -> str:
  """Which earlier checkpoint restores, and how to use it (only on the error path)."""
  for step in reversed(earlier):
    try:
      _restore_step(mngr, directory, abstract_state, step)
    except Exception:  # noqa: BLE001, S112 - try the next older one
      continue
    newer = [s for s in available_steps(directory) if s > step]
    return (f"Step {step} is intact: to resume training from it, move the newer step "
            f"director{'ies' if len(newer) > 1 else 'y'} {newer} out of {directory!r}; "
            f"evaluate.py / probe.py take --step={step}.")
  return f"No earlier checkpoint restores either (tried {earlier})." if earlier else (
      "There is no earlier checkpoint.")
