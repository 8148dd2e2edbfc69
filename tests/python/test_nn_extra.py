"""Issue 26 part 7 against PyTorch 2.13: F.conv1d, F.conv_transpose2d, F.group_norm, F.pad,
F.interpolate, F.normalize and nn.Conv1d, nn.ConvTranspose2d, nn.GroupNorm, nn.ModuleDict,
nn.ParameterList — values and gradients from the same inputs and weights, bad input raising the
error type torch raises, and a small 1-D conv net trained three steps with only the module name
changed."""
import copy
import pickle

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import strata
import strata.nn.functional as F

RNG = np.random.default_rng(26)


def rand(*shape, dtype=np.float32, low=-1.0, high=1.0):
    return RNG.uniform(low, high, shape).astype(dtype)


def check(fs, ft, *arrays, dtype=np.float32, tol=None):
    """fs(*strata tensors) vs ft(*torch tensors): values, then the gradient of every input."""
    tol = tol or (dict(rtol=2e-5, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10))
    arrays = [a.astype(dtype) for a in arrays]
    s = [strata.tensor(a).requires_grad_() for a in arrays]
    t = [torch.tensor(a, requires_grad=True) for a in arrays]
    os_, ot = fs(*s), ft(*t)
    assert tuple(os_.shape) == tuple(ot.shape)
    np.testing.assert_allclose(os_.detach().numpy(), ot.detach().numpy(), **tol)
    g = rand(*ot.shape, dtype=dtype)
    os_.backward(strata.tensor(g))
    ot.backward(torch.tensor(g))
    for a, b in zip(s, t):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), **tol)


DTYPES = [np.float32, np.float64]


# ---- functional ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1), dict(padding=2, dilation=2),
                                dict(padding="same"), dict(padding="same", dilation=3), dict(padding="valid"),
                                dict(groups=2), dict(stride=(3,), padding=(1,))])
def test_conv1d(dtype, kw):
    x, w, b = rand(2, 4, 11), rand(6, 4 // kw.get("groups", 1), 4), rand(6)
    check(lambda x, w, b: F.conv1d(x, w, b, **kw), lambda x, w, b: TF.conv1d(x, w, b, **kw), x, w, b, dtype=dtype)


def test_conv1d_unbatched_and_no_bias():
    check(lambda x, w: F.conv1d(x, w), lambda x, w: TF.conv1d(x, w), rand(3, 9), rand(2, 3, 3))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1, output_padding=1), dict(stride=(2, 3), padding=(0, 1)),
                                dict(groups=2, dilation=2), dict(stride=1, dilation=2, output_padding=1)])
def test_conv_transpose2d(dtype, kw):
    x, w, b = rand(2, 4, 5, 6), rand(4, 3, 3, 2), rand(3 * kw.get("groups", 1))
    check(lambda x, w, b: F.conv_transpose2d(x, w, b, **kw), lambda x, w, b: TF.conv_transpose2d(x, w, b, **kw),
          x, w, b, dtype=dtype)


def test_conv_transpose2d_large_runs_onednn():
    """Big enough that f32 takes oneDNN's backward-data primitive (ops/conv.cpp)."""
    x, w = rand(4, 32, 12, 12), rand(32, 16, 3, 3)
    check(lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1),
          lambda x, w: TF.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1), x, w,
          tol=dict(rtol=1e-4, atol=1e-4))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,groups", [((2, 6, 5), 3), ((3, 4, 2, 3), 2), ((4, 6), 3), ((2, 4, 3), 1)])
