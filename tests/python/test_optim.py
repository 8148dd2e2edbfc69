"""strata.optim against torch.optim (foreach=False) on identical parameters and gradient sequences."""

import re

import numpy as np
import pytest
import torch

import strata
import strata.optim as so

STEPS = 20
SHAPES = [(4, 3), (5,), ()]
TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}


def make_data(dtype, shapes=SHAPES, steps=STEPS, seed=0):
    rng = np.random.default_rng(seed)
    init = [rng.standard_normal(s).astype(dtype) for s in shapes]
    grads = [[rng.standard_normal(s).astype(dtype) for s in shapes] for _ in range(steps)]
    return init, grads


def torch_params(init):
    return [torch.tensor(a.copy(), requires_grad=True) for a in init]


def strata_params(init):
    return [strata.tensor(a.copy()) for a in init]


def feed(params_t, params_s, grads):
    for pt, ps, g in zip(params_t, params_s, grads):
        pt.grad = torch.tensor(g.copy())
        ps.grad = strata.tensor(g.copy())


def assert_params_close(params_t, params_s, dtype, what=""):
    for i, (pt, ps) in enumerate(zip(params_t, params_s)):
        np.testing.assert_allclose(ps.numpy(), pt.detach().numpy(), err_msg=f"{what} param {i}", **TOL[dtype])


def torch_kwargs(kwargs):
    return dict(kwargs, foreach=False)


CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.2)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True)),
    ("SGD", dict(lr=0.05, momentum=0.9, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.5, maximize=True, weight_decay=0.1)),
    ("Adam", dict()),
    ("Adam", dict(lr=0.01, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, amsgrad=True)),
    ("Adam", dict(lr=0.01, maximize=True)),
    ("Adam", dict(lr=0.01, betas=(0.3, 0.9), eps=1e-6)),
    ("AdamW", dict()),
    ("AdamW", dict(lr=0.01, weight_decay=0.1, amsgrad=True)),
    ("Adagrad", dict()),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05)),
    ("Adagrad", dict(lr=0.1, weight_decay=0.1, initial_accumulator_value=0.1)),
    ("Adagrad", dict(lr=0.1, maximize=True)),
    ("RMSprop", dict()),
    ("RMSprop", dict(lr=0.01, alpha=0.9, eps=1e-6)),
    ("RMSprop", dict(lr=0.01, momentum=0.9)),
    ("RMSprop", dict(lr=0.01, centered=True)),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01, alpha=0.3, centered=True, maximize=True)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_parity_with_torch_over_20_steps(name, kwargs, dtype):
    init, grads = make_data(dtype)
    pt, ps = torch_params(init), strata_params(init)
    opt_t = getattr(torch.optim, name)(pt, **torch_kwargs(kwargs))
    opt_s = getattr(so, name)(ps, **kwargs)
    for g in grads:
        feed(pt, ps, g)
        opt_t.step()
        opt_s.step()
    assert_params_close(pt, ps, dtype, f"{name} {kwargs}")
    # The state is readable and matches torch's.
    for p_t, p_s in zip(pt, ps):
        st_t, st_s = opt_t.state[p_t], opt_s.state[p_s]
        assert set(st_s) == set(st_t)
        for key in st_t:
            np.testing.assert_allclose(np.asarray(st_s[key].numpy()), st_t[key].numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_several_param_groups(dtype):
    init, grads = make_data(dtype)
    pt, ps = torch_params(init), strata_params(init)
    opt_t = torch.optim.SGD([{"params": pt[:1], "lr": 0.2, "momentum": 0.9}, {"params": pt[1:]}], lr=0.05,
                            foreach=False)
    opt_s = so.SGD([{"params": ps[:1], "lr": 0.2, "momentum": 0.9}, {"params": ps[1:]}], lr=0.05)
    at = torch_params(init)
    as_ = strata_params(init)
    adam_t = torch.optim.Adam([{"params": at[:2], "betas": (0.8, 0.99)}, {"params": at[2:], "lr": 0.1}], lr=0.01,
                              foreach=False)
    adam_s = so.Adam([{"params": as_[:2], "betas": (0.8, 0.99)}, {"params": as_[2:], "lr": 0.1}], lr=0.01)
    for g in grads:
        feed(pt, ps, g)
        feed(at, as_, g)
        for o in (opt_t, opt_s, adam_t, adam_s):
            o.step()
    assert_params_close(pt, ps, dtype, "SGD groups")
    assert_params_close(at, as_, dtype, "Adam groups")
    assert opt_s.param_groups[1]["momentum"] == 0
    assert adam_s.param_groups[0]["betas"] == (0.8, 0.99)


def test_undefined_grads_are_skipped():
    init, grads = make_data(np.float32)
    pt, ps = torch_params(init), strata_params(init)
    opt_t = torch.optim.Adam(pt, lr=0.01, foreach=False)
    opt_s = so.Adam(ps, lr=0.01)
    for s, g in enumerate(grads):
        feed(pt, ps, g)
        if s % 2 == 0:
            pt[1].grad = None
            ps[1].grad = None
        opt_t.step()
        opt_s.step()
    assert_params_close(pt, ps, np.float32)
    assert float(opt_s.state[ps[1]]["step"].item()) == STEPS // 2


@pytest.mark.parametrize("name,kwargs", [("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
                                         ("Adam", dict(lr=0.01, amsgrad=True)),
                                         ("AdamW", dict(lr=0.01)),
                                         ("Adagrad", dict(lr=0.1, lr_decay=0.01)),
                                         ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True)),
                                         ("RowWiseAdagrad", dict(lr=0.1))])
