"""strata.nn against torch.nn 2.13: every layer's forward and gradients with the weights copied from
the torch module (through load_state_dict of the torch state_dict as NumPy arrays), state_dict keys
for the same structures, Python subclasses (also inside C++ containers), and bad input."""
from collections import OrderedDict

import numpy as np
import pytest
import torch

import strata
from strata import nn

RNG = np.random.default_rng(1)
TOL = dict(rtol=2e-5, atol=2e-5)


def rand(*shape, low=-1.0, high=1.0):
    return RNG.uniform(low, high, shape).astype(np.float32)


def np_state(module):
    return {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}


def copy_from_torch(s_mod, t_mod):
    result = s_mod.load_state_dict(np_state(t_mod))
    assert list(result.missing_keys) == [] and list(result.unexpected_keys) == []
    return s_mod


def compare(s_mod, t_mod, *inputs, grad_inputs=True, tol=TOL):
    """Forward on the same inputs, backward of the same cotangent; compares output, input grads,
    parameter grads (by name) and the state after the step (running statistics)."""
    s_in, t_in = [], []
    for a in inputs:
        req = grad_inputs and np.issubdtype(a.dtype, np.floating)
        s_in.append(strata.tensor(a).requires_grad_(req))
        t_in.append(torch.tensor(a, requires_grad=req))
    out_s, out_t = s_mod(*s_in), t_mod(*t_in)
    assert tuple(out_s.shape) == tuple(out_t.shape)
    np.testing.assert_allclose(out_s.numpy(), out_t.detach().numpy(), **tol)
    g = rand(*out_t.shape)
    out_s.backward(strata.tensor(g))
    out_t.backward(torch.tensor(g))
    for xs, xt in zip(s_in, t_in):
        if xt.requires_grad:
            np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), **tol)
    t_params = dict(t_mod.named_parameters())
    s_params = dict(s_mod.named_parameters())
    assert list(s_params) == list(t_params)
    for name, p in t_params.items():
        np.testing.assert_allclose(s_params[name].grad.numpy(), p.grad.numpy(), **tol, err_msg=name)
    s_state, t_state = s_mod.state_dict(), t_mod.state_dict()
    assert list(s_state) == list(t_state)
    for k, v in t_state.items():
        np.testing.assert_allclose(s_state[k].numpy(), v.numpy(), **tol, err_msg=k)
    return out_s, out_t


# ---- layers -------------------------------------------------------------------------------------

@pytest.mark.parametrize("bias", [True, False])
def test_linear(bias):
    t = torch.nn.Linear(5, 3, bias=bias)
    s = copy_from_torch(nn.Linear(5, 3, bias=bias), t)
    assert s.in_features == 5 and s.out_features == 3
    compare(s, t, rand(4, 5))
    compare(s, t, rand(2, 3, 5))
    assert repr(s) == repr(t)


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1), dict(padding=(1, 2), dilation=2, bias=False),
                                dict(groups=2, stride=(1, 2))])
def test_conv2d(kw):
    t = torch.nn.Conv2d(4, 6, 3, **kw)
    s = copy_from_torch(nn.Conv2d(4, 6, 3, **kw), t)
    compare(s, t, rand(2, 4, 9, 8), tol=dict(rtol=1e-4, atol=1e-4))
    assert repr(s) == repr(t)


@pytest.mark.parametrize("cls,shape", [("BatchNorm1d", (6, 3)), ("BatchNorm1d", (4, 3, 5)), ("BatchNorm2d", (4, 3, 5, 2))])
@pytest.mark.parametrize("momentum", [0.1, None])
def test_batchnorm_train_and_eval(cls, shape, momentum):
    t = getattr(torch.nn, cls)(3, momentum=momentum)
    with torch.no_grad():
        t.weight.uniform_(0.5, 1.5)
        t.bias.uniform_(-0.5, 0.5)
    s = copy_from_torch(getattr(nn, cls)(3, momentum=momentum), t)
    for _ in range(2):  # running statistics and num_batches_tracked after two steps
        compare(s, t, rand(*shape), tol=dict(rtol=1e-4, atol=1e-4))
    assert int(s.num_batches_tracked.numpy()) == 2
    s.eval(), t.eval()
    compare(s, t, rand(*shape), tol=dict(rtol=1e-4, atol=1e-4))
    assert repr(s) == repr(t)