def test_group_norm(dtype, shape, groups):
    x, w, b = rand(*shape), rand(shape[1], low=0.5, high=1.5), rand(shape[1])
    check(lambda x, w, b: F.group_norm(x, groups, w, b), lambda x, w, b: TF.group_norm(x, groups, w, b),
          x, w, b, dtype=dtype, tol=dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else None)
    check(lambda x: F.group_norm(x, groups, eps=1e-3), lambda x: TF.group_norm(x, groups, eps=1e-3), x, dtype=dtype,
          tol=dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else None)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,pad,mode", [
    ((2, 3, 5), (1, 2), "constant"), ((2, 3, 5), (2, 1, 0, 3, 1, 1), "constant"), ((2, 3, 5), (-1, 2), "constant"),
    ((2, 3, 5), (3, 4), "reflect"), ((1, 2, 4, 5), (2, 1, 3, 0), "reflect"), ((3, 5), (2, 2), "reflect"),
    ((2, 3, 4), (2, 3), "replicate"), ((1, 2, 3, 4), (1, 2, 3, 1), "replicate"),
    ((1, 1, 2, 3, 2), (1, 1, 2, 0, 1, 2), "replicate"),
    ((2, 3, 5), (5, 2), "circular"), ((1, 2, 3, 4), (1, 2, 3, 0), "circular"), ((2, 3, 5), (-1, 2), "reflect"),
])
def test_pad(dtype, shape, pad, mode):
    check(lambda x: F.pad(x, pad, mode=mode), lambda x: TF.pad(x, pad, mode=mode), rand(*shape), dtype=dtype)


def test_pad_value_and_empty():
    check(lambda x: F.pad(x, (1, 1, 2, 0), value=2.5), lambda x: TF.pad(x, (1, 1, 2, 0), value=2.5), rand(2, 3))
    check(lambda x: F.pad(x, ()), lambda x: TF.pad(x, ()), rand(2, 3))
    check(lambda x: F.pad(x, (1, 2), mode="reflect", value=0.0), lambda x: TF.pad(x, (1, 2), mode="reflect", value=0.0),
          rand(2, 3))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,kw", [
    ((2, 3, 4), dict(scale_factor=2)), ((2, 3, 5), dict(size=8)), ((2, 3, 8), dict(size=3)),
    ((1, 2, 3, 5), dict(scale_factor=(2, 1.5))), ((1, 2, 4, 4), dict(size=(6, 3))),
    ((2, 3, 5), dict(size=7, mode="nearest-exact")), ((1, 2, 3, 4), dict(scale_factor=2.5, mode="nearest-exact")),
    ((2, 3, 4), dict(scale_factor=2.5, mode="linear")), ((2, 3, 5), dict(size=9, mode="linear", align_corners=True)),
    ((2, 3, 6), dict(size=4, mode="linear")), ((1, 2, 3, 4), dict(size=(5, 7), mode="bilinear")),
    ((2, 1, 3, 3), dict(scale_factor=2, mode="bilinear", align_corners=True)),
    ((1, 2, 5, 4), dict(scale_factor=(0.6, 1.7), mode="bilinear", recompute_scale_factor=True)),
    ((1, 1, 2, 3, 2), dict(scale_factor=2)),
])
def test_interpolate(dtype, shape, kw):
    check(lambda x: F.interpolate(x, **kw), lambda x: TF.interpolate(x, **kw), rand(*shape), dtype=dtype,
          tol=dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else None)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kw", [dict(), dict(p=1.0, dim=0), dict(p=3, dim=-1), dict(dim=2, eps=0.5)])
def test_normalize(dtype, kw):
    check(lambda x: F.normalize(x, **kw), lambda x: TF.normalize(x, **kw), rand(3, 4, 5), dtype=dtype)


# ---- bad input raises what torch raises ---------------------------------------------------------

