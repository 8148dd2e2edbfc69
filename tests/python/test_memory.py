"""strata.memory: configuring the tiered memory, placement (where / prefetch / evict), statistics and
the occupancy timeline.

The process-wide tiered memory is created once per process, so every test that needs a particular
configuration (a small fast tier) runs its body in a fresh interpreter (`run_isolated`), with the
STRATA_* variables of the parent removed. The body prints one JSON object, which the test checks.
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import strata
import strata.memory as M

KiB = 1 << 10
MiB = 1 << 20
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

PRELUDE = """
import json, os, sys
import numpy as np
import strata
import strata.memory as M

def catch(fn):
    try:
        fn()
    except Exception as e:
        return [type(e).__name__, [c.__name__ for c in type(e).__mro__], str(e)]
    return None
"""


def run_isolated(body, env=None, timeout=120):
    """Runs `body` (after PRELUDE) in a new interpreter and returns the JSON it printed last."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}
    clean["STRATA_SLOW_MODEL"] = "off"  # migrations at copy speed: tests never time anything
    clean.update(env or {})
    code = PRELUDE + textwrap.dedent(body)
    proc = subprocess.run([sys.executable, "-c", code], env=clean, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"subprocess failed:\n{proc.stdout}\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ---- configuration ---------------------------------------------------------------------------------

def test_configure_before_first_tensor(tmp_path):
    out = run_isolated(f"""
        before = M.is_initialized()
        M.configure(fast_bytes="1M", slow_bytes=64 << 20, slow_dir={str(tmp_path)!r}, backend="mmap",
                    model="off")
        cfg = M.config()
        big = strata.ones(512 * 1024)          # 2 MiB: larger than the fast tier
        small = strata.ones(16 * 1024)         # 64 KiB
        print(json.dumps(dict(before=before, after=M.is_initialized(), cfg=cfg,
                              big=M.where(big), small=M.where(small), small_fast=M.in_fast(small),
                              big_fast=M.in_fast(big), big_sum=float(big.sum().item()),
                              cap_fast=M.capacity("fast"), cap_slow=M.capacity("slow"),
                              slow_now=M.memory_allocated("slow"), fast_now=M.memory_allocated(),
                              mode=M.slow_tier_mode())))
    """)
    assert out["before"] is False and out["after"] is True
    cfg = out["cfg"]
    assert cfg["active"] is True and cfg["allocator"] == "tiered" and cfg["policy"] == "lru"
    assert cfg["fast_bytes"] == MiB and cfg["slow_bytes"] == 64 * MiB
    assert cfg["slow_dir"] == str(tmp_path) and cfg["backend"] == "mmap" and cfg["model"] == "off"
    assert out["big"] == "slow" and out["big_fast"] is False
    assert out["small"] == "fast" and out["small_fast"] is True
    assert out["big_sum"] == 512 * 1024  # the slow-resident tensor holds the right values
    assert out["cap_fast"] == MiB and out["cap_slow"] >= 64 * MiB
    assert out["slow_now"] == 2 * MiB and out["fast_now"] == 64 * KiB
    assert "model off" in out["mode"] and "mmap" in out["mode"]


def test_configuration_from_environment_and_config_does_not_create():
    out = run_isolated("""
        cfg0 = M.config()
        init0 = M.is_initialized()
        x = strata.zeros(8)
        cfg1 = M.config()
        print(json.dumps(dict(cfg0=cfg0, init0=init0, cfg1=cfg1)))
    """, env={"STRATA_FAST_BYTES": "3M", "STRATA_SLOW_BYTES": "48M", "STRATA_SLOW_BACKEND": "mmap"})
    assert out["init0"] is False and out["cfg0"]["active"] is False
    assert out["cfg1"]["active"] is True
    for cfg in (out["cfg0"], out["cfg1"]):
        assert cfg["fast_bytes"] == 3 * MiB and cfg["slow_bytes"] == 48 * MiB
        assert cfg["backend"] == "mmap" and cfg["model"] == "off"


def test_configure_overrides_only_what_it_is_given():
    out = run_isolated("""
        M.configure(fast_bytes=2 * 1024 * 1024, model={"read": 2.5, "write": 1.0, "latency": 300})
        print(json.dumps(dict(cfg=M.config(), mode=M.slow_tier_mode())))
    """, env={"STRATA_SLOW_BYTES": "40M", "STRATA_SLOW_BACKEND": "mmap"})
    cfg = out["cfg"]
    assert cfg["fast_bytes"] == 2 * MiB and cfg["slow_bytes"] == 40 * MiB and cfg["backend"] == "mmap"
    assert cfg["model"] == "custom"
    assert cfg["model_params"] == {"read": 2.5, "write": 1.0, "latency": 300.0}
    assert "2.5" in out["mode"]


def test_configure_after_first_tensor_or_stats_raises():
    out = run_isolated("""
        x = strata.zeros(4)
        after_tensor = catch(lambda: M.configure(fast_bytes="2M"))
        print(json.dumps(dict(err=after_tensor, cfg=M.config())))
    """, env={"STRATA_FAST_BYTES": "1M", "STRATA_SLOW_BYTES": "32M"})
    name, mro, message = out["err"]
    assert name == "StrataError" and "RuntimeError" in mro
    assert "already exists" in message and "before the first tensor" in message
    assert "fast tier 1.0 MiB" in message
    assert out["cfg"]["fast_bytes"] == MiB  # unchanged

    out = run_isolated("""
        s = M.stats()
        err = catch(lambda: M.configure(fast_bytes="2M"))
        print(json.dumps(dict(err=err)))
    """, env={"STRATA_FAST_BYTES": "1M", "STRATA_SLOW_BYTES": "32M"})
    assert out["err"][0] == "StrataError" and "already exists" in out["err"][2]


def test_configure_twice_raises_and_failed_configure_leaves_nothing_behind():
    out = run_isolated("""
        bad = catch(lambda: M.configure(fast_bytes="1M", backend="tape"))
        init_after_bad = M.is_initialized()
        M.configure(fast_bytes="1M", slow_bytes="32M")
        again = catch(lambda: M.configure(fast_bytes="1M", slow_bytes="32M"))
        print(json.dumps(dict(bad=bad, init_after_bad=init_after_bad, again=again,
                              fast=M.config()["fast_bytes"])))
    """)
    assert out["bad"][0] == "StrataValueError" and out["init_after_bad"] is False
    assert out["fast"] == MiB
    assert out["again"][0] == "StrataError" and "already exists" in out["again"][2]


def test_configure_bad_input(tmp_path):
    missing = str(tmp_path / "does-not-exist")
    a_file = tmp_path / "file"
    a_file.write_text("x")
    out = run_isolated(f"""
        cases = {{
            "negative": lambda: M.configure(fast_bytes=-1),
            "garbage": lambda: M.configure(fast_bytes="12 parsecs"),
            "float": lambda: M.configure(fast_bytes=1.5),
            "bool": lambda: M.configure(slow_bytes=True),
            "huge": lambda: M.configure(fast_bytes="99999999999T"),
            "zero": lambda: M.configure(fast_bytes=0),
            "tiny": lambda: M.configure(fast_bytes=1),
            "backend": lambda: M.configure(backend="tape"),
            "backend_type": lambda: M.configure(backend=3),
            "model": lambda: M.configure(model="fast"),
            "model_dict": lambda: M.configure(model={{"read": 1.0, "write": 1.0}}),
            "model_neg": lambda: M.configure(model={{"read": -1.0, "write": 1.0, "latency": 5}}),
            "model_type": lambda: M.configure(model=3),
            "model_blank": lambda: M.configure(model="read= 8,write=2,latency=3"),
            "model_text_number": lambda: M.configure(model={{"read": "8", "write": 1.0, "latency": 5}}),
            "missing_dir": lambda: M.configure(slow_dir={missing!r}),
            "file_dir": lambda: M.configure(slow_dir={str(a_file)!r}),
            "dir_type": lambda: M.configure(slow_dir=5),
            "numa": lambda: M.configure(numa_node=-2),
            "dram_gbps": lambda: M.configure(dram_gbps=0),
        }}
        errs = {{k: catch(f) for k, f in cases.items()}}
        print(json.dumps(dict(errs=errs, init=M.is_initialized())))
    """)
    errs = out["errs"]
    assert out["init"] is False  # no failed configure created the tiered memory
    expected = {
        "negative": ("ValueError", "fast_bytes must be a non-negative byte count, got -1"),
        "garbage": ("ValueError", "fast_bytes: expected a byte count (e.g. 1048576, 512M, 8G), got '12 parsecs'"),
        "float": ("TypeError", "fast_bytes must be an int or a string like '512M', not float"),
        "bool": ("TypeError", "slow_bytes must be an int or a string like '512M', not bool"),
        "huge": ("ValueError", "is too large"),
        "zero": ("ValueError", "the fast-tier budget is zero"),
        "tiny": ("ValueError", "the fast-tier budget of 1 bytes is below the minimum of 1 MiB"),
        "backend": ("ValueError", "backend: expected auto, memkind, mmap or numa, got 'tape'"),
        "backend_type": ("TypeError", "backend must be a string"),
        "model": ("ValueError", "model: expected auto, off, default, read=R,write=W,latency=L or R,W,L"),
        "model_dict": ("ValueError", "the model dict lacks 'latency'"),
        "model_neg": ("ValueError", "model: read and write bandwidths must be positive and the latency non-negative"),
        "model_type": ("TypeError", "model must be a string or a dict, not int"),
        "model_blank": ("ValueError", "model: expected auto, off, default, read=R,write=W,latency=L or R,W,L"),
        "model_text_number": ("TypeError", "model['read'] must be a number, not str"),
        "missing_dir": ("ValueError", f"slow_dir '{missing}' is not an existing directory"),
        "file_dir": ("ValueError", "is not an existing directory"),
        "dir_type": ("TypeError", "slow_dir must be a path"),
        "numa": ("ValueError", "numa_node must be a node number"),
        "dram_gbps": ("ValueError", "dram_gbps must be a positive number, got 0"),
    }
    for key, (builtin, text) in expected.items():
        assert errs[key] is not None, key
        name, mro, message = errs[key]
        assert builtin in mro and "StrataError" in mro, (key, mro)
        assert "strata.memory.configure()" in message and text in message, (key, message)


@pytest.mark.parametrize("var", ["STRATA_FAST_BYTES", "STRATA_SLOW_BYTES"])
def test_too_small_tiers_from_the_environment_name_the_variable(var):
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}
    env[var] = "1"
    proc = subprocess.run([sys.executable, "-c", "import strata; strata.ones((2,))"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode != 0
    assert f"of 1 bytes is below the minimum of 1 MiB (set {var}" in proc.stderr, proc.stderr
    assert "Arena" not in proc.stderr, proc.stderr


def test_model_spellings_are_those_of_the_variable_and_the_flag():
    # One parser (core/config.h parse_slow_tier_model) for STRATA_SLOW_MODEL, --slow-tier-model and
    # configure(model=...): the flag's R,W,L spelling works in Python too.
    out = run_isolated("""
        M.configure(fast_bytes="2M", model="8,2.5,300")
        print(json.dumps(dict(cfg=M.config())))
    """)
    assert out["cfg"]["model"] == "custom"
    assert out["cfg"]["model_params"] == {"read": 8.0, "write": 2.5, "latency": 300.0}
    out = run_isolated("""
        print(json.dumps(dict(cfg=M.config())))
    """, env={"STRATA_SLOW_MODEL": "read=4,write=1,latency=0"})
    assert out["cfg"]["model_params"] == {"read": 4.0, "write": 1.0, "latency": 0.0}


@pytest.mark.parametrize("var,value,message", [
    ("STRATA_DRAM_GBPS", "fast", "STRATA_DRAM_GBPS: expected a positive number (GB/s), got 'fast'"),
    ("STRATA_DRAM_GATHER_GBPS", "", "STRATA_DRAM_GATHER_GBPS: expected a positive number (GB/s), got ''"),
    ("STRATA_SLOW_MODEL", "read=8GB,write=2,latency=3", "STRATA_SLOW_MODEL: expected auto, off, default"),
    ("STRATA_SLOW_NUMA_NODE", "one", "STRATA_SLOW_NUMA_NODE: expected a NUMA node number in [0, 4096), got 'one'"),
    ("STRATA_SLOW_DIR", "", "STRATA_SLOW_DIR: expected a directory, got ''"),
])
def test_bad_memory_variables_are_errors_not_ignored(var, value, message):
    out = run_isolated("""
        print(json.dumps(dict(cfg=catch(M.config), first=catch(lambda: strata.ones((2,))))))
    """, env={var: value})
    assert "ValueError" in out["cfg"][1] and message in out["cfg"][2], out
    assert out["first"][0] == "StrataError" and message in out["first"][2], out


def test_bad_strata_memory_fails_the_first_allocation():
    # The allocator is chosen during static initialization, where an error would abort the
    # interpreter: the first allocation raises it instead.
    out = run_isolated("""
        print(json.dumps(dict(first=catch(lambda: strata.ones((2,))), alloc=M.config()["allocator"])))
    """, env={"STRATA_MEMORY": "DRAM"})
    assert out["first"][0] == "StrataError"
    assert "STRATA_MEMORY: expected tiered or dram, got 'DRAM'" in out["first"][2]
    assert out["alloc"] == "misconfigured"


def test_configure_reads_bad_environment_as_value_error():
    out = run_isolated("""
        print(json.dumps(dict(cfg=catch(M.config), conf=catch(lambda: M.configure(fast_bytes="1M")))))
    """, env={"STRATA_SLOW_BYTES": "lots"})
    for err in (out["cfg"], out["conf"]):
        assert "ValueError" in err[1] and "STRATA_SLOW_BYTES: expected a byte count (e.g. 1048576, 512M, 8G), got 'lots'" in err[2]


# ---- placement, the policy and the statistics --------------------------------------------------------

def test_prefetch_evict_and_the_statistics_they_leave(tmp_path):
    out = run_isolated(f"""
        M.configure(fast_bytes="1M", slow_bytes="64M", slow_dir={str(tmp_path)!r}, backend="mmap")
        n = 64 * 1024                                   # 256 KiB of float32
        t = strata.arange(n, dtype=strata.float32)
        ref = np.arange(n, dtype=np.float32)
        log = []
        def step(name):
            s = M.stats()
            log.append(dict(name=name, where=M.where(t), in_fast=M.in_fast(t),
                            to_slow=s["moved_to_slow"], to_fast=s["moved_to_fast"],
                            elided=s["copies_elided"], fast=s["heaps"]["fast"]["current_bytes"],
                            slow=s["heaps"]["slow"]["current_bytes"],
                            same=bool(np.array_equal(np.array(t.numpy(), copy=True), ref))))
        step("new")
        h = M.evict(t); ok = h.wait(); step("evicted")
        done, dur = h.done(), h.duration
        ok2 = M.prefetch(t).wait(); step("prefetched")
        ok3 = M.evict(t).wait(); step("clean evicted")      # the slow copy is current: no copy
        M.prefetch(t).wait()
        t.add_(1.0); ref += 1                                 # dirty in the fast tier
        M.evict(t).wait(); step("dirty evicted")
        M.synchronize()
        print(json.dumps(dict(log=log, ok=[ok, ok2, ok3], done=done, dur=dur,
                              repr=repr(h))))
    """)
    size = 256 * KiB
    log = {e["name"]: e for e in out["log"]}
    assert out["ok"] == [True, True, True] and out["done"] is True and out["dur"] >= 0
    assert "evict" in out["repr"] and "done" in out["repr"]
    assert all(e["same"] for e in out["log"])  # values survive every move
    new, ev, pre, clean, dirty = (log[k] for k in ("new", "evicted", "prefetched", "clean evicted",
                                                   "dirty evicted"))
    assert new["where"] == "fast" and new["in_fast"] and new["fast"] == size and new["slow"] == 0
    assert new["to_slow"] == {"count": 0, "bytes": 0}
    # The eviction copied exactly the tensor's bytes to the slow tier.
    assert ev["where"] == "slow" and not ev["in_fast"]
    assert ev["to_slow"] == {"count": 1, "bytes": size} and ev["fast"] == 0 and ev["slow"] == size
    # The prefetch copied them back (and kept the slow sibling).
    assert pre["where"] == "fast" and pre["to_fast"] == {"count": 1, "bytes": size}
    assert pre["fast"] == size and pre["slow"] == size
    # Evicting the unchanged tensor elides the copy.
    assert clean["where"] == "slow" and clean["to_slow"] == {"count": 1, "bytes": size}
    assert clean["elided"] == {"count": 1, "bytes": size} and clean["fast"] == 0
    # After a write, eviction copies again.
    assert dirty["where"] == "slow" and dirty["to_fast"] == {"count": 2, "bytes": 2 * size}
    assert dirty["to_slow"] == {"count": 2, "bytes": 2 * size}


def test_allocation_beyond_the_budget_evicts_the_least_recently_used():
    out = run_isolated("""
        a = strata.ones(192 * 1024)            # 768 KiB
        b = strata.ones(192 * 1024)            # does not fit next to a: a is evicted
        s = M.stats()
        r = dict(a=M.where(a), b=M.where(b), to_slow=s["moved_to_slow"])
        del a, b
        a, b, c = (strata.ones(64 * 1024) for _ in range(3))   # 3 x 256 KiB, LRU order a, b, c
        M.softevict(c)                           # c is the first candidate now, but not moved
        r["c_after_softevict"] = M.where(c)
        d = strata.ones(96 * 1024)             # 384 KiB: one eviction makes room; it is c, not a
        r["after_d"] = [M.where(x) for x in (a, b, c, d)]
        big = strata.ones(512 * 1024)          # 2 MiB > the fast tier: prefetch cannot succeed
        r["big_prefetch"] = M.prefetch(big).wait()
        r["big"] = M.where(big)
        print(json.dumps(r))
    """, env={"STRATA_FAST_BYTES": "1M", "STRATA_SLOW_BYTES": "64M"})
    assert out["a"] == "slow" and out["b"] == "fast"
    assert out["to_slow"] == {"count": 1, "bytes": 768 * KiB}
    assert out["c_after_softevict"] == "fast"
    assert out["after_d"] == ["fast", "fast", "slow", "fast"]
    assert out["big_prefetch"] is False and out["big"] == "slow"


def test_peaks_and_their_reset():
    out = run_isolated("""
        keep = strata.ones(32 * 1024)                        # 128 KiB, stays alive
        tmp = strata.ones(128 * 1024); del tmp              # 512 KiB peak, then freed
        r = dict(now=M.memory_allocated("fast"), peak=M.max_memory_allocated("fast"),
                 peak_default=M.max_memory_allocated())
        M.evict(keep).wait()
        M.prefetch(keep).wait()
        M.reset_peak_stats()
        s = M.stats()
        r.update(peak_after=M.max_memory_allocated("fast"), now_after=M.memory_allocated("fast"),
                 slow_peak_after=M.max_memory_allocated("slow"), slow_now=M.memory_allocated("slow"),
                 moves_kept=s["moved_to_slow"]["bytes"], allocs_kept=s["heaps"]["fast"]["allocations"])
        M.reset_accumulated_memory_stats()
        s = M.stats()
        r.update(moves_zero=s["moved_to_slow"], allocs_zero=s["heaps"]["fast"]["allocations"],
                 now_kept=s["heaps"]["fast"]["current_bytes"], js=json.loads(M.stats_json()),
                 summary=M.memory_summary())
        print(json.dumps(r))
    """, env={"STRATA_FAST_BYTES": "1M", "STRATA_SLOW_BYTES": "64M"})
    assert out["now"] == 128 * KiB and out["peak"] == 640 * KiB and out["peak_default"] == 640 * KiB
    assert out["peak_after"] == out["now_after"] == 128 * KiB
    assert out["slow_peak_after"] == out["slow_now"] == 128 * KiB  # the slow sibling
    assert out["moves_kept"] == 128 * KiB and out["allocs_kept"] >= 3  # reset_peak_stats keeps these
    assert out["moves_zero"] == {"count": 0, "bytes": 0} and out["allocs_zero"] == 0
    assert out["now_kept"] == 128 * KiB
    assert out["js"]["heaps"]["fast"]["current_bytes"] == 128 * KiB
    assert "fast heap" in out["summary"]


def test_dram_allocator_tensors_are_not_tiered():
    out = run_isolated("""
        x = strata.zeros(16)
        print(json.dumps(dict(where=M.where(x), alloc=M.config()["allocator"],
                              pre=catch(lambda: M.prefetch(x)), ev=catch(lambda: M.evict(x)),
                              inf=catch(lambda: M.in_fast(x)))))
    """, env={"STRATA_MEMORY": "dram"})
    assert out["where"] == "dram" and out["alloc"] == "dram"
    for key, op in (("pre", "prefetch"), ("ev", "evict"), ("inf", "in_fast")):
        name, mro, message = out[key]
        assert "ValueError" in mro
        assert f"strata.memory.{op}(): the tensor's storage is not in the tiered memory" in message


# ---- the occupancy timeline --------------------------------------------------------------------------

def test_timeline_json_and_png(tmp_path):
    pytest.importorskip("matplotlib", reason="the occupancy plot needs matplotlib")
    json_path = tmp_path / "run.json"
    png_path = tmp_path / "run.png"
    png2_path = tmp_path / "again.png"
    out = run_isolated(f"""
        M.mark("ignored")                       # no timeline recording: nothing happens
        with M.timeline({str(json_path)!r}, path_png={str(png2_path)!r}, title="toy step"):
            r = dict(enabled=M.timeline_enabled())
            M.mark("forward")
            acts = [strata.ones(64 * 1024) for _ in range(6)]   # 1.5 MiB: spills past 1 MiB
            M.mark("backward")
            del acts
        r["enabled_after"] = M.timeline_enabled()
        M.save_occupancy_plot({str(png_path)!r}, title="toy")
        r["tl"] = json.loads(M.timeline_json())
        print(json.dumps(r))
    """, env={"STRATA_FAST_BYTES": "1M", "STRATA_SLOW_BYTES": "64M"})
    assert out["enabled"] is True and out["enabled_after"] is False
    saved = json.loads(json_path.read_text())
    assert saved == out["tl"]
    assert saved["version"] == 1 and saved["fast_capacity"] == MiB and saved["slow_capacity"] >= 64 * MiB
    assert [label for _, label in saved["marks"]] == ["forward", "backward"]
    samples = saved["samples"]
    assert len(samples) >= 4
    assert max(s[1] for s in samples) == MiB        # the fast tier filled up
    assert max(s[2] for s in samples) >= 512 * KiB  # and spilled into the slow tier
    assert samples[-1][1] == 0 and samples[-1][2] == 0  # all freed at the end
    ts = [s[0] for s in samples]
    assert ts == sorted(ts)
    for p in (png_path, png2_path):
        data = p.read_bytes()
        assert len(data) > len(PNG_SIGNATURE) and data.startswith(PNG_SIGNATURE)


def test_start_stop_timeline_and_restart_clears(tmp_path):
    png = str(tmp_path / "never-written.png")
    out = run_isolated(f"""
        empty = catch(lambda: M.save_occupancy_plot({png!r}))
        M.start_timeline()
        M.mark("one")
        M.stop_timeline()
        first = json.loads(M.timeline_json())
        M.start_timeline(clear=False)
        M.mark("two")
        M.stop_timeline()
        kept = json.loads(M.timeline_json())
        M.start_timeline()
        M.mark("three")
        M.stop_timeline()
        cleared = json.loads(M.timeline_json())
        print(json.dumps(dict(first=first["marks"], kept=kept["marks"], cleared=cleared["marks"],
                              empty=empty, written=os.path.exists({png!r}))))
    """, env={"STRATA_FAST_BYTES": "1M", "STRATA_SLOW_BYTES": "64M"})
    assert out["empty"][0] == "ValueError" and "the timeline has no samples" in out["empty"][2]
    assert out["written"] is False
    assert [m[1] for m in out["first"]] == ["one"]
    assert [m[1] for m in out["kept"]] == ["one", "two"]
    assert [m[1] for m in out["cleared"]] == ["three"]


# ---- bad input in this process (no configuration needed) ---------------------------------------------

def test_non_tensor_arguments_raise_type_error():
    for fn, op in ((M.where, "where"), (M.in_fast, "in_fast"), (M.prefetch, "prefetch"),
                   (M.evict, "evict"), (M.softevict, "softevict")):
        with pytest.raises(TypeError, match=rf"strata.memory.{op}\(\): argument 'tensor' must be "
                                            r"Tensor, not list"):
            fn([1, 2])
    with pytest.raises(TypeError):
        M.prefetch(strata.zeros(2), force="yes")


def test_numpy_backed_tensors_live_outside_the_tiers():
    x = strata.from_numpy(np.zeros(4, dtype=np.float32))
    assert M.where(x) == "dram"
    with pytest.raises(ValueError, match=r"strata.memory.evict\(\): the tensor's storage is not in "
                                         r"the tiered memory"):
        M.evict(x)
    y = strata.zeros(4)
    assert M.where(y) in ("fast", "slow")  # the test process's own tiered memory


def test_bad_tier_label_path_and_plot_arguments(tmp_path):
    with pytest.raises(ValueError, match=r"memory_allocated\(\): unknown tier 'medium' \(expected "
                                         r"'fast' or 'slow'\)"):
        M.memory_allocated("medium")
    with pytest.raises(ValueError, match=r"max_memory_allocated\(\): unknown tier 'dram'"):
        M.max_memory_allocated("dram")
    with pytest.raises(TypeError, match=r"tier must be 'fast' or 'slow', not int"):
        M.capacity(0)
    with pytest.raises(TypeError, match=r"mark\(\): label must be a str, not int"):
        M.mark(3)
    with pytest.raises(ValueError, match=r"mark\(\): label must not be empty"):
        M.mark("")
    with pytest.raises(TypeError, match=r"save_timeline_json\(\): path must be a str or os.PathLike"):
        M.save_timeline_json(3)
    with pytest.raises(strata.StrataError, match="no-such-dir"):
        M.save_timeline_json(str(tmp_path / "no-such-dir" / "t.json"))
    with pytest.raises(TypeError, match=r"save_occupancy_plot\(\): path_png must be"):
        M.save_occupancy_plot(None)
    with pytest.raises(TypeError, match=r"save_occupancy_plot\(\): title must be"):
        M.save_occupancy_plot(str(tmp_path / "x.png"), title=5)
    with pytest.raises(TypeError, match=r"timeline\(\): path_json must be"):
        with M.timeline(path_json=7):
            pass
    assert not M.timeline_enabled()


def test_module_is_exported():
    assert strata.memory is M
    assert set(M.__all__) <= set(dir(M))
