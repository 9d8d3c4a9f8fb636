"""Lambda entry point of a Distributed Map item: analyse one trace file (fan-out path)."""

from __future__ import annotations

import os
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from lambdas.trace_processor import runtime
from lambdas.trace_processor.fanout import analyze_one
from lambdas.trace_processor.telemetry import check_engine
from profstack.analysis.allocator import tune_malloc

runtime.env()  # cold start: a bad deployment fails here, loudly
tune_malloc()  # the function's process is ours: big blocks go back to the system (profstack/analysis/allocator.py)
check_engine(os.environ.get("PROFSTACK_EXPECT_ENGINE"))  # once per cold start: the engine that runs, as expected?
logger = Logger()


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    result = analyze_one(event, env=runtime.env(), clients=runtime.clients(), engine=runtime.engine())
    logger.info("file analysed", extra=result)
    return result
