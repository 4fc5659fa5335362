"""The layer harness: the checks every Keras layer of the kit keeps, shipped with the kit for its
own layers and for a layer of another package (a head plugin's), as keras-hub's
``TestCase.run_layer_test`` is for its layers.

One call runs them all for a layer class, its init arguments and an input::

    from kerasbert.testing import run_layer_test

    def test_my_layer():
        x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
        run_layer_test(MyLayer, {"units": 4}, {"inputs": x, "mask": np.ones((2, 5), bool)})

``input_data`` is a dict of the layer's call arguments by name: numpy arrays, lists of arrays
(a layer called on a list, e.g. :class:`kerasbert.layers.layer_mix.LayerMix`) or plain values
(passed as they are). The layer's variables are set to their initial values plus noise
(:func:`randomise`), so that every weight counts in the comparisons, including those that start
at zero. The checks (:data:`CHECKS`), each also callable alone (:func:`check_layer`):

* ``call``: the layer builds and calls; its outputs have the shapes and dtypes that a symbolic
  call (on ``keras.KerasTensor`` inputs, as in a functional model) gives, and no NaN;
* ``config``: ``get_config()`` is JSON; ``from_config(get_config())`` and
  ``deserialize_keras_object(serialize_keras_object(layer))`` give the same config and, with the
  same weights, the same outputs;
* ``saving``: the layer inside a functional model saved as a ``.keras`` file loads back with
  ``safe_mode=True`` (the layer registered with ``keras.saving.register_keras_serializable``)
  as an instance of its class, with the same config and outputs;
* ``float32``, ``mixed_bfloat16``, ``mixed_float16``: the layer made with that dtype policy
  (``dtype=policy``; init arguments that are layers remade with it) builds; its float variables
  have the policy's variable dtype (float32), its sub-layers the policy; its float outputs have
  the policy's compute dtype, or ``output_dtype`` where the layer documents one (e.g. float32
  logits), in the eager call and in the symbolic one; integer outputs equal float32's; float
  outputs are within :data:`TOLERANCES` of float32's (``rtol`` and ``atol``, after saturating
  both at the compute dtype's largest finite value: a masked logit of -1e12 is -inf in float16);
* ``jax``: the layer rebuilt from its serialized config in a process with
  ``KERAS_BACKEND=jax``, with the same weights, gives TensorFlow's outputs (within
  :data:`TOLERANCES`). The layer's module must be importable there (the process gets this
  process's ``sys.path``).

A check that does not apply to a layer is left out by name with a reason (``excluded``), which
:func:`run_layer_test` prints; never silently. keras-hub's own harness is not reused: it is a
``tf.test.TestCase`` of absl's (methods of a unittest instance, not functions a pytest test
calls), lives in ``keras_hub.src.tests`` and imports ``grain`` (which keras-hub does not
install), saves the layer as the model itself, wants every float output in the compute dtype
(the CRF documents float32) without comparing values with float32, and runs one backend.
"""

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np

#: The checks, in the order :func:`run_layer_test` runs them.
CHECKS = ("call", "config", "saving", "float32", "mixed_bfloat16", "mixed_float16", "jax")
#: The dtype policies checked, each against float32.
POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")
#: How close (``rtol`` and ``atol``) float outputs must be to float32's on TensorFlow: bfloat16
#: keeps 8 bits of mantissa, float16 11; and on JAX (other kernels, other summation orders).
TOLERANCES = {"float32": 1e-6, "mixed_bfloat16": 5e-2, "mixed_float16": 1e-2, "jax": 1e-4}


def run_layer_test(cls, init_kwargs, input_data, *, output_dtype=None, tolerances=None, excluded=None, seed=0):
    """Run every check of :data:`CHECKS` on the layer class ``cls`` made with ``init_kwargs``
    and called on ``input_data`` (see the module docstring); each failure is an
    ``AssertionError`` naming the class and the check. ``output_dtype``: the dtype the layer
    documents for its float outputs under every policy (default: the compute dtype);
    ``tolerances``: over :data:`TOLERANCES`; ``excluded``: ``{check: reason}`` of checks left
    out, each printed with its reason."""
    excluded = dict(excluded or {})
    unknown = sorted(set(excluded) - set(CHECKS))
    if unknown:
        raise ValueError(f"unknown checks {unknown}; the checks are: {', '.join(CHECKS)}")
    for check in CHECKS:
        if check in excluded:
            print(f"{cls.__name__}: the {check} check is excluded: {excluded[check]}")
            continue
        check_layer(check, cls, init_kwargs, input_data, output_dtype=output_dtype, tolerances=tolerances, seed=seed)


