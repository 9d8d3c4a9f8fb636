"""Custom-resource provider for per-user SageMaker TensorBoard apps (docs/platform-facts.md A1)."""
