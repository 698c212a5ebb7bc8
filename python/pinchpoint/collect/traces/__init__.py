"""Spans as a source of tier timings: OTLP payloads decoded into spans (`spans.py`) and
a run's spans turned into tier records (`tiers.py`)."""
