"""`make demo` (`python -m demo`): the processing pipeline on an embedded AWS emulator, no account.

Not part of the installed `profstack` package: it needs the CDK app (stacks/), the Lambda code
(lambdas/) and moto. `lambda_harness` (SQS events, Lambda context, environment) and `local_emf`
(EMF lines -> CloudWatch metrics) are shared with the tests.
"""