def test_layernorm():
    t = torch.nn.LayerNorm((4, 5))
    with torch.no_grad():
        t.weight.uniform_(0.5, 1.5)
        t.bias.uniform_(-0.5, 0.5)
    s = copy_from_torch(nn.LayerNorm((4, 5)), t)
    compare(s, t, rand(3, 4, 5), tol=dict(rtol=1e-4, atol=1e-4))
    assert repr(s) == repr(t)
    assert repr(nn.LayerNorm(7)) == repr(torch.nn.LayerNorm(7))


@pytest.mark.parametrize("make", [
    lambda m: m.ReLU(), lambda m: m.LeakyReLU(0.2), lambda m: m.Sigmoid(), lambda m: m.Tanh(),
    lambda m: m.GELU(), lambda m: m.GELU(approximate="tanh"), lambda m: m.Identity(), lambda m: m.Flatten(),
    lambda m: m.Flatten(0, 2), lambda m: m.MaxPool2d(2), lambda m: m.MaxPool2d(3, stride=2, padding=1),
    lambda m: m.MaxPool2d((2, 3), ceil_mode=True), lambda m: m.AvgPool2d(2),
    lambda m: m.AvgPool2d(3, stride=2, padding=1, count_include_pad=False), lambda m: m.AdaptiveAvgPool2d((3, 2)),
    lambda m: m.AdaptiveAvgPool2d(1)])
def test_parameterless_layers(make):
    s, t = make(nn), make(torch.nn)
    compare(s, t, rand(2, 3, 7, 6))
    assert repr(s) == repr(t)


def test_dropout():
    s = nn.Dropout(0.4)
    assert repr(s) == repr(torch.nn.Dropout(0.4)) and s.p == 0.4
    x = strata.tensor(rand(1000) + 2.0)
    y = s(x).numpy()
    kept = y != 0
    assert 0.5 < kept.mean() < 0.7
    np.testing.assert_allclose(y[kept], x.numpy()[kept] / 0.6, rtol=1e-6)
    s.eval()
    np.testing.assert_array_equal(s(x).numpy(), x.numpy())


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag(mode):
    t = torch.nn.EmbeddingBag(10, 4, mode=mode)
    s = copy_from_torch(nn.EmbeddingBag(10, 4, mode=mode), t)
    idx = np.array([1, 2, 4, 5, 4, 3, 2, 9], np.int64)
    off = np.array([0, 3, 3, 6], np.int64)
    compare(s, t, idx, off)
    compare(s, t, idx.reshape(2, 4))
    assert repr(s) == repr(t)
    if mode == "sum":
        t.zero_grad(), s.zero_grad()
        compare(s, t, idx, off, rand(8))


# ---- Module API ---------------------------------------------------------------------------------

def test_parameter():
    p = nn.Parameter(strata.ones(2, 3))
    assert isinstance(p, strata.Tensor) and isinstance(p, nn.Parameter)
    assert p.requires_grad and p.is_leaf
    q = nn.Parameter(strata.ones(2), requires_grad=False)
    assert not q.requires_grad
    assert repr(p).startswith("Parameter containing:\n")
    with pytest.raises(TypeError, match="data must be a strata.Tensor"):
        nn.Parameter(np.ones(2))
    lin = nn.Linear(2, 3)
    assert isinstance(lin.weight, nn.Parameter) and tuple(lin.weight.shape) == (3, 2)
    assert lin.weight._shares_storage(lin.weight)
    assert isinstance(next(lin.parameters()), nn.Parameter)


class Block(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)
        self.bn = nn.BatchNorm1d(n)
        self.scale = nn.Parameter(strata.ones(n))
        self.register_buffer("offset", strata.zeros(n))
        self.register_buffer("scratch", strata.zeros(1), persistent=False)
        self.note = "plain attribute"

    def forward(self, x):
        return self.bn(self.fc(x)).relu() * self.scale + self.offset


class TBlock(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = torch.nn.Linear(n, n)
        self.bn = torch.nn.BatchNorm1d(n)
        self.scale = torch.nn.Parameter(torch.ones(n))
        self.register_buffer("offset", torch.zeros(n))
        self.register_buffer("scratch", torch.zeros(1), persistent=False)

    def forward(self, x):
        return torch.relu(self.bn(self.fc(x))) * self.scale + self.offset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(4), Block(4)])
        self.head = nn.Sequential(nn.Linear(4, 2), nn.Tanh())

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


class TNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([TBlock(4), TBlock(4)])
        self.head = torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.Tanh())

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def test_python_subclass_matches_torch():
    s, t = Net(), TNet()
    with torch.no_grad():
        for b in t.blocks:
            b.offset.uniform_(-1, 1)
            b.scale.uniform_(0.5, 1.5)
    assert list(s.state_dict()) == list(t.state_dict())
    assert [tuple(v.shape) for v in s.state_dict().values()] == [tuple(v.shape) for v in t.state_dict().values()]
    assert [n for n, _ in s.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert [n for n, _ in s.named_buffers()] == [n for n, _ in t.named_buffers()]
    assert [n for n, _ in s.named_modules()] == [n for n, _ in t.named_modules()]
    assert [n for n, _ in s.named_children()] == [n for n, _ in t.named_children()]
    copy_from_torch(s, t)
    compare(s, t, rand(5, 4), tol=dict(rtol=1e-4, atol=1e-4))
    s.eval(), t.eval()
    compare(s, t, rand(5, 4), tol=dict(rtol=1e-4, atol=1e-4))
    # (torch's ModuleList repr folds repeated identical children into "(0-1): 2 x Block(...)"; Strata's
    # prints each child, so compare below that level.)
    assert repr(s.blocks[0]) == repr(t.blocks[0]).replace("TBlock", "Block")
    assert repr(s.head) == repr(t.head)
    assert repr(s).startswith("Net(\n  (blocks): ModuleList(\n    (0): Block(\n      (fc): Linear(in_features=4")


def test_attribute_protocol():
    b = Block(3)
    assert b.note == "plain attribute" and "note" in b.__dict__
    assert isinstance(b.fc, nn.Linear) and "fc" not in b.__dict__
    assert isinstance(b.scale, nn.Parameter) and tuple(b.offset.shape) == (3,)
    assert "scratch" not in b.state_dict()
    # A parameter replaces an existing parameter or buffer of that name.
    b.scale = nn.Parameter(strata.full((3,), 2.0))
    np.testing.assert_array_equal(b.scale.numpy(), [2, 2, 2])
    b.offset = nn.Parameter(strata.ones(3))
    assert "offset" in dict(b.named_parameters())
    assert "offset" not in dict(b.named_buffers())
    # A buffer is replaced by a tensor, a module by a module.
    b.register_buffer("stat", strata.zeros(2))
    b.stat = strata.ones(2)
    np.testing.assert_array_equal(b.stat.numpy(), [1, 1])
    b.fc = nn.Linear(3, 3, bias=False)
    assert b.fc.bias is None and "fc.bias" not in b.state_dict()
    # None clears.
    b.scale = None
    assert b.scale is None and "scale" not in b.state_dict()
    b.fc = None
    assert b.fc is None and "fc.weight" not in b.state_dict()
    del b.bn
    assert not hasattr(b, "bn") and "bn.weight" not in b.state_dict()
    b.add_module("extra", nn.ReLU())
    assert isinstance(b.extra, nn.ReLU)
    with pytest.raises(AttributeError, match="'Block' object has no attribute 'missing'"):
        b.missing


def test_attribute_errors():
    b = Block(3)
    with pytest.raises(TypeError, match=r"cannot assign 'strata.*Tensor' as parameter 'scale' \(strata.nn.Parameter or None expected\)"):
        b.scale = strata.ones(3)
    with pytest.raises(TypeError, match="cannot assign 'int' as child module 'fc'"):
        b.fc = 3
    with pytest.raises(TypeError, match="cannot assign 'str' as buffer 'offset'"):
        b.offset = "x"
    with pytest.raises(TypeError, match="int is not a strata.nn.Module subclass"):
        b.add_module("x", 3)
    with pytest.raises(TypeError, match="cannot assign 'Tensor' object to parameter 'y'|cannot assign '.*Tensor' object to parameter 'y'"):
        b.register_parameter("y", strata.ones(1))
    with pytest.raises(ValueError, match="attribute 'note' already exists"):
        b.register_buffer("note", strata.ones(1))
    with pytest.raises(strata.StrataError, match="must not contain"):
        b.register_buffer("a.b", strata.ones(1))

    class Early(nn.Module):
        def __init__(self):
            self.fc = nn.Linear(2, 2)
            super().__init__()

    with pytest.raises(AttributeError, match=r"cannot assign module before Module.__init__\(\) call"):
        Early()

    for call in (lambda m: m.train(), lambda m: list(m.parameters()), lambda m: m.state_dict(), repr,
                 lambda m: m.load_state_dict({}), lambda m: m.training, lambda m: m.apply(print), lambda m: m.modules(),
                 lambda m: m.register_buffer("a", None), lambda m: m.zero_grad(), lambda m: m.forward(strata.ones(1)),
                 lambda m: m.named_children(), lambda m: m.extra_repr()):
        class Premature(nn.Module):
            def __init__(self):
                call(self)
                super().__init__()

        with pytest.raises(AttributeError, match="not initialized: call super\\(\\).__init__\\(\\) before using it|"
                                                 "before Module.__init__\\(\\) call"):
            Premature()

    class PrematureSeq(nn.Sequential):
        def __init__(self):
            len(self)
            super().__init__()

    with pytest.raises(AttributeError, match="not initialized"):
        PrematureSeq()

    class Escapes(nn.Module):
        def __init__(self, seq):
            seq.append(self)
            super().__init__()

    with pytest.raises(TypeError, match="Sequential.append: the .*Escapes has not been initialized"):
        Escapes(nn.Sequential())

    class NoInit(nn.Module):
        def __init__(self):
            pass

    with pytest.raises(TypeError):
        NoInit()


def test_modes_grads_apply():
    s = Net()
    assert s.training and all(m.training for m in s.modules())
    assert s.eval() is s and not any(m.training for m in s.modules())
    s.train()
    s.head.training = False  # only that module, like torch
    assert not s.head.training and s.head[0].training and s.training
    x = strata.tensor(rand(3, 4))
    s(x).sum().backward()
    assert all(p.grad is not None for p in s.parameters())
    s.zero_grad(set_to_none=False)
    assert all(np.all(p.grad.numpy() == 0) for p in s.parameters())
    s.zero_grad()
    assert all(p.grad is None for p in s.parameters())
    seen = []
    assert s.apply(lambda m: seen.append(type(m).__name__)) is s
    t_seen = []
    TNet().apply(lambda m: t_seen.append(type(m).__name__))
    assert seen == [n.replace("TNet", "Net").replace("TBlock", "Block") for n in t_seen]
    assert s.requires_grad_(False) is s and not any(p.requires_grad for p in s.parameters())
    assert len(list(Net().parameters())) == len(list(TNet().parameters()))


def test_state_dict_sequential_keys_and_torch_load():
    t = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                            torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(4 * 4 * 4, 5),
                            torch.nn.BatchNorm1d(5), torch.nn.Dropout(0.0), torch.nn.Linear(5, 2))
    s = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                      nn.Linear(4 * 4 * 4, 5), nn.BatchNorm1d(5), nn.Dropout(0.0), nn.Linear(5, 2))
    assert list(s.state_dict()) == list(t.state_dict())
    sd = s.state_dict()
    assert isinstance(sd, OrderedDict) and isinstance(sd["0.weight"], strata.Tensor)
    assert not sd["0.weight"].requires_grad
    copy_from_torch(s, t)
    # (gradients reach ~1e2 through two batch norms: float32 round-off scales with them)
    compare(s, t, rand(4, 3, 8, 8), tol=dict(rtol=1e-3, atol=1e-3))
    assert repr(s) == repr(t)
    # state_dict round trip strata -> strata, and prefix
    s2 = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                       nn.Linear(4 * 4 * 4, 5), nn.BatchNorm1d(5), nn.Dropout(0.0), nn.Linear(5, 2))
    s2.load_state_dict(s.state_dict())
    for (k, a), b in zip(s.state_dict().items(), s2.state_dict().values()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=k)
    assert list(s.state_dict(prefix="model.")) == ["model." + k for k in t.state_dict()]
    # torch tensors themselves are accepted too (through __array__)
    s2.load_state_dict({k: v.detach() for k, v in t.state_dict().items()})
    # ... also parameters that require grad (detached on the way)
    missing, unexpected = s2.load_state_dict(dict(t.named_parameters()), strict=False)
    # (num_batches_tracked is optional, as in PyTorch's older format: not reported missing)
    assert missing == [k for k in t.state_dict() if "running" in k] and unexpected == []


