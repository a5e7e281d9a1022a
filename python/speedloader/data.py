"""Training data: text to the token files sl-run reads (--data).

A token file is raw little-endian uint16 (or uint32, for vocabularies over 65536) token ids, one
after another. This writes byte-level tokens: every byte of the text is one token (vocabulary
256), which needs no tokenizer and suits the tiny models of tests and the quickstart.

    /usr/bin/python3 -m speedloader.data --text data/tiny.txt --out tokens.bin
"""

import argparse
import sys
from pathlib import Path

import numpy as np


def bytes_to_tokens(text: bytes, dtype: str = "uint16") -> np.ndarray:
    return np.frombuffer(text, dtype=np.uint8).astype("<u2" if dtype == "uint16" else "<u4")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m speedloader.data", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--text", required=True, help="the text file to tokenize (bytes)")
    parser.add_argument("--out", required=True, help="the token file to write")
    parser.add_argument("--data-dtype", choices=["uint16", "uint32"], default="uint16",
                        help="token width (default: uint16)")
    args = parser.parse_args(argv)
    try:
        text = Path(args.text).read_bytes()
    except OSError as e:
        print(f"speedloader.data: error: cannot read {args.text}: {e.strerror}", file=sys.stderr)
        return 1
    if not text:
        print(f"speedloader.data: error: {args.text} is empty", file=sys.stderr)
        return 1
    tokens = bytes_to_tokens(text, args.data_dtype)
    out = Path(args.out)
    tmp = out.with_name(out.name + ".tmp")
    tokens.tofile(tmp)
    tmp.replace(out)
    print(f"wrote {out}: {len(tokens)} byte tokens ({args.data_dtype})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
