"""DeepSpeed ZeRO-3 with parameter and optimizer offload to pinned CPU memory: the training peer.

One process, world 1 (no launcher: the rendezvous variables are set here), a LlamaForCausalLM of
the shape (random weights, built inside deepspeed.zero.Init so that parameters go straight to
host memory), bf16, DeepSpeedCPUAdam (JIT-built on first use: needs nvcc and ninja),
activation checkpointing (transformers' gradient checkpointing, non-reentrant), and gradient
accumulation over --sub-batches micro-batches so that an optimizer step sees --batch x --seq
tokens, as SpeedLoader's step does. --max-live-parameters and --prefetch-bucket-size are
ZeRO-3's stage3_max_live_parameters and stage3_prefetch_bucket_size (run-peers.sh sweeps a few;
the best is the baseline). Prints one RESULT line (common.py).

    python3 bench/peers/train_deepspeed.py --layers 2 [--sub-batches 2] [--max-live-parameters 1e9]
    python3 bench/peers/train_deepspeed.py --tiny      # needs a GPU too (ZeRO-3 offload is CUDA's)
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import hf_models  # noqa: E402


def ds_config(args) -> dict:
    micro = args.batch // args.sub_batches
    return {
        "train_batch_size": args.batch,
        "train_micro_batch_size_per_gpu": micro,
        "gradient_accumulation_steps": args.sub_batches,
        "bf16": {"enabled": True},
        "gradient_clipping": 0.0,  # SpeedLoader's runs clip nothing either (--max-grad-norm 0)
        "zero_optimization": {
            "stage": 3,
            "offload_param": {"device": "cpu", "pin_memory": True},
            "offload_optimizer": {"device": "cpu", "pin_memory": True},
            "overlap_comm": True,
            "contiguous_gradients": True,
            "stage3_max_live_parameters": int(args.max_live_parameters),
            "stage3_prefetch_bucket_size": int(args.prefetch_bucket_size),
            "stage3_param_persistence_threshold": int(args.param_persistence_threshold),
            "reduce_bucket_size": int(args.reduce_bucket_size),
        },
        "steps_per_print": 1 << 30,
        "wall_clock_breakdown": False,
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(args, s, config):
    try:
        import torch
    except ImportError as e:
        raise common.Skip(f"PyTorch is not importable: {e}")
    if not torch.cuda.is_available():
        raise common.Skip("ZeRO-3 parameter offload runs on a CUDA device; none is visible")
    try:
        import deepspeed
        from deepspeed.ops.adam import DeepSpeedCPUAdam
    except ImportError as e:
        raise common.Skip(f"deepspeed is not importable: {e} (run-peers.sh installs the wheels "
                          f"prepare.sh fetched)")
    for k, v in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"),
                 ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", str(free_port()))):
        os.environ.setdefault(k, v)
    torch.cuda.set_device(0)
    deepspeed.init_distributed(dist_backend="nccl")
    torch.manual_seed(0)
    with deepspeed.zero.Init(config_dict_or_path=config, remote_device="cpu", pin_memory=True,
                             dtype=torch.bfloat16):
        model = hf_models.build_llama(s)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    optimizer = DeepSpeedCPUAdam(model.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-8,
                                 weight_decay=0.01, adamw_mode=True)
    engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer, config=config)

    micro = args.batch // args.sub_batches
    tokens = torch.as_tensor(
        common.token_ids((args.warmup + args.steps) * args.batch * args.seq, s["vocab"]))
    batches = tokens.view(-1, micro, args.seq)
    it = iter(range(batches.shape[0]))

    def step():
        for _ in range(args.sub_batches):
            x = batches[next(it)].cuda(non_blocking=True)
            loss = engine(input_ids=x, labels=x).loss
            engine.backward(loss)
            engine.step()  # applies the optimizer at the accumulation boundary only
        losses.append(float(loss))

    losses = []
    torch.cuda.reset_peak_memory_stats()
    times = common.timed_steps(step, args.warmup, args.steps, torch.cuda.synchronize)
    fields = common.train_fields(args, s, times)
    fields.update(
        losses=losses, device_peak_bytes=torch.cuda.max_memory_allocated(),
        device_peak_reserved_bytes=torch.cuda.max_memory_reserved(),
        parameters_built=hf_models.count_parameters(model),
        attention=hf_models.attention_implementation(),
        versions=common.versions("torch", "deepspeed", "transformers"),
        optimizer=type(optimizer).__name__)
    return fields


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common.common_arguments(ap, "train")
    ap.add_argument("--max-live-parameters", type=float, default=1e9,
                    help="stage3_max_live_parameters (DeepSpeed's default 1e9)")
    ap.add_argument("--prefetch-bucket-size", type=float, default=5e7,
                    help="stage3_prefetch_bucket_size (DeepSpeed's default 5e7)")
    ap.add_argument("--param-persistence-threshold", type=float, default=1e5,
                    help="stage3_param_persistence_threshold (DeepSpeed's default 1e5)")
    ap.add_argument("--reduce-bucket-size", type=float, default=5e8,
                    help="reduce_bucket_size (DeepSpeed's default 5e8)")
    args = ap.parse_args(argv)
    s = common.train_shape(args)
    config = ds_config(args)
    run_config = {"framework": "deepspeed zero-3", "batch": args.batch, "seq": args.seq,
                  "sub_batches": args.sub_batches, "micro_batch": args.batch // args.sub_batches,
                  "steps": args.steps, "warmup": args.warmup, "lr": args.lr, "dtype": "bf16",
                  "activation_checkpointing": "transformers gradient_checkpointing, "
                                              "use_reentrant=False",
                  "optimizer": "DeepSpeedCPUAdam(adamw_mode=True, betas=(0.9, 0.999), "
                               "eps=1e-8, weight_decay=0.01)",
                  "ds_config": config}
    return common.run_driver("deepspeed", "train", s, run_config, args.jsonl,
                             lambda: measure(args, s, config),
                             modules=("torch", "deepspeed", "transformers"))


if __name__ == "__main__":
    sys.exit(main())
