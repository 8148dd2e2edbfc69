"""Issue 6's parity check against PyTorch 2.13: for an MLP, a small CNN (conv/bn/relu/pool/linear),
a stack of ResNet basic blocks and a small DLRM, the same initial weights (copied from the PyTorch
model) give the same forward outputs and gradients, and 20 optimizer steps (SGD with momentum and
Adam) give the same loss curve, within float32 tolerance."""
import numpy as np
import pytest
import torch
import torch.nn as tnn
import torch.nn.functional as TF

import strata
import strata.nn as snn
import strata.nn.functional as SF

RTOL, ATOL = 1e-4, 1e-5


def to_np(t):
    return t.detach().numpy() if isinstance(t, torch.Tensor) else t.numpy()


def copy_weights(tmodel, smodel):
    result = smodel.load_state_dict({k: v.detach().numpy().copy() for k, v in tmodel.state_dict().items()})
    assert not result.missing_keys and not result.unexpected_keys
    assert [k for k, _ in smodel.state_dict().items()] == list(tmodel.state_dict().keys())


# ---- the models, built the same way on both sides ---------------------------------------------------

def mlp_pair():
    torch.manual_seed(0)
    t = tnn.Sequential(tnn.Linear(20, 32), tnn.ReLU(), tnn.Linear(32, 32), tnn.Tanh(), tnn.Linear(32, 5))
    s = snn.Sequential(snn.Linear(20, 32), snn.ReLU(), snn.Linear(32, 32), snn.Tanh(), snn.Linear(32, 5))
    rng = np.random.default_rng(1)
    x = rng.standard_normal((16, 20), dtype=np.float32)
    y = rng.integers(0, 5, 16)
    return t, s, (x,), y


def cnn_pair():
    def build(nn):
        return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.AvgPool2d(2),
                             nn.Flatten(), nn.Linear(16 * 4 * 4, 10))
    torch.manual_seed(0)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((8, 3, 16, 16), dtype=np.float32)
    return build(tnn), build(snn), (x,), rng.integers(0, 10, 8)


