"""Post-training int8 weight quantization of a tagger's encoder: worth it on this CPU?

Figures, not a test. Keras's ``encoder.quantize("int8")`` on a trained tagger's encoder against the
same encoder in float32: the encoder's time alone (median of ``--repeats`` calls) at batch 1 x 20
tokens and 64 x 48, the difference of the last hidden state, and the entities ``Tagger.predict``
finds on ``--sentences`` CoNLL-2003 test sentences. kerasbert offers no int8 option: this is why.

    python -m bench.int8_encoder --model RUN/model [--sentences 1000] [--repeats 30]
"""

import argparse
import os

from bench.common import flags_line
from bench.common import median_ms
from bench.common import random_inputs
from bench.common import write_result
from bench.serving_throughput import conll_sentences


def encoder_inputs(batch, width):
    import tensorflow as tf

    return {k: tf.constant(v) for k, v in random_inputs(batch, width, high=20000).items()}


def entity_set(results):
    return {(i, e["start"], e["end"], e["type"]) for i, r in enumerate(results) for e in r["entities"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a trained NER tagger folder")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import numpy as np
    import tensorflow as tf

    from kerasbert_apps.ner.heads.bio.pipeline import Tagger

    print(flags_line())
    texts = conll_sentences(args.sentences)
    taggers, hidden, times = {}, {}, {}
    for mode in ("float32", "int8"):
        tagger = Tagger.load(args.model)
        if mode == "int8":
            tagger.model.encoder.quantize("int8")
        encoder = tf.function(lambda x, e=tagger.model.encoder: e(x, training=False)["sequence_output"])
        times[mode] = {"batch 1 x 20 tokens": median_ms(encoder, encoder_inputs(1, 20), repeats=args.repeats),
                       "64 rows x 48 tokens": median_ms(encoder, encoder_inputs(64, 48),
                                                        repeats=max(3, args.repeats // 4))}
        hidden[mode] = encoder(encoder_inputs(4, 32)).numpy()
        taggers[mode] = tagger
        print(f"{mode}: encoder " + ", ".join(f"{k} {v:.1f} ms" for k, v in times[mode].items()), flush=True)
    for key in times["float32"]:
        print(f"int8 / float32 time, {key}: {times['int8'][key] / times['float32'][key]:.2f}x")
    diff = np.abs(hidden["float32"] - hidden["int8"])
    print(f"last hidden state |int8 - float32|: max {diff.max():.4f}, mean {diff.mean():.4f} "
          f"(mean |float32| {np.abs(hidden['float32']).mean():.4f})")
    a, b = (entity_set(taggers[m].predict(texts)) for m in ("float32", "int8"))
    agreement = (f"{len(a & b)} of {len(a)} float32 identical in int8 ({len(b)} found), "
                 f"share of the union {len(a & b) / max(len(a | b), 1):.4f}")
    print(f"entities on {len(texts)} CoNLL test sentences: {agreement}")
    rows = [{"shape": key, "float32 ms": round(times["float32"][key], 2), "int8 ms": round(times["int8"][key], 2),
             "int8 time / float32 time": f"{times['int8'][key] / times['float32'][key]:.2f}x"}
            for key in times["float32"]]
    write_result("int8_encoder", rows, setup={
        "model": f"the encoder of {args.model}: float32 against Keras post-training int8 (encoder.quantize('int8'))",
        "timing": f"a tf.function of the encoder alone, median of {args.repeats} calls (batch 1) and "
                  f"{max(3, args.repeats // 4)} calls (64 rows) after a warm-up call",
        "hidden state": f"|int8 - float32| of the last hidden state: max {diff.max():.4f}, mean {diff.mean():.4f}",
        "entities": f"on {len(texts)} CoNLL-2003 test sentences: {agreement}",
    })


if __name__ == "__main__":
    main()