def test_load_state_dict_errors():
    s = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
    good = np_state(torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3)))
    bad = dict(good)
    del bad["0.bias"]
    bad["extra"] = np.zeros(1, np.float32)
    with pytest.raises(strata.StrataError) as e:
        s.load_state_dict(bad)
    assert 'Missing key(s) in state_dict: "0.bias"' in str(e.value)
    assert 'Unexpected key(s) in state_dict: "extra"' in str(e.value)
    assert "Error(s) in loading state_dict for Sequential" in str(e.value)
    before = s[0].weight.numpy().copy()
    shaped = dict(good)
    shaped["0.weight"] = np.zeros((3, 3), np.float32)
    with pytest.raises(strata.StrataError, match=r"size mismatch for 0.weight: copying a param with shape \[3, 3\]"):
        s.load_state_dict(shaped)
    np.testing.assert_array_equal(s[0].weight.numpy(), before)  # nothing copied on error
    missing, unexpected = s.load_state_dict(bad, strict=False)
    assert missing == ["0.bias"] and unexpected == ["extra"]
    np.testing.assert_array_equal(s[0].weight.numpy(), good["0.weight"])
    without_counter = {k: v for k, v in good.items() if not k.endswith("num_batches_tracked")}
    assert s.load_state_dict(without_counter) == nn.IncompatibleKeys([], [])
    with pytest.raises(TypeError, match="expected a dict"):
        s.load_state_dict([1, 2])
    with pytest.raises(TypeError, match="value of '0.weight' is a str"):
        s.load_state_dict({"0.weight": "x"})
    with pytest.raises(TypeError, match="keys must be strings"):
        s.load_state_dict({1: np.zeros(1)})
    kept = s.state_dict(keep_vars=True)
    assert list(kept) == list(s.state_dict()) == list(good)
    assert isinstance(kept["0.weight"], nn.Parameter) and kept["0.weight"].requires_grad
    assert not isinstance(kept["1.running_mean"], nn.Parameter)
    net, tnet = Net(), TNet()
    assert list(net.state_dict(keep_vars=True, prefix="p.")) == ["p." + k for k in tnet.state_dict(keep_vars=True)]
    with pytest.raises(NotImplementedError, match="assign=True"):
        s.load_state_dict(good, assign=True)


