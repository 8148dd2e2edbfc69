"""copy.deepcopy and pickle of tensors, Parameters and modules (nn layers, Sequential, a Python
module, the zoo's models), against PyTorch 2.13 where it has the same behaviour."""
import copy
import pickle

import numpy as np
import pytest
import torch

import strata

LIBS = [strata, torch]


def arr(t):
    return t.detach().numpy()


@pytest.mark.parametrize("lib", LIBS, ids=["strata", "torch"])
def test_tensor_deepcopy_and_pickle_keep_values_dtype_and_requires_grad(lib):
    x = lib.tensor(np.array([1.5, -2.0], np.float64)).requires_grad_()
    (x * x).sum().backward()
    c = copy.deepcopy(x)
    assert c.requires_grad and c.is_leaf and c.dtype == lib.float64
    np.testing.assert_array_equal(arr(c), [1.5, -2.0])
    np.testing.assert_array_equal(arr(c.grad), [3.0, -4.0])
    c.detach().mul_(0) if lib is strata else c.data.mul_(0)
    np.testing.assert_array_equal(arr(x), [1.5, -2.0])  # a copy, not a view
    p = pickle.loads(pickle.dumps(x))
    assert p.requires_grad and p.dtype == lib.float64 and p.grad is None
    np.testing.assert_array_equal(arr(p), [1.5, -2.0])
    i = pickle.loads(pickle.dumps(lib.arange(4)))
    assert i.dtype == lib.int64 and not i.requires_grad
    pair = copy.deepcopy([x, x])
    assert pair[0] is pair[1]  # the memo


@pytest.mark.parametrize("lib", LIBS, ids=["strata", "torch"])
def test_non_leaf_refuses_deepcopy_and_pickles_as_a_leaf(lib):
    y = lib.ones(2).requires_grad_() * 2
    with pytest.raises(RuntimeError, match=r"\(graph leaves\) support the deepcopy protocol"):
        copy.deepcopy(y)
    back = pickle.loads(pickle.dumps(y))
    assert back.requires_grad and back.is_leaf and arr(back).tolist() == [2.0, 2.0]
    assert pickle.loads(pickle.dumps(y.detach())).requires_grad is False


@pytest.mark.parametrize("lib", LIBS, ids=["strata", "torch"])
def test_parameter_keeps_its_type(lib):
    p = lib.nn.Parameter(lib.ones(2))
    for c in (copy.deepcopy(p), pickle.loads(pickle.dumps(p))):
        assert isinstance(c, lib.nn.Parameter) and c.requires_grad
    frozen = pickle.loads(pickle.dumps(lib.nn.Parameter(lib.ones(2), requires_grad=False)))
    assert isinstance(frozen, lib.nn.Parameter) and not frozen.requires_grad


def build(lib):
    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.ReLU(), lib.nn.BatchNorm1d(4))
            self.head = lib.nn.Linear(4, 4)
            self.tied = lib.nn.Linear(4, 4)
            self.tied.weight = self.head.weight  # shared by two children
            self.scale = 2.5

        def forward(self, x):
            return self.tied(self.head(self.body(x))) * self.scale

    lib.manual_seed(0)
    return Net


def test_module_deepcopy_keeps_state_structure_and_sharing():
    Net = build(strata)
    net = Net()
    net.eval()
    x = strata.ones(2, 3)
    c = copy.deepcopy(net)
    assert type(c) is Net and not c.training and c.scale == 2.5
    assert list(c.state_dict().keys()) == list(net.state_dict().keys())
    for (k, a), (_, b) in zip(net.state_dict().items(), c.state_dict().items()):
        np.testing.assert_array_equal(arr(a), arr(b), err_msg=k)
    np.testing.assert_array_equal(arr(c(x)), arr(net(x)))
    with strata.no_grad():
        c.head.weight.mul_(0)
    assert np.all(arr(c.tied.weight) == 0)  # still shared in the copy
    assert not np.all(arr(net.head.weight) == 0)  # and apart from the original
    assert c.head.weight.requires_grad


def test_module_pickle_round_trip():
    for module in (strata.nn.Linear(3, 2), strata.nn.Sequential(strata.nn.Linear(3, 2), strata.nn.Tanh())):
        back = pickle.loads(pickle.dumps(module))
        assert type(back) is type(module) and repr(back) == repr(module)
        x = strata.ones(1, 3)
        np.testing.assert_array_equal(arr(back(x)), arr(module(x)))
    net = PickledNet(4)
    back = pickle.loads(pickle.dumps(net))
    assert type(back) is PickledNet and back.width == 4 and back.training
    np.testing.assert_array_equal(arr(back(strata.ones(2, 3))), arr(net(strata.ones(2, 3))))
    assert back.fc.weight.requires_grad and back.offset.dtype == strata.float32


class PickledNet(strata.nn.Module):
    """A Python module at module level (pickle finds classes by name)."""

    def __init__(self, width):
        super().__init__()
        self.width = width
        self.fc = strata.nn.Linear(3, width)
        self.register_buffer("offset", strata.ones(width))

    def forward(self, x):
        return self.fc(x) + self.offset


def test_copy_does_not_change_later_random_numbers():
    strata.manual_seed(3)
    linear = strata.nn.Linear(5, 5)
    expected = arr(strata.rand(4))
    strata.manual_seed(3)
    linear = strata.nn.Linear(5, 5)
    copy.deepcopy(linear)
    pickle.loads(pickle.dumps(linear))
    np.testing.assert_array_equal(arr(strata.rand(4)), expected)


def test_part_of_a_zoo_model_is_not_copied_on_its_own():
    model = strata.models.cifar_resnet(8, num_classes=3)
    with pytest.raises(TypeError, match="built by C\\+\\+ code"):
        copy.deepcopy(model.conv1)


@pytest.mark.parametrize("name", ["gpt", "resnet"])
def test_zoo_model_deepcopy_and_pickle(name):
    if name == "gpt":
        model = strata.models.GPT(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8)
        x = strata.tensor(np.array([[1, 2, 3]], np.int64))
    else:
        model = strata.models.cifar_resnet(8, num_classes=3)
        x = strata.ones(1, 3, 8, 8)
    model.eval()

    def run(m):
        out = m(x)
        return arr(out[0] if isinstance(out, tuple) else out)

    for c in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        assert type(c) is type(model)
        np.testing.assert_array_equal(run(c), run(model))
        assert sum(p.numel() for p in c.parameters()) == sum(p.numel() for p in model.parameters())


def test_optimizer_state_dict_round_trips_through_pickle():
    def step(model, opt):
        opt.zero_grad()
        model(strata.ones(1, 3)).sum().backward()
        opt.step()

    strata.manual_seed(0)
    model = strata.nn.Linear(3, 2)
    opt = strata.optim.Adam(model.parameters(), lr=0.1)
    step(model, opt)
    twin = copy.deepcopy(model)
    restored = strata.optim.Adam(twin.parameters(), lr=0.5)
    restored.load_state_dict(pickle.loads(pickle.dumps(opt.state_dict())))
    assert restored.param_groups[0]["lr"] == 0.1
    step(model, opt)
    step(twin, restored)
    for a, b in zip(model.parameters(), twin.parameters()):
        np.testing.assert_array_equal(arr(a), arr(b))
