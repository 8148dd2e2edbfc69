"""strata.dlrm: the DLRM of facebookresearch/dlrm (``dlrm_s_pytorch.py``) with its embedding tables
in tiered memory — the Python face of ``strata-dlrm`` (embeddings/dlrm.h).

Options are the reference script's flags as keyword arguments (``--arch-mlp-bot`` is
``arch_mlp_bot``), with the reference's defaults, plus Strata's tier options::

    import numpy as np, strata.dlrm

    model = strata.dlrm.DLRM(arch_sparse_feature_size=16, arch_embedding_size=[1000, 500, 200],
                             arch_mlp_bot=[13, 64, 16], arch_mlp_top=[64, 1],
                             loss_function="bce", optimizer="rwsadagrad", learning_rate=0.05,
                             fast_budget="64M", emb_policy="auto")
    loss = model.train_step(dense, indices, offsets, targets)   # NumPy in, float out
    probs = model(dense, indices, offsets)                       # [B, 1] NumPy array

A batch is what torch.nn.EmbeddingBag takes: ``dense`` [B, n_dense] floats; per table a 1-D
integer array of ``indices`` and its ``offsets`` (B bag starts, or B + 1 CSR offsets); ``targets``
[B] or [B, 1]; optionally ``per_sample_weights`` per table. The dense parameters are available
through ``state_dict()`` under the reference's names (``bot_l.0.weight``, ``top_l.2.bias``, ...),
the tables as NumPy arrays through ``table_weight(k)`` / ``set_table_weight(k, values)``.
``load_state_dict`` accepts a PyTorch DLRM's state_dict converted to NumPy (``emb_l.<k>.weight``
entries set the tables).

The reference's table tricks work through the same flags (``qr_flag=True, qr_operation="mult"``,
``md_flag=True``, ``weighted_pooling="learned"``; embeddings/dlrm.h Note [DLRM table kinds]). The
stored tables then carry the reference's state_dict names: a quotient-remainder table k is
``emb_l.<k>.weight_q`` / ``emb_l.<k>.weight_r`` (``table_weight(k)`` / ``table_weight(k, part=1)``),
a mixed-dimension table ``emb_l.<k>.embs.weight`` [rows, d_k] with its projection
``emb_l.<k>.proj.weight`` among the dense parameters, and learned pooling weights ``v_W_l.<k>``
[rows] are in ``state_dict()`` (copies). ``stored_table_keys`` lists the tables' names in order.

The optimizer is applied as the reference applies it to all parameters: ``sgd`` (SGD everywhere),
``rwsadagrad`` (row-wise Adagrad on the tables, element-wise Adagrad on the MLPs), ``adagrad``
(element-wise Adagrad everywhere); the tables' update is fused into their backward.
"""

from collections import OrderedDict

import numpy as np

from . import _C

__all__ = ["DLRM", "Batches", "dataset_counts", "usage", "presets", "plot_training"]

_FLAGS = frozenset(_C.dlrm.flag_names())
# Options that are not model options in Python (they steer the strata-dlrm program).
_NOT_MODEL_OPTIONS = {"help": None, "h": None, "threads": "use strata.set_num_threads(n)",
                      "json": "strata-dlrm writes JSON; read DLRM.times and DLRM.counters instead"}


def usage():
    """strata-dlrm's flags with their defaults (the keyword arguments of DLRM)."""
    return _C.dlrm.usage()


def presets():
    """The preset names DLRM(preset=...) accepts."""
    return list(_C.dlrm.preset_names())


def _flag_value(name, value):
    if isinstance(value, (list, tuple, np.ndarray)):
        return "-".join(str(v) for v in value)
    if isinstance(value, bool):
        return "True" if value else "False"
    return str(value)


