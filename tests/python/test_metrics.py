"""strata.metrics against scikit-learn (issue 25: AUC equals roc_auc_score within 1e-9 on random,
tied and one-class inputs)."""

import math
import warnings

import numpy as np
import pytest

import strata

sk = pytest.importorskip("sklearn.metrics")


@pytest.mark.parametrize("levels", [None, 3, 50])
@pytest.mark.parametrize("n", [2, 17, 1000, 20000])
def test_auc_matches_sklearn(n, levels):
    rng = np.random.default_rng(n * 7 + (levels or 0))
    y = (rng.random(n) < 0.3).astype(np.float32)
    y[0], y[-1] = 0, 1
    s = rng.random(n).astype(np.float32)
    if levels:  # heavy ties
        s = (np.floor(s * levels) / levels).astype(np.float32)
    assert abs(strata.metrics.roc_auc_score(y, s) - sk.roc_auc_score(y, s)) <= 1e-9


def test_auc_all_tied_is_half():
    y = np.array([0, 1, 0, 1, 1], np.float32)
    s = np.full(5, 0.25, np.float32)
    assert strata.metrics.roc_auc_score(y, s) == pytest.approx(sk.roc_auc_score(y, s), abs=1e-12) == 0.5


def test_auc_one_class_warns_and_is_nan_as_sklearn():
    y = np.ones(4, np.float32)
    s = np.array([0.1, 0.3, 0.2, 0.9], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = sk.roc_auc_score(y, s)
    with pytest.warns(RuntimeWarning, match="Only one class"):
        got = strata.metrics.roc_auc_score(y, s)
    assert math.isnan(got) and math.isnan(expected)


def test_accuracy_and_log_loss_match_sklearn():
    rng = np.random.default_rng(3)
    y = (rng.random(500) < 0.4).astype(np.float32)
    s = rng.random(500)
    s[:5] = [0.0, 1.0, 0.5, 0.5, 1e-30]
    s = s.astype(np.float64)
    assert strata.metrics.accuracy_score(y, s.astype(np.float32)) == sk.accuracy_score(y, np.round(s))
    assert strata.metrics.log_loss(y, s.astype(np.float32)) == pytest.approx(
        sk.log_loss(y, s.astype(np.float32).astype(np.float64)), rel=1e-12)


@pytest.mark.parametrize("y, s, text", [
    ([0, 2], [0.1, 0.2], r"targets\[1\] is 2"),
    ([0, 1], [0.1, float("nan")], r"scores\[1\] is NaN"),
    ([0, 1, 1], [0.1, 0.2], "scores has 2 elements but targets has 3"),
    ([], [], "no samples"),
])
def test_bad_input_names_the_argument(y, s, text):
    with pytest.raises(ValueError, match=text):
        strata.metrics.roc_auc_score(np.array(y, np.float32), np.array(s, np.float32))


def test_non_numeric_input_is_a_type_error():
    with pytest.raises(TypeError, match="y_score must be an array of numbers"):
        strata.metrics.roc_auc_score([0, 1], ["a", "b"])
