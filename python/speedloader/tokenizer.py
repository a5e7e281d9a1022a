"""A Hugging Face model directory's own tokenizer: text to token ids and back.

Reads DIR/tokenizer.json with the `tokenizers` package (what `save_pretrained` of a fast
tokenizer writes), DIR/tokenizer_config.json for the chat template and the special tokens, and
the end-of-sequence ids from DIR/generation_config.json, DIR/config.json and tokenizer_config's
`eos_token` (all of them: generation stops at any). Chat templates are rendered with jinja2 as
transformers renders them (sandboxed, trim_blocks, lstrip_blocks, `raise_exception`, `tojson`).

Used by speedloader.generate (prompts in, text out) and speedloader.data --tokenizer (training
tokens). sl-run itself only ever sees token ids.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional


class TokenizerError(ValueError):
    """A tokenizer directory that cannot be used; the message says why."""


def _read_json(path: Path) -> Optional[Dict[str, Any]]:
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TokenizerError(f"{path}: cannot read it: {e}") from None
    if not isinstance(value, dict):
        raise TokenizerError(f"{path}: not a JSON object")
    return value


def _token_text(value) -> Optional[str]:
    # tokenizer_config.json writes special tokens as strings or as AddedToken dicts.
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _ids(value) -> List[int]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, int) and not isinstance(v, bool)]
    return []


class ModelTokenizer:
    """The tokenizer of a model directory."""

    def __init__(self, directory: str | Path):
        d = Path(directory)
        if not d.is_dir():
            raise TokenizerError(f"{d}: no such directory (give the model's save_pretrained "
                                 f"directory)")
        path = d / "tokenizer.json"
        if not path.is_file():
            raise TokenizerError(f"{d}: no tokenizer.json (a fast tokenizer's save_pretrained "
                                 f"writes it; slow tokenizers' files are not read)")
        try:
            import tokenizers
        except ImportError:
            raise TokenizerError("the tokenizers package is needed to read tokenizer.json (run "
                                 "with the venv scripts/install-deps.sh makes)") from None
        try:
            self.tokenizer = tokenizers.Tokenizer.from_file(str(path))
        except Exception as e:  # tokenizers raises its own Exception type
            raise TokenizerError(f"{path}: tokenizers cannot read it: {e}") from None
        self.directory = d
        self.config = _read_json(d / "tokenizer_config.json") or {}
        self.model_config = _read_json(d / "config.json") or {}
        self.generation_config = _read_json(d / "generation_config.json") or {}

    def special_token(self, key: str) -> Optional[str]:
        return _token_text(self.config.get(key))

    @property
    def vocab_size(self) -> int:
        """The ids the model may see: the tokenizer's (with added tokens), or the model's
        vocab_size when config.json says more."""
        n = self.tokenizer.get_vocab_size(with_added_tokens=True)
        model = self.model_config.get("vocab_size")
        return max(n, model) if isinstance(model, int) else n

    @property
    def eos_token_ids(self) -> List[int]:
        """Every end-of-sequence id the directory names, in order, without repeats."""
        ids = _ids(self.generation_config.get("eos_token_id")) + \
            _ids(self.model_config.get("eos_token_id"))
        text = self.special_token("eos_token")
        if text is not None:
            tid = self.tokenizer.token_to_id(text)
            if tid is not None:
                ids.append(tid)
        return list(dict.fromkeys(ids))

    def encode(self, text: str, *, add_special_tokens: bool = True) -> List[int]:
        return self.tokenizer.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids: List[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def chat_template(self) -> str:
        template = self.config.get("chat_template")
        if isinstance(template, list):  # named templates: the default one
            named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
            template = named.get("default")
        if not isinstance(template, str) or not template:
            raise TokenizerError(f"{self.directory / 'tokenizer_config.json'}: no chat_template "
                                 f"(--chat needs one; give the prompt as plain text instead)")
        return template

    def render_chat(self, messages: List[Dict[str, str]]) -> str:
        """The chat template rendered for `messages`, with the generation prompt."""
        template = self.chat_template()
        try:
            import jinja2
            import jinja2.sandbox
        except ImportError:
            raise TokenizerError("--chat renders the chat template with jinja2, which is not "
                                 "installed (Debian: python3-jinja2)") from None

        def raise_exception(message):
            raise TokenizerError(f"chat template: {message}")

        env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False,
                                                                   indent=indent)
        env.globals["raise_exception"] = raise_exception
        specials = {k: self.special_token(k) or "" for k in
                    ("bos_token", "eos_token", "unk_token", "pad_token")}
        try:
            return env.from_string(template).render(messages=messages,
                                                    add_generation_prompt=True, **specials)
        except jinja2.TemplateError as e:
            raise TokenizerError(f"chat template of {self.directory}: {e}") from None

    def encode_chat(self, messages: List[Dict[str, str]]) -> List[int]:
        # The template writes the special tokens itself (transformers' apply_chat_template
        # tokenizes its text without adding any).
        return self.encode(self.render_chat(messages), add_special_tokens=False)