def _to_flags(options):
    flags = []
    for name, value in options.items():
        if name in _NOT_MODEL_OPTIONS or name.startswith("_"):
            hint = _NOT_MODEL_OPTIONS.get(name)
            raise TypeError(f"DLRM() got an unexpected keyword argument '{name}'" + (f" ({hint})" if hint else ""))
        flag = "--" + name.replace("_", "-")
        if name == "local_rank":
            flag = "--local_rank"
        if flag not in _FLAGS:
            raise TypeError(f"DLRM() got an unexpected keyword argument '{name}' (see strata.dlrm.usage())")
        if value is None:
            continue
        if _C.dlrm.flag_is_store_true(flag):
            if not isinstance(value, (bool, np.bool_)):
                raise TypeError(f"DLRM(): {name} must be True or False, got {value!r}")
            if value:
                flags.append(flag)
            continue
        flags += [flag, _flag_value(name, value)]
    if "preset" not in options:
        # No arguments means the embedded default job to strata-dlrm; in Python the reference's
        # defaults apply unless a preset is asked for.
        flags = ["--preset", "tiny"] + flags
    return flags


def dataset_counts(**options):
    """A Criteo data set's ids per categorical column (the reference's ``counts``, what
    ``DLRM(arch_embedding_size=...)`` takes; DLRM and strata-dlrm use them by default): keyword
    arguments as for DLRM (``data_generation="dataset"``, ``raw_data_file``,
    ``processed_data_file``, ``data_set``, ``max_ind_range``, ...). Preprocesses the raw file as
    the reference's data_utils does when the processed file does not exist."""
    return list(_C.dlrm.dataset_counts(_to_flags(options)))


class Batches:
    """The batches of a run, as strata-dlrm draws them: keyword arguments as for DLRM (the data
    ones matter: ``data_generation`` random | synthetic | zipf | dataset, ``mini_batch_size``,
    ``num_batches``, ``num_indices_per_lookup``, ``zipf_alpha``, ``reuse``, ``raw_data_file``,
    ...). Iterating yields one epoch of ``(dense, indices, offsets, targets)`` NumPy tuples that
    ``DLRM.train_step(*batch)`` takes (offsets are CSR, B + 1 per table; targets [B, 1]); the
    ``random`` and ``synthetic`` generators follow the reference draw for draw.

    ``data_generation="click"`` has labels a model can learn (Note [Click data] in
    embeddings/click_source.h) and a test split: ``split="test"`` yields its
    ``test_data_size`` samples (default a tenth of the training samples) in batches of
    ``test_mini_batch_size`` (default ``mini_batch_size``), drawn apart from the train split's.
    With ``data_generation="dataset"`` the batches are the reference's Criteo pipeline (the raw
    file preprocessed into the processed .npz when that is missing) and ``split`` picks
    ``"train"`` (days 0..D-2, shuffled per ``data_randomize`` with the reference's numpy draws),
    ``"test"`` or ``"val"`` (the two halves of the last day; ``test_mini_batch_size``) or
    ``"none"`` (everything); ``rows`` are the tables' row counts. The other generators have no
    split of their own (the reference tests them on their training batches)."""

    def __init__(self, split="train", **options):
        self._options = dict(options)
        self._split = split
        self._src = _C.dlrm.Batches(_to_flags(options), split)

    def __len__(self):
        return len(self._src)

    @property
    def rows(self):
        """Rows per table: every index of table k lies in [0, rows[k])."""
        return list(self._src.rows)

    def __iter__(self):
        self._src.reset()
        while True:
            b = self._src.next()
            if b is None:
                return
            yield b

    def describe(self):
        return self._src.describe()


