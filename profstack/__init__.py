"""ProfStack: the pure-Python library behind the CDK app, the Lambdas and the CLI."""

__version__ = "0.1.0"
