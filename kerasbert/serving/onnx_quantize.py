"""int8 ONNX exports (``export --format onnx --precision int8``): ONNX Runtime's dynamic quantization of a checked export.

:func:`quantize_int8` is ``onnxruntime.quantization.quantize_dynamic`` with
kerasbert's choices:

* **what**: every ``MatMul`` and ``Attention`` with constant weights (the
  encoder's self-attention and feed-forward products, the head's emissions)
  becomes an int8 product with int8 weights, its input quantized at each
  call (dynamic: no calibration data); the embedding tables (``Gather``)
  are stored as int8, which makes the file about a quarter of float32's.
  LayerNorm, softmax, GELU, the BiLSTM, the CRF and the decoding stay
  float32;
* **one scale per output column** (``per_channel``): one scale per matrix
  cost entity F1 on a trained tagger where per-column scales kept it (the
  serving-speed design note, ``docs/design/onnx-engine.md``);
* **no pre-processing**: ONNX Runtime's ``quant_pre_process`` runs symbolic
  shape inference, which stops at the windows' data-dependent ``Expand``
  (as :mod:`kerasbert.serving.onnx_fusion` says); the tensors whose type
  the quantizer cannot infer (the outputs of ``Loop`` and ``If``) are
  declared float (``DefaultTensorType``), which every one of them is.

An int8 model does not answer exactly as the float32 one it was made from:
:func:`agreement` counts on how many inputs it gives the same numbers, for
the export's description; a user measures it on labelled data with
``evaluate --engine onnx``.
"""

import logging
import tempfile
from pathlib import Path

import numpy as np

#: What ``export --format onnx --precision`` may be.
ONNX_PRECISIONS = ("float32", "int8")
#: The ops whose constant weights become int8.
QUANTIZED_OPS = ("MatMul", "Attention", "Gather")


def quantize_int8(model):
    """``model`` (a checked float32 ``onnx.ModelProto``) with its constant
    weights' products and embedding tables in int8 (the module's choices);
    the model given is not changed. A model the quantizer cannot handle is a
    one-line :class:`~kerasbert.errors.KerasbertError`."""
    import onnx
    from onnxruntime.quantization import QuantType
    from onnxruntime.quantization import quantize_dynamic

    from kerasbert.errors import KerasbertError

    quiet = logging.getLogger()  # its advice to pre-process goes to the root logger as a warning
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "int8.onnx"
            quantize_dynamic(model, path, op_types_to_quantize=list(QUANTIZED_OPS), per_channel=True,
                             weight_type=QuantType.QInt8,
                             extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
            return onnx.load(str(path))
    except Exception as e:  # noqa: BLE001 (the quantizer raises many kinds)
        raise KerasbertError(f"ONNX Runtime's int8 quantization fails on this model: {type(e).__name__}: "
                             f"{str(e).splitlines()[0] if str(e) else ''}") from e
    finally:
        quiet.setLevel(level)


def agreement(reference, quantized, feeds):
    """``{"inputs", "same_answers", "max_score_difference"}``: on how many of
    ``feeds`` the session ``quantized`` gives integer outputs (offsets,
    labels, counts) equal to ``reference``'s, and the largest difference of
    their float outputs (scores) where they do. A feed it cannot run is a
    one-line :class:`~kerasbert.errors.KerasbertError`."""
    from kerasbert.errors import KerasbertError
    from kerasbert.serving.onnx import _ort_problem

    names = [o.name for o in reference.get_outputs()]
    same, gap = 0, 0.0
    for index, feed in enumerate(feeds):
        want = reference.run(names, feed)
        try:
            got = quantized.run(names, feed)
        except Exception as e:  # noqa: BLE001
            raise KerasbertError(f"the int8 ONNX model fails in ONNX Runtime on check input {index}: "
                                 f"{_ort_problem(e)}") from e
        if all(a.shape == b.shape and (a.dtype.kind == "f" or np.array_equal(a, b)) for a, b in zip(want, got)):
            same += 1
            gap = max([gap] + [float(np.max(np.abs(a - b), initial=0.0)) for a, b in zip(want, got)
                               if a.dtype.kind == "f"])
    return {"inputs": len(feeds), "same_answers": same, "max_score_difference": gap}
