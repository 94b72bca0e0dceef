"""The shared PyTorch peer's training step on any device and precision.

`../shared/peers/torch_transformer_train.py` times its `Seq2Seq`
(nn.Transformer, post-LN, shared scaled embedding, sinusoidal positions) on the
CPU in float32. For a GPU comparison at our `mixed_bfloat16` policy this
script loads that `Seq2Seq` class unchanged and times the same step (Adam(0.9,
0.98, 1e-9), cross-entropy with label smoothing 0.1) on `--device` under
`torch.autocast(--autocast)`, waiting for the device before reading the clock.
`--compile` wraps the model in `torch.compile`, as a tuned PyTorch user would.
It takes the peer's flags and prints the peer's JSON line, so
`benchmarks/train_step.py --peer_device=cuda --peer_autocast=bfloat16` runs it
in place of the peer:

    python benchmarks/torch_peer_step.py --device cuda --autocast bfloat16 \\
        --d_model 1024 --layers 6 --heads 16 --ff 4096 --vocab 32000 --batch 256
"""

import argparse
import importlib.util
import json
import os
import pathlib
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED = pathlib.Path(os.environ.get("T2T_SHARED", ROOT.parent / "shared"))
PEER_FLAGS = [("d_model", 512), ("layers", 6), ("heads", 8), ("ff", 2048), ("vocab", 32000),
              ("batch", 64), ("src_len", 32), ("tgt_len", 32), ("steps", 10), ("warmup", 2),
              ("threads", 0)]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in PEER_FLAGS:
        p.add_argument(f"--{name}", type=int, default=default)
    p.add_argument("--device", default="cuda",
                   help="torch device; cuda falls back to cpu when no GPU is visible")
    p.add_argument("--autocast", default="none", choices=["none", "bfloat16", "float16"],
                   help="torch.autocast dtype of the forward pass (weights stay float32)")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--peer_script",
                   default=str(SHARED / "peers" / "torch_transformer_train.py"),
                   help="the shared peer whose Seq2Seq is timed")
    return p.parse_args(argv)


def load_peer(path):
    spec = importlib.util.spec_from_file_location("torch_transformer_train", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv=None):
    a = parse_args(argv)
    if not os.path.exists(a.peer_script):
        raise SystemExit(f"torch_peer_step.py: error: no peer script at {a.peer_script}; "
                         "pass --peer_script or set T2T_SHARED to the shared folder")
    import torch
    from torch import nn

    peer = load_peer(a.peer_script)
    device = a.device
    if device.startswith("cuda") and not torch.cuda.is_available():
        device = "cpu"
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    # The peer builds its causal mask with the default device at every call.
    torch.set_default_device(device)
    model = peer.Seq2Seq(a).to(device)
    forward = torch.compile(model) if a.compile else model
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
    src = torch.randint(1, a.vocab, (a.batch, a.src_len))
    tgt = torch.randint(1, a.vocab, (a.batch, a.tgt_len + 1))
    kind = device.split(":")[0]
    enabled = a.autocast != "none"
    dtype = getattr(torch, a.autocast) if enabled else None

    def sync():
        if kind == "cuda":
            torch.cuda.synchronize()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(kind, dtype=dtype, enabled=enabled):
            logits = forward(src, tgt[:, :-1])
            loss = loss_fn(logits.reshape(-1, a.vocab).float(), tgt[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        return loss

    start = time.perf_counter()
    for _ in range(a.warmup):
        step()
    sync()
    warmup_s = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    sync()
    elapsed = time.perf_counter() - start
    tokens = a.batch * a.tgt_len * a.steps
    print(json.dumps({
        "peer": "torch.nn.Transformer", "torch": torch.__version__, "device": device,
        "device_name": torch.cuda.get_device_name() if kind == "cuda" else "cpu",
        "autocast": a.autocast, "compile": a.compile, "threads": torch.get_num_threads(),
        "params": sum(p.numel() for p in model.parameters()), "warmup_s": warmup_s,
        "loss": float(loss.detach()), "step_s": elapsed / a.steps, "tgt_tokens_per_s": tokens / elapsed}))


if __name__ == "__main__":
    main()