def check_layer(check, cls, init_kwargs, input_data, *, output_dtype=None, tolerances=None, seed=0):
    """One check of :data:`CHECKS` (arguments as :func:`run_layer_test`'s)."""
    tolerances = {**TOLERANCES, **(tolerances or {})}
    where = f"{cls.__name__} ({check})"
    with dtype_policy():
        if check == "call":
            return _check_call(cls, init_kwargs, input_data, where)
        reference, outputs = reference_layer(cls, init_kwargs, input_data, seed)
        if check == "config":
            return _check_config(reference, outputs, input_data, where)
        if check == "saving":
            return _check_saving(reference, outputs, input_data, where)
        if check in POLICIES:
            return _check_policy(check, reference, outputs, cls, init_kwargs, input_data, output_dtype,
                                 tolerances[check], where)
        if check == "jax":
            return _check_jax(reference, outputs, input_data, tolerances["jax"], where)
    raise ValueError(f"unknown check {check!r}; the checks are: {', '.join(CHECKS)}")


def reference_layer(cls, init_kwargs, input_data, seed=0):
    """``(layer, outputs)``: ``cls(**init_kwargs)`` in float32, built by a call on
    ``input_data``, its variables randomised (:func:`randomise`), and its outputs then (a flat
    list of numpy arrays). Keras's random seed is set to ``seed`` first (the initial weights)."""
    import keras

    keras.utils.set_random_seed(seed)
    layer = cls(**init_kwargs)
    call(layer, input_data)
    randomise(layer, seed)
    return layer, flat_outputs(call(layer, input_data))


def call(layer, input_data):
    """``layer`` called on ``input_data`` (the call arguments by name)."""
    return layer(**input_data)


def flat_outputs(outputs):
    """The layer's outputs (a tensor, or a nest of them) as a flat list of numpy arrays."""
    import keras

    return [np.asarray(keras.ops.convert_to_numpy(x)) for x in keras.tree.flatten(outputs)]


def randomise(layer, seed=0):
    """Every float variable of ``layer`` set to its value plus normal noise (standard
    deviation 0.3): weights that start at zero or one count too."""
    rng = np.random.default_rng(seed)
    for variable in layer.weights:
        if _is_float(variable.dtype):
            value = np.asarray(variable.numpy(), np.float32)
            variable.assign((value + rng.normal(0, 0.3, value.shape)).astype(value.dtype))


def _is_float(dtype):
    import keras

    return "float" in keras.backend.standardize_dtype(dtype)


@contextlib.contextmanager
def dtype_policy(name="float32"):
    """The global dtype policy ``name`` for the block, the previous one after
    it (the harness runs under float32: a policy given to the layer is explicit)."""
    import keras

    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(name)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


def _dtype(x):
    import keras

    return keras.backend.standardize_dtype(x.dtype)


def _same_outputs(ours, theirs, where, atol=1e-6):
    assert len(ours) == len(theirs), f"{where}: {len(ours)} outputs, expected {len(theirs)}"
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a.shape == b.shape, f"{where}: output {i} has shape {a.shape}, expected {b.shape}"
        if _is_float(b.dtype):
            np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=atol, atol=atol,
                                       err_msg=f"{where}: output {i}")
        else:
            np.testing.assert_array_equal(a, b, err_msg=f"{where}: output {i}")


def _symbolic(input_data):
    """``input_data`` with every array a ``keras.KerasTensor`` of its shape and dtype."""
    import keras

    def tensor(x):
        return keras.KerasTensor(x.shape, dtype=str(x.dtype)) if isinstance(x, np.ndarray) else x

    return {k: [tensor(x) for x in v] if isinstance(v, (list, tuple)) else tensor(v) for k, v in input_data.items()}