class TorchBasicBlock(tnn.Module):
    """torchvision's BasicBlock (names conv1, bn1, conv2, bn2, downsample.0/1)."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = tnn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = tnn.BatchNorm2d(cout)
        self.relu = tnn.ReLU()
        self.conv2 = tnn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = tnn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = tnn.Sequential(tnn.Conv2d(cin, cout, 1, stride, bias=False), tnn.BatchNorm2d(cout))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + (x if self.downsample is None else self.downsample(x)))


class TorchCifarResNet(tnn.Module):
    def __init__(self, layers, widths, classes):
        super().__init__()
        self.conv1 = tnn.Conv2d(3, widths[0], 3, 1, 1, bias=False)
        self.bn1 = tnn.BatchNorm2d(widths[0])
        self.relu = tnn.ReLU()
        cin = widths[0]
        for s, (n, w) in enumerate(zip(layers, widths)):
            blocks = []
            for b in range(n):
                blocks.append(TorchBasicBlock(cin, w, 2 if (s > 0 and b == 0) else 1))
                cin = w
            setattr(self, f"layer{s + 1}", tnn.Sequential(*blocks))
        self.n = len(layers)
        self.avgpool = tnn.AdaptiveAvgPool2d(1)
        self.fc = tnn.Linear(cin, classes)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        for s in range(self.n):
            x = getattr(self, f"layer{s + 1}")(x)
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet_pair():
    torch.manual_seed(0)
    t = TorchCifarResNet([2, 2], [8, 16], 10)
    s = strata.models.ResNet(layers=[2, 2], widths=[8, 16], stem="cifar", num_classes=10)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 3, 16, 16), dtype=np.float32)
    return t, s, (x,), rng.integers(0, 10, 4)


class TorchDLRM(tnn.Module):
    """REFERENCE.md §1: emb_l (EmbeddingBag sum), bot_l / top_l (Linear + ReLU, Sigmoid last on top),
    dot interaction keeping the strict lower triangle."""

    def __init__(self, d, rows, bot, top):
        super().__init__()
        self.emb_l = tnn.ModuleList([tnn.EmbeddingBag(n, d, mode="sum") for n in rows])
        self.bot_l = self._mlp(bot, sigmoid_last=False)
        f = len(rows) + 1
        self.top_l = self._mlp([d + f * (f - 1) // 2] + top, sigmoid_last=True)

    @staticmethod
    def _mlp(widths, sigmoid_last):
        layers = []
        for i in range(len(widths) - 1):
            layers.append(tnn.Linear(widths[i], widths[i + 1]))
            layers.append(tnn.Sigmoid() if (sigmoid_last and i == len(widths) - 2) else tnn.ReLU())
        return tnn.Sequential(*layers)

    def forward(self, dense, indices, offsets):
        x = self.bot_l(dense)
        ly = [e(i, o) for e, i, o in zip(self.emb_l, indices, offsets)]
        t = torch.cat([x] + ly, dim=1).view(x.shape[0], -1, x.shape[1])
        z = torch.bmm(t, t.transpose(1, 2))
        f = t.shape[1]
        li = torch.tensor([i for i in range(f) for j in range(i)])
        lj = torch.tensor([j for i in range(f) for j in range(i)])
        return self.top_l(torch.cat([x, z[:, li, lj]], dim=1))


def dlrm_pair():
    torch.manual_seed(0)
    d, rows, bot, top = 4, [50, 30, 20], [6, 8, 4], [8, 1]
    t = TorchDLRM(d, rows, bot, top)
    s = strata.models.DLRM(sparse_feature_size=d, embedding_sizes=rows, bottom_mlp=bot, top_mlp=top)
    rng = np.random.default_rng(4)
    b = 8
    dense = rng.random((b, 6), dtype=np.float32)
    indices, offsets = [], []
    for n in rows:
        lengths = rng.integers(1, 5, b)
        offsets.append(np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64))
        indices.append(rng.integers(0, n, int(lengths.sum())).astype(np.int64))
    target = rng.random((b, 1), dtype=np.float32).round()
    return t, s, (dense, indices, offsets), target


PAIRS = {"mlp": mlp_pair, "cnn": cnn_pair, "resnet": resnet_pair, "dlrm": dlrm_pair}


def run(model, inputs, lib):
    if lib is torch:
        conv = lambda a: [torch.from_numpy(v) for v in a] if isinstance(a, list) else torch.from_numpy(a)  # noqa: E731
    else:
        conv = lambda a: [strata.from_numpy(v) for v in a] if isinstance(a, list) else strata.from_numpy(a)  # noqa: E731
    return model(*[conv(a) for a in inputs])


def loss_of(name, out, target, lib):
    if name == "dlrm":
        t = torch.from_numpy(target) if lib is torch else strata.from_numpy(target)
        return TF.mse_loss(out, t) if lib is torch else SF.mse_loss(out, t)
    y = torch.from_numpy(target) if lib is torch else strata.from_numpy(target.astype(np.int64))
    return TF.cross_entropy(out, y) if lib is torch else SF.cross_entropy(out, y)


@pytest.mark.parametrize("name", list(PAIRS))
def test_same_weights_give_the_same_outputs_and_gradients(name):
    t, s, inputs, target = PAIRS[name]()
    copy_weights(t, s)
    for mode in ("train", "eval"):
        getattr(t, mode)()
        getattr(s, mode)()
        t.zero_grad()
        s.zero_grad()
        tout = run(t, inputs, torch)
        sout = run(s, inputs, strata)
        np.testing.assert_allclose(to_np(sout), to_np(tout), rtol=RTOL, atol=ATOL, err_msg=f"{name} {mode} forward")
        loss_of(name, tout, target, torch).backward()
        loss_of(name, sout, target, strata).backward()
        tgrads = dict(t.named_parameters())
        for k, p in s.named_parameters():
            np.testing.assert_allclose(to_np(p.grad), to_np(tgrads[k].grad), rtol=RTOL, atol=ATOL,
                                       err_msg=f"{name} {mode} grad {k}")
    # Batch-norm running statistics after the training-mode forward agree too.
    tstate = t.state_dict()
    for k, v in s.state_dict().items():
        np.testing.assert_allclose(to_np(v), to_np(tstate[k]), rtol=RTOL, atol=ATOL, err_msg=f"{name} state {k}")


@pytest.mark.parametrize("opt", ["sgd", "adam"])
@pytest.mark.parametrize("name", list(PAIRS))
def test_twenty_optimizer_steps_give_the_same_loss_curve(name, opt):
    t, s, inputs, target = PAIRS[name]()
    copy_weights(t, s)
    if opt == "sgd":
        topt = torch.optim.SGD(t.parameters(), lr=0.05, momentum=0.9, foreach=False)
        sopt = strata.optim.SGD(s.parameters(), lr=0.05, momentum=0.9)
    else:
        topt = torch.optim.Adam(t.parameters(), lr=1e-3, foreach=False)
        sopt = strata.optim.Adam(s.parameters(), lr=1e-3)
    tl, sl = [], []
    for _ in range(20):
        for model, o, lib, curve in ((t, topt, torch, tl), (s, sopt, strata, sl)):
            o.zero_grad()
            loss = loss_of(name, run(model, inputs, lib), target, lib)
            loss.backward()
            o.step()
            curve.append(loss.item())
    np.testing.assert_allclose(sl, tl, rtol=2e-4, atol=1e-5, err_msg=f"{name} {opt} loss curve")
    assert tl[-1] < tl[0]
