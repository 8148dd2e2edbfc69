"""strata.metrics: binary-classification metrics as scikit-learn computes them (models/metrics.h).

``roc_auc_score(y_true, y_score)`` is the exact ROC AUC (ties count one half, Note [Exact ROC AUC]);
with one class in ``y_true`` it warns and returns NaN, as ``sklearn.metrics.roc_auc_score`` does.
``accuracy_score(y_true, y_score)`` rounds the scores half to even (the DLRM reference's
``np.round(S) == T``); ``log_loss(y_true, y_score)`` is the mean binary cross-entropy with the
probabilities clipped to [2^-52, 1 - 2^-52]. Targets must be 0 or 1.
"""

import math
import warnings

from . import _C

__all__ = ["roc_auc_score", "accuracy_score", "log_loss"]


def roc_auc_score(y_true, y_score):
    auc = _C.metrics.roc_auc(y_true, y_score)
    if math.isnan(auc):
        warnings.warn("Only one class is present in y_true. ROC AUC score is not defined in that case.",
                      RuntimeWarning, stacklevel=2)
    return auc


def accuracy_score(y_true, y_score):
    return _C.metrics.accuracy(y_true, y_score)


def log_loss(y_true, y_score):
    return _C.metrics.log_loss(y_true, y_score)
