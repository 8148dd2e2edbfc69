"""strata.dlrm's Criteo pipeline against a pure-numpy re-implementation of the DLRM reference's
(data_utils.getCriteoAdData and dlrm_data_pytorch.CriteoDataset, as REFERENCE.md §1 describes them;
written here, not the reference's code): the processed arrays, the day and feature counts, the
train/test/val batches and their order for a seed (with and without sub-sampling); numpy reading
Strata's files and Strata reading np.savez_compressed files in the reference's own dtypes; bad
input naming the file and line or member."""

import numpy as np
import pytest

import strata
import strata.dlrm


def make_raw(path, n, seed):
    """n Criteo lines: random 8-hex-digit hashes from small vocabularies (some >= 2^31), empty
    fields, negative dense values."""
    rng = np.random.default_rng(seed)
    lines = []
    for _ in range(n):
        fields = [str(int(rng.random() < 0.3))]
        for _j in range(13):
            fields.append("" if rng.random() < 0.1 else str(int(rng.integers(-3, 60))))
        for k in range(26):
            h = (int(rng.integers(0, 5 + 11 * k)) * 2654435761 + k) & 0xFFFFFFFF
            fields.append("" if rng.random() < 0.08 else f"{h:08x}")
        lines.append("\t".join(fields))
    path.write_text("\n".join(lines) + "\n")
    return lines


def reference_pipeline(lines, days, max_ind_range, rate, seed):
    """The reference's preprocessing and split, re-implemented with numpy (Note [Criteo
    preprocessing] and Note [Criteo split] in embeddings/criteo_dataset.h)."""
    np.random.seed(seed)
    per, extra = divmod(len(lines), days)
    sizes = [per + (1 if j < extra else 0) for j in range(days)]
    dicts = [{} for _ in range(26)]
    y, x_int, x_cat, kept = [], [], [], []
    at = 0
    for size in sizes:
        u = np.random.uniform(low=0.0, high=1.0, size=size) if rate > 0 else None
        n = 0
        for k, line in enumerate(lines[at:at + size]):
            f = [v if v != "" else "0" for v in line.split("\t")]
            label = int(f[0])
            if rate > 0 and label == 0 and u[k] < rate:
                continue
            y.append(label)
            x_int.append([max(0, int(v)) for v in f[1:14]])
            row = []
            for j, v in enumerate(f[14:]):
                h = int(v, 16) % max_ind_range if max_ind_range > 0 else int(v, 16)
                row.append(dicts[j].setdefault(h, len(dicts[j])))
            x_cat.append(row)
            n += 1
        kept.append(n)
        at += size
    out = dict(X_cat=np.array(x_cat, dtype=np.int32), X_int=np.array(x_int, dtype=np.int32),
               y=np.array(y, dtype=np.int32), counts=np.array([len(d) for d in dicts], dtype=np.int32),
               total_per_file=np.array(kept, dtype=np.int64))
    # CriteoDataset(split="train"): days 0..D-2 shuffled, the last day halved into test and val.
    offsets = np.concatenate(([0], np.cumsum(kept)))
    indices = np.array_split(np.arange(offsets[-1]), offsets[1:-1])
    train = np.concatenate(indices[:-1])
    test, val = np.array_split(indices[-1], 2)
    out["train"] = np.random.permutation(train)
    out["test"], out["val"] = test, val
    return out


def options(tmp_path, **extra):
    o = dict(data_generation="dataset", arch_mlp_bot="13-2", raw_data_file=str(tmp_path / "train.txt"),
             processed_data_file=str(tmp_path / "kaggleAdDisplayChallenge_processed.npz"), mini_batch_size=64,
             test_mini_batch_size=100, numpy_rand_seed=7)
    o.update(extra)
    return o


def collect(batches):
    dense, cat, y = [], [], []
    for d, indices, offsets, t in batches:
        dense.append(d)
        for o in offsets:
            np.testing.assert_array_equal(o, np.arange(len(d) + 1))
        cat.append(np.stack(indices, axis=1))
        y.append(t[:, 0])
    return np.concatenate(dense), np.concatenate(cat), np.concatenate(y)


def expect_split(ref, name, batches):
    dense, cat, y = collect(batches)
    idx = ref[name]
    np.testing.assert_array_equal(cat, ref["X_cat"][idx])
    np.testing.assert_array_equal(y, ref["y"][idx].astype(np.float32))
    np.testing.assert_allclose(dense, np.log(ref["X_int"][idx].astype(np.float32) + 1), rtol=1e-6)


