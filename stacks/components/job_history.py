"""Across jobs (issue 16): the Glue Data Catalog tables over the history rows, the Athena workgroup with its
named queries, the analyst role that may query them, and the processor's access to write the rows.

Per-user isolation: the history rows of every user sit under one ``history/`` prefix, so no user role is
granted anything there (nor on ``athena-results/``); only the processor functions (write their rows, read
their family's baseline) and the ``HistoryAnalyst`` role (query through the workgroup) are. A user still
sees their own job's cost and regression in their own report under ``reports/<user>/``.

Partition projection (no crawler, no MSCK REPAIR): ``dt`` is a date projected from 2024-01-01 to today,
``user`` an enum of the configured users plus ``_unowned``; a job tagged with a user missing from the config
is written but not queryable until the user is added.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_athena as athena
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from profstack import layout
from profstack.config import History
from profstack.history.mlflow import MlflowTarget
from profstack.history.queries import NAMED_QUERIES
from profstack.history.rows import COLUMNS, PARTITION_KEYS, TABLES, table_prefix
from stacks.components.iam import key_use_statement, s3_key_context
from stacks.components.nag_wildcards import acknowledge_wildcards
from stacks.components.python_function import ProfStackFunction

PROJECTION_START = "2024-01-01"
#: Athena stops a query of the history workgroup after this many bytes scanned (runaway-cost guard)
BYTES_SCANNED_CUTOFF = 10 * 2**30
#: The MLflow REST calls profstack.history.mlflow makes, as IAM actions of SageMaker managed MLflow
MLFLOW_ACTIONS = (
    "sagemaker-mlflow:GetExperimentByName",
    "sagemaker-mlflow:CreateExperiment",
    "sagemaker-mlflow:SearchRuns",
    "sagemaker-mlflow:CreateRun",
    "sagemaker-mlflow:LogBatch",
    "sagemaker-mlflow:UpdateRun",
)

HISTORY_WILDCARDS = {
    r"AwsSolutions-IAM5\[Resource::.*/history/\*\]": "History rows are keyed history/<table>/dt=<date>/user=<user>/"
    "<job>.jsonl (profstack/history/rows.py); the prefix is the tightest static scope for rows of any job.",
    r"AwsSolutions-IAM5\[Resource::.*/athena-results/\*\]": "Athena writes each query's result under the "
    "workgroup's output prefix with a generated name; the analyst reads them back.",
    r"AwsSolutions-IAM5\[Resource::arn:<AWS::Partition>:sagemaker:<AWS::Region>:<AWS::AccountId>:training-job/\*\]": (
        "The processor reads the instance type, duration and tags (the job family) of any job that ends in "
        "this account and region; only DescribeTrainingJob and ListTags are granted."
    ),
    r"AwsSolutions-IAM5\[Resource::arn:<AWS::Partition>:glue:<AWS::Region>:<AWS::AccountId>:table/.*/\*\]": (
        "Read-only catalog access to the history database's own tables (jobs, ranks, kernels)."
    ),
    r"AwsSolutions-IAM5\[Resource::s3://.*\]|AwsSolutions-IAM5\[Resource::arn:<AWS::Partition>:s3:::.*/\*\]": (
        "Only the configured MLflow artifact store prefix: the processor uploads the report as the run's artifact."
    ),
}


def database_name(name_prefix: str) -> str:
    """Glue/Athena database names take lower case, digits and underscores."""
    return f"{name_prefix.replace('-', '_')}_history"


class JobHistory(Construct):
    """Glue database and tables (partition projection), Athena workgroup and named queries, analyst role."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        bucket: s3.IBucket,
        key: kms.IKey,
        users: Sequence[str],
        history: History,
        name_prefix: str,
        analyst_role_path: str,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        self.bucket = bucket
        self.key = key
        self.history = history
        self.database_name = database_name(name_prefix)
        self.workgroup_name = f"{name_prefix}-history"
        self.users = sorted({*users, layout.UNOWNED_USER})

        self.database = glue.CfnDatabase(
            self,
            "Database",
            catalog_id=stack.account,
            database_input=glue.CfnDatabase.DatabaseInputProperty(
                name=self.database_name,
                description="ProfStack job history: one row per job, rank and top kernel (JSON Lines under history/)",
            ),
        )
        self.database.apply_removal_policy(cdk.RemovalPolicy.DESTROY)  # metadata only: the rows stay in S3
        self.tables: dict[str, glue.CfnTable] = {}
        for table in TABLES:
            self.tables[table] = self._table(table, stack)

        self.workgroup = athena.CfnWorkGroup(
            self,
            "WorkGroup",
            name=self.workgroup_name,
            description="ProfStack job history queries (results KMS-encrypted under athena-results/)",
            state="ENABLED",
            work_group_configuration=athena.CfnWorkGroup.WorkGroupConfigurationProperty(
                enforce_work_group_configuration=True,
                publish_cloud_watch_metrics_enabled=True,
                bytes_scanned_cutoff_per_query=BYTES_SCANNED_CUTOFF,
                result_configuration=athena.CfnWorkGroup.ResultConfigurationProperty(
                    output_location=f"s3://{bucket.bucket_name}/{layout.ATHENA_RESULTS_PREFIX}",
                    encryption_configuration=athena.CfnWorkGroup.EncryptionConfigurationProperty(
                        encryption_option="SSE_KMS", kms_key=key.key_arn
                    ),
                    expected_bucket_owner=stack.account,
                ),
            ),
        )
        self.workgroup.apply_removal_policy(cdk.RemovalPolicy.DESTROY)  # queries are code; results are in S3
        self.named_queries: dict[str, athena.CfnNamedQuery] = {}
        tables = {t: f'"{self.database_name}"."{t}"' for t in TABLES}
        for query in NAMED_QUERIES:
            named = athena.CfnNamedQuery(
                self,
                "Query-" + "".join(part.capitalize() for part in query.name.split("-")),
                name=query.name,
                description=query.description,
                database=self.database_name,
                work_group=self.workgroup_name,
                query_string=query.render(tables),
            )
            named.node.add_dependency(self.workgroup, self.database)
            self.named_queries[query.name] = named

        self.analyst_role = iam.Role(
            self,
            "AnalystRole",
            assumed_by=iam.AccountRootPrincipal(),
            description="ProfStack: query the job history of every user through the Athena workgroup "
            "(grant sts:AssumeRole on this role to platform analysts only)",
            max_session_duration=cdk.Duration.hours(4),
            # the trace bucket's policy lets only this path (and the processing roles, break-glass) read
            # history/ and use athena-results/ (stacks/components/trace_store.py, BucketBoundary)
            path=analyst_role_path,
        )
        self.analyst_policy = iam.Policy(self, "AnalystPolicy", statements=self._analyst_statements(stack))
        self.analyst_policy.attach_to_role(self.analyst_role)
        acknowledge_wildcards(self.analyst_policy, HISTORY_WILDCARDS)

    def _table(self, table: str, stack: cdk.Stack) -> glue.CfnTable:
        location = f"s3://{self.bucket.bucket_name}/{table_prefix(table)}"
        resource = glue.CfnTable(
            self,
            f"{table.capitalize()}Table",
            catalog_id=stack.account,
            database_name=self.database_name,
            table_input=glue.CfnTable.TableInputProperty(
                name=table,
                description=f"ProfStack history: {table} (profstack/history/rows.py COLUMNS)",
                table_type="EXTERNAL_TABLE",
                parameters={
                    "classification": "json",
                    "projection.enabled": "true",
                    "projection.dt.type": "date",
                    "projection.dt.format": "yyyy-MM-dd",
                    "projection.dt.range": f"{PROJECTION_START},NOW",
                    "projection.dt.interval": "1",
                    "projection.dt.interval.unit": "DAYS",
                    "projection.user.type": "enum",
                    "projection.user.values": ",".join(self.users),
                    "storage.location.template": f"{location}dt=${{dt}}/user=${{user}}/",
                },
                partition_keys=[glue.CfnTable.ColumnProperty(name=n, type=t) for n, t in PARTITION_KEYS],
                storage_descriptor=glue.CfnTable.StorageDescriptorProperty(
                    location=location,
                    columns=[glue.CfnTable.ColumnProperty(name=n, type=t) for n, t in COLUMNS[table]],
                    input_format="org.apache.hadoop.mapred.TextInputFormat",
                    output_format="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
                    serde_info=glue.CfnTable.SerdeInfoProperty(
                        serialization_library="org.openx.data.jsonserde.JsonSerDe",
                        parameters={"ignore.malformed.json": "true"},
                    ),
                ),
            ),
        )
        resource.node.add_dependency(self.database)
        resource.apply_removal_policy(cdk.RemovalPolicy.DESTROY)
        return resource

    def _glue_arns(self, stack: cdk.Stack) -> list[str]:
        return [
            stack.format_arn(service="glue", resource="catalog"),
            stack.format_arn(service="glue", resource="database", resource_name=self.database_name),
            stack.format_arn(service="glue", resource="table", resource_name=f"{self.database_name}/*"),
        ]

    def _analyst_statements(self, stack: cdk.Stack) -> list[iam.PolicyStatement]:
        workgroup_arn = stack.format_arn(service="athena", resource="workgroup", resource_name=self.workgroup_name)
        history = self.bucket.arn_for_objects(f"{layout.HISTORY_PREFIX}*")
        results = self.bucket.arn_for_objects(f"{layout.ATHENA_RESULTS_PREFIX}*")
        return [
            iam.PolicyStatement(
                sid="QueryHistoryWorkgroup",
                actions=[
                    "athena:StartQueryExecution",
                    "athena:StopQueryExecution",
                    "athena:GetQueryExecution",
                    "athena:GetQueryResults",
                    "athena:GetWorkGroup",
                    "athena:ListNamedQueries",
                    "athena:GetNamedQuery",
                    "athena:BatchGetNamedQuery",
                    "athena:ListQueryExecutions",
                ],
                resources=[workgroup_arn],
            ),
            iam.PolicyStatement(
                sid="ReadHistoryCatalog",
                actions=[
                    "glue:GetDatabase",
                    "glue:GetTable",
                    "glue:GetTables",
                    "glue:GetPartition",
                    "glue:GetPartitions",
                ],
                resources=self._glue_arns(stack),
            ),
            iam.PolicyStatement(sid="ReadHistoryRows", actions=["s3:GetObject"], resources=[history]),
            iam.PolicyStatement(
                sid="QueryResults",
                actions=["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"],
                resources=[results],
            ),
            iam.PolicyStatement(
                sid="ListHistory",
                actions=["s3:ListBucket", "s3:GetBucketLocation"],
                resources=[self.bucket.bucket_arn],
                conditions={
                    "StringLike": {"s3:prefix": [f"{layout.HISTORY_PREFIX}*", f"{layout.ATHENA_RESULTS_PREFIX}*"]}
                },
            ),
            key_use_statement(
                self.key,
                ["kms:Decrypt", "kms:GenerateDataKey"],
                via="s3",
                context=s3_key_context(self.bucket),
                sid="HistoryDataKey",
            ),
        ]

    # ------------------------------------------------------------------ the processor

    def environment(self) -> dict[str, str]:
        """What lambdas.trace_processor.history.HistoryEnv validates."""
        h = self.history
        env = {
            "HISTORY_ENABLED": "true" if h.enabled else "false",
            "FAMILY_TAG_KEY": h.family.tag_key,
            "FAMILY_NAME_PATTERNS": json.dumps(h.family.name_patterns),
            "REGRESSION_THRESHOLDS": json.dumps(h.regression, sort_keys=True),
            "PRICE_OVERRIDES": json.dumps(
                {"usd_per_hour": h.prices.usd_per_hour, "gpus": h.prices.gpus}, sort_keys=True
            ),
            "MLFLOW_EXPERIMENT": h.mlflow.experiment,
            "MLFLOW_ARTIFACTS": "true" if h.mlflow.artifacts else "false",
            "MLFLOW_EXPERIMENT_PER_USER": "true" if h.mlflow.experiment_per_user else "false",
        }
        if h.mlflow.tracking:
            env["MLFLOW_TRACKING"] = h.mlflow.tracking
        return env

    def grant_processor(self, fn: ProfStackFunction, *, construct_id: str) -> iam.Policy:
        """Read and write history/ rows, DescribeTrainingJob + ListTags (cost, family), MLflow when configured;
        and the environment. A policy of its own, so its wildcards are acknowledged here."""
        stack = cdk.Stack.of(self)
        role = fn.role
        history = self.bucket.arn_for_objects(f"{layout.HISTORY_PREFIX}*")
        statements = [
            iam.PolicyStatement(sid="WriteHistoryRows", actions=["s3:PutObject", "s3:GetObject"], resources=[history]),
            iam.PolicyStatement(
                sid="ListHistoryRows",
                actions=["s3:ListBucket"],
                resources=[self.bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{layout.HISTORY_PREFIX}*"]}},
            ),
            iam.PolicyStatement(
                sid="JobResourcesAndTags",
                actions=["sagemaker:DescribeTrainingJob", "sagemaker:ListTags"],
                resources=[stack.format_arn(service="sagemaker", resource="training-job", resource_name="*")],
            ),
            key_use_statement(
                self.key,
                ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"],
                via="s3",
                context=s3_key_context(self.bucket),
                sid="HistoryDataKey",
            ),
        ]
        mlflow = self.history.mlflow
        if mlflow.tracking and MlflowTarget.parse(mlflow.tracking).arn:
            statements.append(
                iam.PolicyStatement(sid="MlflowExport", actions=list(MLFLOW_ACTIONS), resources=[mlflow.tracking])
            )
        if mlflow.artifact_s3_uri:
            bucket, _, prefix = mlflow.artifact_s3_uri.removeprefix("s3://").partition("/")
            statements.append(
                iam.PolicyStatement(
                    sid="MlflowArtifacts",
                    actions=["s3:PutObject"],
                    resources=[f"arn:{cdk.Aws.PARTITION}:s3:::{bucket}/{prefix.rstrip('/') + '/' if prefix else ''}*"],
                )
            )
        policy = iam.Policy(self, construct_id, statements=statements)
        policy.attach_to_role(role)
        acknowledge_wildcards(policy, HISTORY_WILDCARDS)
        for name, value in self.environment().items():
            fn.function.add_environment(name, value)
        return policy
