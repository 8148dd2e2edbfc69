"""strata.models against PyTorch equivalents built here (torchvision is not installed): a CIFAR
ResNet of basic blocks, a bottleneck ResNet, small VGGs, a small DenseNet following torchvision's
module names, and the reference DLRM (facebookresearch/dlrm, dlrm_s_pytorch.py). state_dict keys
and shapes match; loading the torch model's state_dict (as NumPy) gives the same forward output
(eval mode) and the same gradients (train mode)."""
from collections import OrderedDict

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn as tnn

import strata
from strata import models

RNG = np.random.default_rng(7)
TOL = dict(rtol=2e-4, atol=2e-4)


def rand(*shape):
    return RNG.uniform(-1, 1, shape).astype(np.float32)


# ---- PyTorch equivalents (torchvision's structure and names) -------------------------------------

class TBasicBlock(tnn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = tnn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = tnn.BatchNorm2d(planes)
        self.relu = tnn.ReLU(inplace=True)
        self.conv2 = tnn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = tnn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + (self.downsample(x) if self.downsample is not None else x))


class TBottleneck(tnn.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = tnn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = tnn.BatchNorm2d(planes)
        self.conv2 = tnn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = tnn.BatchNorm2d(planes)
        self.conv3 = tnn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = tnn.BatchNorm2d(planes * 4)
        self.relu = tnn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + (self.downsample(x) if self.downsample is not None else x))


