"""Text in and out with a model directory's own tokenizer: speedloader.generate and
speedloader.data --tokenizer.

A byte-level BPE tokenizer is trained here with the `tokenizers` package on a small corpus and
saved, with a tiny LLaMA whose vocabulary is the tokenizer's, as a save_pretrained directory.
Text prompts go through speedloader.generate (tokenize, sl-run --prompts, detokenize, stop at the
EOS of generation_config.json) and come out as the text HF `generate` gives on the same model,
decoded by the same tokenizer; --chat renders transformers' apply_chat_template's tokens; and
training tokens written by speedloader.data --tokenizer train with PyTorch's losses.

Needs transformers and tokenizers: ctest runs it in python-hf (SL_REQUIRE_TRANSFORMERS=1).
"""

import json
import os

import numpy as np
import pytest
import torch

if os.environ.get("SL_REQUIRE_TRANSFORMERS") == "1":
    import tokenizers
    import transformers
else:
    transformers = pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")

from hf_harness import LogitsOnly  # noqa: E402
from sl_helpers import check_ok  # noqa: E402
from speedloader.data import main as data_main  # noqa: E402
from speedloader.export import main as export_main  # noqa: E402
from speedloader.generate import main as generate_main  # noqa: E402
from test_e2e_training import torch_training  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")

CORPUS = """The quick brown fox jumps over the lazy dog.
A tiny model learns the shape of words from a tiny corpus.
SpeedLoader brings each layer to the device once for every sub-batch.
Tokens go in, tokens come out, and the tokenizer turns them back into text.
Once upon a time there was a model that wanted to write stories.
""" * 4
CHAT_TEMPLATE = ("{{ bos_token }}{% for m in messages %}{{ '<|' + m['role'] + '|>' + m['content'] "
                 "+ eos_token }}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>' }}"
                 "{% endif %}")
PROMPTS = ["Once upon a time", "The quick brown"]
NEW = 8


def train_tokenizer():
    from tokenizers import decoders, models, pre_tokenizers, processors, trainers

    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS.splitlines(), trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", tok.token_to_id("<s>"))])
    return tok


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("tok") / "model"
    tok = train_tokenizer()
    vocab = tok.get_vocab_size()
    assert 256 < vocab <= 320
    cfg = transformers.LlamaConfig(
        hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=vocab, max_position_embeddings=128,
        bos_token_id=tok.token_to_id("<s>"), eos_token_id=tok.token_to_id("</s>"),
        tie_word_embeddings=False)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.08)
    model.save_pretrained(d)
    tok.save(str(d / "tokenizer.json"))
    (d / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": "<s>", "eos_token": "</s>", "chat_template": CHAT_TEMPLATE,
        "tokenizer_class": "PreTrainedTokenizerFast"}))
    return d


def set_eos(d, eos):
    g = json.loads((d / "generation_config.json").read_text())
    g["eos_token_id"] = eos
    (d / "generation_config.json").write_text(json.dumps(g))


def hf_generate(d, prompt_ids, eos):
    model = transformers.AutoModelForCausalLM.from_pretrained(d).eval()
    ids = torch.tensor([prompt_ids])
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                             max_new_tokens=NEW, do_sample=False, num_beams=1,
                             eos_token_id=eos, pad_token_id=eos)
    new = [int(t) for t in out[0, ids.shape[1]:]]
    if eos in new:  # HF pads a finished sequence; sl-run stops it, keeping the EOS
        new = new[:new.index(eos) + 1]
    return new


