"""Click data (Note [Click data] in embeddings/click_source.h) from Python: a DLRM trained on it
for a few hundred steps beats test AUC 0.7 (scikit-learn's roc_auc_score on the test split);
the splits; strata.dlrm.plot_training writes a PNG that decodes (zlib + struct here, PIL too if
installed); bad input."""

import struct
import time
import zlib

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

import strata
import strata.dlrm

# A small click job: 8 tables (4 interaction pairs), one id per table and sample.
CLICK = dict(data_generation="click", arch_embedding_size=[20000] * 8, arch_sparse_feature_size=16,
             arch_mlp_bot=[16, 64, 16], arch_mlp_top=[64, 1], num_indices_per_lookup=1,
             num_indices_per_lookup_fixed=True, mini_batch_size=256, num_batches=400, test_data_size=8192,
             numpy_rand_seed=123)


def test_a_dlrm_learns_the_click_data_and_beats_auc_0_7_on_the_test_split():
    start = time.monotonic()
    model = strata.dlrm.DLRM(loss_function="bce", optimizer="rwsadagrad", learning_rate=0.03, **CLICK)
    losses = [model.train_step(*b) for b in strata.dlrm.Batches(**CLICK)]
    assert len(losses) == 400
    assert np.mean(losses[-50:]) < np.mean(losses[:50]) - 0.05
    probs, labels = [], []
    for dense, indices, offsets, targets in strata.dlrm.Batches(split="test", **CLICK):
        probs.append(model(dense, indices, offsets)[:, 0])
        labels.append(targets[:, 0])
    labels = np.concatenate(labels)
    assert labels.size == 8192
    assert 0.25 < labels.mean() < 0.35
    auc = roc_auc_score(labels, np.concatenate(probs))
    assert auc > 0.7, f"test AUC {auc:.4f}"
    assert time.monotonic() - start < 60  # ~6 s on 2 cores; far slower means something broke


def test_the_splits_are_disjoint_replayable_and_described():
    small = dict(CLICK, arch_embedding_size=[1000] * 2, num_batches=3, test_data_size=300)
    train = strata.dlrm.Batches(**small)
    test = strata.dlrm.Batches(split="test", **small)
    assert train.describe() == "click(alpha 1.05, train), prefetched"
    assert test.describe() == "click(alpha 1.05, test), prefetched"
    assert (len(train), len(test)) == (3, 2)
    first = [b[0] for b in train]
    again = [b[0] for b in train]  # iterating again replays the epoch
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    train_rows = {row.tobytes() for dense in first for row in dense}
    test_rows = {row.tobytes() for dense, *_ in test for row in dense}
    assert len(test_rows) == 300 and not train_rows & test_rows


def test_batches_refuse_a_bad_split():
    with pytest.raises(strata.StrataError, match="expected train, test, val or none, got 'dev'"):
        strata.dlrm.Batches(split="dev", **CLICK)
    with pytest.raises(strata.StrataError, match="the test split: only --data-generation dataset and click have "
                                                 "splits, got --data-generation zipf"):
        strata.dlrm.Batches(split="test", **dict(CLICK, data_generation="zipf"))
    with pytest.raises(strata.StrataError, match="--test-data-size"):
        strata.dlrm.Batches(split="test", **dict(CLICK, test_data_size=-5))


def png_chunks(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, at = [], 8
    while at < len(data):
        (length,) = struct.unpack(">I", data[at:at + 4])
        kind, body = data[at + 4:at + 8], data[at + 8:at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length:at + 12 + length])
        assert crc == zlib.crc32(kind + body), kind
        chunks.append((kind, body))
        at += 12 + length
    return chunks


def test_plot_training_writes_a_png_that_decodes(tmp_path):
    path = tmp_path / "curves.png"
    it = np.arange(1, 301) * 5
    strata.dlrm.plot_training(path, it, 0.45 + 0.25 * np.exp(-it / 300.0), test_iterations=[500, 1000, 1500],
                              accuracy=[0.70, 0.74, 0.75], auc=[0.70, 0.76, 0.78], title="click run")
    chunks = png_chunks(path.read_bytes())
    assert [k for k, _ in chunks] == [b"IHDR", b"IDAT", b"IEND"]
    width, height, depth, colour = struct.unpack(">IIBB", chunks[0][1][:10])
    assert (width, height, depth, colour) == (800, 40 + 2 * 320, 8, 2)  # two panels, 8-bit RGB
    rows = zlib.decompress(chunks[1][1])
    assert len(rows) == height * (1 + 3 * width)
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(path) as im:
        assert im.size == (800, 680) and im.mode == "RGB"
        assert im.getpixel((0, 0)) == (255, 255, 255)


def test_plot_training_without_test_figures_has_one_panel(tmp_path):
    path = tmp_path / "loss.png"
    strata.dlrm.plot_training(path, [1, 2, 3], [0.69, 0.6, float("nan")])
    (_, header), *_ = png_chunks(path.read_bytes())
    assert struct.unpack(">II", header[:8]) == (800, 40 + 320)


def test_plot_training_names_what_is_wrong(tmp_path):
    missing = tmp_path / "no" / "such" / "dir" / "curves.png"
    with pytest.raises(strata.StrataError, match=f"line plot: cannot write '{missing}'"):
        strata.dlrm.plot_training(missing, [1, 2], [0.7, 0.6])
    with pytest.raises(strata.StrataError, match="series 'loss': x has 3 values but y has 2"):
        strata.dlrm.plot_training(tmp_path / "a.png", [1, 2, 3], [0.7, 0.6])
    with pytest.raises(strata.StrataError, match="series 'AUC': x has 0 values but y has 1"):
        strata.dlrm.plot_training(tmp_path / "b.png", [1], [0.7], auc=[0.8])
    with pytest.raises(ValueError, match="loss must be one-dimensional"):
        strata.dlrm.plot_training(tmp_path / "c.png", [1], [[0.7]])
    assert not list(tmp_path.iterdir())
