"""strata.models.gpt: the GPT-2-style decoder of the zoo (C++ ``nn::zoo::GPT``) and its configurations.

    model = strata.models.gpt.GPT(vocab_size=65, block_size=256, n_layer=6, n_head=6, n_embd=384)
    loss = model(idx, targets)          # or logits = model(idx)
    model.blocks.set_policy(strata.remat.auto(budget_bytes))   # plan the blocks per op under Auto

The blocks are ``TransformerEncoderLayer(norm_first=True, activation="gelu", batch_first=True)`` made
causal; the head shares the token embedding's weight (``lm_head.weight`` is ``transformer.wte.weight``).
"""

from .._C.models import GPT

__all__ = ["GPT", "CONFIGS", "gpt"]

# name: (n_layer, n_head, n_embd) — GPT-2's sizes and nanoGPT's character-level "baby GPT".
CONFIGS = {
    "gpt2": (12, 12, 768),
    "gpt2-medium": (24, 16, 1024),
    "gpt2-large": (36, 20, 1280),
    "gpt2-xl": (48, 25, 1600),
    "baby": (6, 6, 384),
}


def gpt(name="gpt2", vocab_size=50304, block_size=1024, dropout=0.0, bias=True):
    """A GPT of one of the named sizes (``CONFIGS``)."""
    if name not in CONFIGS:
        raise ValueError(f"gpt(): unknown configuration {name!r} (expected one of {', '.join(CONFIGS)})")
    n_layer, n_head, n_embd = CONFIGS[name]
    return GPT(vocab_size=vocab_size, block_size=block_size, n_layer=n_layer, n_head=n_head, n_embd=n_embd,
               dropout=dropout, bias=bias)
