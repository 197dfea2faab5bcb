"""Which weight layer each trainable leaf of a model belongs to (NTK components, per-layer learning rates)."""

from __future__ import annotations

from jax.tree_util import SequenceKey, tree_flatten_with_path


def _first_sequence_index(path) -> int | None:
    return next((key.idx for key in path if isinstance(key, SequenceKey)), None)


def layer_components(arrays) -> tuple[tuple[int, ...], int]:
    """Per-layer component of each leaf of ``arrays`` (in ``jax.tree.leaves`` order), and their count.

    Rule: a leaf's layer is the first sequence index in its pytree path (``weights[ℓ]`` and
    ``biases[ℓ]`` → ℓ; ``layers[ℓ].weight`` → ℓ). Distinct indices, ranked ascending, are the
    components 0, 1, …; a leaf with no index in its path is a component of its own, after those,
    in pytree order.

    Example: an MLP with ``weights[0..2]`` and ``biases[0..2]`` gives ``((0, 1, 2, 0, 1, 2), 3)``.
    """
    indices = [_first_sequence_index(path) for path, _ in tree_flatten_with_path(arrays)[0]]
    ranks = {index: rank for rank, index in enumerate(sorted({i for i in indices if i is not None}))}
    components, count = [], len(ranks)
    for index in indices:
        if index is None:
            components.append(count)
            count += 1
        else:
            components.append(ranks[index])
    return tuple(components), count