class TResNet(tnn.Module):
    def __init__(self, layers, widths=(64, 128, 256, 512), bottleneck=False, stem="imagenet", num_classes=1000,
                 in_channels=3):
        super().__init__()
        block = TBottleneck if bottleneck else TBasicBlock
        self.inplanes = widths[0]
        if stem == "imagenet":
            self.conv1 = tnn.Conv2d(in_channels, widths[0], 7, 2, 3, bias=False)
        else:
            self.conv1 = tnn.Conv2d(in_channels, widths[0], 3, 1, 1, bias=False)
        self.bn1 = tnn.BatchNorm2d(widths[0])
        self.relu = tnn.ReLU(inplace=True)
        self.maxpool = tnn.MaxPool2d(3, 2, 1) if stem == "imagenet" else tnn.Identity()
        for i, (n, w) in enumerate(zip(layers, widths)):
            setattr(self, f"layer{i + 1}", self._make_layer(block, w, n, 1 if i == 0 else 2))
        self.avgpool = tnn.AdaptiveAvgPool2d((1, 1))
        self.fc = tnn.Linear(self.inplanes, num_classes)
        self.n_stages = len(layers)

    def _make_layer(self, block, planes, blocks, stride):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = tnn.Sequential(tnn.Conv2d(self.inplanes, planes * block.expansion, 1, stride, bias=False),
                                        tnn.BatchNorm2d(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        layers += [block(self.inplanes, planes) for _ in range(1, blocks)]
        return tnn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        for i in range(self.n_stages):
            x = getattr(self, f"layer{i + 1}")(x)
        return self.fc(torch.flatten(self.avgpool(x), 1))


class TVGG(tnn.Module):
    def __init__(self, cfg, batch_norm=False, num_classes=1000, in_channels=3, pool_size=7, hidden=4096, dropout=0.5):
        super().__init__()
        layers, c = [], in_channels
        for v in cfg:
            if v == "M":
                layers.append(tnn.MaxPool2d(2, 2))
            else:
                layers.append(tnn.Conv2d(c, v, 3, padding=1))
                if batch_norm:
                    layers.append(tnn.BatchNorm2d(v))
                layers.append(tnn.ReLU(inplace=True))
                c = v
        self.features = tnn.Sequential(*layers)
        self.avgpool = tnn.AdaptiveAvgPool2d((pool_size, pool_size))
        self.classifier = tnn.Sequential(
            tnn.Linear(c * pool_size * pool_size, hidden), tnn.ReLU(True), tnn.Dropout(p=dropout),
            tnn.Linear(hidden, hidden), tnn.ReLU(True), tnn.Dropout(p=dropout), tnn.Linear(hidden, num_classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


class TDenseLayer(tnn.Module):
    def __init__(self, num_input_features, growth_rate, bn_size):
        super().__init__()
        self.norm1 = tnn.BatchNorm2d(num_input_features)
        self.relu1 = tnn.ReLU(inplace=True)
        self.conv1 = tnn.Conv2d(num_input_features, bn_size * growth_rate, 1, 1, bias=False)
        self.norm2 = tnn.BatchNorm2d(bn_size * growth_rate)
        self.relu2 = tnn.ReLU(inplace=True)
        self.conv2 = tnn.Conv2d(bn_size * growth_rate, growth_rate, 3, 1, 1, bias=False)

    def forward(self, inputs):
        x = torch.cat(inputs, 1)
        return self.conv2(self.relu2(self.norm2(self.conv1(self.relu1(self.norm1(x))))))


class TDenseBlock(tnn.ModuleDict):
    def __init__(self, num_layers, num_input_features, bn_size, growth_rate):
        super().__init__()
        for i in range(num_layers):
            self.add_module(f"denselayer{i + 1}", TDenseLayer(num_input_features + i * growth_rate, growth_rate, bn_size))

    def forward(self, init_features):
        features = [init_features]
        for _, layer in self.items():
            features.append(layer(features))
        return torch.cat(features, 1)


class TTransition(tnn.Sequential):
    def __init__(self, num_input_features, num_output_features):
        super().__init__()
        self.norm = tnn.BatchNorm2d(num_input_features)
        self.relu = tnn.ReLU(inplace=True)
        self.conv = tnn.Conv2d(num_input_features, num_output_features, 1, 1, bias=False)
        self.pool = tnn.AvgPool2d(2, 2)


class TDenseNet(tnn.Module):
    def __init__(self, growth_rate=32, block_config=(6, 12, 24, 16), num_init_features=64, bn_size=4, num_classes=1000):
        super().__init__()
        self.features = tnn.Sequential(OrderedDict([
            ("conv0", tnn.Conv2d(3, num_init_features, 7, 2, 3, bias=False)),
            ("norm0", tnn.BatchNorm2d(num_init_features)), ("relu0", tnn.ReLU(inplace=True)),
            ("pool0", tnn.MaxPool2d(3, 2, 1))]))
        n = num_init_features
        for i, num_layers in enumerate(block_config):
            self.features.add_module(f"denseblock{i + 1}", TDenseBlock(num_layers, n, bn_size, growth_rate))
            n += num_layers * growth_rate
            if i != len(block_config) - 1:
                self.features.add_module(f"transition{i + 1}", TTransition(n, n // 2))
                n //= 2
        self.features.add_module("norm5", tnn.BatchNorm2d(n))
        self.classifier = tnn.Linear(n, num_classes)

    def forward(self, x):
        out = F.adaptive_avg_pool2d(F.relu(self.features(x)), (1, 1))
        return self.classifier(torch.flatten(out, 1))


class TDLRM(tnn.Module):
    """dlrm_s_pytorch.py's DLRM_Net (create_mlp, create_emb, apply_mlp, apply_emb, interact_features);
    dense embedding gradients (sparse=False) so they can be compared."""

    def create_mlp(self, ln, sigmoid_layer):
        layers = tnn.ModuleList()
        for i in range(0, len(ln) - 1):
            layers.append(tnn.Linear(int(ln[i]), int(ln[i + 1]), bias=True))
            layers.append(tnn.Sigmoid() if i == sigmoid_layer else tnn.ReLU())
        return torch.nn.Sequential(*layers)

    def __init__(self, m_spa, ln_emb, ln_bot, ln_top, arch_interaction_op="dot", arch_interaction_itself=False):
        super().__init__()
        self.arch_interaction_op = arch_interaction_op
        self.arch_interaction_itself = arch_interaction_itself
        self.emb_l = tnn.ModuleList([tnn.EmbeddingBag(n, m_spa, mode="sum", sparse=False) for n in ln_emb])
        self.bot_l = self.create_mlp(ln_bot, -1)
        self.top_l = self.create_mlp(ln_top, len(ln_top) - 2)

    def interact_features(self, x, ly):
        if self.arch_interaction_op == "dot":
            (batch_size, d) = x.shape
            T = torch.cat([x] + ly, dim=1).view((batch_size, -1, d))
            Z = torch.bmm(T, torch.transpose(T, 1, 2))
            _, ni, nj = Z.shape
            offset = 1 if self.arch_interaction_itself else 0
            li = torch.tensor([i for i in range(ni) for j in range(i + offset)])
            lj = torch.tensor([j for i in range(nj) for j in range(i + offset)])
            Zflat = Z[:, li, lj]
            return torch.cat([x] + [Zflat], dim=1)
        return torch.cat([x] + ly, dim=1)

    def forward(self, dense_x, lS_o, lS_i):
        x = self.bot_l(dense_x)
        ly = [E(lS_i[k], lS_o[k]) for k, E in enumerate(self.emb_l)]
        return self.top_l(self.interact_features(x, ly))


# ---- helpers ------------------------------------------------------------------------------------

def np_state(module):
    return {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}


def check_same_keys_and_shapes(s_model, t_model):
    s_sd, t_sd = s_model.state_dict(), t_model.state_dict()
    assert list(s_sd) == list(t_sd)
    for k in t_sd:
        assert tuple(s_sd[k].shape) == tuple(t_sd[k].shape), k
        assert str(s_sd[k].dtype).split(".")[-1] == str(t_sd[k].dtype).split(".")[-1], k


def check_forward_and_gradients(s_model, t_model, x, tol=TOL):
    """Loads t_model's weights into s_model; eval-mode outputs, then train-mode outputs, input and
    parameter gradients and updated running statistics."""
    result = s_model.load_state_dict(np_state(t_model))
    assert list(result.missing_keys) == [] and list(result.unexpected_keys) == []
    s_model.eval(), t_model.eval()
    with torch.no_grad():
        expected = t_model(torch.tensor(x)).numpy()
    np.testing.assert_allclose(s_model(strata.tensor(x)).numpy(), expected, **tol)

    s_model.train(), t_model.train()
    xs, xt = strata.tensor(x).requires_grad_(), torch.tensor(x, requires_grad=True)
    out_s, out_t = s_model(xs), t_model(xt)
    np.testing.assert_allclose(out_s.numpy(), out_t.detach().numpy(), **tol)
    g = rand(*out_t.shape)
    out_s.backward(strata.tensor(g))
    out_t.backward(torch.tensor(g))
    np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), **tol)
    s_params = dict(s_model.named_parameters())
    for name, p in t_model.named_parameters():
        np.testing.assert_allclose(s_params[name].grad.numpy(), p.grad.numpy(), **tol, err_msg=name)
    s_sd = s_model.state_dict()
    for k, v in t_model.state_dict().items():
        np.testing.assert_allclose(s_sd[k].numpy(), v.numpy(), **tol, err_msg=k)


def randomize_bn(t_model):
    """Non-trivial batch-norm affine parameters and running statistics, so loading them matters."""
    with torch.no_grad():
        for m in t_model.modules():
            if isinstance(m, tnn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.8, 1.2)
                m.num_batches_tracked.fill_(5)


# ---- ResNet -------------------------------------------------------------------------------------

def test_cifar_resnet_matches_torch():
    s = models.cifar_resnet(8, num_classes=5)  # n = 1: three stages of one basic block
    t = TResNet([1, 1, 1], widths=(16, 32, 64), stem="cifar", num_classes=5)
    check_same_keys_and_shapes(s, t)
    assert isinstance(s, strata.nn.Module) and type(s.layer1[0]).__name__ == "BasicBlock"
    randomize_bn(t)
    check_forward_and_gradients(s, t, rand(2, 3, 16, 16))


def test_small_bottleneck_resnet_matches_torch():
    s = models.ResNet([1, 2], widths=(4, 8), bottleneck=True, num_classes=3, in_channels=2)
    t = TResNet([1, 2], widths=(4, 8), bottleneck=True, num_classes=3, in_channels=2)
    check_same_keys_and_shapes(s, t)
    randomize_bn(t)
    check_forward_and_gradients(s, t, rand(2, 2, 24, 24))


@pytest.mark.parametrize("depth,layers,bottleneck,count", [(18, [2, 2, 2, 2], False, 11689512),
                                                           (50, [3, 4, 6, 3], True, 25557032)])
def test_resnet_depths(depth, layers, bottleneck, count):
    s = getattr(models, f"resnet{depth}")()
    check_same_keys_and_shapes(s, TResNet(layers, bottleneck=bottleneck))
    assert sum(p.numel() for p in s.parameters()) == count  # torchvision's published counts
    assert repr(s).startswith("ResNet(\n  (conv1): Conv2d(3, 64, kernel_size=(7, 7), stride=(2, 2), padding=(3, 3), bias=False)")


def test_resnet_kwargs_and_sizes():
    assert len(models.resnet34(num_classes=7).fc.bias.numpy()) == 7
    assert [len(getattr(models.resnet101(), f"layer{i}")) for i in range(1, 5)] == [3, 4, 23, 3]
    assert [len(getattr(models.cifar_resnet(20), f"layer{i}")) for i in range(1, 4)] == [3, 3, 3]
    r = models.ResNet((1, 1), widths=(8, 16), stem="cifar", num_classes=4, in_channels=1)
    assert tuple(r(strata.randn(2, 1, 8, 8)).shape) == (2, 4)


# ---- VGG ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("batch_norm", [False, True])
@pytest.mark.parametrize("pool_size", [1, 2])
def test_small_vgg_matches_torch(batch_norm, pool_size):
    cfg = [8, "M", 16, 16, "M"]
    kw = dict(batch_norm=batch_norm, num_classes=5, pool_size=pool_size, hidden=32, dropout=0.0)
    s, t = models.VGG(cfg, **kw), TVGG(cfg, **kw)
    check_same_keys_and_shapes(s, t)
    assert isinstance(s.features, strata.nn.Sequential)
    if batch_norm:
        randomize_bn(t)
    check_forward_and_gradients(s, t, rand(2, 3, 12, 12))


def test_vgg_depths_and_deep_variants():
    cfg16 = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]
    small = dict(num_classes=10, pool_size=1, hidden=16)
    check_same_keys_and_shapes(models.vgg16(**small), TVGG(cfg16, pool_size=1, hidden=16, num_classes=10))
    check_same_keys_and_shapes(models.VGG("D", batch_norm=True, **small),
                               TVGG(cfg16, batch_norm=True, pool_size=1, hidden=16, num_classes=10))
    convs = lambda m: sum(1 for k in m.state_dict() if k.startswith("features") and k.endswith("weight"))  # noqa: E731
    assert [convs(f(**small)) for f in (models.vgg11, models.vgg13, models.vgg16, models.vgg19)] == [8, 10, 13, 16]
    assert convs(models.deep_vgg(116, **small)) == 113  # 116 layers = 113 convolutions + 3 linear
    assert convs(models.VGG(21, **small)) == 18


# ---- DenseNet -----------------------------------------------------------------------------------

def test_small_densenet_matches_torch():
    kw = dict(growth_rate=4, block_config=(2, 3), num_init_features=8, bn_size=2, num_classes=3)
    s, t = models.DenseNet(**kw), TDenseNet(**kw)
    check_same_keys_and_shapes(s, t)
    assert "features.denseblock1.denselayer2.norm1.weight" in s.state_dict()
    assert "features.transition1.conv.weight" in s.state_dict()
    randomize_bn(t)
    check_forward_and_gradients(s, t, rand(2, 3, 32, 32))


def test_densenet121_keys_and_count():
    s = models.densenet121()
    check_same_keys_and_shapes(s, TDenseNet())
    assert sum(p.numel() for p in s.parameters()) == 7978856
    assert list(models.densenet161().features.denseblock1.denselayer1.conv2.weight.shape) == [48, 192, 3, 3]


# ---- DLRM ---------------------------------------------------------------------------------------

def dlrm_inputs(batch, rows):
    dense = rand(batch, 4)
    indices, offsets = [], []
    for n in rows:
        lengths = RNG.integers(1, 4, batch)
        offsets.append(np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64))
        indices.append(RNG.integers(0, n, int(lengths.sum())).astype(np.int64))
    return dense, indices, offsets


@pytest.mark.parametrize("interaction,itself", [("dot", False), ("dot", True), ("cat", False)])
def test_dlrm_matches_reference(interaction, itself):
    rows, d = [4, 3, 2], 2
    s = models.DLRM(d, rows, [4, 3, 2], [4, 2, 1], interaction=interaction, interaction_itself=itself)
    f = len(rows) + 1
    width = f * d if interaction == "cat" else d + (f * (f + 1) // 2 if itself else f * (f - 1) // 2)
    assert s.interaction_width == width
    t = TDLRM(d, rows, [4, 3, 2], [width, 4, 2, 1], interaction, itself)
    check_same_keys_and_shapes(s, t)
    assert list(s.state_dict())[:3] == ["emb_l.0.weight", "emb_l.1.weight", "emb_l.2.weight"]
    s.load_state_dict(np_state(t))
    dense, indices, offsets = dlrm_inputs(3, rows)
    xs = strata.tensor(dense).requires_grad_()
    xt = torch.tensor(dense, requires_grad=True)
    out_s = s(xs, [strata.tensor(i) for i in indices], [strata.tensor(o) for o in offsets])
    out_t = t(xt, [torch.tensor(o) for o in offsets], [torch.tensor(i) for i in indices])
    np.testing.assert_allclose(out_s.numpy(), out_t.detach().numpy(), **TOL)
    g = rand(*out_t.shape)
    out_s.backward(strata.tensor(g))
    out_t.backward(torch.tensor(g))
    np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), **TOL)
    s_params = dict(s.named_parameters())
    for name, p in t.named_parameters():
        np.testing.assert_allclose(s_params[name].grad.numpy(), p.grad.numpy(), **TOL, err_msg=name)


def test_dlrm_arch_strings_and_weighted_pooling():
    s = models.DLRM(2, "4-3-2", "4-3-2", "4-2-1")
    assert [tuple(v.shape) for v in s.state_dict().values()][:3] == [(4, 2), (3, 2), (2, 2)]
    dense, indices, offsets = dlrm_inputs(2, [4, 3, 2])
    ones = [strata.ones(len(i)) for i in indices]
    a = s(strata.tensor(dense), [strata.tensor(i) for i in indices], [strata.tensor(o) for o in offsets])
    b = s(strata.tensor(dense), [strata.tensor(i) for i in indices], [strata.tensor(o) for o in offsets], ones)
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
    assert np.all((a.numpy() > 0) & (a.numpy() < 1))  # sigmoid output


# ---- MLP and common Module behaviour ------------------------------------------------------------

def test_mlp_matches_torch_sequential():
    s = models.MLP([5, 8, 3], activation="tanh", last_activation="sigmoid")
    t = tnn.Sequential(tnn.Linear(5, 8), tnn.Tanh(), tnn.Linear(8, 3), tnn.Sigmoid())
    check_same_keys_and_shapes(s, t)
    assert isinstance(s, strata.nn.Sequential) and len(s) == 4 and list(s.widths) == [5, 8, 3]
    check_forward_and_gradients(s, t, rand(4, 5), tol=dict(rtol=1e-5, atol=1e-6))
    assert repr(s) == repr(t).replace("Sequential", "MLP", 1)
    assert len(models.MLP("4-3-2")) == 3


def test_models_are_modules():
    m = models.cifar_resnet(8)
    assert m.training and not m.eval().training and m.train() is m
    m.layer1[0].training = False
    assert not m.layer1[0].training and m.layer1[0].conv1.training
    names = [n for n, _ in m.named_modules()]
    assert "layer2.0.downsample.0" in names
    assert m.layer1[0] is m.layer1[0]
    sd = m.state_dict()
    m2 = models.cifar_resnet(8)
    m2.load_state_dict(sd)
    x = strata.randn(1, 3, 8, 8)
    m.eval(), m2.eval()
    np.testing.assert_array_equal(m(x).numpy(), m2(x).numpy())


def test_replacing_layers():
    m = models.cifar_resnet(8, num_classes=3)
    # The C++ forward keeps the layers it was built with: replacing one is refused, not ignored.
    for change in (lambda: setattr(m, "fc", strata.nn.Linear(64, 5)), lambda: setattr(m, "fc", None),
                   lambda: delattr(m, "fc"), lambda: m.add_module("fc", strata.nn.Identity()),
                   lambda: setattr(m.layer1[0], "conv1", strata.nn.Identity())):
        with pytest.raises(NotImplementedError,
                           match="replacing or removing a child of (ResNet|BasicBlock) is not supported"):
            change()
    assert tuple(m(strata.randn(2, 3, 8, 8)).shape) == (2, 3)
    m.extra = strata.nn.ReLU()  # a new child is fine (forward does not use it, as in torch)
    # Inside Sequential containers replacing works, as in torchvision fine-tuning code.
    v = models.VGG([4, "M"], num_classes=10, pool_size=1, hidden=8, dropout=0.0)
    v.classifier[6] = strata.nn.Linear(8, 2)
    assert tuple(v(strata.randn(2, 3, 4, 4)).shape) == (2, 2)
    assert tuple(v.state_dict()["classifier.6.weight"].shape) == (2, 8)


# ---- bad arguments ------------------------------------------------------------------------------

def test_bad_arguments():
    with pytest.raises(strata.StrataError, match="ResNet: layers and widths must be non-empty and of equal length"):
        models.ResNet([2, 2], widths=[64])
    with pytest.raises(strata.StrataError, match="stem must be"):
        models.ResNet([1], widths=[4], stem="tiny")
    with pytest.raises(TypeError, match="unexpected keyword argument 'layers'"):
        models.resnet18(layers=[1])
    with pytest.raises(strata.StrataError, match="CIFAR ResNet has depth 6n \\+ 2"):
        models.cifar_resnet(21)
    with pytest.raises(ValueError, match="unknown configuration 'Z'"):
        models.VGG("Z")
    with pytest.raises(ValueError, match="positive widths or 'M' \\(or 0\\), got -1"):
        models.VGG([8, -1])
    with pytest.raises(strata.StrataError, match="16 \\+ 5k"):
        models.deep_vgg(100)
    with pytest.raises(ValueError, match="dropout must lie in"):
        models.VGG(11, dropout=2.0)
    with pytest.raises(strata.StrataError, match="DenseNet: block 2 needs at least one layer"):
        models.DenseNet(block_config=(2, 0))
    with pytest.raises(strata.StrataError, match="bottom MLP's last width \\(3\\) must equal the sparse feature size \\(2\\)"):
        models.DLRM(2, [4, 3], [4, 3], [2, 1])
    with pytest.raises(strata.StrataError, match="--arch|embedding_sizes"):
        models.DLRM(2, "4-x-2", [4, 2], [2, 1])
    with pytest.raises(strata.StrataError, match="unknown activation 'swish'"):
        models.MLP([2, 2], activation="swish")
    s = models.DLRM(2, [4, 3], [4, 2], [2, 1])
    dense = strata.randn(2, 4)
    idx, off = strata.tensor([0, 1], dtype=strata.int64), strata.tensor([0, 1], dtype=strata.int64)
    with pytest.raises(strata.StrataError, match="expected indices and offsets for 2 tables, got 1 and 1"):
        s(dense, [idx], [off])
    with pytest.raises(TypeError, match="indices must be a list of tensors"):
        s(dense, idx, [off, off])
    with pytest.raises(strata.StrataError, match="DLRM: expected dense features \\[B, 4\\]"):
        s(strata.randn(2, 3), [idx, idx], [off, off])
    with pytest.raises(strata.StrataError, match="ResNet: expected a 4-D input"):
        models.cifar_resnet(8)(strata.randn(3, 8, 8))
