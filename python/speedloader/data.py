"""Training data: text to the token files sl-run reads (--data).

A token file is raw little-endian uint16 (or uint32, for vocabularies over 65536) token ids, one
after another. By default this writes byte-level tokens: every byte of the text is one token
(vocabulary 256), which needs no tokenizer and suits the tiny models of tests and the quickstart.

    /usr/bin/python3 -m speedloader.data --text data/tiny.txt --out tokens.bin

With --tokenizer DIR, a Hugging Face model directory, the text (UTF-8) is tokenized by the
model's own tokenizer (DIR/tokenizer.json, with the `tokenizers` package) as one document,
without special tokens, and written as uint16 when every id the model may see fits (vocabulary
of at most 65536), else uint32; sl-run then needs `--data-dtype uint32`, as this prints.

    .venv/bin/python -m speedloader.data --text corpus.txt --tokenizer DIR --out tokens.bin
"""

import argparse
import sys
from pathlib import Path

import numpy as np


def bytes_to_tokens(text: bytes, dtype: str = "uint16") -> np.ndarray:
    return np.frombuffer(text, dtype=np.uint8).astype("<u2" if dtype == "uint16" else "<u4")


def text_to_tokens(text: str, tokenizer_dir, dtype=None):
    """`text` tokenized by the tokenizer of `tokenizer_dir`, as the narrowest of uint16 and
    uint32 that holds the model's vocabulary (or `dtype`, checked to hold it)."""
    from .tokenizer import ModelTokenizer, TokenizerError

    tok = ModelTokenizer(tokenizer_dir)
    need = "uint16" if tok.vocab_size <= 65536 else "uint32"
    if dtype == "uint16" and need == "uint32":
        raise TokenizerError(f"--data-dtype uint16 cannot hold the {tok.vocab_size} ids of "
                             f"{tokenizer_dir}'s vocabulary: use uint32")
    dtype = dtype or need
    ids = np.asarray(tok.encode(text, add_special_tokens=False), dtype=np.int64)
    return ids.astype("<u2" if dtype == "uint16" else "<u4"), dtype, tok.vocab_size


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m speedloader.data", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--text", required=True, help="the text file to tokenize (bytes)")
    parser.add_argument("--out", required=True, help="the token file to write")
    parser.add_argument("--data-dtype", choices=["uint16", "uint32"], default=None,
                        help="token width (default: uint16; with --tokenizer, the narrowest that "
                             "holds the vocabulary)")
    parser.add_argument("--tokenizer", metavar="DIR",
                        help="tokenize with a Hugging Face model directory's tokenizer.json "
                             "(needs the tokenizers package) instead of one token per byte")
    args = parser.parse_args(argv)
    try:
        text = Path(args.text).read_bytes()
    except OSError as e:
        print(f"speedloader.data: error: cannot read {args.text}: {e.strerror}", file=sys.stderr)
        return 1
    if not text:
        print(f"speedloader.data: error: {args.text} is empty", file=sys.stderr)
        return 1
    if args.tokenizer is None:
        dtype = args.data_dtype or "uint16"
        tokens = bytes_to_tokens(text, dtype)
        what = "byte tokens"
    else:
        from .tokenizer import TokenizerError

        try:
            tokens, dtype, vocab = text_to_tokens(text.decode("utf-8"), args.tokenizer,
                                                  args.data_dtype)
        except UnicodeDecodeError as e:
            print(f"speedloader.data: error: {args.text} is not UTF-8 text: {e}",
                  file=sys.stderr)
            return 1
        except TokenizerError as e:
            print(f"speedloader.data: error: {e}", file=sys.stderr)
            return 1
        if len(tokens) == 0:
            print(f"speedloader.data: error: {args.text} has no tokens", file=sys.stderr)
            return 1
        what = f"tokens of {args.tokenizer}'s tokenizer (vocabulary {vocab})"
    out = Path(args.out)
    tmp = out.with_name(out.name + ".tmp")
    tokens.tofile(tmp)
    tmp.replace(out)
    print(f"wrote {out}: {len(tokens)} {what} ({dtype})")
    if dtype == "uint32":
        print("give sl-run --data-dtype uint32 with it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
