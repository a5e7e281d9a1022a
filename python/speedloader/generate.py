"""Text in, text out: generate with a --sl-generate schedule and the model's own tokenizer.

    python3 -m speedloader.generate --model-dir DIR --schedule gen.slsched \\
        --prompt "Once upon a time" [--prompt ...] [--prompts-file FILE] [--chat [--system TEXT]] \\
        [--max-new-tokens N] [--temperature T --top-k K --top-p P --seed S] [--output FILE.jsonl]

Each prompt is tokenized with DIR/tokenizer.json (speedloader/tokenizer.py; with --chat, rendered
as a user message with the chat template of DIR/tokenizer_config.json first), written as token
ids to a prompts file, and run by `sl-run SCHEDULE --prompts`, which stops each sequence at any
end-of-sequence id the directory names (--stop-token, from generation_config.json, config.json
and tokenizer_config.json). The new tokens are decoded with the same tokenizer, special tokens
left out. sl-run is $SL_RUN, else build/bin/sl-run of this checkout, else sl-run on PATH
(--sl-run overrides). Without --output each completion is printed; with it, one JSON line per
prompt: {"index", "prompt", "text", "tokens", "prompt_tokens", "finish_reason"}.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List, Optional, Sequence

from .tokenizer import ModelTokenizer, TokenizerError

REPO_ROOT = Path(__file__).resolve().parent.parent.parent


def find_sl_run(given: Optional[str]) -> str:
    for candidate in (given, os.environ.get("SL_RUN"), REPO_ROOT / "build" / "bin" / "sl-run",
                      shutil.which("sl-run")):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return str(candidate)
    if given:
        raise FileNotFoundError(f"--sl-run {given}: not an executable file")
    raise FileNotFoundError("sl-run not found: set SL_RUN, build build/bin/sl-run or give "
                            "--sl-run")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m speedloader.generate", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model-dir", required=True, type=Path, metavar="DIR",
                   help="the model's save_pretrained directory: tokenizer.json, and "
                        "tokenizer_config.json, generation_config.json, config.json for the "
                        "chat template and the end-of-sequence ids")
    p.add_argument("--schedule", required=True, type=Path,
                   help="a schedule sl-opt --sl-generate compiled from the model's ONNX export")
    p.add_argument("--prompt", action="append", default=[], metavar="TEXT",
                   help="a prompt (repeatable)")
    p.add_argument("--prompts-file", type=Path, metavar="FILE",
                   help="more prompts: a text file, one prompt per line (blank lines skipped)")
    p.add_argument("--chat", action="store_true",
                   help="render each prompt as a user message with the directory's chat "
                        "template (needs jinja2)")
    p.add_argument("--system", metavar="TEXT",
                   help="with --chat: a system message before each prompt")
    p.add_argument("--no-stop", action="store_true",
                   help="do not stop at the end-of-sequence tokens: run --max-new-tokens")
    p.add_argument("--output", type=Path, metavar="FILE.jsonl",
                   help="write one JSON line per prompt instead of printing the completions")
    p.add_argument("--sl-run", metavar="PATH", help="the sl-run binary")
    g = p.add_argument_group("passed to sl-run")
    g.add_argument("--max-new-tokens", type=int)
    g.add_argument("--temperature", type=float)
    g.add_argument("--top-k", type=int)
    g.add_argument("--top-p", type=float)
    g.add_argument("--seed", type=int)
    g.add_argument("--backend")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    prog = parser.prog
    prompts: List[str] = list(args.prompt)
    if args.prompts_file is not None:
        try:
            text = args.prompts_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            parser.error(f"--prompts-file {args.prompts_file}: {e}")
        prompts += [line for line in text.splitlines() if line.strip()]
    if not prompts:
        parser.error("give at least one --prompt or a --prompts-file")
    if args.system is not None and not args.chat:
        parser.error("--system goes with --chat")
    if not args.schedule.is_file():
        parser.error(f"--schedule {args.schedule}: no such file")
    try:
        tok = ModelTokenizer(args.model_dir)
        encoded = []
        for text in prompts:
            if args.chat:
                messages = ([{"role": "system", "content": args.system}]
                            if args.system is not None else [])
                encoded.append(tok.encode_chat(messages + [{"role": "user", "content": text}]))
            else:
                encoded.append(tok.encode(text))
        sl_run = find_sl_run(args.sl_run)
    except (TokenizerError, FileNotFoundError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 1
    for text, ids in zip(prompts, encoded):
        if not ids:
            print(f"{prog}: error: prompt {text!r} has no tokens", file=sys.stderr)
            return 1
    stops = [] if args.no_stop else tok.eos_token_ids

    with tempfile.TemporaryDirectory(prefix="sl-generate-") as tmp:
        prompts_file, out_file = Path(tmp) / "prompts.jsonl", Path(tmp) / "out.jsonl"
        with open(prompts_file, "w") as f:
            for i, ids in enumerate(encoded):
                f.write(json.dumps({"id": i, "tokens": ids}) + "\n")
        cmd = [sl_run, str(args.schedule), "--prompts", str(prompts_file), "--output",
               str(out_file)]
        for s in stops:
            cmd += ["--stop-token", str(s)]
        for flag in ("max_new_tokens", "temperature", "top_k", "top_p", "seed", "backend"):
            value = getattr(args, flag)
            if value is not None:
                cmd += ["--" + flag.replace("_", "-"), str(value)]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr)
            print(f"{prog}: error: sl-run failed (exit {proc.returncode}); line N of the "
                  f"prompts file it names is the N-th prompt given here, as token ids",
                  file=sys.stderr)
            return 1
        with open(out_file) as f:
            results = [json.loads(line) for line in f if line.strip()]

    lines = []
    for r in results:
        i = int(r["id"])
        new = list(r["tokens"])
        lines.append({"index": i, "prompt": prompts[i], "text": tok.decode(new), "tokens": new,
                      "prompt_tokens": r["prompt_tokens"],
                      "finish_reason": r["finish_reason"]})
    if args.output is not None:
        tmp_out = args.output.with_name(args.output.name + ".tmp")
        with open(tmp_out, "w", encoding="utf-8") as f:
            for line in lines:
                f.write(json.dumps(line, ensure_ascii=False) + "\n")
        tmp_out.replace(args.output)
    else:
        for line in lines:
            print(line["prompt"] + line["text"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