@pytest.mark.parametrize("max_ind_range,rate", [(-1, 0.0), (50, 0.0), (-1, 0.4)])
def test_preprocessing_and_splits_equal_the_numpy_pipeline(tmp_path, max_ind_range, rate):
    lines = make_raw(tmp_path / "train.txt", 7003, seed=1)
    ref = reference_pipeline(lines, 7, max_ind_range, rate, seed=7)
    opts = options(tmp_path, max_ind_range=max_ind_range, data_sub_sample_rate=rate)
    counts = strata.dlrm.dataset_counts(**opts)
    assert counts == ref["counts"].tolist()
    with np.load(tmp_path / "kaggleAdDisplayChallenge_processed.npz") as p:
        assert sorted(p.files) == ["X_cat", "X_int", "counts", "y"]
        for k in ["X_cat", "X_int", "y", "counts"]:
            assert p[k].dtype == np.int32
            np.testing.assert_array_equal(p[k], ref[k])
    with np.load(tmp_path / "train_day_count.npz") as d:
        np.testing.assert_array_equal(d["total_per_file"], ref["total_per_file"])
    with np.load(tmp_path / "train_fea_count.npz") as f:
        np.testing.assert_array_equal(f["counts"], ref["counts"])
    # The train order continues the stream after the sub-sampling draws of this process.
    train = strata.dlrm.Batches(split="train", **opts)
    assert len(train) == -(-len(ref["train"]) // 64)
    expect_split(ref, "train", train)
    rows = np.minimum(ref["counts"], max_ind_range) if max_ind_range > 0 else ref["counts"]
    assert train.rows == [max(1, int(r)) for r in rows]
    for split in ["test", "val"]:
        expect_split(ref, split, strata.dlrm.Batches(split=split, **opts))
    # The model takes its rows from the data.
    model = strata.dlrm.DLRM(**{k: v for k, v in opts.items()}, arch_sparse_feature_size=2)
    assert model.table_rows == train.rows


def test_day_randomization_and_reading_numpy_files(tmp_path):
    lines = make_raw(tmp_path / "train.txt", 2000, seed=2)
    ref = reference_pipeline(lines, 7, -1, 0.0, seed=7)
    # The processed file as the reference writes it: X_cat float64 transposed (Fortran order).
    np.savez_compressed(tmp_path / "kaggleAdDisplayChallenge_processed.npz",
                        X_cat=np.transpose(np.transpose(ref["X_cat"]).astype(np.float64)), X_int=ref["X_int"],
                        y=ref["y"], counts=ref["counts"])
    np.savez_compressed(tmp_path / "train_day_count.npz", total_per_file=ref["total_per_file"])
    np.random.seed(7)
    offsets = np.concatenate(([0], np.cumsum(ref["total_per_file"])))
    days = [np.random.permutation(np.arange(offsets[d], offsets[d + 1])) for d in range(6)]
    ref["train"] = np.concatenate(days)
    opts = options(tmp_path, data_randomize="day")
    expect_split(ref, "train", strata.dlrm.Batches(split="train", **opts))
    ref["none"] = np.arange(offsets[-1])
    expect_split(ref, "none", strata.dlrm.Batches(split="none", **options(tmp_path, data_randomize="none")))
    # np.savez (stored members) too, mapped with memory_map.
    np.savez(tmp_path / "stored.npz", X_cat=ref["X_cat"], X_int=ref["X_int"], y=ref["y"], counts=ref["counts"])
    expect_split(ref, "none", strata.dlrm.Batches(split="none", **options(
        tmp_path, data_randomize="none", memory_map=True, processed_data_file=str(tmp_path / "stored.npz"))))


def test_bad_input_names_the_file_and_line_or_member(tmp_path):
    lines = make_raw(tmp_path / "train.txt", 50, seed=3)
    f = lines[20].split("\t")
    f[0] = "5"
    lines[20] = "\t".join(f)
    (tmp_path / "train.txt").write_text("\n".join(lines) + "\n")
    with pytest.raises(strata.StrataError, match=r"train.txt' line 21, column label: '5' is not a 0/1 label"):
        strata.dlrm.dataset_counts(**options(tmp_path))
    np.savez_compressed(tmp_path / "p.npz", X_cat=np.zeros((3, 26), np.int32), X_int=np.zeros((3, 13), np.int32),
                        counts=np.ones(26, np.int32))
    np.savez_compressed(tmp_path / "train_day_count.npz", total_per_file=np.array([1, 1, 1, 0, 0, 0, 0]))
    with pytest.raises(strata.StrataError, match=r"member 'y' is missing \(it holds: X_cat, X_int, counts\)"):
        strata.dlrm.Batches(split="train", **options(tmp_path, processed_data_file=str(tmp_path / "p.npz")))
    with pytest.raises(strata.StrataError, match=r"Batches\(split=...\): expected train, test, val or none"):
        strata.dlrm.Batches(split="dev", **options(tmp_path))