BAD_CALLS = [
    ("conv1d 4-D input", lambda m, x: m.conv1d(x(2, 3, 5, 5), x(4, 3, 2))),
    ("conv1d same strided", lambda m, x: m.conv1d(x(2, 3, 5), x(4, 3, 2), padding="same", stride=2)),
    ("conv1d bad padding string", lambda m, x: m.conv1d(x(2, 3, 5), x(4, 3, 2), padding="full")),
    ("conv1d channels", lambda m, x: m.conv1d(x(2, 3, 5), x(4, 2, 2))),
    ("conv1d kernel too large", lambda m, x: m.conv1d(x(2, 3, 5), x(4, 3, 9))),
    ("conv_transpose2d 5-D", lambda m, x: m.conv_transpose2d(x(2, 3, 4, 4, 1), x(3, 2, 3, 3))),
    ("conv_transpose2d channels", lambda m, x: m.conv_transpose2d(x(2, 4, 4, 4), x(3, 2, 3, 3))),
    ("conv_transpose2d output_padding", lambda m, x: m.conv_transpose2d(x(1, 3, 4, 4), x(3, 2, 3, 3), stride=2,
                                                                       output_padding=2)),
    ("group_norm groups", lambda m, x: m.group_norm(x(2, 6, 4), 4)),
    ("group_norm 1-D", lambda m, x: m.group_norm(x(6), 2)),
    ("group_norm weight", lambda m, x: m.group_norm(x(2, 6, 4), 2, x(5))),
    ("pad odd length", lambda m, x: m.pad(x(2, 3, 5), (1, 2, 3))),
    ("pad too long", lambda m, x: m.pad(x(2, 3), (1, 1, 1, 1, 1, 1))),
    ("pad bad mode", lambda m, x: m.pad(x(2, 3, 5), (1, 1), mode="mirror")),
    ("pad reflect too large", lambda m, x: m.pad(x(2, 3, 5), (5, 1), mode="reflect")),
    ("pad reflect 1-D input", lambda m, x: m.pad(x(5), (1, 1), mode="reflect")),
    ("pad circular wraps twice", lambda m, x: m.pad(x(2, 3, 5), (6, 1), mode="circular")),
    ("pad reflect with value", lambda m, x: m.pad(x(2, 3, 5), (1, 1), mode="reflect", value=1.0)),
    ("pad replicate empty dim", lambda m, x: m.pad(x(2, 3, 0), (1, 1), mode="replicate")),
    ("interpolate bad mode", lambda m, x: m.interpolate(x(2, 3, 5), scale_factor=2, mode="fancy")),
    ("interpolate bilinear 3-D", lambda m, x: m.interpolate(x(2, 3, 5), scale_factor=2, mode="bilinear")),
    ("interpolate 2-D input", lambda m, x: m.interpolate(x(3, 5), scale_factor=2)),
    ("interpolate size and scale", lambda m, x: m.interpolate(x(2, 3, 5), size=4, scale_factor=2)),
    ("interpolate neither", lambda m, x: m.interpolate(x(2, 3, 5))),
    ("interpolate align_corners nearest", lambda m, x: m.interpolate(x(2, 3, 5), scale_factor=2, align_corners=True)),
    ("interpolate size length", lambda m, x: m.interpolate(x(2, 3, 5), size=(3, 4))),
    ("interpolate zero output", lambda m, x: m.interpolate(x(2, 3, 5), scale_factor=0.1)),
    ("normalize dim", lambda m, x: m.normalize(x(2, 3), dim=5)),
]


def _torch_error(call):
    try:
        call(TF, lambda *s: torch.zeros(*s))
    except Exception as e:  # noqa: BLE001 — the type is what we compare
        return type(e)
    pytest.fail("torch accepted the call")


