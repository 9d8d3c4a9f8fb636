"""Trace processor: turns a finished SageMaker training job into a ProfStack report.

handler.py (thin Lambda entry points) -> logic.py (what to do) -> aws.py (S3/SageMaker/SNS I/O with
injected clients). Pure helpers: events.py (event model), tfevents.py (TensorBoard scalars).
"""
