"""strata.optim.lr_scheduler against torch.optim.lr_scheduler, step by step."""

import re
import warnings

import numpy as np
import pytest
import torch

import strata
import strata.optim as so
import strata.optim.lr_scheduler as ss

STEPS = 60
# torch warns when its scheduler steps before its optimizer ever did; several tests do that on purpose.
pytestmark = pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before")


def make_pair(opt_name="SGD", lrs=(0.1, 0.03), **kwargs):
    """The same two-group optimizer in torch and strata, over the same initial values."""
    rng = np.random.default_rng(0)
    init = [rng.standard_normal((3, 2)), rng.standard_normal(4)]
    pt = [torch.tensor(a, requires_grad=True) for a in init]
    ps = [strata.tensor(a) for a in init]
    gt = [{"params": [pt[0]], "lr": lrs[0]}, {"params": [pt[1]], "lr": lrs[1]}]
    gs = [{"params": [ps[0]], "lr": lrs[0]}, {"params": [ps[1]], "lr": lrs[1]}]
    return (getattr(torch.optim, opt_name)(gt, **kwargs, foreach=False), getattr(so, opt_name)(gs, **kwargs), pt, ps)


def step_both(opt_t, opt_s, pt, ps, rng):
    for a, b in zip(pt, ps):
        g = rng.standard_normal(tuple(a.shape))
        a.grad = torch.tensor(g)
        b.grad = strata.tensor(g)
    opt_t.step()
    opt_s.step()


def train_both(opt_t, opt_s, sched_t, sched_s, pt, ps, steps, seed, rtol):
    """`steps` optimizer and scheduler steps on both sides; the parameters end up close."""
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        step_both(opt_t, opt_s, pt, ps, rng)
        sched_t.step()
        sched_s.step()
    for a, b in zip(pt, ps):
        np.testing.assert_allclose(b.numpy(), a.detach().numpy(), rtol=rtol)


SCHEDULES = {
    "LambdaLR": lambda m, o: m.LambdaLR(o, lambda e: 0.95 ** e),
    "LambdaLR-per-group": lambda m, o: m.LambdaLR(o, [lambda e: 1.0 / (e + 1), lambda e: 0.5 * (e % 4)]),
    "StepLR": lambda m, o: m.StepLR(o, step_size=7, gamma=0.5),
    "MultiStepLR": lambda m, o: m.MultiStepLR(o, milestones=[30, 5, 12, 12], gamma=0.3),
    "ExponentialLR": lambda m, o: m.ExponentialLR(o, gamma=0.93),
    "CosineAnnealingLR": lambda m, o: m.CosineAnnealingLR(o, T_max=10, eta_min=0.001),
    "CosineAnnealingLR-long": lambda m, o: m.CosineAnnealingLR(o, T_max=45),
    "LinearLR": lambda m, o: m.LinearLR(o, start_factor=0.1, total_iters=8),
    "LinearLR-decay": lambda m, o: m.LinearLR(o, start_factor=0.5, end_factor=0.0, total_iters=10),
    "OneCycleLR": lambda m, o: m.OneCycleLR(o, max_lr=[0.5, 0.2], total_steps=STEPS + 1),
    "OneCycleLR-3phase-linear": lambda m, o: m.OneCycleLR(o, max_lr=0.4, epochs=4, steps_per_epoch=16,
                                                          three_phase=True, anneal_strategy="linear",
                                                          base_momentum=0.8, max_momentum=[0.9, 0.95]),
    "SequentialLR-warmup-cosine": lambda m, o: m.SequentialLR(
        o, [m.LinearLR(o, start_factor=0.1, total_iters=5), m.CosineAnnealingLR(o, T_max=20)], milestones=[5]),
    "SequentialLR-three": lambda m, o: m.SequentialLR(
        o, [m.ExponentialLR(o, gamma=0.9), m.StepLR(o, step_size=3, gamma=0.5), m.MultiStepLR(o, [2, 9])],
        milestones=[4, 20]),
}


def group_values(opt, key):
    return [g[key] for g in opt.param_groups]