@pytest.fixture(scope="module")
def gen_schedule(model_dir, tmp_path_factory):
    import shutil

    sl_opt = os.environ.get("SL_OPT")
    if not sl_opt or not os.environ.get("SL_RUN"):
        pytest.skip("SL_OPT and SL_RUN are needed")
    tmp = tmp_path_factory.mktemp("gen")
    onnx_path = tmp / "model.onnx"
    assert export_main(["--hf", str(model_dir), "--out", str(onnx_path)]) == 0
    sched = tmp / "gen.slsched"
    import subprocess

    p = subprocess.run([sl_opt, str(onnx_path), "--sl-generate=batch=2 num-sub-batches=2 "
                        "max-prompt-len=56 max-new-tokens=8", "-o", str(sched)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert shutil.which(os.environ["SL_RUN"]) or os.path.isfile(os.environ["SL_RUN"])
    return sched


def run_generate(model_dir, sched, tmp, *extra):
    out = tmp / "out.jsonl"
    assert generate_main(["--model-dir", str(model_dir), "--schedule", str(sched),
                          "--output", str(out)] + [a for p in PROMPTS for a in ("--prompt", p)]
                         + list(extra)) == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_text_round_trip_and_eos(model_dir, gen_schedule, tmp_path):
    tok = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    eos = tok.token_to_id("</s>")
    prompt_ids = [tok.encode(p).ids for p in PROMPTS]
    assert all(ids[0] == tok.token_to_id("<s>") for ids in prompt_ids)  # the post-processor's BOS

    # No EOS met in 8 tokens: every completion runs to the length, as HF's does.
    got = run_generate(model_dir, gen_schedule, tmp_path)
    for g, p, ids in zip(got, PROMPTS, prompt_ids):
        want = hf_generate(model_dir, ids, eos)
        assert eos not in want, "pick another seed: the random model says </s> early"
        assert g["prompt"] == p and g["prompt_tokens"] == len(ids)
        assert g["tokens"] == want
        assert g["text"] == tok.decode(want, skip_special_tokens=True)
        assert g["finish_reason"] == "length"

    # Make the third new token of the first prompt the EOS (generation_config.json's): both
    # stop there.
    stop = got[0]["tokens"][2]
    set_eos(model_dir, stop)
    try:
        again = run_generate(model_dir, gen_schedule, tmp_path)
        want = hf_generate(model_dir, prompt_ids[0], stop)
        assert again[0]["tokens"] == want
        assert again[0]["finish_reason"] == "stop" and len(want) <= 3
        assert again[0]["text"] == tok.decode(want, skip_special_tokens=True)
    finally:
        set_eos(model_dir, eos)


def test_chat_template(model_dir, gen_schedule, tmp_path):
    pytest.importorskip("jinja2")
    got = run_generate(model_dir, gen_schedule, tmp_path, "--chat", "--system", "Be brief.")
    hf_tok = transformers.PreTrainedTokenizerFast.from_pretrained(model_dir)
    tok = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    eos = tok.token_to_id("</s>")
    for g, p in zip(got, PROMPTS):
        ids = hf_tok.apply_chat_template(
            [{"role": "system", "content": "Be brief."}, {"role": "user", "content": p}],
            add_generation_prompt=True, tokenize=True)
        assert g["prompt_tokens"] == len(ids)
        assert g["tokens"] == hf_generate(model_dir, ids, eos)


def test_errors(model_dir, tmp_path, capsys):
    sched = tmp_path / "x.slsched"
    sched.write_bytes(b"not used")
    bare = tmp_path / "bare"
    bare.mkdir()
    assert generate_main(["--model-dir", str(bare), "--schedule", str(sched), "--prompt",
                          "hi"]) == 1
    assert "no tokenizer.json" in capsys.readouterr().err
    no_chat = tmp_path / "nochat"
    no_chat.mkdir()
    (no_chat / "tokenizer.json").write_text((model_dir / "tokenizer.json").read_text())
    assert generate_main(["--model-dir", str(no_chat), "--schedule", str(sched), "--prompt",
                          "hi", "--chat"]) == 1
    assert "no chat_template" in capsys.readouterr().err
    assert data_main(["--text", str(sched), "--out", str(tmp_path / "t.bin"), "--tokenizer",
                      str(bare)]) == 1
    assert "no tokenizer.json" in capsys.readouterr().err


def test_data_dtype_follows_the_vocabulary(model_dir, tmp_path):
    from tokenizers import models

    text = tmp_path / "c.txt"
    text.write_text(CORPUS)
    assert data_main(["--text", str(text), "--out", str(tmp_path / "t.bin"), "--tokenizer",
                      str(model_dir)]) == 0
    tok = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    want = tok.encode(CORPUS, add_special_tokens=False).ids
    np.testing.assert_array_equal(np.fromfile(tmp_path / "t.bin", dtype="<u2"), want)

    # A vocabulary past 65536 ids: uint32, and uint16 refused.
    big = tmp_path / "big"
    big.mkdir()
    vocab = {f"w{i}": i for i in range(70000)}
    wide = tokenizers.Tokenizer(models.WordLevel(vocab, unk_token="w0"))
    wide.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    wide.save(str(big / "tokenizer.json"))
    text.write_text("w69999 w3 w65536")
    assert data_main(["--text", str(text), "--out", str(tmp_path / "w.bin"), "--tokenizer",
                      str(big)]) == 0
    np.testing.assert_array_equal(np.fromfile(tmp_path / "w.bin", dtype="<u4"),
                                  [69999, 3, 65536])
    assert data_main(["--text", str(text), "--out", str(tmp_path / "w.bin"), "--tokenizer",
                      str(big), "--data-dtype", "uint16"]) == 1


def test_tokenized_data_trains(sl_tools, model_dir, tmp_path):
    """Training tokens written with the model's tokenizer train as PyTorch trains on them."""
    text = tmp_path / "corpus.txt"
    text.write_text(CORPUS)
    data = tmp_path / "tokens.bin"
    assert data_main(["--text", str(text), "--out", str(data), "--tokenizer",
                      str(model_dir)]) == 0
    tokens = np.fromfile(data, dtype="<u2")
    onnx_path = tmp_path / "train" / "model.onnx"
    assert export_main(["--hf", str(model_dir), "--out", str(onnx_path), "--train"]) == 0
    batch, seq, steps, lr = 2, 16, 4, 3e-3
    sched, report = tmp_path / "train" / "train.slsched", tmp_path / "train.json"
    check_ok(sl_tools._run([sl_tools.sl_opt, onnx_path, f"--sl-train=batch={batch} seq={seq}",
                            "-o", sched]))
    check_ok(sl_tools._run([sl_tools.sl_run, sched, "--data", data, "--steps", steps, "--lr", lr,
                            "--report", report]))
    losses = json.loads(report.read_text())["train"]["losses"]
    assert np.isfinite(losses).all()

    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir).train()
    want = torch_training(LogitsOnly(model), tokens, model.config.vocab_size, batch=batch, seq=seq,
                          steps=steps, lr=lr, wd=0.01)
    np.testing.assert_allclose(losses, want, rtol=1e-4)
    assert losses[-1] < losses[0]
