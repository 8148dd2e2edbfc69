"""Training steps: a large MLP (batch 256, 1024-1024-1024-10), a small MLP (batch 32, 256-256-10)
and a small CNN (a CIFAR ResNet-8: widths 16/32/64, batch 64), one step = zero_grad (set to None),
forward, cross-entropy, backward, plain SGD update. Strata's side is the C++ binary
strata-bench-train (the Python package gains nn modules and optimizers with the Python issue; until
then Strata's steps are driven from C++ and PyTorch's from Python, which favours Strata on the small
models where per-op overhead dominates). Targets: large MLP >= 1.0x PyTorch's speed, small MLP
>= 1.5x, CNN >= 1.0x."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from harness.core import Figure, Item, Run, Target, Workload
from workloads.torch_side import meta, time_us


def torch_mlp(arch):
    layers = []
    for k in range(len(arch) - 1):
        layers.append(nn.Linear(arch[k], arch[k + 1]))
        if k + 2 < len(arch):
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.shortcut is None else self.shortcut(x)))


def torch_resnet(widths, blocks=1, classes=10):
    layers = [nn.Conv2d(3, widths[0], 3, 1, 1, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU()]
    cin = widths[0]
    for s, w in enumerate(widths):
        for b in range(blocks):
            layers.append(BasicBlock(cin, w, 2 if (s > 0 and b == 0) else 1))
            cin = w
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


CONFIGS = {
    # name: (strata-bench-train flags, PyTorch model factory, input shape without batch, classes, batch, target)
    "mlp-large": (["--model", "mlp", "--arch", "1024-1024-1024-10"], lambda: torch_mlp([1024, 1024, 1024, 10]),
                  [1024], 10, 256, Target("ratio <= 1.0 (>= 1.0x speed)", max_ratio=1.0)),
    "mlp-small": (["--model", "mlp", "--arch", "256-256-10"], lambda: torch_mlp([256, 256, 10]),
                  [256], 10, 32, Target("ratio <= 0.667 (>= 1.5x speed)", max_ratio=1 / 1.5)),
    "cnn-resnet8": (["--model", "cnn", "--widths", "16,32,64"], lambda: torch_resnet([16, 32, 64]),
                    [3, 32, 32], 10, 64, Target("ratio <= 1.0 (>= 1.0x speed)", max_ratio=1.0)),
}


def _strata(name, steps, warmup):
    flags, _, _, _, batch, _ = CONFIGS[name]

    def run(ctx):
        data = ctx.run_json("strata-bench-train", flags + ["--batch", batch, "--steps", steps, "--warmup", warmup,
                                                           "--threads", ctx.threads], tag=name)
        rec = data["step_us"]
        m = {"threads": data["threads"], "dtype": data["dtype"], "library": data.get("library", "")}
        return Run(m, {"step": rec["samples"]}, {"step": float(data["flops_per_step"])})
    return run


def _peer(name, steps, warmup):
    _, factory, shape, classes, batch, _ = CONFIGS[name]

    def run(ctx):
        torch.manual_seed(0)
        model = factory()
        model.train()
        x = torch.randn([batch] + shape)
        y = torch.randint(0, classes, [batch])
        opt = torch.optim.SGD(model.parameters(), lr=0.01)

        def step():
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            loss.item()  # Strata's step reads the loss value too

        return Run(meta(), {"step": time_us(step, steps, warmup)})
    return run


def items(ctx):
    steps, warmup = (5, 2) if ctx.quick else (20, 3)
    names = ["mlp-small"] if ctx.quick else list(CONFIGS)
    return [Item(n, [Figure("step", f"training step (batch {CONFIGS[n][4]})", limit="sgemm", target=CONFIGS[n][5])],
                 strata=_strata(n, steps, warmup), peer=_peer(n, steps, warmup)) for n in names]


WORKLOAD = Workload(
    name="train",
    title="Training steps vs PyTorch (Strata from C++, PyTorch from Python)",
    peer_name="PyTorch",
    slow_tier="not involved (every tensor fits the fast tier)",
    items=items,
    describe=__doc__,
)
