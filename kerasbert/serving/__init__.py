"""Serving: SavedModels for TensorFlow Serving and the rows a predict call runs.

``saved_model`` writes versioned, atomic, warmed-up exports and reads them back;
``rows`` groups a predict call's rows (by length, in compiled buckets) and trims
padding; ``requests`` builds TF Serving requests (gRPC ``PredictRequest``, REST
bodies); ``graph_ops`` holds the small TensorFlow building blocks of serving graphs.
"""
