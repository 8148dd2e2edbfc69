"""Issue 26 parts 7-8 against PyTorch 2.13: F.scaled_dot_product_attention (values and gradients,
masks, causal, scale), F.embedding / nn.Embedding, the activation and loss modules,
nn.MultiheadAttention and nn.TransformerEncoderLayer from the same weights, a small causal
transformer (nn.Embedding, SDPA, MultiheadAttention) trained with the same weights to the same
losses, and the zoo's GPT trained from Python (also under Auto), with bad inputs throughout."""

import numpy as np
import pytest
import torch

import strata
from strata import nn
import strata.nn.functional as F

TF = torch.nn.functional
RNG = np.random.default_rng(26)
TOL = dict(rtol=2e-5, atol=2e-5)


def rand(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def np_state(module):
    return {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}


def pair(a, requires_grad=True):
    return strata.tensor(a).requires_grad_(requires_grad), torch.tensor(a, requires_grad=requires_grad)


def close(s, t, tol=TOL, msg=""):
    np.testing.assert_allclose(s.detach().numpy(), t.detach().numpy(), **tol, err_msg=msg)


# ---- scaled_dot_product_attention --------------------------------------------------------------


def causal_bool(L, S):
    return np.tril(np.ones((L, S), dtype=bool))


SDPA_CASES = {
    "4d": dict(q=(2, 3, 7, 8), k=(2, 3, 9, 8), v=(2, 3, 9, 5)),
    "3d_causal": dict(q=(3, 70, 4), k=(3, 70, 4), v=(3, 70, 6), is_causal=True),
    "2d_scale": dict(q=(5, 4), k=(6, 4), v=(6, 3), scale=0.7),
    "long_keys_causal": dict(q=(1, 2, 130, 8), k=(1, 2, 140, 8), v=(1, 2, 140, 8), is_causal=True),
    "bool_mask": dict(q=(2, 2, 6, 4), k=(2, 2, 5, 4), v=(2, 2, 5, 4), mask=lambda: RNG.random((6, 5)) > 0.3),
    "bool_mask_3d": dict(q=(2, 6, 4), k=(2, 6, 4), v=(2, 6, 4), mask=lambda: RNG.random((2, 6, 6)) > 0.2),
    "float_mask": dict(q=(2, 2, 4, 4), k=(2, 2, 5, 4), v=(2, 2, 5, 3), mask=lambda: rand(2, 1, 4, 5)),
}


@pytest.mark.parametrize("name", sorted(SDPA_CASES))
def test_sdpa_values_and_gradients_match_torch(name):
    case = SDPA_CASES[name]
    (qs, qt), (ks, kt), (vs, vt) = pair(rand(*case["q"])), pair(rand(*case["k"])), pair(rand(*case["v"]))
    kw = dict(is_causal=case.get("is_causal", False), scale=case.get("scale"))
    ms = mt = None
    if "mask" in case:
        m = case["mask"]()
        ms, mt = strata.tensor(m), torch.tensor(m)
    out_s = F.scaled_dot_product_attention(qs, ks, vs, attn_mask=ms, **kw)
    out_t = TF.scaled_dot_product_attention(qt, kt, vt, attn_mask=mt, **kw)
    assert out_s.dtype == strata.float32 and tuple(out_s.shape) == tuple(out_t.shape)
    close(out_s, out_t)
    g = rand(*out_t.shape)
    out_s.backward(strata.tensor(g))
    out_t.backward(torch.tensor(g))
    for s, t, what in ((qs, qt, "q"), (ks, kt, "k"), (vs, vt, "v")):
        close(s.grad, t.grad, msg=what)


def test_sdpa_float64_fully_masked_rows_and_transposed_inputs():
    q, k, v = (RNG.standard_normal((2, 4, 3, 8)) for _ in range(3))
    mask = np.ones((4, 4), dtype=bool)
    mask[2] = False  # query 2 sees no key: PyTorch 2.13 gives zeros
    out_s = F.scaled_dot_product_attention(*(strata.tensor(a).transpose(1, 2) for a in (q, k, v)),
                                           attn_mask=strata.tensor(mask))
    out_t = TF.scaled_dot_product_attention(*(torch.tensor(a).transpose(1, 2) for a in (q, k, v)),
                                            attn_mask=torch.tensor(mask))
    assert out_s.dtype == strata.float64
    np.testing.assert_allclose(out_s.numpy(), out_t.numpy(), rtol=1e-12, atol=1e-12)
    assert np.all(out_s.numpy()[:, :, 2] == 0)


def test_sdpa_dropout_is_seeded_and_scales_the_kept_probabilities():
    q, k, v = (strata.tensor(rand(2, 2, 16, 8)) for _ in range(3))
    strata.manual_seed(5)
    a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.4)
    strata.manual_seed(5)
    b = F.scaled_dot_product_attention(q, k, v, dropout_p=0.4)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    plain = F.scaled_dot_product_attention(q, k, v)
    assert not np.allclose(a.numpy(), plain.numpy())
    # With v = ones every output element is the row's kept probability mass / (1 - p): 1 on average.
    ones = strata.ones(2, 2, 16, 8)
    strata.manual_seed(6)
    mass = F.scaled_dot_product_attention(q, k, ones, dropout_p=0.4).numpy()
    assert abs(mass.mean() - 1.0) < 0.1
    assert np.all(F.scaled_dot_product_attention(q, k, v, dropout_p=1.0).numpy() == 0)


