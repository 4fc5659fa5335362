"""Calibration of a trained NER model's entity scores on a labelled file.

Figures, not a test. Predicts ``--data`` as ``kerasbert ner predict`` does (any head) and reports the
expected calibration error of the entity scores over 10 score bins with the reliability table
(:mod:`kerasbert_apps.ner.calibration`), with the model's fitted temperature and without it (T = 1).
Writes ``calibration.json`` and ``reliability.png`` into ``--output``.

    python -m bench.entity_calibration --model RUN_OR_MODEL_DIR \\
        --data ../shared/data/conll2003/eng.testb --output calibration/
"""

import argparse
import json
import sys
import time
from pathlib import Path

from bench.common import flags_line
from bench.common import write_result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a NER model folder or training run folder")
    parser.add_argument("--data", required=True, help="a labelled NER file (any format kerasbert reads)")
    parser.add_argument("--output", required=True, help="folder for calibration.json and reliability.png")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-examples", type=int, default=None, help="only the first N examples")
    args = parser.parse_args(argv)

    from kerasbert_apps.ner.calibration import format_calibration
    from kerasbert_apps.ner.calibration import reliability_figure
    from kerasbert_apps.ner.readers import detect_format
    from kerasbert_apps.ner.readers import read_ner_file
    from kerasbert_apps.ner.heads.global_pointer.pipeline import SpanTagger
    from kerasbert_apps.ner.train import NER
    from kerasbert.files.atomic import atomic_write_text

    tagger = NER.load(args.model, verbose=True)
    spans = isinstance(tagger, SpanTagger)
    head = "GlobalPointer" if spans else "CRF" if getattr(tagger.model, "crf", None) is not None else "softmax"
    keep = spans and detect_format(args.data) not in ("conll", "parallel")  # BIO files cannot nest
    options = {"keep_overlaps": True} if keep else {}
    examples = read_ner_file(args.data, **options).examples[: args.max_examples]
    temperature = float(getattr(tagger, "temperature", 1.0))
    runs = [("calibrated", temperature)] + ([("T = 1", 1.0)] if temperature != 1.0 else [])
    rows, results = [], {}
    print(flags_line())
    for scores_name, value in runs:
        tagger.set_temperature(value)
        start = time.perf_counter()
        predictions = tagger.predict([e.text for e in examples], batch_size=args.batch_size)
        seconds = time.perf_counter() - start
        scores = NER.score(examples, predictions, spans=spans)
        calib = scores["calibration"]
        label = f"{scores_name} (T = {value:.4g})" if scores_name == "calibrated" else scores_name
        results[scores_name] = {"temperature": value, "f1": scores["f1"], "predict_seconds": round(seconds, 1), **calib}
        print(f"{len(examples)} examples, {head} head, scores {label}, F1 {scores['f1']:.4f}, predicted in {seconds:.0f} s")
        print(format_calibration(calib))
        rows.append({"scores": label, "bins": f"all ({calib['bins']} equal-width)", "entities": calib["entities"],
                     "right": calib["correct"], "ECE": None if calib["ece"] is None else round(calib["ece"], 4),
                     "F1": round(scores["f1"], 4)})
        for b in reversed(calib["table"]):  # the confident bins first
            if b["count"]:
                closed = "]" if b["high"] >= 1 else ")"
                rows.append({"scores": label, "bins": f"[{b['low']:g}, {b['high']:g}{closed}", "entities": b["count"],
                             "mean score": round(b["mean_score"], 4), "accuracy": round(b["accuracy"], 4)})

    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    result = {"model": str(args.model), "data": str(args.data), "head": head, "examples": len(examples), **results}
    atomic_write_text(out / "calibration.json", json.dumps(result, indent=2) + "\n")
    figure = reliability_figure(results["calibrated"], title=f"{Path(args.data).name} ({head} head)")
    figure.savefig(out / "reliability.png", dpi=100)
    print(f"written: {out / 'calibration.json'}, {out / 'reliability.png'}")
    write_result("entity_calibration", rows, setup={
        "model": str(args.model), "data": f"{args.data} ({len(examples)} examples)", "head": head,
        "temperature": temperature,
        "what": "each predicted entity's score against whether it exactly matches a gold entity; ECE over "
                "equal-width score bins weighted by their share of the entities; the same entities scored with the "
                "model's fitted temperature and with none (T = 1)",
        "unscored entities": calib.get("unscored", 0),
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
