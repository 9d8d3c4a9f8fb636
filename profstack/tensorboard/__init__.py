"""Per-user SageMaker TensorBoard: the names ProfStack gives its domain objects (`names`) and the
SageMaker app I/O (`apps`), shared by the stacks, the Lambdas and the CLI."""