# ---- containers and Python modules inside C++ ones ----------------------------------------------

class Doubler(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x * 2.0

    def extra_repr(self):
        return "factor=2"


class TDoubler(torch.nn.Module):
    def forward(self, x):
        return x * 2.0

    def extra_repr(self):
        return "factor=2"


def test_python_module_inside_cpp_sequential():
    d = Doubler()
    s = nn.Sequential(nn.Linear(3, 3), d, nn.ReLU())
    t = torch.nn.Sequential(torch.nn.Linear(3, 3), TDoubler(), torch.nn.ReLU())
    copy_from_torch(s, t)
    compare(s, t, rand(4, 3))
    assert d.calls == 1
    assert s[1] is d
    assert repr(s) == repr(t).replace("TDoubler", "Doubler")
    # The C++ container keeps the Python object (and its state) alive.
    del d
    s.append(Doubler())
    import gc
    gc.collect()
    s(strata.tensor(rand(2, 3)))
    assert s[1].calls == 2 and s[3].calls == 1 and type(s[3]) is Doubler


def test_python_subclass_of_cpp_layer():
    class Scaled(nn.Linear):
        def forward(self, x):
            return super().forward(x) * 3.0

    lin = Scaled(2, 2)
    seq = nn.Sequential(lin)
    x = strata.tensor(rand(1, 2))
    expected = (x.numpy() @ lin.weight.numpy().T + lin.bias.numpy()) * 3.0
    np.testing.assert_allclose(seq(x).numpy(), expected, rtol=1e-6)
    assert repr(seq).startswith("Sequential(\n  (0): Scaled(in_features=2")


def test_python_forward_errors_propagate():
    class Bad(nn.Module):
        def forward(self, x):
            raise KeyError("boom")

    class NotTensor(nn.Module):
        def forward(self, x):
            return 3

    with pytest.raises(KeyError, match="boom"):
        nn.Sequential(Bad())(strata.ones(1))
    with pytest.raises(TypeError, match="NotTensor.forward returned int"):
        nn.Sequential(NotTensor())(strata.ones(1))
    with pytest.raises(strata.StrataError, match="Module has no forward"):
        nn.Module()(strata.ones(1))


def test_python_subclass_of_sequential():
    class PlusOne(nn.Sequential):
        def forward(self, x):
            return super().forward(x) + 1.0

    m = PlusOne(OrderedDict([("a", nn.Identity()), ("b", Doubler())]))
    assert list(dict(m.named_children())) == ["a", "b"] and len(m) == 2
    np.testing.assert_array_equal(m(strata.ones(2)).numpy(), [3.0, 3.0])
    outer = nn.Sequential(m, nn.ReLU())  # the Python override also runs from C++
    np.testing.assert_array_equal(outer(strata.ones(2)).numpy(), [3.0, 3.0])
    assert repr(outer).startswith("Sequential(\n  (0): PlusOne(\n    (a): Identity()")
    with pytest.raises(TypeError, match="module names must be strings, got int"):
        nn.Sequential(OrderedDict([(1, nn.ReLU())]))


def test_sequential_and_modulelist():
    layers = [nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 1)]
    s = nn.Sequential(*layers)
    assert len(s) == 3 and list(s) == layers and s[-1] is layers[2]
    sub = s[1:]
    assert isinstance(sub, nn.Sequential) and len(sub) == 2 and list(sub.state_dict()) == ["2.weight", "2.bias"]
    od = nn.Sequential(OrderedDict([("fc", nn.Linear(2, 2)), ("act", nn.ReLU())]))
    assert list(od.state_dict()) == ["fc.weight", "fc.bias"] and isinstance(od.act, nn.ReLU)
    s[1] = nn.Tanh()
    assert isinstance(s[1], nn.Tanh)
    ml = nn.ModuleList()
    ml.append(nn.Linear(1, 1)).extend([nn.ReLU()])
    assert len(ml) == 2 and list(ml.state_dict()) == ["0.weight", "0.bias"]
    with pytest.raises(IndexError, match="index 3 is out of range for Sequential of length 3"):
        s[3]
    with pytest.raises(TypeError, match="Sequential.append: int is not a strata.nn.Module subclass"):
        s.append(3)
    with pytest.raises(TypeError, match="Sequential.__init__: str is not a strata.nn.Module subclass"):
        nn.Sequential(nn.ReLU(), "relu")
    with pytest.raises(TypeError, match="ModuleList.__init__: float is not a strata.nn.Module"):
        nn.ModuleList([1.0])
    with pytest.raises(strata.StrataError, match="ModuleList has no forward"):
        ml(strata.ones(1))