@pytest.mark.parametrize("opt_name,opt_kwargs", [("SGD", dict(momentum=0.9)), ("Adam", dict())])
@pytest.mark.parametrize("name", list(SCHEDULES))
def test_schedule_matches_torch_step_by_step(name, opt_name, opt_kwargs):
    opt_t, opt_s, pt, ps = make_pair(opt_name, **opt_kwargs)
    sched_t = SCHEDULES[name](torch.optim.lr_scheduler, opt_t)
    sched_s = SCHEDULES[name](ss, opt_s)
    rng = np.random.default_rng(1)
    assert sched_s.get_last_lr() == sched_t.get_last_lr()
    assert sched_s.base_lrs == sched_t.base_lrs if hasattr(sched_t, "base_lrs") else True
    for step in range(STEPS):
        step_both(opt_t, opt_s, pt, ps, rng)
        sched_t.step()
        sched_s.step()
        # The same double-precision formulas in the same order: equal to the last bit.
        assert sched_s.get_last_lr() == sched_t.get_last_lr(), f"step {step}"
        assert sched_s.last_epoch == sched_t.last_epoch
        assert group_values(opt_s, "lr") == group_values(opt_t, "lr")
        if name.startswith("OneCycleLR"):
            key = "momentum" if opt_name == "SGD" else "betas"
            assert group_values(opt_s, key) == group_values(opt_t, key), f"step {step}"
    for a, b in zip(pt, ps):
        np.testing.assert_allclose(b.numpy(), a.detach().numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LinearLR",
                                  "OneCycleLR", "SequentialLR-warmup-cosine", "LambdaLR"])
def test_state_dict_matches_torch_and_resumes(name):
    opt_t, opt_s, _, _ = make_pair(momentum=0.9)
    sched_t = SCHEDULES[name](torch.optim.lr_scheduler, opt_t)
    sched_s = SCHEDULES[name](ss, opt_s)
    for _ in range(13):
        sched_t.step()
        sched_s.step()
    sd_t, sd_s = sched_t.state_dict(), sched_s.state_dict()
    common = {"base_lrs", "last_epoch", "_step_count", "_last_lr", "step_size", "gamma", "milestones", "T_max",
              "eta_min", "start_factor", "end_factor", "total_iters", "total_steps", "cycle_momentum", "_milestones"}
    for key in common & set(sd_t):
        assert sd_s[key] == sd_t[key], key
        assert type(sd_s[key]) is type(sd_t[key]), key
    if "_schedulers" in sd_t:
        assert len(sd_s["_schedulers"]) == len(sd_t["_schedulers"])
    # Torch continues; a fresh strata scheduler over a fresh optimizer whose groups got the saved
    # values, loaded with strata's or with torch's state, continues identically.
    snapshot = [{k: v for k, v in g.items() if k != "params"} for g in opt_s.param_groups]
    expected = []
    for _ in range(10):
        sched_t.step()
        expected.append(sched_t.get_last_lr())
    for state in (sd_s, sd_t):
        _, opt_2, _, _ = make_pair(momentum=0.9)
        resumed = SCHEDULES[name](ss, opt_2)
        for group, saved in zip(opt_2.param_groups, snapshot):
            group.update(saved)
        resumed.load_state_dict(state)
        assert resumed.last_epoch == 13
        got = []
        for _ in range(10):
            resumed.step()
            got.append(resumed.get_last_lr())
        assert got == expected


def test_optimizer_uses_the_scheduled_lr_and_keeps_initial_lr():
    opt_t, opt_s, pt, ps = make_pair(momentum=0.9)
    sched_t = torch.optim.lr_scheduler.StepLR(opt_t, step_size=2, gamma=0.1)
    sched_s = ss.StepLR(opt_s, step_size=2, gamma=0.1)
    assert [g["initial_lr"] for g in opt_s.param_groups] == [g["initial_lr"] for g in opt_t.param_groups]
    train_both(opt_t, opt_s, sched_t, sched_s, pt, ps, steps=6, seed=3, rtol=1e-12)
    # The optimizer's state_dict carries initial_lr, as torch's does, and loads it back.
    sd = opt_s.state_dict()
    assert sd["param_groups"][0]["initial_lr"] == 0.1
    opt_s.param_groups[0]["initial_lr"] = 5.0
    opt_s.load_state_dict(sd)
    assert opt_s.param_groups[0]["initial_lr"] == 0.1