def _check_call(cls, init_kwargs, input_data, where):
    import keras

    layer = cls(**init_kwargs)
    outputs = flat_outputs(call(layer, input_data))
    assert layer.built, f"{where}: the layer is not built after a call"
    specs = keras.tree.flatten(call(cls(**init_kwargs), _symbolic(input_data)))
    assert len(specs) == len(outputs), f"{where}: {len(outputs)} outputs, the symbolic call gives {len(specs)}"
    for i, (spec, x) in enumerate(zip(specs, outputs)):
        assert len(spec.shape) == x.ndim and all(s in (None, n) for s, n in zip(spec.shape, x.shape)), (
            f"{where}: output {i} has shape {x.shape}, the symbolic call gives {spec.shape}")
        assert _dtype(spec) == _dtype(x), f"{where}: output {i} is {_dtype(x)}, the symbolic call gives {_dtype(spec)}"
        assert not (_is_float(x.dtype) and np.isnan(x).any()), f"{where}: output {i} has NaN"


def _check_config(layer, outputs, input_data, where):
    import keras

    config = layer.get_config()
    text = _json(config)  # a config is JSON
    clones = [type(layer).from_config(json.loads(text)),
              keras.saving.deserialize_keras_object(json.loads(json.dumps(keras.saving.serialize_keras_object(layer))))]
    for clone, how in zip(clones, ("from_config", "deserialize_keras_object")):
        assert type(clone) is type(layer), f"{where}: {how} gives a {type(clone).__name__}"
        assert _json(clone.get_config()) == text, f"{where}: {how} gives another config"
        call(clone, input_data)
        assert len(clone.weights) == len(layer.weights), f"{where}: {how} gives other variables"
        clone.set_weights(layer.get_weights())
        _same_outputs(flat_outputs(call(clone, input_data)), outputs, f"{where}: {how}")


def _json(config):
    """A config as JSON text (tuples and lists alike, as in a saved file)."""
    return json.dumps(config, sort_keys=True)


def _functional(layer, input_data):
    """``(model, feed)``: a functional model of ``keras.Input``s (every array of
    ``input_data``, named by its argument, ``_<i>`` after the name of a list's items) calling
    ``layer``, and the dict of arrays it takes."""
    import keras

    inputs, feed, arguments = {}, {}, {}

    def tensor(name, x):
        inputs[name] = keras.Input(shape=x.shape[1:], dtype=str(x.dtype), name=name)
        feed[name] = x
        return inputs[name]

    for key, value in input_data.items():
        if isinstance(value, (list, tuple)):
            arguments[key] = [tensor(f"{key}_{i}", x) for i, x in enumerate(value)]
        else:
            arguments[key] = tensor(key, value) if isinstance(value, np.ndarray) else value
    return keras.Model(inputs, layer(**arguments)), feed


def _check_saving(layer, outputs, input_data, where):
    import keras

    model, feed = _functional(layer, input_data)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.keras"
        model.save(path)
        loaded = keras.saving.load_model(path, safe_mode=True)
    (back,) = [sub for sub in loaded.layers if sub.name == layer.name]
    assert type(back) is type(layer), f"{where}: the loaded model holds a {type(back).__name__}"
    assert _json(back.get_config()) == _json(layer.get_config()), f"{where}: the loaded layer has another config"
    _same_outputs(flat_outputs(loaded(feed)), flat_outputs(model(feed)), f"{where}: the model before and after")
    _same_outputs(flat_outputs(loaded(feed)), outputs, f"{where}: the loaded model and the layer")


def with_policy(cls, init_kwargs, policy):
    """``cls`` made with the dtype policy ``policy``, as keras-hub's precision check makes it:
    ``dtype=policy``, and every init argument that is a layer remade with it."""
    import keras

    kwargs = {}
    for key, value in init_kwargs.items():
        if isinstance(value, keras.layers.Layer):
            value = type(value).from_config({**value.get_config(), "dtype": policy})
        kwargs[key] = value
    return cls(**kwargs, dtype=policy)


def _saturated(x, dtype):
    """``x`` as float64 clipped to the finite range of ``dtype`` (infinities at its limits)."""
    import ml_dtypes

    top = float(ml_dtypes.finfo(dtype).max)
    return np.clip(np.nan_to_num(np.asarray(x, np.float64), posinf=top, neginf=-top), -top, top)


