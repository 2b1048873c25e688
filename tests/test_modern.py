"""Chapter 10's package parts: RMSNorm/SwiGLU/ReLU^2/QK-norm/soft-cap options, Muon, WSD, windows, INT8 cache, DDP."""
import dataclasses
import os
import shutil
import subprocess
import sys

import pytest
import torch

from book.attention import sliding_window_mask
from book.gpt import GPT, GPTConfig
from book.kv_cache import quantize_int8
from book.layers import FeedForward, swiglu_hidden
from book.optim import Muon, newton_schulz
from book.train import COURSE_CPU, GPTRecipe, RecipeRun, warmup_stable_decay
from nbtools import ROOT

MODERN = dict(norm="rms", activation="swiglu", positions="rope", qk_norm=True, zero_init=True,
              logit_softcap=15.0, tie_weights=False)


def test_swiglu_at_8c_over_3_has_the_parameters_of_the_4c_gelu_ffn():
    gelu, swiglu = FeedForward(96), FeedForward(96, swiglu_hidden(96), activation="swiglu")
    n = [sum(p.numel() for p in m.parameters()) for m in (gelu, swiglu)]
    assert swiglu_hidden(96) == 256 and n == [2 * 96 * 384, 3 * 96 * 256] and n[0] == n[1]
    x = torch.randn(2, 5, 96)
    assert swiglu(x).shape == x.shape and FeedForward(96, activation="relu2")(x).shape == x.shape


def test_a_modern_gpt_trains_and_its_cache_equals_the_full_pass():
    torch.manual_seed(0)
    model = GPT(GPTConfig(65, 32, 64, 4, 2, **MODERN)).eval()
    x = torch.randint(0, 65, (2, 20))
    assert model(x, x)[1].item() == pytest.approx(torch.log(torch.tensor(65.0)).item(), abs=0.05)  # zero-init
    for p in model.parameters():   # away from the zero start, so the cache check means something
        p.data.add_(0.05 * torch.randn_like(p))
    full = model(x)
    cache = model.new_cache(2)
    torch.testing.assert_close(torch.cat([model(x[:, :7], cache=cache), model(x[:, 7:], cache=cache)], 1), full)
    assert model(x).abs().max() < 15.0   # soft-capped


def test_int8_cache_is_3_8x_smaller_and_close():
    torch.manual_seed(0)
    model = GPT(GPTConfig(65, 32, 64, 4, 2)).eval()
    x = torch.randint(0, 65, (1, 24))
    full, cache = model(x), model.new_cache(1, int8=True)
    out = torch.cat([model(x[:, :10], cache=cache), model(x[:, 10:], cache=cache)], 1)
    assert model.new_cache(1).nbytes / cache.nbytes == pytest.approx(4 * 16 / (16 + 2))
    assert (out - full).abs().max() < 0.05
    q, s = quantize_int8(torch.tensor([[1.0, -2.0, 0.5]]))
    assert q.dtype == torch.int8 and q.tolist() == [[64, -127, 32]]
    assert (q * s - torch.tensor([[1.0, -2.0, 0.5]])).abs().max() < 0.01


def test_sliding_window_mask_and_window_attention_with_a_cache():
    m = sliding_window_mask(4, window=2)
    assert m.int().tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]
    assert sliding_window_mask(1, 5, window=2).int().tolist() == [[0, 0, 0, 1, 1]]
    with pytest.raises(ValueError, match="window must be a positive int"):
        sliding_window_mask(3, window=0)
    torch.manual_seed(0)
    model = GPT(GPTConfig(65, 32, 64, 4, 2, positions="rope", window=4)).eval()
    x = torch.randint(0, 65, (1, 12))
    cache = model.new_cache(1)
    steps = [model(x[:, :5], cache=cache)] + [model(x[:, t:t + 1], cache=cache) for t in range(5, 12)]
    torch.testing.assert_close(torch.cat(steps, 1), model(x))
    y = x.clone()
    y[0, 0] = (y[0, 0] + 1) % 65   # beyond the window of the last position (2 layers: 2 x 3 back)
    assert torch.equal(model(x)[0, -1], model(y)[0, -1])


def test_newton_schulz_pushes_singular_values_towards_one_and_muon_matches_pytorch():
    torch.manual_seed(0)
    g = torch.randn(32, 96) * torch.logspace(-2, 1, 96)
    s = torch.linalg.svdvals(newton_schulz(g))
    assert torch.linalg.svdvals(g).max() / torch.linalg.svdvals(g).min() > 10 and 0.6 < s.min() and s.max() < 1.25
    if not hasattr(torch.optim, "Muon"):
        pytest.skip("torch.optim.Muon needs PyTorch >= 2.9")
    a = torch.nn.Parameter(torch.randn(48, 16))
    b = torch.nn.Parameter(a.detach().clone())
    ours, theirs = Muon([a], lr=0.02, weight_decay=0.1), torch.optim.Muon([b], lr=0.02, weight_decay=0.1)
    for _ in range(4):
        grad = torch.randn(48, 16)
        a.grad, b.grad = grad.clone(), grad.clone()
        ours.step()
        theirs.step()
    assert (a - b).abs().max() < 3e-3   # PyTorch iterates in bfloat16, ours in float32
    with pytest.raises(ValueError, match="Muon is for 2-D matrices"):
        Muon([torch.nn.Parameter(torch.ones(3))])