# ---- bad input ----------------------------------------------------------------------------------

def test_bad_layer_input():
    with pytest.raises(strata.StrataError, match="Linear"):
        nn.Linear(3, 2)(strata.ones(4, 5))
    with pytest.raises(strata.StrataError, match="Conv2d"):
        nn.Conv2d(3, 2, 3)(strata.ones(3, 5))
    with pytest.raises(strata.StrataError, match="BatchNorm2d"):
        nn.BatchNorm2d(3)(strata.ones(2, 3))
    with pytest.raises(strata.StrataError, match="BatchNorm1d"):
        nn.BatchNorm1d(3)(strata.ones(2, 4))
    with pytest.raises(strata.StrataError, match="EmbeddingBag"):
        nn.EmbeddingBag(5, 2)(strata.ones(3), strata.tensor([0]))


def test_bad_constructor_arguments():
    with pytest.raises(NotImplementedError, match="ReLU: inplace=True is not supported"):
        nn.ReLU(inplace=True)
    with pytest.raises(NotImplementedError, match="MaxPool2d: return_indices=True"):
        nn.MaxPool2d(2, return_indices=True)
    with pytest.raises(NotImplementedError, match="EmbeddingBag: max_norm"):
        nn.EmbeddingBag(3, 2, max_norm=1.0)
    with pytest.raises(ValueError, match="Conv2d: padding must be an int or a pair of ints, got the string 'same'"):
        nn.Conv2d(2, 2, 3, padding="same")
    with pytest.raises(ValueError, match="kernel_size must be an int or a pair of ints, got 3 values"):
        nn.Conv2d(2, 2, (3, 3, 3))
    with pytest.raises(strata.StrataError, match="Dropout: probability"):
        nn.Dropout(1.5)
    with pytest.raises(strata.StrataError, match="GELU: approximate"):
        nn.GELU("fast")
    with pytest.raises(strata.StrataError, match="mode"):
        nn.EmbeddingBag(3, 2, mode="max")
    with pytest.raises(TypeError):
        nn.Linear(2.5, 3)