def _check_policy(name, reference, reference_outputs, cls, init_kwargs, input_data, output_dtype, tolerance, where):
    import keras

    policy = keras.dtype_policies.get(name)
    layer = with_policy(cls, init_kwargs, name)
    call(layer, input_data)  # builds it
    specs = keras.tree.flatten(call(with_policy(cls, init_kwargs, name), _symbolic(input_data)))
    assert len(layer.weights) == len(reference.weights), f"{where}: other variables than float32's"
    for variable in layer.weights:
        if _is_float(variable.dtype):
            assert _dtype(variable) == policy.variable_dtype, (
                f"{where}: the variable {variable.path} is {_dtype(variable)}, not {policy.variable_dtype}")
    for sub in layer._flatten_layers(include_self=False):
        assert sub.dtype_policy.name == name, (
            f"{where}: the sub-layer {sub.name} has the policy {sub.dtype_policy.name}")
    layer.set_weights(reference.get_weights())
    outputs = flat_outputs(call(layer, input_data))
    assert len(outputs) == len(reference_outputs) == len(specs), f"{where}: another number of outputs"
    want = output_dtype or policy.compute_dtype
    for i, (x, spec, ref) in enumerate(zip(outputs, specs, reference_outputs)):
        if not _is_float(ref.dtype):
            assert _dtype(x) == _dtype(ref) == _dtype(spec), f"{where}: output {i} is {_dtype(x)}, not {_dtype(ref)}"
            np.testing.assert_array_equal(x, ref, err_msg=f"{where}: output {i}")
            continue
        assert _dtype(x) == want, f"{where}: output {i} is {_dtype(x)}, not {want}"
        assert _dtype(spec) == want, f"{where}: the symbolic call's output {i} is {_dtype(spec)}, not {want}"
        assert not np.isnan(np.asarray(x, np.float64)).any(), f"{where}: output {i} has NaN"
        np.testing.assert_allclose(_saturated(x, want), _saturated(ref, want), rtol=tolerance, atol=tolerance,
                                   err_msg=f"{where}: output {i} against float32's")


#: The ``jax`` check's process: the layer from its serialized config, the same weights, the
#: same inputs; its outputs into an ``.npz`` file.
JAX_LAYER = textwrap.dedent(r"""
    import importlib, json, os, sys
    os.environ["KERAS_BACKEND"] = "jax"
    import keras
    import numpy as np
    assert keras.backend.backend() == "jax", keras.backend.backend()
    job = json.load(open(sys.argv[1], encoding="utf-8"))
    importlib.import_module(job["module"])  # registers the class
    arrays = np.load(job["arrays"])
    data = {key: [arrays[n] for n in names] if kind == "list" else arrays[names] if kind == "array" else names
            for key, (kind, names) in job["inputs"].items()}
    layer = keras.saving.deserialize_keras_object(job["layer"])
    layer(**data)
    layer.set_weights([arrays[f"weight_{i}"] for i in range(job["weights"])])
    out = [np.asarray(keras.ops.convert_to_numpy(x)) for x in keras.tree.flatten(layer(**data))]
    np.savez(job["output"], *out)
""")


def _check_jax(layer, outputs, input_data, tolerance, where):
    import keras

    arrays, inputs = {}, {}
    for key, value in input_data.items():
        if isinstance(value, (list, tuple)):
            names = [f"input_{key}_{i}" for i in range(len(value))]
            arrays.update(zip(names, value))
            inputs[key] = ("list", names)
        elif isinstance(value, np.ndarray):
            arrays[f"input_{key}"] = value
            inputs[key] = ("array", f"input_{key}")
        else:
            inputs[key] = ("value", value)
    weights = layer.get_weights()
    arrays.update({f"weight_{i}": w for i, w in enumerate(weights)})
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        np.savez(tmp / "arrays.npz", **arrays)
        job = {"module": type(layer).__module__, "layer": keras.saving.serialize_keras_object(layer),
               "arrays": str(tmp / "arrays.npz"), "inputs": inputs, "weights": len(weights),
               "output": str(tmp / "out.npz")}
        (tmp / "job.json").write_text(json.dumps(job), encoding="utf-8")
        env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3",
                   PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        run = subprocess.run([sys.executable, "-c", JAX_LAYER, str(tmp / "job.json")], capture_output=True,
                             text=True, env=env, cwd=tmp, timeout=600)
        assert run.returncode == 0, f"{where}: the JAX process failed:\n{run.stderr[-3000:]}"
        with np.load(tmp / "out.npz") as out:
            theirs = [out[f"arr_{i}"] for i in range(len(out.files))]
    _same_outputs(theirs, outputs, f"{where}: JAX against TensorFlow", atol=tolerance)
