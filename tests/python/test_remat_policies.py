"""strata.nn.RematSequential under strata.remat's policies: gradients bit for bit those of the
plain Sequential (and PyTorch 2.13's within float32 tolerance, same weights), Auto's plan summary,
explain() and measured peak within the budget, re-planning on a new input shape, Python-defined
children, and bad inputs."""

import re

import numpy as np
import pytest
import torch

import strata
from strata import nn, remat

TOL = dict(rtol=1e-4, atol=1e-5)


def np_state(module):
    return {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}


def torch_cnn(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.Conv2d(8, 8, 3, padding=1),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 16, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(16, 5),
    )


def strata_layers():
    return [
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.Conv2d(8, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 5),
    ]


def step(model, x, target, set_to_none=True):
    """One training step's gradients: the loss, the input's and every parameter's gradient. Auto's
    budget covers activations: with set_to_none=False a second step reuses the parameters'
    gradients, and the measured peak holds no gradient allocation."""
    model.zero_grad(set_to_none=set_to_none)
    xs = strata.tensor(x).requires_grad_()
    loss = strata.nn.functional.cross_entropy(model(xs), strata.tensor(target))
    loss.backward()
    grads = {n: p.grad.numpy().copy() for n, p in model.named_parameters()}
    return float(loss.item()), xs.grad.numpy().copy(), grads


def data(batch=4, size=16, seed=1):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((batch, 3, size, size)).astype(np.float32), rng.integers(0, 5, batch).astype(np.int64)


def pair(policy):
    t = torch_cnn()
    plain = nn.Sequential(*strata_layers())
    plain.load_state_dict(np_state(t))
    rs = nn.RematSequential(*strata_layers(), policy=policy)
    rs.load_state_dict(np_state(t))
    return plain, rs, t


def storeall_peak():
    """The test CNN's activation peak on data() under Auto with a budget nothing needs to leave
    the fast tier for (about StoreAll's)."""
    _, rs, _ = pair(remat.auto(1 << 30))
    step(rs, *data())
    return rs.last_plan()["predicted_peak_bytes"]


POLICIES = {
    "store_all": lambda: remat.store_all(),
    "recompute_all": lambda: remat.recompute_all(),
    "every_k_2": lambda: remat.every_k(2),
    "every_k_5": lambda: remat.every_k(5),
    "sqrt_n": lambda: remat.sqrt_n(),
    "revolve_1": lambda: remat.revolve(1),
    "revolve_3": lambda: remat.revolve(3),
    "auto_roomy": lambda: remat.auto(1 << 30),
    "auto_step": lambda: remat.auto(1 << 30, granularity="step"),
}


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_gradients_equal_the_plain_sequential_and_pytorch(name):
    plain, rs, t = pair(POLICIES[name]())
    x, target = data()
    want = step(plain, x, target)
    got = step(rs, x, target)
    assert got[0] == want[0]
    np.testing.assert_array_equal(got[1], want[1])
    assert got[2].keys() == want[2].keys()
    for k in want[2]:
        np.testing.assert_array_equal(got[2][k], want[2][k], err_msg=k)
    # PyTorch on the same weights and batch.
    t.zero_grad()
    xt = torch.tensor(x, requires_grad=True)
    loss = torch.nn.functional.cross_entropy(t(xt), torch.tensor(target))
    loss.backward()
    np.testing.assert_allclose(got[0], loss.item(), **TOL)
    np.testing.assert_allclose(got[1], xt.grad.numpy(), **TOL)
    for n, p in t.named_parameters():
        np.testing.assert_allclose(got[2][n], p.grad.numpy(), err_msg=n, **TOL)
    # Batch norm's running statistics moved once, as in the plain forward.
    for k, v in plain.state_dict().items():
        np.testing.assert_array_equal(rs.state_dict()[k].numpy(), v.numpy(), err_msg=k)


def minimum_budget():
    """The smallest budget Auto plans the test CNN under, from the error a 1-byte budget raises."""
    _, rs, _ = pair(remat.auto(1))
    with pytest.raises(strata.StrataError, match="below the minimum") as err:
        step(rs, *data())
    return int(re.search(r"at least (\d+) bytes", str(err.value)).group(1))


