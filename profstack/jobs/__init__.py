"""Training jobs as SageMaker runs them, and what ProfStack watches of them. Pure: no AWS calls.

| module | what |
| --- | --- |
| `events` | the names of the events about jobs (state changes, the alarm manager's sweep) |
| `instances` | GPUs per instance type, and a job's hosts |
| `instance_metrics` | a job's CloudWatch instance metrics as per-host, per-GPU series (the queries and their answers) |
| `instance_rules` | Debugger's system-metric rules over those series |
| `alarms` | the CloudWatch alarms one running job should have |
| `links` | console links for a job, and the text of a failed job's notification |
| `metric_names` | the names of the metrics ProfStack publishes (EMF) and alarms on |
"""
