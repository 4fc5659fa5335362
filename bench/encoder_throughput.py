"""Encoder forward throughput and tokenizer speed (figures, not a test).

Forward tokens/s at ``--batch`` x ``--length`` of the BERT-base and MiniLM shapes, randomly
initialised: kerasbert's ``BertEncoder`` and a bare keras-hub ``BertBackbone``, in float32 and
mixed_bfloat16, as a TF graph and by XLA (``predict_on_batch``); Hugging Face's ``BertModel`` on
PyTorch, float32 (with the ``bench`` extra). Medians of ``--runs`` passes after ``--warmup``. Also
the tokenizer's characters/s on CoNLL-2003 dev sentences.

    python -m bench.encoder_throughput [--runs 5] [--shapes base,minilm]
"""

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import keras_hub  # noqa: E402

import kerasbert  # noqa: E402
from bench.common import CONLL  # noqa: E402
from bench.common import MINILM  # noqa: E402
from bench.common import cpu  # noqa: E402
from bench.common import flags_line  # noqa: E402
from bench.common import hf_inputs  # noqa: E402
from bench.common import median_ms  # noqa: E402
from bench.common import random_inputs  # noqa: E402
from bench.common import read_conll  # noqa: E402
from bench.common import sentence_text  # noqa: E402
from bench.common import write_result  # noqa: E402
from kerasbert.models.encoder import BertEncoder  # noqa: E402

SHAPE_NAMES = {"base": "BERT-base", "minilm": "MiniLM"}  # as the rows of bench/results/encoder_throughput/ name them
SHAPES = {
    "base": dict(num_layers=12, hidden_dim=768, num_heads=12, intermediate_dim=3072),
    "minilm": dict(num_layers=6, hidden_dim=384, num_heads=12, intermediate_dim=1536),
}
VOCAB = 30522


def keras_rate(cls, shape, policy, x, runs, warmup, xla):
    model = cls(vocabulary_size=VOCAB, max_sequence_length=512, dtype=policy, **shape)
    model.compile(jit_compile=xla)
    return x["token_ids"].size / median_ms(model.predict_on_batch, x, repeats=runs, warmup=warmup) * 1000


def torch_rate(shape, x, runs, warmup):
    try:
        import torch
        from transformers import BertConfig
        from transformers import BertModel
    except ImportError:
        return None
    torch.set_num_threads(os.cpu_count())
    config = BertConfig(vocab_size=VOCAB, hidden_size=shape["hidden_dim"], num_hidden_layers=shape["num_layers"],
                        num_attention_heads=shape["num_heads"], intermediate_size=shape["intermediate_dim"],
                        hidden_act="gelu_new")
    model = BertModel(config).eval()
    inputs = {k: torch.from_numpy(v) for k, v in hf_inputs(x).items()}

    def forward():
        with torch.inference_mode():
            model(**inputs)

    return x["token_ids"].size / median_ms(forward, repeats=runs, warmup=warmup) * 1000


def english_text():
    conll = CONLL / "eng.testa"
    if conll.exists():
        return [sentence_text(block) for block in read_conll(conll)], "CoNLL-2003 eng.testa sentences"
    return (MINILM / "reference_sentences.txt").read_text(encoding="utf-8").splitlines() * 400, "reference sentences x400"


def tokenizer_rate(runs, warmup):
    vocab = MINILM / "vocab.txt"
    if not vocab.exists():
        return None, "no ../shared vocab"
    tokenizer = kerasbert.BertTokenizer(vocab, lowercase=True)
    sentences, source = english_text()
    chars = sum(len(s) for s in sentences)

    def run():
        for i in range(0, len(sentences), 256):
            tokenizer(sentences[i : i + 256], max_length=512)

    seconds = median_ms(run, repeats=runs, warmup=warmup) / 1000
    return chars / seconds, f"{source}: {len(sentences)} texts, {chars} characters, batches of 256"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--shapes", default="base,minilm")
    args = parser.parse_args()

    x = random_inputs(args.batch, args.length, high=VOCAB)
    print(flags_line())
    print(f"keras {keras.__version__} ({keras.backend.backend()}), keras-hub {keras_hub.__version__}")
    print(f"batch {args.batch} x {args.length} tokens, median of {args.runs} runs after {args.warmup} warm-up\n")
    results = []
    for name in args.shapes.split(","):
        r = {}
        for xla in (False, True):
            for policy in ("float32", "mixed_bfloat16"):
                for label, cls in (("kerasbert", BertEncoder), ("keras-hub", keras_hub.models.BertBackbone)):
                    r[(label, policy, xla)] = keras_rate(cls, SHAPES[name], policy, x, args.runs, args.warmup, xla)
                    print(f"{name}: {label} {policy} {'XLA' if xla else 'graph'}: {r[(label, policy, xla)]:.0f} tok/s", flush=True)
        hf = torch_rate(SHAPES[name], x, args.runs, args.warmup)
        print(f"{name}: HF transformers torch float32: {hf or 0:.0f} tok/s", flush=True)
        for xla in (False, True):
            ours, bare = r[("kerasbert", "float32", xla)], r[("keras-hub", "float32", xla)]
            ours16, bare16 = r[("kerasbert", "mixed_bfloat16", xla)], r[("keras-hub", "mixed_bfloat16", xla)]
            results.append({
                "shape": SHAPE_NAMES.get(name, name), "mode": "XLA" if xla else "graph", "kerasbert fp32": round(ours),
                "keras-hub BertBackbone fp32": round(bare), "HF torch fp32": round(hf) if hf else None,
                "kerasbert bf16": round(ours16), "keras-hub BertBackbone bf16": round(bare16),
                "ours / HF": f"{ours / hf:.2f}x" if hf else None, "ours / bare": f"{ours / bare:.3f}",
                "bf16 / fp32": f"{ours16 / ours:.2f}x"})

    rate, how = tokenizer_rate(args.runs, 1)
    if rate:
        print(f"\ntokenizer: {rate:,.0f} characters/s ({how})")
    flags = cpu()["flags"]
    write_result("encoder_throughput", results, setup={
        "unit": "forward tokens/s (keras models through predict_on_batch; HF BertModel under torch.inference_mode)",
        "batch": f"{args.batch} x {args.length} tokens, randomly initialised weights",
        "timing": f"median of {args.runs} runs after {args.warmup} warm-up runs",
        "tokenizer": f"{rate:,.0f} characters/s ({how})" if rate else how,
        **({} if "avx512_bf16" in flags or "amx_bf16" in flags else
           {"note": "no native bfloat16 arithmetic on this CPU: mixed_bfloat16 is emulated"}),
    })


if __name__ == "__main__":
    main()