def test_wsd_schedule_and_a_muon_recipe_run():
    lrs = [warmup_stable_decay(s, 100, 10, 1.0, 0.1, 0.3) for s in range(101)]
    assert lrs[9] == pytest.approx(10 / 11) and lrs[10] == lrs[69] == 1.0 and lrs[100] == 0.1
    assert all(a >= b for a, b in zip(lrs[70:], lrs[71:])) and lrs[99] == pytest.approx(1.0 - 29 / 30 * 0.9)
    recipe = dataclasses.replace(COURSE_CPU, name="m", steps=6, warmup=1, optimizer="muon", schedule="wsd", **MODERN)
    run = RecipeRun(recipe, 65, torch.randint(0, 65, (5000,)))
    run.advance(6)
    assert run.step == 6 and all(l == l for l in run.losses)
    factor = recipe.lr_at(5) / recipe.lr
    assert all(g["lr"] / g["peak_lr"] == pytest.approx(factor) for g in run.opt.param_groups)
    with pytest.raises(ValueError, match="optimizer must be"):
        GPTRecipe("x", optimizer="sgd")
    with pytest.raises(ValueError, match="norm must be"):
        GPTRecipe("x", norm="batch")


@pytest.mark.skipif(sys.platform == "win32", reason="torchrun with gloo: Linux and macOS")
def test_ddp_on_two_cpu_processes_equals_one_process():
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or shutil.which("torchrun")
    assert torchrun, "torchrun comes with torch"
    out = subprocess.run([torchrun, "--nproc_per_node=2", "--master_port=29517", "-m", "book.distributed"],
                         capture_output=True, text=True, timeout=240, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stdout + out.stderr[-2000:]
    assert "2 processes (gloo)" in out.stdout and "EQUAL" in out.stdout


def test_the_benchmark_races_three_recipes_and_reports_the_modern_ratio():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpt_time_to_loss.py"), "--quick"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    fields = dict(kv.split("=") for kv in out.stdout.strip().splitlines()[-1].split())
    assert set(fields) == {"ratio", "course_s", "baseline_s", "baseline_final_val", "modern_ratio", "modern_s",
                           "modern_eager_ratio", "modern_eager_s", "compile_s"}
    assert float(fields["compile_s"]) == 0          # --quick compiles nothing
    # the seconds are printed to 0.01 s, and a quick run's are small: the ratio must lie within their rounding
    ratio, modern, base = (float(fields[k]) for k in ("modern_ratio", "modern_s", "baseline_s"))
    assert (modern - 0.005) / (base + 0.005) - 5e-4 <= ratio <= (modern + 0.005) / max(base - 0.005, 1e-9) + 5e-4


def test_a_compiled_recipe_trains_like_the_eager_one_and_compiles_before_its_first_step():
    recipe = dataclasses.replace(COURSE_CPU, name="c", steps=4, warmup=1, n_layers=1, d_model=32, n_heads=2,
                                 context_len=16, batch_size=4, optimizer="muon", schedule="wsd", **MODERN)
    data = torch.randint(0, 65, (5000,))
    eager = RecipeRun(recipe, 65, data, seed=3)
    compiled = RecipeRun(dataclasses.replace(recipe, compile=True), 65, data, seed=3)
    assert eager.compile_s == 0 and compiled.compile_s > 0 and compiled.step == 0
    assert all(p.grad is None for p in compiled.model.parameters())       # the warm-up pass left no gradient
    assert type(compiled.model) is type(eager.model)                      # evaluation and export stay eager
    eager.advance(4)
    compiled.advance(4)
    assert compiled.step == 4
    assert compiled.losses == pytest.approx(eager.losses, rel=1e-3, abs=1e-3)   # the same maths, fused differently
    with pytest.raises(ValueError, match="compile must be True or False"):
        GPTRecipe("x", compile="yes")


def _listeners(pids) -> set:
    """Local addresses ("127.0.0.1", "0.0.0.0", "::", ...) of the TCP sockets that processes `pids` listen on."""
    import ipaddress
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
        except OSError:
            continue
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in open(table).read().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and f[9] in inodes:                       # 0A: LISTEN
                raw = bytes.fromhex(f[1].split(":")[0])
                raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))   # little-endian words
                found.add(str(ipaddress.ip_address(raw)))
    return found


def _descendants(pid: int) -> list:
    parent = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parent[int(entry)] = int(open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    out, todo = [], [pid]
    while todo:
        node = todo.pop()
        kids = [c for c, p in parent.items() if p == node]
        out += kids
        todo += kids
    return out


def _listening_while_running(cmd) -> set:
    import time
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"})
    seen, family = set(), []
    try:
        for _ in range(40):
            time.sleep(0.25)
            family = [proc.pid, *_descendants(proc.pid)] if proc.poll() is None else family
            seen |= _listeners(family)
            if proc.poll() is not None:
                break
    finally:
        for pid in family[::-1]:
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        proc.wait()
    return seen


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="reads Linux's socket tables")
def test_chapter_10s_launch_listens_on_the_loopback_only_and_torchrun_does_not():
    ours = _listening_while_running([sys.executable, "-m", "book.distributed", "--nproc", "2", "--steps", "1500"])
    assert ours and ours <= {"127.0.0.1"}, f"listening on {ours}"
    theirs = _listening_while_running([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                                       "--master_addr=127.0.0.1", "--master_port=29541", "-m", "book.distributed",
                                       "--steps", "1500"])
    assert theirs - {"127.0.0.1"}, f"torchrun's store was expected on every interface, saw {theirs}"


def test_nproc_two_equals_one_process_and_refuses_nonsense():
    out = subprocess.run([sys.executable, "-m", "book.distributed", "--nproc", "2", "--steps", "2"],
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0 and "2 processes (gloo)" in out.stdout and "EQUAL" in out.stdout, out.stderr[-2000:]
    from book.distributed import launch_local
    with pytest.raises(ValueError, match="nproc must be a positive int"):
        launch_local(0, [])