@pytest.mark.parametrize("name,call", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_input_raises_torchs_error_type(name, call):
    expected = _torch_error(call)
    with pytest.raises(expected):
        call(F, lambda *s: strata.zeros(*s))


BAD_MODULES = [
    ("GroupNorm groups", lambda nn: nn.GroupNorm(4, 6)),
    ("Conv1d padding_mode", lambda nn: nn.Conv1d(3, 4, 3, padding_mode="mirror")),
    ("Conv1d same strided", lambda nn: nn.Conv1d(3, 4, 3, padding="same", stride=2)),
    ("Conv1d padding string", lambda nn: nn.Conv1d(3, 4, 3, padding="full")),
    ("Conv1d groups", lambda nn: nn.Conv1d(3, 4, 3, groups=2)),
    ("ConvTranspose2d groups", lambda nn: nn.ConvTranspose2d(3, 4, 3, groups=2)),
    ("ConvTranspose2d padding_mode", lambda nn: nn.ConvTranspose2d(3, 4, 3, padding_mode="reflect")),
    ("ModuleDict non-module", lambda nn: nn.ModuleDict({"a": 3})),
    ("ModuleDict dotted key", lambda nn: nn.ModuleDict({"a.b": nn.ReLU()})),
    ("ModuleDict missing key", lambda nn: nn.ModuleDict({})["x"]),
    ("ModuleDict not pairs", lambda nn: nn.ModuleDict(nn.ReLU())),
]


@pytest.mark.parametrize("name,call", BAD_MODULES, ids=[c[0] for c in BAD_MODULES])
def test_bad_module_arguments_raise_torchs_error_type(name, call):
    try:
        call(torch.nn)
    except Exception as e:  # noqa: BLE001
        expected = type(e)
    else:
        pytest.fail("torch accepted the call")
    with pytest.raises(expected):
        call(strata.nn)


# ---- modules ------------------------------------------------------------------------------------

def copy_weights(s, t):
    """Loads torch module t's state_dict into strata module s (names must match torch's)."""
    state = {k: v.detach().numpy() for k, v in t.state_dict().items()}
    assert list(s.state_dict().keys()) == list(state.keys())
    s.load_state_dict(state)


def check_module(s, t, x, tol=dict(rtol=2e-5, atol=2e-5)):
    copy_weights(s, t)
    xs, xt = strata.tensor(x).requires_grad_(), torch.tensor(x, requires_grad=True)
    ys, yt = s(xs), t(xt)
    np.testing.assert_allclose(ys.detach().numpy(), yt.detach().numpy(), **tol)
    g = rand(*yt.shape)
    ys.backward(strata.tensor(g))
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), **tol)
    grads_t = dict(t.named_parameters())
    for name, p in s.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), grads_t[name].grad.numpy(), **tol, err_msg=name)
    assert repr(s) == repr(t)


@pytest.mark.parametrize("args,kw", [((3, 4, 3), {}), ((4, 6, 4), dict(stride=2, padding=1, groups=2, bias=False)),
                                     ((3, 4, 4), dict(padding="same", dilation=2)),
                                     ((3, 4, 3), dict(padding=2, padding_mode="reflect")),
                                     ((3, 4, 4), dict(padding="same", padding_mode="circular")),
                                     ((3, 2, 3), dict(padding=1, padding_mode="replicate"))])
def test_conv1d_module(args, kw):
    check_module(strata.nn.Conv1d(*args, **kw), torch.nn.Conv1d(*args, **kw), rand(2, args[0], 10))


@pytest.mark.parametrize("args,kw", [((3, 4, 3), {}), ((4, 6, (3, 2)), dict(stride=2, padding=1, output_padding=1,
                                                                          groups=2, bias=False)),
                                     ((2, 3, 2), dict(dilation=2, output_padding=1))])
def test_conv_transpose2d_module(args, kw):
    check_module(strata.nn.ConvTranspose2d(*args, **kw), torch.nn.ConvTranspose2d(*args, **kw),
                 rand(2, args[0], 5, 4))


@pytest.mark.parametrize("args,kw", [((2, 6), {}), ((3, 3, 1e-3, False), {}), ((1, 4), {}), ((2, 4), dict(bias=False))])
def test_group_norm_module(args, kw):
    s, t = strata.nn.GroupNorm(*args, **kw), torch.nn.GroupNorm(*args, **kw)
    with torch.no_grad():  # move the affine parameters off their ones/zeros start
        for p in t.parameters():
            p.uniform_(0.5, 1.5)
    check_module(s, t, rand(2, args[1], 7), tol=dict(rtol=1e-4, atol=1e-5))
    assert list(s.state_dict()) == list(t.state_dict())