@pytest.mark.parametrize("fraction", [0.2, 0.6])
def test_auto_under_a_tight_budget(fraction):
    full, least = storeall_peak(), minimum_budget()
    assert least < full
    # Between the minimum and StoreAll's peak (the minimum moves a little with the measured op
    # times that set the copies' windows, so not at it).
    budget = int(least + fraction * (full - least))
    plain, rs, _ = pair(remat.auto(budget))
    x, target = data()
    want = step(plain, x, target)
    state = {k: v.numpy().copy() for k, v in rs.state_dict().items()}
    got = step(rs, x, target)
    rs.load_state_dict(state)
    assert step(rs, x, target, set_to_none=False)[0] == got[0]  # measured without gradient allocations
    np.testing.assert_array_equal(got[1], want[1])
    for k in want[2]:
        np.testing.assert_array_equal(got[2][k], want[2][k], err_msg=k)
    plan = rs.last_plan()
    assert plan["budget_bytes"] == budget
    assert plan["stream"] + plan["recompute"] + plan["slow"] > 0  # something had to leave the fast tier
    assert plan["keep"] + plan["stream"] + plan["recompute"] + plan["slow"] == plan["values"]
    assert plan["predicted_peak_bytes"] <= budget
    assert 0 < plan["measured_peak_bytes"] <= budget
    assert plan["source"] in ("ilp", "greedy", "cached")
    assert isinstance(plan["sync_prefetch"], bool)
    assert ("fetched at their need points" in rs.explain()) == plan["sync_prefetch"]
    assert isinstance(plan["sync_evict"], bool)
    assert ("each eviction finishes before the next op runs" in rs.explain()) == plan["sync_evict"]
    assert plan["predicted_step_seconds"] >= plan["predicted_base_seconds"] > 0
    text = rs.explain()
    assert "measured" in text and str(budget) in text.replace(",", "")
    assert rs.policy.kind == "auto" and rs.policy.budget_bytes == budget and rs.policy.granularity == "op"


def test_auto_places_values_in_the_slow_tier_below_what_whole_fast_tensors_reach():
    """Below the lowest budget of plans that keep every tensor in the fast tier (the error of
    slow_placement=False names it), Auto places step outputs in the slow tier, where their readers
    use them in place: the plan says how many, the measured peak stays within the budget and the
    gradients are bitwise the plain Sequential's."""
    _, fast_only, _ = pair(remat.auto(1, slow_placement=False))
    with pytest.raises(strata.StrataError, match="below the minimum") as err:
        step(fast_only, *data())
    whole = int(re.search(r"at least (\d+) bytes", str(err.value)).group(1))
    least = minimum_budget()
    assert least < whole
    budget = (least + whole) // 2
    plain, rs, _ = pair(remat.auto(budget))
    x, target = data()
    want = step(plain, x, target)
    state = {k: v.numpy().copy() for k, v in rs.state_dict().items()}
    got = step(rs, x, target)
    np.testing.assert_array_equal(got[1], want[1])
    for k in want[2]:
        np.testing.assert_array_equal(got[2][k], want[2][k], err_msg=k)
    rs.load_state_dict(state)
    step(rs, x, target, set_to_none=False)
    plan = rs.last_plan()
    assert plan["slow"] > 0
    assert 0 < plan["measured_peak_bytes"] <= budget
    assert "slow" in rs.explain()
    _, no_slow, _ = pair(remat.auto(budget, slow_placement=False))
    with pytest.raises(strata.StrataError, match="below the minimum"):
        step(no_slow, x, target)


def test_auto_replans_on_a_new_input_shape():
    _, rs, _ = pair(remat.auto(1 << 30))
    step(rs, *data(size=16))
    assert rs.last_plan()["plans_made"] == 1
    step(rs, *data(size=16, seed=2))
    assert rs.last_plan()["plans_made"] == 1  # same signature: the cached plan
    step(rs, *data(size=8))
    assert rs.last_plan()["plans_made"] == 2


def test_auto_below_the_minimum_names_it():
    _, rs, _ = pair(remat.auto(1024))
    with pytest.raises(strata.StrataError, match=r"below the minimum.*raise the budget to at least \d+ bytes"):
        step(rs, *data())