def test_state_dict_round_trip_mid_run(name, kwargs):
    init, grads = make_data(np.float32)
    ps = strata_params(init)
    opt = getattr(so, name)(ps, **kwargs)
    for g in grads[:10]:
        for p, gi in zip(ps, g):
            p.grad = strata.tensor(gi)
        opt.step()
    sd = opt.state_dict()
    assert sorted(sd) == ["param_groups", "state"]
    assert sd["param_groups"][0]["params"] == [0, 1, 2]
    assert sd["param_groups"][0]["lr"] == kwargs["lr"]
    copies = [strata.tensor(p.numpy().copy()) for p in ps]
    opt2 = getattr(so, name)(copies, lr=0.5)  # the loaded options replace these
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == kwargs["lr"]
    for g in grads[10:]:
        for p, q, gi in zip(ps, copies, g):
            p.grad = strata.tensor(gi)
            q.grad = strata.tensor(gi)
        opt.step()
        opt2.step()
    for p, q in zip(ps, copies):
        np.testing.assert_array_equal(p.numpy(), q.numpy())


@pytest.mark.parametrize("name,kwargs", [("SGD", dict(lr=0.1, momentum=0.9)),
                                         ("Adam", dict(lr=0.01, amsgrad=True)),
                                         ("AdamW", dict(lr=0.01)),
                                         ("Adagrad", dict(lr=0.1))])
def test_loads_a_torch_state_dict_converted_to_numpy(name, kwargs):
    init, grads = make_data(np.float32)
    pt = torch_params(init)
    opt_t = getattr(torch.optim, name)(pt, **torch_kwargs(kwargs))
    for g in grads[:10]:
        for p, gi in zip(pt, g):
            p.grad = torch.tensor(gi)
        opt_t.step()
    sd_t = opt_t.state_dict()
    sd_np = {
        "state": {i: {k: v.numpy() for k, v in st.items()} for i, st in sd_t["state"].items()},
        "param_groups": sd_t["param_groups"],
    }
    ps = [strata.tensor(p.detach().numpy().copy()) for p in pt]
    opt_s = getattr(so, name)(ps)
    opt_s.load_state_dict(sd_np)
    assert opt_s.param_groups[0]["lr"] == kwargs["lr"]
    # torch-only keys (foreach, fused, ...) are kept as they are.
    assert opt_s.param_groups[0]["foreach"] is False
    for g in grads[10:]:
        feed(pt, ps, g)
        opt_t.step()
        opt_s.step()
    assert_params_close(pt, ps, np.float32, name)


def test_param_group_lr_change_takes_effect():
    init, grads = make_data(np.float32)
    pt, ps = torch_params(init), strata_params(init)
    opt_t = torch.optim.Adam(pt, lr=0.01, foreach=False)
    opt_s = so.Adam(ps, lr=0.01)
    sched_t = torch.optim.lr_scheduler.StepLR(opt_t, step_size=5, gamma=0.5)
    for s, g in enumerate(grads):
        feed(pt, ps, g)
        opt_t.step()
        opt_s.step()
        sched_t.step()
        for group in opt_s.param_groups:  # what an LR scheduler does
            group.setdefault("initial_lr", group["lr"])
            group["lr"] = opt_t.param_groups[0]["lr"]
    assert opt_s.param_groups[0]["lr"] == pytest.approx(0.01 * 0.5**4)
    assert opt_s.param_groups[0]["initial_lr"] == 0.01
    assert_params_close(pt, ps, np.float32)