class DLRM:
    """The reference DLRM with tiered embedding tables. Keyword arguments are the reference
    script's flags (``arch_embedding_size=[4, 3, 2]`` or ``"4-3-2"``, ``loss_function="bce"``, ...)
    and Strata's (``preset``, ``fast_budget``, ``slow_dir``, ``emb_policy``, ``cache_fraction``,
    ``slow_tier_model``, ``scale_rows``, ``emb_dtype``, ``check_finite``); ``strata.dlrm.usage()``
    lists them. Bad options raise strata.StrataError naming the flag. With ``check_finite=True`` a
    step that leaves a parameter NaN or inf raises strata.StrataError naming it and the step."""

    def __init__(self, **options):
        self._options = dict(options)
        self._m = _C.dlrm.DLRM(_to_flags(options))

    # ---- training and inference ----
    def train_step(self, dense, indices, offsets, targets, per_sample_weights=None):
        """One step (forward, loss, backward, dense and fused sparse updates); returns the loss."""
        return self._m.train_step(dense, indices, offsets, targets, per_sample_weights)

    def forward(self, dense, indices, offsets, per_sample_weights=None):
        """Click probabilities [B, 1] as a NumPy array (no update, no graph)."""
        return self._m.forward(dense, indices, offsets, per_sample_weights).numpy()

    __call__ = forward

    def evaluate(self, batches, indices=None, offsets=None, targets=None, per_sample_weights=None):
        """A test pass with no gradient and no update.

        ``evaluate(batches)`` scores every batch of ``batches`` — a :class:`Batches` (e.g. the
        ``split="test"`` of a dataset) or any iterable of ``(dense, indices, offsets, targets)``
        tuples — and returns ``{"loss", "log_loss", "accuracy", "auc", "samples"}`` (AUC is the
        exact ROC AUC, NaN with one class; accuracy rounds scores half to even, as the reference).
        ``evaluate(dense, indices, offsets, targets)`` is the loss of one batch."""
        if indices is not None or offsets is not None or targets is not None:
            return self._m.evaluate(batches, indices, offsets, targets, per_sample_weights)
        if isinstance(batches, Batches):
            return self._m.evaluate_source(batches._src)
        acc = _C.metrics.Accumulator()
        for batch in batches:
            if not isinstance(batch, (tuple, list)) or len(batch) not in (4, 5):
                raise TypeError("DLRM.evaluate: each batch must be a (dense, indices, offsets, targets[, "
                                f"per_sample_weights]) tuple, got {type(batch).__name__}")
            scores, batch_targets, loss = self._m.score(*batch)
            acc.add(scores, batch_targets, loss)
        return acc.compute()

    # ---- parameters ----
    @property
    def num_tables(self):
        return self._m.num_tables

    @property
    def table_rows(self):
        """Rows per table (after scale_rows)."""
        return list(self._m.table_rows)

    @property
    def feature_size(self):
        return self._m.feature_size

    @property
    def dense_features(self):
        return self._m.dense_features

    @property
    def stored_table_keys(self):
        """The stored tables' state_dict names in order (``emb_l.<k>.weight``, ``emb_l.<k>.weight_q``,
        ``emb_l.<k>.weight_r``, ``emb_l.<k>.embs.weight``)."""
        return list(self._m.stored_table_keys)

    def table_weight(self, k, part=0):
        """A copy of table k as float32 [rows, d_k]; for a quotient-remainder table part 0 is the
        quotient table (``weight_q``), part 1 the remainder table (``weight_r``)."""
        return self._m.get_table(k, part)

    def set_table_weight(self, k, values, part=0):
        """Overwrites table k (part 1: a quotient-remainder table's remainder) from float values."""
        self._m.set_table(k, values, part)

    def state_dict(self, tables=False):
        """The dense parameters under the reference's names (strata Tensors sharing the parameters'
        memory; ``.numpy()`` views them) and learned pooling weights ``v_W_l.<k>`` (copies). With
        ``tables=True`` also copies of every stored table under ``stored_table_keys``."""
        out = OrderedDict(self._m._state_dict())
        if tables:
            for p, key in enumerate(self.stored_table_keys):
                out[key] = _C.from_numpy(self._m.get_stored(p))
        return out

    def load_state_dict(self, state):
        """Loads the dense parameters (every key of ``state_dict()`` must be present, same shapes)
        and, where given, tables (``stored_table_keys``). Values may be strata Tensors or anything
        NumPy converts (a PyTorch state_dict: ``{k: v.detach().numpy() ...}``)."""
        dense = []
        tables = {}
        stored = {key: p for p, key in enumerate(self.stored_table_keys)}
        for key, value in state.items():
            if key in stored:
                tables[stored[key]] = value
                continue
            if key.startswith("emb_l.") and not key.endswith(".proj.weight"):
                raise KeyError(f"DLRM.load_state_dict: unexpected key '{key}' (the tables are "
                               f"{', '.join(stored)})")
            if not isinstance(value, _C.Tensor):
                value = _C.from_numpy(np.ascontiguousarray(np.asarray(value, dtype=np.float32)))
            dense.append((key, value))
        self._m._load_state_dict(dense)
        for p, value in tables.items():
            if isinstance(value, _C.Tensor):
                value = value.numpy()
            self._m.set_stored(p, np.asarray(value))

    # ---- checkpoints ----
    def save(self, path, **metadata):
        """Saves everything a training step depends on (MLPs, tables, the dense and sparse
        optimizer state, the step count) to ``path`` atomically, tables streamed in bounded
        chunks. ``metadata`` (e.g. ``epoch=2, iter=100, best_auc_test=0.79``: the names
        strata-dlrm's DLRMTrainState uses) is stored as text: ints and floats as ``str()`` gives
        them (exact for floats), strings as they are; load() returns it."""
        extra = []
        for key, value in metadata.items():
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (str, int, float, np.integer, np.floating)):
                raise TypeError(f"DLRM.save: metadata '{key}' must be a str, int or float, got {type(value).__name__}")
            extra.append((key, value if isinstance(value, str) else str(value.item() if isinstance(value, np.generic) else value)))
        self._m.save(str(path), extra)

    def load(self, path):
        """Loads a file written by save() (same architecture and optimizer), all or nothing: every
        section is validated before anything changes, and an error names the path and the key.
        Returns the metadata as a dict of strings (save()'s keyword arguments among them)."""
        return dict(self._m.load(str(path)))

    # ---- statistics ----
    @property
    def steps(self):
        """Optimizer steps taken."""
        return self._m.steps

    @property
    def next_learning_rate(self):
        return self._m.next_learning_rate

    @property
    def times(self):
        """Seconds per phase (bottom_mlp, lookup, interaction, top_mlp, backward, update) summed over steps."""
        return self._m.times

    @property
    def counters(self):
        """Rows looked up and updated, bytes per tier, cache hit rate (None without a cached table)."""
        return self._m.counters

    def reset_stats(self):
        self._m.reset_stats()

    def __repr__(self):
        return "strata.dlrm.DLRM(" + ", ".join(f"{k}={v!r}" for k, v in self._options.items()) + ")"

    def describe(self):
        """The architecture, the tiers and where every table lives."""
        return self._m.describe()


def _series(name, values):
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1:
        raise ValueError(f"plot_training(): {name} must be one-dimensional, got shape {values.shape}")
    return values.tolist()


def plot_training(path, iterations, loss, test_iterations=(), accuracy=(), auc=(), title="strata-dlrm"):
    """Writes training curves to ``path`` as a PNG line plot, drawn in C++ (core/line_plot.h; no
    matplotlib): a panel of the training loss against ``iterations`` and, when test figures are
    given, a panel of test ``accuracy`` and ``auc`` against ``test_iterations`` (either may be
    left empty). Non-finite values break the line. Raises strata.StrataError naming the series
    whose length differs from its x values, or the path when it cannot be written."""
    _C.dlrm.write_training_plot(str(path), str(title), _series("iterations", iterations), _series("loss", loss),
                                _series("test_iterations", test_iterations), _series("accuracy", accuracy),
                                _series("auc", auc))
