"""Requests to a TensorFlow Serving model: gRPC ``PredictRequest`` protos and REST bodies.

What a client of a kerasbert export sends (and what the export's warmup
records hold, :func:`kerasbert.serving.saved_model.write_warmup`).
"""

#: The signature every kerasbert export serves.
SIGNATURE = "serving_default"


def _tensor_proto(values, dtype):
    import tensorflow as tf

    return tf.make_tensor_proto(values, dtype=dtype)


def predict_request(inputs, model_name="model", signature_name=SIGNATURE):
    """A TF Serving ``PredictRequest`` (gRPC) for a dict of input arrays,
    e.g. ``{"text": ["Alice lives in Paris."]}``."""
    import numpy as np
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature_name
    for name, value in inputs.items():
        array = np.asarray(value)
        dtype = tf.string if array.dtype.kind in "USO" else tf.as_dtype(array.dtype)
        if dtype == tf.string:
            array = np.asarray([str(v).encode("utf-8") for v in array.reshape(-1)], dtype=object).reshape(array.shape)
        request.inputs[name].CopyFrom(_tensor_proto(array, dtype))
    return request


def rest_body(texts, signature_name=SIGNATURE):
    """The TF Serving REST body (row format) for a text export:
    ``{"signature_name": ..., "instances": [{"text": ...}, ...]}``."""
    return {"signature_name": signature_name, "instances": [{"text": t} for t in texts]}
