"""Distillation, DistilBERT style: a student encoder with fewer layers, initialised from the teacher's.

DistilBERT (Sanh et al., 2019) starts its student from the teacher by taking
one layer out of two; TinyBERT and others keep the same idea. Here:

* :func:`every_other_layer` picks which teacher layers initialise the
  student's (``6 -> 3``: 0, 2, 4; ``12 -> 6``: 0, 2, 4, 6, 8, 10);
* :func:`student_encoder` builds an encoder of the teacher's family and sizes
  with fewer layers and copies the embeddings, the pooler and the picked
  layers into it. ALBERT shares its layer weights across depth: its student
  runs the same shared weights fewer times.

The student is an ordinary encoder: it saves to the official checkpoint
layout with :func:`kerasbert.save_encoder` and loads back with
:func:`kerasbert.load_encoder` like any other. Training it on the teacher's
outputs is the app's part (``kerasbert ner distill``).
"""

from kerasbert.errors import KerasbertError

LAYER_PREFIX = "transformer_layer_"


def shares_layers(encoder):
    """Whether ``encoder`` runs one set of layer weights at every depth (ALBERT)."""
    return not any(layer.name.startswith(LAYER_PREFIX) for layer in encoder.layers)


def every_other_layer(teacher_layers, student_layers):
    """The teacher layers (from 0) that initialise a student of
    ``student_layers`` layers: evenly spaced from the bottom, every other
    layer when the student has half the depth."""
    if not 1 <= student_layers <= teacher_layers:
        raise KerasbertError(
            f"a student needs between 1 and the teacher's {teacher_layers} layers, got {student_layers}"
        )
    return [i * teacher_layers // student_layers for i in range(student_layers)]


def student_encoder(encoder, layers, dtype=None):
    """A copy of ``encoder`` with only the transformer layers ``layers``
    (teacher layer numbers, from 0, in the student's order); every other
    weight (embeddings, projections, pooler) is copied as it is. For ALBERT
    (layers shared across depth) ``layers`` only sets the depth: pass
    ``range(n)``. ``dtype``: the student's Keras dtype policy (None: the
    global policy, e.g. the run's mixed precision)."""
    layers = [int(i) for i in layers]
    teacher_depth = int(encoder.num_layers)
    if not layers or min(layers) < 0 or max(layers) >= teacher_depth:
        raise KerasbertError(f"teacher layers must be between 0 and {teacher_depth - 1}, got {layers}")
    config = dict(encoder.get_config(), num_layers=len(layers), dtype=dtype)
    student = type(encoder).from_config(config)
    if shares_layers(encoder) and layers != list(range(len(layers))):
        raise KerasbertError(f"{type(encoder).__name__} shares its layers across depth: a student can only "
                             f"run fewer of them (layers 0..{len(layers) - 1}), not pick {layers}")
    for layer in student.layers:
        if not layer.weights:
            continue
        name = layer.name
        if name.startswith(LAYER_PREFIX):
            name = LAYER_PREFIX + str(layers[int(name[len(LAYER_PREFIX):])])
        layer.set_weights(encoder.get_layer(name).get_weights())
    student.trainable = encoder.trainable
    return student


def copy_layer_weights(source, target, skip=()):
    """Copy the weights of every layer of ``target`` that has weights, from the
    layer of the same name in ``source`` (layers in ``skip`` left alone)."""
    for layer in target.layers:
        if layer.weights and not any(layer is other for other in skip):
            layer.set_weights(source.get_layer(layer.name).get_weights())