def test_module_init_matches_torchs_distribution():
    """Same state_dict names and shapes; weights uniform in torch's bounds (±1/sqrt(fan_in))."""
    for make in (lambda nn: nn.Conv1d(8, 16, 5, groups=2), lambda nn: nn.ConvTranspose2d(8, 6, 3, groups=2),
                 lambda nn: nn.GroupNorm(2, 8)):
        s, t = make(strata.nn), make(torch.nn)
        ss, ts = s.state_dict(), t.state_dict()
        assert list(ss) == list(ts)
        for k in ts:
            assert tuple(ss[k].shape) == tuple(ts[k].shape), k
            bound = ts[k].abs().max().item()
            if isinstance(t, torch.nn.GroupNorm):
                np.testing.assert_array_equal(ss[k].numpy(), ts[k].numpy())
            else:
                fan_in = t.weight.shape[1] * t.weight[0, 0].numel()
                assert np.abs(ss[k].numpy()).max() <= 1 / np.sqrt(fan_in) and bound <= 1 / np.sqrt(fan_in)
                if k == "weight":  # uniform: std = bound / sqrt(3) ~ 0.58 bound
                    assert ss[k].numpy().std() > 0.4 / np.sqrt(fan_in), k


def test_factory_kwargs():
    m = strata.nn.Conv1d(2, 3, 2, dtype=strata.float64)
    assert m.weight.dtype == strata.float64
    assert strata.nn.GroupNorm(1, 2, dtype=strata.float64).bias.dtype == strata.float64


def test_module_dict():
    s = strata.nn.ModuleDict({"lin": strata.nn.Linear(2, 3), "act": strata.nn.ReLU()})
    t = torch.nn.ModuleDict({"lin": torch.nn.Linear(2, 3), "act": torch.nn.ReLU()})
    s["out"] = strata.nn.Linear(3, 1)
    t["out"] = torch.nn.Linear(3, 1)
    s.update([("lin", strata.nn.Linear(2, 3, bias=False))])  # a replaced key keeps its position
    t.update([("lin", torch.nn.Linear(2, 3, bias=False))])
    assert list(s) == list(t) == list(s.keys()) == ["lin", "act", "out"]
    assert list(s.state_dict()) == list(t.state_dict())
    assert len(s) == 3 and "act" in s and "nope" not in s and 3 not in s
    assert [k for k, _ in s.items()] == ["lin", "act", "out"] and len(s.values()) == 3
    assert isinstance(s["act"], strata.nn.ReLU)
    popped = s.pop("act")
    del s["out"]
    assert isinstance(popped, strata.nn.ReLU) and list(s) == ["lin"]
    assert repr(strata.nn.ModuleDict({"a": strata.nn.ReLU()})) == repr(torch.nn.ModuleDict({"a": torch.nn.ReLU()}))
    with pytest.raises(KeyError):
        del s["out"]
    s.clear()
    assert len(s) == 0 and list(s.parameters()) == []
    c = copy.deepcopy(strata.nn.ModuleDict({"a": strata.nn.Linear(2, 2)}))
    assert list(c) == ["a"] and isinstance(c["a"], strata.nn.Linear)


