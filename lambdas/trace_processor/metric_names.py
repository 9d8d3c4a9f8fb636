"""Re-export of profstack.metric_names for stacks/components/training_dashboard.py, whose owner
switches it to `profstack.metric_names` in the monitoring change; delete this file then."""

from profstack.metric_names import *  # noqa: F403
