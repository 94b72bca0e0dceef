"""The shared PyTorch peer's training step on any device and precision.

`../shared/peers/torch_transformer_train.py` times its `Seq2Seq`
(nn.Transformer, post-LN, shared scaled embedding, sinusoidal positions) on the
CPU in float32. For a GPU comparison at our `mixed_bfloat16` policy this
script loads that `Seq2Seq` class unchanged and times the same step (Adam(0.9,
0.98, 1e-9), cross-entropy with label smoothing 0.1) on `--device` under
`torch.autocast(--autocast)`, waiting for the device before reading the clock.
`--compile` wraps the model in `torch.compile`, as a tuned PyTorch user would.
It takes the peer's flags and prints the peer's JSON line, so
`python -m benchmarks.train_step --peer_device=cuda --peer_autocast=bfloat16`
runs it in place of the peer:

    python -m benchmarks.torch_peer_step --device cuda --autocast bfloat16 \\
        --d_model 1024 --layers 6 --heads 16 --ff 4096 --vocab 32000 --batch 256
"""

import importlib.util
import os
import time

from benchmarks import harness
from t2t_revival.errors import UserError

PROG = "torch_peer_step"
PEER_FLAGS = list(harness.SHAPES["base"].items()) + harness.RUN_FLAGS
"""The shared peer's flags and its defaults: a model shape and a run."""


def parse_args(argv=None):
    p = harness.argument_parser(PROG, __doc__)
    for name, default in PEER_FLAGS:
        p.add_argument(f"--{name}", type=int, default=default)
    p.add_argument("--device", default="cuda",
                   help="torch device; cuda falls back to cpu when no GPU is visible")
    p.add_argument("--autocast", default="none", choices=["none", "bfloat16", "float16"],
                   help="torch.autocast dtype of the forward pass (weights stay float32)")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--peer_script", default=str(harness.PEER_SCRIPT),
                   help="the shared peer whose Seq2Seq is timed")
    return p.parse_args(argv)


def device_for(requested: str, cuda_available: bool) -> str:
    """The torch device the step runs on: `requested`, or cpu when it names
    a CUDA device and none is visible."""
    return "cpu" if requested.startswith("cuda") and not cuda_available else requested


def load_peer(path):
    spec = importlib.util.spec_from_file_location("torch_transformer_train", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv=None):
    a = parse_args(argv)
    if not os.path.exists(a.peer_script):
        raise UserError("there is no peer script there; pass --peer_script, or set T2T_SHARED "
                        f"to the shared folder. Received: --peer_script={a.peer_script!r}")
    import torch
    from torch import nn

    peer = load_peer(a.peer_script)
    device = device_for(a.device, torch.cuda.is_available())
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
    harness.print_result({
        "peer": "torch.nn.Transformer", "torch": torch.__version__, "device": device,
        "device_name": torch.cuda.get_device_name() if kind == "cuda" else "cpu",
        "autocast": a.autocast, "compile": a.compile, "threads": torch.get_num_threads(),
        "params": sum(p.numel() for p in model.parameters()), "warmup_s": warmup_s,
        "loss": float(loss.detach()), "step_s": elapsed / a.steps,
        "tgt_tokens_per_s": tokens / elapsed})


if __name__ == "__main__":
    harness.run(main, PROG)