def test_deprecated_step_with_epoch_uses_the_closed_form():
    for make in (lambda m, o: m.StepLR(o, 3, 0.5), lambda m, o: m.CosineAnnealingLR(o, 10),
                 lambda m, o: m.MultiStepLR(o, [2, 6]), lambda m, o: m.ExponentialLR(o, 0.9),
                 lambda m, o: m.LinearLR(o, 0.2, total_iters=4)):
        opt_t, opt_s, _, _ = make_pair()
        sched_t, sched_s = make(torch.optim.lr_scheduler, opt_t), make(ss, opt_s)
        for epoch in (5, 2, 9, 3):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sched_t.step(epoch)
            with pytest.warns(UserWarning, match="deprecated"):
                sched_s.step(epoch)
            assert sched_s.get_last_lr() == pytest.approx(sched_t.get_last_lr(), rel=1e-15)


@pytest.mark.parametrize("kwargs", [dict(), dict(mode="max", patience=2, factor=0.5), dict(threshold_mode="abs",
                                    threshold=0.05, patience=1, cooldown=2, min_lr=[0.01, 0.02]),
                                    dict(mode="max", threshold_mode="abs", patience=0, eps=0.05)])
def test_reduce_lr_on_plateau_matches_torch(kwargs):
    opt_t, opt_s, _, _ = make_pair()
    sched_t = torch.optim.lr_scheduler.ReduceLROnPlateau(opt_t, **kwargs)
    sched_s = ss.ReduceLROnPlateau(opt_s, **kwargs)
    rng = np.random.default_rng(5)
    metrics = np.concatenate([np.linspace(1, 0.5, 10), 0.5 + 0.01 * rng.standard_normal(40)])
    for i, m in enumerate(metrics):
        sched_t.step(m)
        sched_s.step(strata.tensor(m) if i % 2 else m)
        assert sched_s.get_last_lr() == sched_t.get_last_lr(), f"step {i}"
        assert (sched_s.num_bad_epochs, sched_s.cooldown_counter, sched_s.best, sched_s.last_epoch) == (
            sched_t.num_bad_epochs, sched_t.cooldown_counter, sched_t.best, sched_t.last_epoch)
    sd_t = sched_t.state_dict()
    sd_s = sched_s.state_dict()
    for key in sd_s:
        assert sd_s[key] == sd_t[key], key
    fresh = ss.ReduceLROnPlateau(make_pair()[1])
    fresh.load_state_dict(sd_t)
    assert fresh.state_dict() == sd_s


def test_adamw_with_warmup_then_cosine_is_torch_equivalent():
    opt_t, opt_s, pt, ps = make_pair("AdamW", lrs=(0.01, 0.01))
    make = SCHEDULES["SequentialLR-warmup-cosine"]
    sched_t, sched_s = make(torch.optim.lr_scheduler, opt_t), make(ss, opt_s)
    train_both(opt_t, opt_s, sched_t, sched_s, pt, ps, steps=25, seed=7, rtol=1e-10)


def check(exc, pattern, fn, *args, **kwargs):
    with pytest.raises(exc, match=re.escape(pattern)):
        fn(*args, **kwargs)