def test_module_dict_in_a_python_model():
    class Net(strata.nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = strata.nn.ModuleDict({"a": strata.nn.Linear(4, 2), "b": strata.nn.Linear(4, 3)})

        def forward(self, x, head):
            return self.heads[head](x)

    net = Net()
    assert [k for k, _ in net.named_parameters()] == ["heads.a.weight", "heads.a.bias", "heads.b.weight",
                                                        "heads.b.bias"]
    assert tuple(net(strata.ones(5, 4), "b").shape) == (5, 3)


def test_gpt_transformer_is_a_module_dict():
    gpt = strata.models.gpt.GPT(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8)
    assert isinstance(gpt.transformer, strata.nn.ModuleDict)
    assert list(gpt.transformer) == ["wte", "wpe", "drop", "h", "ln_f"]
    assert "transformer.wte.weight" in gpt.state_dict()


def test_parameter_list():
    ps = strata.nn.ParameterList([strata.nn.Parameter(strata.ones(2)), strata.zeros(3)])
    pt = torch.nn.ParameterList([torch.nn.Parameter(torch.ones(2)), torch.zeros(3)])
    ps.append(strata.nn.Parameter(strata.ones(1, 2), requires_grad=False))
    pt.append(torch.nn.Parameter(torch.ones(1, 2), requires_grad=False))
    assert len(ps) == len(pt) == 3
    assert [k for k, _ in ps.named_parameters()] == [k for k, _ in pt.named_parameters()] == ["0", "1", "2"]
    assert [p.requires_grad for p in ps] == [p.requires_grad for p in pt] == [True, True, False]
    assert isinstance(ps[1], strata.nn.Parameter) and tuple(ps[-1].shape) == (1, 2)
    ps[0] = strata.nn.Parameter(strata.full((4,), 2.0))
    assert ps[0].numpy().tolist() == [2.0] * 4
    with pytest.raises(IndexError):
        ps[3]
    with pytest.raises(TypeError):
        ps.append(3)

    class Net(strata.nn.Module):
        def __init__(self):
            super().__init__()
            self.ws = strata.nn.ParameterList([strata.nn.Parameter(strata.ones(3)) for _ in range(2)])

        def forward(self, x):
            for w in self.ws:
                x = x * w
            return x.sum()

    net = Net()
    net(strata.ones(3)).backward()
    assert [k for k, _ in net.named_parameters()] == ["ws.0", "ws.1"]
    assert all(p.grad is not None for p in net.parameters())


# ---- a script that runs with only the module name changed -----------------------------------------

SCRIPT = """
import numpy as np
{lib}.manual_seed(0)
nn, F = {lib}.nn, {lib}.nn.functional


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv1d(2, 8, 3, padding=1)
        self.norm = nn.GroupNorm(2, 8)
        self.conv2 = nn.Conv1d(8, 4, 3, padding="same", padding_mode="replicate")
        self.up = nn.ConvTranspose2d(4, 2, (1, 2), stride=(1, 2))

    def forward(self, x):
        x = F.relu(self.norm(self.conv1(x)))
        x = F.interpolate(x, scale_factor=2, mode="linear", align_corners=False)
        x = F.pad(self.conv2(x), (1, 1), mode="reflect")
        y = self.up(x.unsqueeze(2)).squeeze(2)
        return F.normalize(y, dim=1)


model = Net()
model.load_state_dict({{k: {lib}.tensor(v) for k, v in WEIGHTS.items()}})
opt = {lib}.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
x, target = {lib}.tensor(X), {lib}.tensor(Y)
losses = []
for _ in range(3):
    opt.zero_grad()
    loss = F.mse_loss(model(x), target)
    loss.backward()
    opt.step()
    losses.append(loss.item())
"""


def test_script_matches_torch():
    x, y = rand(4, 2, 6), rand(4, 2, 28)
    ns0 = {"torch": torch}  # torch's initial weights: its script up to the model's construction
    exec(SCRIPT.split("model = Net()")[0].format(lib="torch") + "model = Net()\n", ns0)
    weights = {k: v.detach().numpy().copy() for k, v in ns0["model"].state_dict().items()}
    runs = {}
    for lib, mod in (("torch", torch), ("strata", strata)):
        ns = {lib: mod, "WEIGHTS": weights, "X": x, "Y": y}
        exec(SCRIPT.format(lib=lib), ns)
        runs[lib] = ns["losses"]
    np.testing.assert_allclose(runs["strata"], runs["torch"], rtol=1e-5)
    assert runs["strata"][2] < runs["strata"][0]


def test_deepcopy_and_pickle_keep_structure_and_weights():
    nn = strata.nn
    for m in [nn.Conv1d(2, 3, 3, padding="same", padding_mode="circular"), nn.ConvTranspose2d(2, 3, 2, stride=2),
              nn.GroupNorm(2, 4, bias=False), nn.ParameterList([strata.ones(2)]),
              nn.ModuleDict({"a": nn.Linear(2, 2)})]:
        for c in (copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
            a, b = m.state_dict(), c.state_dict()
            assert list(a) == list(b) and repr(c) == repr(m)
            for k in a:
                np.testing.assert_array_equal(a[k].numpy(), b[k].numpy())
