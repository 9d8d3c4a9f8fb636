"""Trace processor: turns a finished SageMaker training job into a ProfStack report.

handler.py, analyze_file.py, aggregate.py (thin Lambda entry points) -> pipeline.py / fanout.py (what
to do, one module per concern: job, discovery, routing, engine, outputs, notification,
legacy_rule_output) -> aws.py (every S3/SageMaker/SNS/Step Functions call, clients injected).
Pure helpers: events.py (event model), tfevents.py (TensorBoard scalars).
"""