def test_sdpa_bad_inputs():
    q = strata.tensor(rand(2, 3, 4))
    with pytest.raises(RuntimeError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        F.scaled_dot_product_attention(q, q, q, dropout_p=1.5)
    with pytest.raises(RuntimeError, match="same dtype"):
        F.scaled_dot_product_attention(q, q.double(), q)
    with pytest.raises(RuntimeError, match="key's last dim"):
        F.scaled_dot_product_attention(q, strata.tensor(rand(2, 3, 5)), q)
    with pytest.raises(RuntimeError, match="does not broadcast"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=strata.ones(2, 2))
    with pytest.raises(RuntimeError, match="attn_mask must be bool or of query's dtype"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=strata.zeros(3, 3, dtype=strata.int64))
    with pytest.raises(RuntimeError, match="attn_mask should not be set when is_causal=True"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=strata.ones(3, 3), is_causal=True)
    with pytest.raises(TypeError, match="argument 'key' must be Tensor"):
        F.scaled_dot_product_attention(q, np.zeros((2, 3, 4)), q)
    with pytest.raises(NotImplementedError, match="enable_gqa"):
        F.scaled_dot_product_attention(q, q, q, enable_gqa=True)


# ---- embedding ------------------------------------------------------------------------------------


def test_functional_embedding_padding_idx_and_max_norm_match_torch():
    w = rand(10, 4, scale=2.0)
    idx = np.array([[1, 3, 3], [0, 9, 1]])
    for kw in (dict(), dict(padding_idx=3), dict(padding_idx=-1), dict(max_norm=1.0), dict(max_norm=2.0, norm_type=1.0)):
        ws, wt = pair(w.copy())
        out_s = F.embedding(strata.tensor(idx), ws, **kw)
        out_t = TF.embedding(torch.tensor(idx), wt, **kw)
        assert tuple(out_s.shape) == (2, 3, 4)
        close(out_s, out_t, msg=str(kw))
        close(ws, wt, msg=f"weight after {kw}")  # max_norm renormalizes in place
        g = rand(2, 3, 4)
        out_s.backward(strata.tensor(g))
        out_t.backward(torch.tensor(g))
        close(ws.grad, wt.grad, msg=str(kw))
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        F.embedding(strata.tensor(idx), strata.tensor(w), padding_idx=10)
    with pytest.raises(RuntimeError, match="index 10 at position 1"):
        F.embedding(strata.tensor(np.array([2, 10])), strata.tensor(w))
    with pytest.raises(RuntimeError, match="indices must be i64 or i32"):
        F.embedding(strata.tensor(w), strata.tensor(w))
    with pytest.raises(NotImplementedError, match="sparse"):
        F.embedding(strata.tensor(idx), strata.tensor(w), sparse=True)


def test_embedding_module_matches_torch():
    torch.manual_seed(0)
    t = torch.nn.Embedding(7, 3, padding_idx=-2)
    s = nn.Embedding(7, 3, padding_idx=-2)
    assert repr(s) == repr(t) == "Embedding(7, 3, padding_idx=5)"
    assert s.padding_idx == 5 and s.num_embeddings == 7 and s.embedding_dim == 3
    assert np.all(s.weight.detach().numpy()[5] == 0)
    s.load_state_dict(np_state(t))
    idx = np.array([[5, 1], [2, 5]])
    out_s, out_t = s(strata.tensor(idx)), t(torch.tensor(idx))
    close(out_s, out_t)
    out_s.sum().backward()
    out_t.sum().backward()
    close(s.weight.grad, t.weight.grad)
    assert list(s.state_dict()) == ["weight"]
    pre = strata.tensor(rand(4, 2))
    frozen = nn.Embedding.from_pretrained(pre)
    assert not frozen.weight.requires_grad and nn.Embedding.from_pretrained(pre, freeze=False).weight.requires_grad
    np.testing.assert_array_equal(frozen(strata.tensor(np.array([3]))).numpy(), pre.numpy()[[3]])
    with pytest.raises(RuntimeError, match="padding_idx 7 must be within num_embeddings"):
        nn.Embedding(7, 3, padding_idx=7)
    with pytest.raises(NotImplementedError, match="sparse=True"):
        nn.Embedding(7, 3, sparse=True)


# ---- activations and losses -----------------------------------------------------------------------


@pytest.mark.parametrize("name,args", [("SiLU", ()), ("Softmax", (1,)), ("Softmax", ()), ("LogSoftmax", (-1,)),
                                       ("LogSoftmax", ()), ("GELU", ()), ("Identity", ())])
def test_activation_modules_match_torch(name, args):
    x = rand(3, 4, 5)
    s, t = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    assert repr(s) == repr(t)
    (xs, xt) = pair(x)
    out_s, out_t = s(xs), t(xt)
    close(out_s, out_t)
    g = rand(3, 4, 5)
    out_s.backward(strata.tensor(g))
    out_t.backward(torch.tensor(g))
    close(xs.grad, xt.grad)


def test_functional_silu_and_l1_loss():
    (xs, xt), (ys, yt) = pair(rand(4, 6)), pair(rand(4, 6))
    close(F.silu(xs), TF.silu(xt))
    for red in ("mean", "sum", "none"):
        out_s, out_t = F.l1_loss(xs, ys, reduction=red), TF.l1_loss(xt, yt, reduction=red)
        close(out_s, out_t)
        out_s.sum().backward()
        out_t.sum().backward()
    close(xs.grad, xt.grad)
    close(ys.grad, yt.grad)
    with pytest.raises(ValueError, match="is not a valid value for reduction"):
        F.l1_loss(xs, ys, reduction="avg")
    with pytest.raises(RuntimeError, match="must have the same shape"):
        F.l1_loss(xs, strata.tensor(rand(6, 4)))


LOSSES = [
    ("CrossEntropyLoss", dict(), "class"),
    ("CrossEntropyLoss", dict(ignore_index=2, label_smoothing=0.1, reduction="sum"), "class"),
    ("CrossEntropyLoss", dict(weight=np.linspace(0.5, 2, 5, dtype=np.float32)), "class"),
    ("NLLLoss", dict(reduction="none"), "logprob"),
    ("MSELoss", dict(), "same"),
    ("L1Loss", dict(reduction="sum"), "same"),
    ("BCEWithLogitsLoss", dict(pos_weight=np.full(5, 2.0, np.float32)), "binary"),
    ("BCELoss", dict(), "prob"),
]


@pytest.mark.parametrize("i", range(len(LOSSES)))
def test_loss_modules_match_torch(i):
    name, kw, kind = LOSSES[i]
    x = rand(6, 5)
    if kind == "logprob":
        x = torch.log_softmax(torch.tensor(x), 1).numpy()
    if kind == "prob":
        x = (1 / (1 + np.exp(-x))).astype(np.float32)
    if kind in ("class", "logprob"):
        y = RNG.integers(0, 5, 6)
    elif kind in ("binary", "prob"):
        y = (RNG.random((6, 5)) > 0.5).astype(np.float32)
    else:
        y = rand(6, 5)
    s_kw = {k: strata.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    t_kw = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    s, t = getattr(nn, name)(**s_kw), getattr(torch.nn, name)(**t_kw)
    assert repr(s) == repr(t)
    xs, xt = pair(x)
    out_s, out_t = s(xs, strata.tensor(y)), t(xt, torch.tensor(y))
    assert out_s.dtype == strata.float32 and tuple(out_s.shape) == tuple(out_t.shape)
    close(out_s, out_t)
    out_s.sum().backward()
    out_t.sum().backward()
    close(xs.grad, xt.grad)
    assert s.reduction == t.reduction


def test_loss_modules_bad_inputs():
    with pytest.raises(ValueError, match="is not a valid value for reduction"):
        nn.MSELoss(reduction="avg")(strata.ones(2), strata.ones(2))
    with pytest.raises(NotImplementedError, match="size_average"):
        nn.L1Loss(size_average=True)
    with pytest.raises(RuntimeError, match="must have the same shape"):
        nn.MSELoss()(strata.ones(2, 3), strata.ones(3, 2))
    with pytest.raises(RuntimeError, match="target 7 is out of bounds"):
        nn.CrossEntropyLoss()(strata.ones(2, 3), strata.tensor(np.array([0, 7])))


# ---- MultiheadAttention and TransformerEncoderLayer -----------------------------------------------


def mha_pair(E, H, **kw):
    torch.manual_seed(1)
    t = torch.nn.MultiheadAttention(E, H, **kw)
    s = nn.MultiheadAttention(E, H, **kw)
    assert list(s.state_dict()) == list(t.state_dict())
    s.load_state_dict(np_state(t))
    return s, t


MHA_CASES = {
    "self_seq_first": (dict(), dict(self_attn=True)),
    "batch_first_weights_per_head": (dict(batch_first=True), dict(self_attn=True, average_attn_weights=False)),
    "cross_kdim_vdim": (dict(batch_first=True, kdim=6, vdim=3), dict()),
    "no_bias_bool_mask": (dict(bias=False), dict(self_attn=True, attn_mask="bool2d", need_weights=False)),
    "float_mask_3d_padding": (dict(batch_first=True), dict(attn_mask="float3d", key_padding_mask=True)),
    "causal_hint_fused": (dict(batch_first=True), dict(self_attn=True, attn_mask="causal", is_causal=True,
                                                       need_weights=False)),
    "unbatched": (dict(), dict(self_attn=True, unbatched=True)),
}


@pytest.mark.parametrize("name", sorted(MHA_CASES))
def test_multihead_attention_matches_torch(name):
    ctor, call = MHA_CASES[name]
    E, H, B, L, S = 8, 2, 3, 5, 4
    s, t = mha_pair(E, H, **ctor)
    bf = ctor.get("batch_first", False)
    shape = lambda n, w: ((n, w) if call.get("unbatched") else (B, n, w) if bf else (n, B, w))  # noqa: E731
    q = rand(*shape(L, E))
    if call.get("self_attn"):
        qs, qt = pair(q)
        args_s, args_t = (qs, qs, qs), (qt, qt, qt)
        S = L
    else:
        (qs, qt), (ks, kt), (vs, vt) = pair(q), pair(rand(*shape(S, ctor.get("kdim", E)))), pair(
            rand(*shape(S, ctor.get("vdim", E))))
        args_s, args_t = (qs, ks, vs), (qt, kt, vt)
    kw_s, kw_t = {}, {}
    mask = call.get("attn_mask")
    if mask == "bool2d":
        m = RNG.random((L, S)) > 0.7
        m[:, 0] = False
    elif mask == "float3d":
        m = rand(B * H, L, S)
    elif mask == "causal":
        m = ~causal_bool(L, S)
    if mask:
        kw_s["attn_mask"], kw_t["attn_mask"] = strata.tensor(m), torch.tensor(m)
    if call.get("key_padding_mask"):
        kpm = np.zeros((B, S), dtype=bool)
        kpm[0, -1] = kpm[2, 1] = True
        kw_s["key_padding_mask"], kw_t["key_padding_mask"] = strata.tensor(kpm), torch.tensor(kpm)
    for key in ("need_weights", "average_attn_weights", "is_causal"):
        if key in call:
            kw_s[key] = kw_t[key] = call[key]
    out_s, w_s = s(*args_s, **kw_s)
    out_t, w_t = t(*args_t, **kw_t)
    close(out_s, out_t)
    assert (w_s is None) == (w_t is None)
    if w_t is not None:
        close(w_s, w_t)
    g = rand(*out_t.shape)
    out_s.backward(strata.tensor(g))
    out_t.backward(torch.tensor(g))
    for (n, ps), (_, pt) in zip(s.named_parameters(), t.named_parameters()):
        close(ps.grad, pt.grad, msg=n)
    close(args_s[0].grad, args_t[0].grad)


def test_multihead_attention_bad_inputs():
    with pytest.raises(RuntimeError, match="embed_dim must be divisible by num_heads"):
        nn.MultiheadAttention(10, 3)
    with pytest.raises(NotImplementedError, match="add_bias_kv"):
        nn.MultiheadAttention(8, 2, add_bias_kv=True)
    m = nn.MultiheadAttention(8, 2)
    x = strata.tensor(rand(5, 2, 8))
    with pytest.raises(RuntimeError, match="the shape of the 2D attn_mask is"):
        m(x, x, x, attn_mask=strata.zeros(4, 5))
    with pytest.raises(RuntimeError, match=r"expected key_padding_mask of shape \(2, 5\)"):
        m(x, x, x, key_padding_mask=strata.zeros(5, 2))
    with pytest.raises(TypeError, match="argument 'attn_mask' must be Tensor"):
        m(x, x, x, attn_mask=np.zeros((5, 5)))


TEL_CASES = {
    "post_norm_relu_seq_first": dict(),
    "pre_norm_gelu_batch_first_causal": dict(norm_first=True, activation="gelu", batch_first=True, causal=True),
    "post_norm_padding_mask": dict(batch_first=True, padding=True),
}


@pytest.mark.parametrize("name", sorted(TEL_CASES))
@pytest.mark.parametrize("train", [False, True])
def test_transformer_encoder_layer_matches_torch(name, train):
    case = dict(TEL_CASES[name])
    causal, padding = case.pop("causal", False), case.pop("padding", False)
    dropout = 0.0 if train else 0.1  # eval mode ignores dropout; a training comparison needs none
    torch.manual_seed(2)
    t = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout, **case)
    s = nn.TransformerEncoderLayer(8, 2, 16, dropout, **case)
    assert list(s.state_dict()) == list(t.state_dict())
    s.load_state_dict(np_state(t))
    s.train(train)
    t.train(train)
    B, L = 3, 6
    x = rand(B, L, 8) if case.get("batch_first") else rand(L, B, 8)
    xs, xt = pair(x)
    kw_s, kw_t = {}, {}
    if causal:
        m = torch.nn.Transformer.generate_square_subsequent_mask(L)
        kw_s.update(src_mask=strata.tensor(m.numpy()), is_causal=True)
        kw_t.update(src_mask=m, is_causal=True)
    if padding:
        kpm = np.zeros((B, L), dtype=bool)
        kpm[1, 4:] = True
        kw_s["src_key_padding_mask"], kw_t["src_key_padding_mask"] = strata.tensor(kpm), torch.tensor(kpm)
    out_s, out_t = s(xs, **kw_s), t(xt, **kw_t)
    close(out_s, out_t, tol=dict(rtol=1e-4, atol=1e-5))
    if train:
        g = rand(*out_t.shape)
        out_s.backward(strata.tensor(g))
        out_t.backward(torch.tensor(g))
        close(xs.grad, xt.grad, tol=dict(rtol=1e-4, atol=1e-5))
        for (n, ps), (_, pt) in zip(s.named_parameters(), t.named_parameters()):
            close(ps.grad, pt.grad, tol=dict(rtol=1e-4, atol=1e-5), msg=n)
    with pytest.raises(RuntimeError, match="activation should be relu/gelu"):
        nn.TransformerEncoderLayer(8, 2, activation="tanh")


# ---- a small causal transformer trained from the same weights --------------------------------------


def tiny_lm(lib, V=13, E=16, H=2, T=8):
    """Token + position embeddings, a MultiheadAttention layer with a causal bool mask, a hand-written
    SDPA layer (is_causal), a head; written once for torch and strata (the module name changed)."""

    class TinyLM(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = lib.nn.Embedding(V, E, padding_idx=0)
            self.pos = lib.nn.Embedding(T, E)
            self.attn = lib.nn.MultiheadAttention(E, H, batch_first=True)
            self.ln = lib.nn.LayerNorm(E)
            self.qkv = lib.nn.Linear(E, 3 * E)
            self.proj = lib.nn.Linear(E, E)
            self.head = lib.nn.Linear(E, V)

        def forward(self, idx, mask):
            B = idx.shape[0]
            x = self.tok(idx) + self.pos(lib.arange(T))
            a, _ = self.attn(x, x, x, attn_mask=mask, need_weights=False)
            x = x + a
            q, k, v = self.qkv(self.ln(x)).split(E, dim=-1)
            heads = lambda z: z.reshape(B, T, H, E // H).transpose(1, 2)  # noqa: E731
            o = lib.nn.functional.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
            x = x + self.proj(o.transpose(1, 2).reshape(B, T, E))
            return self.head(x)

    return TinyLM()


def test_causal_transformer_trains_to_torchs_losses():
    V, T = 13, 8
    torch.manual_seed(3)
    t = tiny_lm(torch)
    s = tiny_lm(strata)
    s.load_state_dict(np_state(t))
    mask = ~causal_bool(T, T)
    data = RNG.integers(0, V, (4, T + 1))
    opt_s = strata.optim.Adam(s.parameters(), lr=1e-2)
    opt_t = torch.optim.Adam(t.parameters(), lr=1e-2)
    losses_s, losses_t = [], []
    for _ in range(5):
        for lib, model, opt, losses in ((strata, s, opt_s, losses_s), (torch, t, opt_t, losses_t)):
            x, y = lib.tensor(data[:, :-1]), lib.tensor(data[:, 1:])
            opt.zero_grad()
            logits = model(x, lib.tensor(mask))
            loss = lib.nn.functional.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
            loss.backward()
            opt.step()
            losses.append(loss.item())
    np.testing.assert_allclose(losses_s, losses_t, rtol=1e-4)
    assert losses_s[-1] < losses_s[0]


# ---- the zoo's GPT ------------------------------------------------------------------------------


class TorchGPT(torch.nn.Module):
    """The zoo GPT's structure in PyTorch: nanoGPT's names with TransformerEncoderLayer blocks."""

    def __init__(self, V, T, L, H, E):
        super().__init__()
        self.transformer = torch.nn.ModuleDict(dict(
            wte=torch.nn.Embedding(V, E), wpe=torch.nn.Embedding(T, E), drop=torch.nn.Dropout(0.0),
            h=torch.nn.ModuleList([torch.nn.TransformerEncoderLayer(E, H, 4 * E, 0.0, "gelu", batch_first=True,
                                                                    norm_first=True) for _ in range(L)]),
            ln_f=torch.nn.LayerNorm(E)))
        self.lm_head = torch.nn.Linear(E, V, bias=False)
        self.lm_head.weight = self.transformer.wte.weight

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(T))
        mask = torch.nn.Transformer.generate_square_subsequent_mask(T)
        for block in self.transformer.h:
            x = block(x, src_mask=mask, is_causal=True)
        logits = self.lm_head(self.transformer.ln_f(x))
        return TF.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-1)


def gpt_pair(V=17, T=16, L=2, H=2, E=16):
    torch.manual_seed(4)
    t = TorchGPT(V, T, L, H, E)
    s = strata.models.gpt.GPT(vocab_size=V, block_size=T, n_layer=L, n_head=H, n_embd=E)
    assert list(s.state_dict()) == list(t.state_dict())
    s.load_state_dict(np_state(t))
    return s, t


def test_gpt_trains_from_python_to_torchs_losses():
    s, t = gpt_pair()
    data = RNG.integers(0, 17, (3, 17))
    opt_s, opt_t = strata.optim.AdamW(s.parameters(), lr=3e-3), torch.optim.AdamW(t.parameters(), lr=3e-3)
    losses_s, losses_t = [], []
    for _ in range(4):
        for lib, model, opt, losses in ((strata, s, opt_s, losses_s), (torch, t, opt_t, losses_t)):
            opt.zero_grad()
            loss = model(lib.tensor(data[:, :-1]), lib.tensor(data[:, 1:]))
            loss.backward()
            opt.step()
            losses.append(loss.item())
    np.testing.assert_allclose(losses_s, losses_t, rtol=1e-4)
    # The tied head: one parameter under two names, updated once.
    sd = s.state_dict()
    np.testing.assert_array_equal(sd["lm_head.weight"].numpy(), sd["transformer.wte.weight"].numpy())
    assert tuple(s(strata.tensor(data[:, :-1])).shape) == (3, 16, 17)


def test_gpt_blocks_under_auto_give_bitwise_gradients_within_the_budget():
    s, _ = gpt_pair(T=32, L=3, E=32)
    x, y = (strata.tensor(a) for a in np.split(RNG.integers(0, 17, (4, 33)), [32], axis=1))
    y = strata.tensor(np.concatenate([x.numpy()[:, 1:], y.numpy()], 1))

    def step():
        s.zero_grad(set_to_none=False)
        loss = s(x, y)
        loss.backward()
        return loss.item(), {n: p.grad.numpy().copy() for n, p in s.named_parameters()}

    step()  # allocates the gradients (not activations)
    want = step()
    s.blocks.policy = strata.remat.auto(1 << 30)
    step()
    full = s.blocks.last_plan()["predicted_peak_bytes"]
    s.blocks.policy = strata.remat.auto(full // 2)
    step()
    got = step()
    plan = s.blocks.last_plan()
    assert plan["measured_peak_bytes"] <= full // 2, s.blocks.explain()
    assert got[0] == want[0]
    for n in want[1]:
        np.testing.assert_array_equal(got[1][n], want[1][n], err_msg=n)


def test_gpt_with_the_mlp_in_row_chunks_is_the_same_function():
    # Note [Feed-forward in row chunks]: the same weights and names, the same loss and gradients up
    # to the GEMMs' summation order (a slice's rows instead of all of them).
    s, t = gpt_pair(T=16, L=2, E=16)
    c = strata.models.gpt.GPT(vocab_size=17, block_size=16, n_layer=2, n_head=2, n_embd=16, ffn_chunks=3)
    assert list(c.state_dict()) == list(s.state_dict())
    c.load_state_dict(s.state_dict())
    data = RNG.integers(0, 17, (3, 17))
    x, y = strata.tensor(data[:, :-1]), strata.tensor(data[:, 1:])
    for model in (s, c):
        model.zero_grad()
        model(x, y).backward()
    np.testing.assert_allclose(c(x, y).item(), s(x, y).item(), rtol=1e-6)
    got = dict(c.named_parameters())
    for n, p in s.named_parameters():
        np.testing.assert_allclose(got[n].grad.numpy(), p.grad.numpy(), rtol=1e-5, atol=1e-6, err_msg=n)
    with pytest.raises(RuntimeError, match="ffn_chunks must be at least 1, got 0"):
        strata.models.gpt.GPT(n_embd=16, n_head=2, n_layer=1, ffn_chunks=0)


def test_gpt_bad_inputs():
    s, _ = gpt_pair()
    with pytest.raises(RuntimeError, match="the block size is only 16"):
        s(strata.zeros(1, 17, dtype=strata.int64))
    with pytest.raises(RuntimeError, match="must be a multiple of n_head"):
        strata.models.gpt.GPT(n_embd=10, n_head=3)
    with pytest.raises(ValueError, match="unknown configuration 'gpt5'"):
        strata.models.gpt.gpt("gpt5")
    assert strata.models.gpt.gpt("baby", vocab_size=65, block_size=8).block_size == 8