def test_row_wise_adagrad_against_numpy():
    init, grads = make_data(np.float32, shapes=[(6, 4), (5,)])
    ps = strata_params(init)
    lr, eps, wd = 0.1, 1e-6, 0.05
    opt = so.RowWiseAdagrad(ps, lr=lr, eps=eps, weight_decay=wd)
    ref = [a.astype(np.float64) for a in init]
    acc = [np.zeros(6), np.zeros(1)]
    for g in grads:
        for p, gi in zip(ps, g):
            p.grad = strata.tensor(gi)
        opt.step()
        for k in range(2):
            gk = gi_ = g[k].astype(np.float64) + wd * ref[k]
            rows = gk.reshape(acc[k].shape[0], -1)
            acc[k] += (rows**2).mean(axis=1)
            ref[k] = (ref[k].reshape(rows.shape) - lr * rows / (np.sqrt(acc[k])[:, None] + eps)).reshape(gi_.shape)
    for p, r in zip(ps, ref):
        np.testing.assert_allclose(p.numpy(), r, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(opt.state[ps[0]]["sum"].numpy(), acc[0], rtol=1e-5)
    assert opt.state[ps[1]]["sum"].shape == (1,)


def test_step_with_closure_and_zero_grad():
    p = strata.tensor(np.array([1.0, 2.0], dtype=np.float32))
    opt = so.SGD([p], lr=0.5)
    calls = []

    def closure():
        calls.append(strata.is_grad_enabled())
        p.grad = strata.tensor(np.array([1.0, -1.0], dtype=np.float32))
        return 3.5

    with strata.no_grad():
        assert opt.step(closure) == 3.5
    assert calls == [True]
    np.testing.assert_array_equal(p.numpy(), [0.5, 2.5])
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(p.grad.numpy(), [0, 0])
    opt.zero_grad()
    assert p.grad is None
    assert opt.step() is None


def test_add_param_group_and_repr():
    a = strata.zeros(2)
    b = strata.zeros(3)
    opt = so.SGD([a], lr=0.1, momentum=0.9)
    opt.add_param_group({"params": b, "lr": 0.01})
    assert len(opt.param_groups) == 2
    assert opt.param_groups[1]["params"][0] is b
    assert opt.param_groups[1]["momentum"] == 0.9
    text = repr(opt)
    assert text.startswith("SGD (\nParameter Group 0\n    dampening: 0.0\n    lr: 0.1\n")
    assert "Parameter Group 1\n" in text and "    nesterov: False\n" in text and text.endswith(")")
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        opt.add_param_group({"params": [a]})
    assert len(opt.param_groups) == 2


def check_error(exc, pattern, fn, *args, **kwargs):
    with pytest.raises(exc, match=re.escape(pattern)):
        fn(*args, **kwargs)


def test_bad_hyperparameters():
    p = [strata.zeros(2)]
    check_error(ValueError, "Invalid learning rate: -1.0", so.SGD, p, lr=-1.0)
    check_error(ValueError, "Invalid momentum value: -0.1", so.SGD, p, momentum=-0.1)
    check_error(ValueError, "Nesterov momentum requires a momentum and zero dampening", so.SGD, p, nesterov=True)
    check_error(ValueError, "Invalid weight_decay value: -0.5", so.SGD, p, weight_decay=-0.5)
    check_error(ValueError, "Invalid beta parameter at index 0: 1.0", so.Adam, p, betas=(1.0, 0.999))
    check_error(ValueError, "Invalid beta parameter at index 1: -0.5", so.AdamW, p, betas=(0.9, -0.5))
    check_error(ValueError, "Invalid epsilon value: -1e-08", so.Adam, p, eps=-1e-8)
    check_error(ValueError, "Invalid lr_decay value: -1.0", so.Adagrad, p, lr_decay=-1.0)
    check_error(ValueError, "Invalid initial_accumulator_value value: -1.0", so.Adagrad, p,
                initial_accumulator_value=-1.0)
    check_error(ValueError, "Invalid learning rate: -0.1", so.RowWiseAdagrad, p, lr=-0.1)
    check_error(ValueError, "Invalid alpha value: -0.5", so.RMSprop, p, alpha=-0.5)
    check_error(ValueError, "Invalid momentum value: -1.0", so.RMSprop, p, momentum=-1.0)
    check_error(ValueError, "Invalid epsilon value: -1.0", so.RMSprop, p, eps=-1.0)
    check_error(TypeError, "option 'centered' must be a bool, got str", so.RMSprop, p, centered="yes")
    check_error(ValueError, "Invalid learning rate: -2.0", so.SGD, [{"params": p, "lr": -2.0}])
    check_error(TypeError, "option 'lr' must be a number, got str", so.SGD, p, lr="0.1")
    check_error(TypeError, "betas must be a pair of numbers", so.Adam, p, betas=0.9)
    check_error(ValueError, "betas must be a pair of numbers, got 3 values", so.Adam, p, betas=(0.9, 0.9, 0.9))
    check_error(ValueError, "optimizer got an empty parameter list", so.SGD, [])
    check_error(TypeError, "should be an iterable of Tensors or dicts, but got Tensor", so.SGD, p[0])
    check_error(TypeError, "Please use a list instead", so.SGD, {1, 2})
    check_error(TypeError, "optimizer can only optimize Tensors, but one of the params is ndarray", so.SGD,
                [np.zeros(2)])
    check_error(ValueError, "must be f32 or f64, got Tensor[2] i64", so.SGD, [strata.zeros(2, dtype=strata.int64)])
    opt = so.SGD(p, lr=0.1)
    check_error(ValueError, "Invalid learning rate: -3.0", opt.param_groups[0].__setitem__, "lr", -3.0)
    assert opt.param_groups[0]["lr"] == 0.1
    check_error(ValueError, "params cannot be replaced", opt.param_groups[0].__setitem__, "params", [])


def test_bad_state_dicts():
    a, b = strata.zeros((2, 3)), strata.zeros(4)
    src = so.Adam([{"params": [a]}, {"params": [b]}], amsgrad=True)
    a.grad = strata.ones((2, 3))
    b.grad = strata.ones(4)
    src.step()
    good = src.state_dict()

    x, y = strata.zeros((2, 3)), strata.zeros(4)
    dst = so.Adam([{"params": [x]}, {"params": [y]}], amsgrad=True)
    check_error(TypeError, "expected a dict, got list", dst.load_state_dict, [])
    check_error(ValueError, "the state dict lacks the key 'param_groups'", dst.load_state_dict, {"state": {}})
    check_error(ValueError, "loaded state dict has a different number of parameter groups",
                so.Adam([x, y]).load_state_dict, good)
    bad = {"state": good["state"], "param_groups": [dict(good["param_groups"][0], params=[0, 5]),
                                                    good["param_groups"][1]]}
    check_error(ValueError, "loaded state dict contains a parameter group that doesn't match the size of "
                "optimizer's group", dst.load_state_dict, bad)
    bad = {"state": {0: dict(good["state"][0], exp_avg=np.zeros((3, 2), np.float32)), 1: good["state"][1]},
           "param_groups": good["param_groups"]}
    check_error(ValueError, "key 'state.0.exp_avg' has shape [3, 2], expected [2, 3]", dst.load_state_dict, bad)
    bad = {"state": {1: {k: v for k, v in good["state"][1].items() if k != "exp_avg_sq"}},
           "param_groups": good["param_groups"]}
    check_error(ValueError, "missing key 'state.1.exp_avg_sq'", dst.load_state_dict, bad)
    bad = {"state": {0: dict(good["state"][0], exp_avg="zeros")}, "param_groups": good["param_groups"]}
    check_error(TypeError, "state[0]['exp_avg']: expected a Tensor or an array, got str", dst.load_state_dict, bad)
    bad = {"state": {}, "param_groups": [dict(good["param_groups"][0], lr=-1.0), good["param_groups"][1]]}
    check_error(ValueError, "param_groups.0: Invalid learning rate: -1.0", dst.load_state_dict, bad)
    # Failed loads changed nothing; a good one loads.
    assert len(dst.state) == 0
    dst.load_state_dict(good)
    assert len(dst.state) == 2
    np.testing.assert_array_equal(dst.state[x]["exp_avg"].numpy(), src.state[a]["exp_avg"].numpy())
