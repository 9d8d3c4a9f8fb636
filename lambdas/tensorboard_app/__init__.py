"""Custom-resource provider for per-user SageMaker TensorBoard apps (platform facts A1)."""
