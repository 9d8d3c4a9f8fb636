"""Across jobs (issue 16) in the templates: Glue tables with partition projection over history/, the Athena
workgroup (KMS-encrypted results, enforced), the named queries, who may read history/, the processor's env."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from profstack.config import parse_config
from profstack.history.queries import NAMED_QUERIES
from profstack.history.rows import COLUMNS, TABLES
from stacks.components.job_history import MLFLOW_ACTIONS, database_name
from stacks.lint import lint_templates
from tests.infra.conftest import SynthesizedApp, synthesize

PROCESSING = "profstack-processing"


def _of_type(template: dict[str, Any], rtype: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == rtype}


def _statements(template: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for logical_id, resource in template["Resources"].items():
        props = resource.get("Properties", {})
        docs = [props["PolicyDocument"]] if "PolicyDocument" in props else []
        docs += [p["PolicyDocument"] for p in props.get("Policies", [])]
        for doc in docs:
            for statement in doc["Statement"]:
                yield logical_id, statement


def _flat(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def test_one_glue_table_per_history_table_with_the_row_columns_and_partition_projection(
    synthesized: SynthesizedApp, example_config: Any
) -> None:
    # GIVEN the example config's processing stack
    template = synthesized.templates[PROCESSING]
    (database,) = _of_type(template, "AWS::Glue::Database").values()
    assert (
        database["Properties"]["DatabaseInput"]["Name"] == database_name(example_config.prefix) == "profstack_history"
    )
    tables = {
        t["Properties"]["TableInput"]["Name"]: t["Properties"]["TableInput"]
        for t in _of_type(template, "AWS::Glue::Table").values()
    }
    # WHEN each table is read THEN its columns are exactly the rows' columns, partitioned by dt and user
    assert set(tables) == set(TABLES)
    for name, table in tables.items():
        columns = [(c["Name"], c["Type"]) for c in table["StorageDescriptor"]["Columns"]]
        assert columns == list(COLUMNS[name])
        assert [k["Name"] for k in table["PartitionKeys"]] == ["dt", "user"]
        params = table["Parameters"]
        assert params["projection.enabled"] == "true"
        assert params["projection.dt.type"] == "date"
        assert params["projection.dt.range"].endswith(",NOW")
        # every configured user (and the owner of untagged jobs) is a projected partition
        assert params["projection.user.values"].split(",") == sorted(
            [*(u.name for u in example_config.users), "_unowned"]
        )
        template_loc = _flat(params["storage.location.template"])
        assert f"/history/{name}/dt=${{dt}}/user=${{user}}/" in template_loc
        assert table["StorageDescriptor"]["SerdeInfo"]["SerializationLibrary"] == "org.openx.data.jsonserde.JsonSerDe"


def test_the_workgroup_enforces_kms_encrypted_results_under_a_prefix_with_the_data_key(
    synthesized: SynthesizedApp,
) -> None:
    template = synthesized.templates[PROCESSING]
    (workgroup,) = _of_type(template, "AWS::Athena::WorkGroup").values()
    config = workgroup["Properties"]["WorkGroupConfiguration"]
    assert config["EnforceWorkGroupConfiguration"] is True
    assert config["BytesScannedCutoffPerQuery"] > 0
    result = config["ResultConfiguration"]
    assert result["EncryptionConfiguration"]["EncryptionOption"] == "SSE_KMS"
    # the storage stack's data key (cross-stack import), the same key as the bucket's
    assert "DataKey" in _flat(result["EncryptionConfiguration"]["KmsKey"])
    assert _flat(result["OutputLocation"]).endswith('/athena-results/"]]}')


def test_the_named_queries_are_the_shared_sql_against_the_history_database(synthesized: SynthesizedApp) -> None:
    template = synthesized.templates[PROCESSING]
    queries = {q["Properties"]["Name"]: q["Properties"] for q in _of_type(template, "AWS::Athena::NamedQuery").values()}
    assert (
        set(queries)
        == {q.name for q in NAMED_QUERIES}
        == {
            "idle-gpu-hours-by-user-and-week",
            "top-regressions",
            "slowest-kernels-across-jobs",
        }
    )
    tables = {t: f'"profstack_history"."{t}"' for t in TABLES}
    for query in NAMED_QUERIES:
        assert queries[query.name]["QueryString"] == query.render(tables)
        assert queries[query.name]["Database"] == "profstack_history"
        assert queries[query.name]["WorkGroup"] == "profstack-history"


def test_only_the_processor_and_the_analyst_role_touch_history_and_query_results(synthesized: SynthesizedApp) -> None:
    # GIVEN every IAM statement of every stack that grants (the TensorBoard stack holds the per-user roles; the
    # trace bucket's policy only denies there: tests/infra/test_bucket_boundary.py)
    holders: dict[str, set[str]] = {}
    for stack, template in synthesized.templates.items():
        for logical_id, statement in _statements(template):
            if statement.get("Effect") != "Allow":
                continue
            text = _flat(statement.get("Resource")) + _flat(statement.get("Condition"))
            for prefix in ("history/", "athena-results/"):
                if prefix in text:
                    holders.setdefault(prefix, set()).add(f"{stack}/{logical_id}")
    # THEN history/ is granted only by the history construct's policies: processor, aggregate, analyst
    assert holders["history/"] == {
        f"{PROCESSING}/HistoryAnalystPolicy17B97E25",
        f"{PROCESSING}/HistoryProcessorAccess2CD8DCAE",
        f"{PROCESSING}/HistoryAggregateAccessD0261B3C",
    }
    assert holders["athena-results/"] == {f"{PROCESSING}/HistoryAnalystPolicy17B97E25"}
    # AND no per-user TensorBoard role or policy is among them
    assert not any(h.startswith("profstack-tensorboard") for hs in holders.values() for h in hs)


def test_the_analyst_role_is_assumable_in_the_account_only(synthesized: SynthesizedApp) -> None:
    template = synthesized.templates[PROCESSING]
    role = template["Resources"]["HistoryAnalystRole4A96DBC3"]["Properties"]
    # on the path the trace bucket's policy lets read history/ and use athena-results/
    assert role["Path"] == "/profstack/analysts/"
    (statement,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert "AWS::AccountId" in _flat(statement["Principal"])
    assert ":root" in _flat(statement["Principal"])


def test_processor_and_aggregate_get_the_history_environment(synthesized: SynthesizedApp) -> None:
    template = synthesized.templates[PROCESSING]
    handlers = {
        f["Properties"]["Handler"]: f["Properties"]["Environment"]["Variables"]
        for f in _of_type(template, "AWS::Lambda::Function").values()
        if "Environment" in f["Properties"]
    }
    for handler in ("lambdas.trace_processor.handler.handler", "lambdas.trace_processor.aggregate.handler"):
        env = handlers[handler]
        assert env["HISTORY_ENABLED"] == "true"
        assert env["FAMILY_TAG_KEY"] == "profstack:family"
        assert json.loads(env["FAMILY_NAME_PATTERNS"])  # the default SageMaker-name rule
        assert "MLFLOW_TRACKING" not in env  # not configured in the example
    assert "HISTORY_ENABLED" not in handlers["lambdas.trace_processor.analyze_file.handler"]


def test_history_and_query_results_expire(synthesized: SynthesizedApp, example_config: Any) -> None:
    template = synthesized.templates["profstack-storage"]
    (bucket,) = [b for k, b in _of_type(template, "AWS::S3::Bucket").items() if "Traces" in k]
    rules = {r["Id"]: r for r in bucket["Properties"]["LifecycleConfiguration"]["Rules"]}
    assert rules["history"]["Prefix"] == "history/"
    assert rules["history"]["ExpirationInDays"] == example_config.retention.reports_expire_after_days
    assert rules["athena-results"]["Prefix"] == "athena-results/"
    assert rules["athena-results"]["ExpirationInDays"] == 30


@pytest.mark.slow
def test_a_managed_mlflow_server_is_granted_exactly_the_rest_calls_on_its_arn(
    example_config: Any, tmp_path: Path
) -> None:
    # GIVEN the example config with a SageMaker MLflow tracking server and its S3 artifact store
    arn = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/profstack"
    data = example_config.model_dump(mode="json")
    data["history"]["mlflow"] = {"tracking": arn, "artifact_s3_uri": "s3://mlflow-artifacts-bucket/runs"}
    app = synthesize(parse_config(data))  # cdk-nag on: the new statements are acknowledged or fail here
    template = app.templates[PROCESSING]
    # WHEN the processor's history policy is read THEN MLflow is scoped to the ARN, artifacts to the prefix
    policy = template["Resources"]["HistoryProcessorAccess2CD8DCAE"]["Properties"]["PolicyDocument"]
    by_sid = {s["Sid"]: s for s in policy["Statement"]}
    assert by_sid["MlflowExport"]["Resource"] == arn
    assert sorted(by_sid["MlflowExport"]["Action"]) == sorted(MLFLOW_ACTIONS)
    assert "mlflow-artifacts-bucket/runs/*" in _flat(by_sid["MlflowArtifacts"]["Resource"])
    env = next(
        f["Properties"]["Environment"]["Variables"]
        for f in _of_type(template, "AWS::Lambda::Function").values()
        if f["Properties"]["Handler"] == "lambdas.trace_processor.handler.handler"
    )
    assert env["MLFLOW_TRACKING"] == arn
    # AND cfn-lint accepts the template
    path = tmp_path / "processing.json"
    path.write_text(json.dumps(template))
    assert lint_templates([path]) == []
