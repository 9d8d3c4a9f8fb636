"""`profstack cost`: what a deployment costs, standing per month, per finished job and per running job-hour.

    profstack cost [--config PATH] [--jobs-per-month N] [--trace-gb GB] [--tensorboard-hours H] [--json]

From the config and the pinned list prices (profstack/history/prices.json), offline: no AWS call.
The model and its sources: profstack/deploy_cost.py; docs/operate.md, Cost.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from profstack.cli import CliError
from profstack.cli._aws import add_config_argument, load
from profstack.cli._help import N, command


def register(subparsers: Any) -> None:
    parser = command(
        subparsers,
        "cost",
        help="what the deployment costs: standing per month, per job, per running job-hour (pinned prices, offline)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        examples=(
            "profstack cost",
            "profstack cost --config config/deploy.yaml --jobs-per-month 500 --trace-gb 4",
            "profstack cost --tensorboard-hours 60 --json",
        ),
    )
    add_config_argument(parser)
    parser.add_argument(
        "--jobs-per-month", type=int, default=100, metavar=N, help="finished jobs a month (default 100)"
    )
    parser.add_argument(
        "--trace-gb", type=float, default=1.0, metavar="GB", help="uncompressed trace JSON per job, GB (default 1)"
    )
    parser.add_argument(
        "--tensorboard-hours",
        type=float,
        default=20.0,
        metavar="HOURS",
        help="hours each user's TensorBoard app runs a month (default 20)",
    )
    parser.add_argument(
        "--running-hours", type=float, default=6.0, metavar="HOURS", help="hours each job runs (default 6)"
    )
    parser.add_argument("--hosts", type=float, default=2.0, metavar=N, help="instances per job (default 2)")
    parser.add_argument("--json", action="store_true", help="print the estimate as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from profstack.deploy_cost import Assumptions, estimate, format_text

    for flag, value in (
        ("--jobs-per-month", args.jobs_per_month),
        ("--trace-gb", args.trace_gb),
        ("--tensorboard-hours", args.tensorboard_hours),
        ("--running-hours", args.running_hours),
        ("--hosts", args.hosts),
    ):
        if value < 0:
            raise CliError(f"{flag} must be 0 or more, got {value}")
    assumptions = Assumptions(
        jobs_per_month=args.jobs_per_month,
        trace_gb_per_job=args.trace_gb,
        tensorboard_hours_per_user=args.tensorboard_hours,
        running_hosts=args.hosts,
        running_hours_per_job=args.running_hours,
    )
    result = estimate(load(args), assumptions)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(format_text(result), end="")
    return 0