def test_bad_arguments_raise_what_torch_raises():
    _, opt, _, _ = make_pair()
    check(TypeError, "list is not an Optimizer", ss.StepLR, [], 3)
    check(TypeError, "NoneType is not an Optimizer", ss.ReduceLROnPlateau, None)
    check(ValueError, "Expected 2 lr_lambdas, but got 3", ss.LambdaLR, opt, [abs, abs, abs])
    check(TypeError, "lr_lambda should be a function, but got int", ss.LambdaLR, opt, 3)
    check(ValueError, "Starting multiplicative factor expected to be greater than 0", ss.LinearLR, opt, 0.0)
    check(ValueError, "Ending multiplicative factor expected to be between 0 and 1.", ss.LinearLR, opt, 0.5, 1.5)
    check(ValueError, "You must define either total_steps OR (epochs AND steps_per_epoch)", ss.OneCycleLR, opt, 0.1)
    check(ValueError, "Expected positive integer total_steps, but got 0", ss.OneCycleLR, opt, 0.1, total_steps=0)
    check(ValueError, "Expected float between 0 and 1 pct_start, but got 1.5", ss.OneCycleLR, opt, 0.1,
          total_steps=5, pct_start=1.5)
    check(ValueError, "anneal_strategy must be one of 'cos' or 'linear', instead got exp", ss.OneCycleLR, opt, 0.1,
          total_steps=5, anneal_strategy="exp")
    check(ValueError, "Factor should be < 1.0.", ss.ReduceLROnPlateau, opt, factor=1.0)
    check(ValueError, "mode avg is unknown!", ss.ReduceLROnPlateau, opt, mode="avg")
    check(ValueError, "threshold mode x is unknown!", ss.ReduceLROnPlateau, opt, threshold_mode="x")
    check(ValueError, "expected 2 min_lrs, got 3", ss.ReduceLROnPlateau, opt, min_lr=[0, 0, 0])
    check(ValueError, "StepLR: step_size must be a positive integer, got 0", ss.StepLR, opt, 0)
    check(TypeError, "step_size must be an int, got float", ss.StepLR, opt, 2.5)
    check(TypeError, "'gamma' must be a number, got str", ss.ExponentialLR, opt, "0.9")
    check(ValueError, "expects number of schedulers provided to be one more than the number of milestone points",
          ss.SequentialLR, opt, [ss.StepLR(opt, 2)], milestones=[3])
    check(ValueError, "expects at least one scheduler", ss.SequentialLR, opt, [], [])
    check(ValueError, "does not support `ReduceLROnPlateau`", ss.SequentialLR, opt,
          [ss.StepLR(opt, 2), ss.ReduceLROnPlateau(opt)], [2])
    _, other, _, _ = make_pair()
    check(ValueError, "expects all schedulers to belong to the same optimizer", ss.SequentialLR, opt,
          [ss.StepLR(opt, 2), ss.StepLR(other, 2)], [2])
    _, fresh, _, _ = make_pair()
    check(KeyError, "param 'initial_lr' is not specified in param_groups[0]", ss.StepLR, fresh, 3, last_epoch=4)
    # A lambda that fails or returns a non-number raises its error from step().
    lam = ss.LambdaLR(fresh, lambda e: 1.0 if e < 2 else "x")
    lam.step()
    check(TypeError, "lr_lambda returned str, expected a number", lam.step)
    # OneCycleLR refuses to step past its total.
    _, o2, _, _ = make_pair(momentum=0.9)
    cyc = ss.OneCycleLR(o2, 0.1, total_steps=3)
    for _ in range(3):
        cyc.step()
    check(ValueError, "Tried to step 4 times. The specified number of total steps is 3", cyc.step)
    _, o3, _, _ = make_pair()
    check(ValueError, "optimizer must support momentum or beta1 with `cycle_momentum` option enabled",
          ss.OneCycleLR, so.Adagrad([strata.zeros(2)]), 0.1, total_steps=3)
    del o3


def test_bad_state_dicts():
    _, opt, _, _ = make_pair()
    s = ss.StepLR(opt, 3)
    check(TypeError, "StepLR.load_state_dict: expected a dict, got list", s.load_state_dict, [])
    check(ValueError, "unexpected key 'bogus'", s.load_state_dict, {"bogus": 1.0})
    check(ValueError, "key 'base_lrs' has 3 values, but the optimizer has 2 param groups", s.load_state_dict,
          {"base_lrs": [0.1, 0.1, 0.1]})
    check(ValueError, "key 'last_epoch' must be a whole number, got 1.5", s.load_state_dict, {"last_epoch": 1.5})
    check(TypeError, "'gamma' must be a number, got str", s.load_state_dict, {"gamma": "x"})
    check(ValueError, "key 'step_size' must be a positive integer, got 0.0", s.load_state_dict, {"step_size": 0})
    assert s.last_epoch == 0 and s.state_dict()["step_size"] == 3  # nothing changed
    p = ss.ReduceLROnPlateau(opt)
    check(ValueError, "mode 'avg' is unknown", p.load_state_dict, {"mode": "avg"})
    check(ValueError, "Factor should be < 1.0.", p.load_state_dict, {"factor": 2.0})
