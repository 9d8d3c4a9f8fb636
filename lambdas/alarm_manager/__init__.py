"""Per-job CloudWatch alarms that live and die with a SageMaker training job (issue 15)."""
