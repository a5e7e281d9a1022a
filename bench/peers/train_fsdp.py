"""PyTorch FSDP with CPUOffload(offload_params=True): the second training peer.

One process, world 1 (NCCL on a GPU, gloo on the CPU), a LlamaForCausalLM of the shape (random
weights), each decoder layer its own FSDP unit (transformer_auto_wrap_policy), parameters kept
in float32 in host memory and cast to bf16 for compute (MixedPrecision(param_dtype=bf16)),
gradients offloaded to the host, torch.optim.AdamW stepping the host parameters (optimizer state
in host memory), activation checkpointing (transformers' gradient checkpointing, non-reentrant)
and gradient accumulation over --sub-batches micro-batches to --batch x --seq tokens per
optimizer step. --api fsdp2 uses fully_shard with CPUOffloadPolicy instead (FSDP2, where the
installed PyTorch has it). Prints one RESULT line (common.py).

    python3 bench/peers/train_fsdp.py --layers 2 [--sub-batches 2]
    python3 bench/peers/train_fsdp.py --tiny       # also on a CPU (gloo), where FSDP allows it
"""

from __future__ import annotations

import argparse
import functools
import os
import socket
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import hf_models  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wrap_fsdp1(model, cuda: bool):
    import torch
    from torch.distributed.fsdp import CPUOffload, FullyShardedDataParallel, MixedPrecision
    from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy

    policy = functools.partial(transformer_auto_wrap_policy,
                               transformer_layer_cls={hf_models.decoder_layer_class()})
    kwargs = dict(auto_wrap_policy=policy, cpu_offload=CPUOffload(offload_params=True),
                  mixed_precision=MixedPrecision(param_dtype=torch.bfloat16,
                                                 reduce_dtype=torch.bfloat16,
                                                 buffer_dtype=torch.bfloat16))
    if cuda:
        kwargs["device_id"] = torch.cuda.current_device()
    return FullyShardedDataParallel(model, **kwargs)


def wrap_fsdp2(model, cuda: bool):
    import torch

    try:
        from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard
    except ImportError as e:
        raise common.Skip(f"this PyTorch has no FSDP2 (fully_shard): {e}")
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)
    kw = dict(offload_policy=CPUOffloadPolicy(pin_memory=cuda), mp_policy=mp)
    for layer in model.model.layers:
        fully_shard(layer, **kw)
    fully_shard(model, **kw)
    return model


def measure(args, s):
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        raise common.Skip(f"PyTorch is not importable: {e}")
    try:
        import transformers  # noqa: F401
    except ImportError as e:
        raise common.Skip(f"transformers is not importable: {e}")
    cuda = torch.cuda.is_available() and not args.cpu
    if not cuda and not args.tiny:
        raise common.Skip("no CUDA device visible (only --tiny runs on the CPU)")
    for k, v in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"),
                 ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", str(free_port()))):
        os.environ.setdefault(k, v)
    if cuda:
        torch.cuda.set_device(0)
    dist.init_process_group("nccl" if cuda else "gloo", rank=0, world_size=1)
    try:
        torch.manual_seed(0)
        model = hf_models.build_llama(s)  # float32 on the CPU: FSDP keeps it there
        model.gradient_checkpointing_enable(
            gradient_checkpointing_kwargs={"use_reentrant": False})
        model.train()
        model = (wrap_fsdp2 if args.api == "fsdp2" else wrap_fsdp1)(model, cuda)
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.999),
                                      eps=1e-8, weight_decay=0.01)
        device = torch.device("cuda", torch.cuda.current_device()) if cuda else "cpu"
        micro = args.batch // args.sub_batches
        tokens = torch.as_tensor(
            common.token_ids((args.warmup + args.steps) * args.batch * args.seq, s["vocab"]))
        batches = tokens.view(-1, micro, args.seq)
        it = iter(range(batches.shape[0]))
        losses = []

        def step():
            for _ in range(args.sub_batches):
                x = batches[next(it)].to(device, non_blocking=True)
                loss = model(input_ids=x, labels=x).loss / args.sub_batches
                loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(float(loss) * args.sub_batches)

        sync = torch.cuda.synchronize if cuda else (lambda: None)
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        times = common.timed_steps(step, args.warmup, args.steps, sync)
        fields = common.train_fields(args, s, times)
        fields.update(
            losses=losses,
            device_peak_bytes=torch.cuda.max_memory_allocated() if cuda else 0,
            device_peak_reserved_bytes=torch.cuda.max_memory_reserved() if cuda else 0,
            backend="nccl" if cuda else "gloo (CPU)",
            attention=hf_models.attention_implementation(),
        versions=common.versions("torch", "transformers"))
        return fields
    finally:
        dist.destroy_process_group()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common.common_arguments(ap, "train")
    ap.add_argument("--api", choices=("fsdp1", "fsdp2"), default="fsdp1",
                    help="fsdp1: FullyShardedDataParallel with CPUOffload(offload_params=True) "
                         "(default); fsdp2: fully_shard with CPUOffloadPolicy")
    ap.add_argument("--cpu", action="store_true", help="run on the CPU even where CUDA is "
                                                       "visible (gloo; with --tiny)")
    args = ap.parse_args(argv)
    s = common.train_shape(args)
    offload = ("CPUOffload(offload_params=True)" if args.api == "fsdp1"
               else "CPUOffloadPolicy(pin_memory=True)")
    run_config = {"framework": f"pytorch {args.api}", "offload": offload, "batch": args.batch,
                  "seq": args.seq, "sub_batches": args.sub_batches,
                  "micro_batch": args.batch // args.sub_batches, "steps": args.steps,
                  "warmup": args.warmup, "lr": args.lr,
                  "dtype": "bf16 compute (MixedPrecision), float32 parameters on the host",
                  "wrap": "one unit per LlamaDecoderLayer, the rest in the root unit",
                  "activation_checkpointing": "transformers gradient_checkpointing, "
                                              "use_reentrant=False",
                  "optimizer": "torch.optim.AdamW(betas=(0.9, 0.999), eps=1e-8, "
                               "weight_decay=0.01) on the host parameters"}
    return common.run_driver("fsdp", "train", s, run_config, args.jsonl,
                             lambda: measure(args, s), modules=("torch", "transformers"))


if __name__ == "__main__":
    sys.exit(main())
