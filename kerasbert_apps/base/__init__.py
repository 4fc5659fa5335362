"""What every app shares: the pipeline (text in, results out, one path for predict and
serving), the task model, counted reports, the task's train/evaluate/predict/export and
its command-line wiring. An app folder adds its readers, its head and its decoding."""