class Scale(nn.Module):
    """A child defined in Python: re-run from C++ during backward."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(strata.tensor(np.array([1.5], dtype=np.float32)))

    def forward(self, x):
        return strata.relu(x * self.weight)


@pytest.mark.parametrize("policy", ["recompute_all", "every_k_2", "auto_roomy"])
def test_python_children_are_recomputed(policy):
    def layers():
        strata.manual_seed(3)
        return [nn.Linear(6, 12), Scale(), nn.Linear(12, 12), Scale(), nn.Linear(12, 3)]

    plain = nn.Sequential(*layers())
    rs = nn.RematSequential(*layers(), policy=POLICIES[policy]())
    x = np.random.default_rng(4).standard_normal((5, 6)).astype(np.float32)
    outs = []
    for m in (plain, rs):
        m.zero_grad()
        out = m(strata.tensor(x)).sum()
        out.backward()
        outs.append({n: p.grad.numpy().copy() for n, p in m.named_parameters()})
    for k in outs[0]:
        np.testing.assert_array_equal(outs[1][k], outs[0][k], err_msg=k)


def test_container_behaviour_and_reprs():
    rs = nn.RematSequential(nn.Linear(2, 3), nn.ReLU(), policy=remat.every_k(1))
    assert isinstance(rs, nn.Sequential) and isinstance(rs, nn.Module)
    assert len(rs) == 2 and isinstance(rs[1], nn.ReLU)
    assert repr(rs).startswith("RematSequential(")
    assert repr(rs.policy) == "strata.remat.EveryK(1)" and rs.policy.k == 1 and rs.policy.snapshots is None
    assert nn.RematSequential().policy.kind == "store_all"
    rs.policy = remat.revolve(2)
    assert rs.policy.kind == "revolve" and rs.policy.snapshots == 2
    assert remat.recompute_all(preserve_rng_state=False).preserve_rng_state is False
    assert remat.auto(4096, granularity="step").granularity == "step"
    assert remat.store_all().budget_bytes is None
    assert strata.remat.RematSequential is nn.RematSequential


def test_bad_inputs():
    with pytest.raises(ValueError, match=r"every_k: k must be >= 1, got 0"):
        remat.every_k(0)
    with pytest.raises(TypeError):
        remat.every_k(1.5)
    with pytest.raises(TypeError):
        remat.every_k(True)
    with pytest.raises(ValueError, match=r"revolve: snapshots must be >= 1, got -1"):
        remat.revolve(-1)
    with pytest.raises(ValueError, match=r"auto: budget_bytes must be >= 1, got 0"):
        remat.auto(0)
    with pytest.raises(ValueError, match=r"granularity must be 'op' or 'step', got 'layer'"):
        remat.auto(1 << 20, granularity="layer")
    with pytest.raises(TypeError, match="slow_placement must be a bool"):
        remat.auto(1 << 20, slow_placement=1)
    with pytest.raises(TypeError, match=r"policy must be a strata.remat policy.*got str"):
        nn.RematSequential(nn.ReLU(), policy="auto")
    rs = nn.RematSequential(nn.ReLU())
    with pytest.raises(TypeError, match=r"policy must be a strata.remat policy.*got int"):
        rs.policy = 3
    with pytest.raises(strata.StrataError, match=r"explain: the policy is StoreAll; only strata.remat.auto plans"):
        rs.explain()
    with pytest.raises(strata.StrataError, match=r"last_plan: the policy is StoreAll"):
        rs.last_plan()
    rs.policy = remat.auto(1 << 20)
    assert rs.last_plan() is None
    with pytest.raises(strata.StrataError, match=r"no plan yet; run a forward first"):
        rs.explain()
    with pytest.raises(strata.StrataError, match=r"no modules to run"):
        nn.RematSequential(policy=remat.every_k(2))(strata.zeros([2, 2]))


def resnet_chain(net):
    """A zoo ResNet as the chain RematSequential runs: stem, blocks, pool, flatten, fc (the modules
    are shared with `net`, so both see the same parameters)."""
    chain = [net.conv1, net.bn1, net.relu]
    for stage in (net.layer1, net.layer2, net.layer3):
        chain.extend(m for _, m in stage.named_children())
    return chain + [net.avgpool, nn.Flatten(1), net.fc]


def test_auto_plans_zoo_resnet_blocks_per_op():
    strata.manual_seed(5)
    net = strata.models.cifar_resnet(8, num_classes=4)
    rng = np.random.default_rng(6)
    x = rng.standard_normal((8, 3, 16, 16)).astype(np.float32)
    target = rng.integers(0, 4, 8).astype(np.int64)
    state = {k: v.numpy().copy() for k, v in net.state_dict().items()}
    want = step(net, x, target)
    roomy = nn.RematSequential(*resnet_chain(net), policy=remat.auto(1 << 30))
    net.load_state_dict(state)
    step(roomy, x, target)
    full = roomy.last_plan()["predicted_peak_bytes"]
    per_block = nn.RematSequential(*resnet_chain(net), policy=remat.auto(1 << 30, granularity="step"))
    net.load_state_dict(state)
    step(per_block, x, target)
    assert roomy.last_plan()["points"] > per_block.last_plan()["points"]  # blocks gave their ops
    tight = nn.RematSequential(*resnet_chain(net), policy=remat.auto(int(full * 0.6)))
    net.load_state_dict(state)
    got = step(tight, x, target)
    net.load_state_dict(state)
    assert step(tight, x, target, set_to_none=False)[0] == got[0]  # the cached plan, gradients kept
    plan = tight.last_plan()
    assert plan["stream"] + plan["recompute"] > 0
    assert plan["measured_peak_bytes"] <= int(full * 0.6)
    assert got[0] == want[0]
    np.testing.assert_array_equal(got[1], want[1])
    names = [n for n, _ in net.named_parameters()]
    assert len(names) == len(got[2])
    for (k, g), n in zip(got[2].items(), names):  # same parameters, in the same order
        np.testing.assert_array_equal(g, want[2][n], err_msg=f"{k} / {n}")
