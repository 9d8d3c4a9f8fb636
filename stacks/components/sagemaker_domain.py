"""The SageMaker domain that hosts the per-user TensorBoard apps: created here, or imported by id.

A created domain uses AuthMode IAM (presigned URLs need it, docs/platform-facts.md A3), home EFS
(managed TensorBoard needs it, A2) encrypted with the ProfStack data key, and the VPC and
subnets from config. With `network_access: VpcOnly` the apps have no internet path, so the
interface endpoints Studio needs (SageMaker API and runtime, plus STS for credentials) are
created in the same subnets, and an S3 gateway endpoint on `s3_gateway_route_table_ids`
(leave that empty when the VPC already routes S3 through one).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from profstack.config import CreateDomain, ImportDomain
from profstack.guardrails import Scope, isolation_statements
from stacks.components.iam import managed_policies

# Interface endpoints a VpcOnly domain needs (SageMaker dev guide: studio-notebooks-and-internet-access;
# STS so that the apps can use their execution role's credentials).
VPC_ONLY_ENDPOINTS = ("sagemaker.api", "sagemaker.runtime", "sts")
NFS_PORT = 2049
# Studio apps talk to each other on these ports inside the domain security group (same guide).
STUDIO_APP_PORTS = (8192, 65535)


class StudioDomain(Construct):
    """`domain_id`, `domain_arn` and (created domains only) `security_group_ids` for profiles."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        domain: CreateDomain | ImportDomain,
        domain_name: str,
        key: kms.IKey,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        self.security_group_ids: list[str] = []
        self.resource: sagemaker.CfnDomain | None = None
        self.default_role: iam.Role | None = None
        if isinstance(domain, ImportDomain):
            self.domain_id = domain.domain_id
        else:
            self.resource = self._create(domain, domain_name=domain_name, key=key)
            self.domain_id = self.resource.attr_domain_id
        self.domain_arn = stack.format_arn(service="sagemaker", resource="domain", resource_name=self.domain_id)

    def _create(self, domain: CreateDomain, *, domain_name: str, key: kms.IKey) -> sagemaker.CfnDomain:
        # L1 security groups: an L2 needs an IVpc, and an imported VPC without AZs cannot make one.
        group = ec2.CfnSecurityGroup(
            self,
            "AppSecurityGroup",
            vpc_id=domain.vpc_id,
            group_description="ProfStack SageMaker domain apps: EFS (NFS) and Studio app traffic in the group",
            security_group_egress=[
                ec2.CfnSecurityGroup.EgressProperty(
                    ip_protocol="-1",
                    cidr_ip="0.0.0.0/0",
                    description="apps reach S3, SageMaker and STS (endpoints or NAT)",
                )
            ],
        )
        for name, (low, high), what in (
            ("Nfs", (NFS_PORT, NFS_PORT), "home EFS (NFS) within the domain"),
            ("Apps", STUDIO_APP_PORTS, "Studio app traffic within the domain"),
        ):
            ec2.CfnSecurityGroupIngress(
                self,
                f"AppIngress{name}",
                group_id=group.attr_group_id,
                source_security_group_id=group.attr_group_id,
                ip_protocol="tcp",
                from_port=low,
                to_port=high,
                description=what,
            )
        self.security_group_ids = [group.attr_group_id]

        # Every user profile overrides this role with its own least-privilege role (user_workspace.py);
        # the domain default has no permissions at all.
        default_role = iam.Role(
            self,
            "DefaultExecutionRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description="ProfStack domain default execution role; every profile overrides it; no permissions",
        )
        self.default_role = default_role
        if domain.network_access == "VpcOnly":
            self._endpoints(domain, group.attr_group_id)
        return sagemaker.CfnDomain(
            self,
            "Domain",
            domain_name=domain_name,
            auth_mode="IAM",  # CreatePresignedDomainUrl works only with IAM (docs/platform-facts.md A3)
            vpc_id=domain.vpc_id,
            subnet_ids=list(domain.subnet_ids),
            app_network_access_type=domain.network_access,
            home_efs_file_system_creation="Enabled",  # TensorBoard needs home EFS (docs/platform-facts.md A2)
            kms_key_id=key.key_arn,
            default_user_settings=sagemaker.CfnDomain.UserSettingsProperty(
                execution_role=default_role.role_arn,
                security_groups=self.security_group_ids,
                auto_mount_home_efs="Enabled",
            ),
            domain_settings=sagemaker.CfnDomain.DomainSettingsProperty(security_group_ids=self.security_group_ids),
        )

    def deny_every_users_things(self, isolation: Scope) -> None:
        """The default execution role belongs to no user: whatever is granted to it later (a profile created outside
        ProfStack runs as it), every user's roles, profile, apps, spaces and jobs' tags stay someone else's."""
        if self.default_role is None:
            return
        managed_policies(
            self,
            "DefaultRoleIsolation",
            isolation_statements(isolation, None),
            description="ProfStack: the domain's default execution role reaches no user's things (Deny only)",
            roles=[self.default_role],
        )

    def _endpoints(self, domain: CreateDomain, apps_group_id: str) -> None:
        group = ec2.CfnSecurityGroup(
            self,
            "EndpointSecurityGroup",
            vpc_id=domain.vpc_id,
            group_description="ProfStack interface endpoints: HTTPS from the SageMaker domain apps only",
            security_group_ingress=[
                ec2.CfnSecurityGroup.IngressProperty(
                    ip_protocol="tcp",
                    from_port=443,
                    to_port=443,
                    source_security_group_id=apps_group_id,
                    description="HTTPS from the domain apps",
                )
            ],
            # Endpoints answer; they open no connections. A rule to nowhere replaces the default allow-all.
            security_group_egress=[
                ec2.CfnSecurityGroup.EgressProperty(
                    ip_protocol="icmp",
                    from_port=252,
                    to_port=86,
                    cidr_ip="255.255.255.255/32",
                    description="no egress",
                )
            ],
        )
        region = cdk.Stack.of(self).region
        for service in VPC_ONLY_ENDPOINTS:
            ec2.CfnVPCEndpoint(
                self,
                f"Endpoint-{service.replace('.', '-')}",
                vpc_id=domain.vpc_id,
                service_name=f"com.amazonaws.{region}.{service}",
                vpc_endpoint_type="Interface",
                private_dns_enabled=True,
                subnet_ids=list(domain.subnet_ids),
                security_group_ids=[group.attr_group_id],
            )
        if domain.s3_gateway_route_table_ids:
            # TensorBoard reads its logs from S3; a gateway endpoint is free and needs no DNS change.
            ec2.CfnVPCEndpoint(
                self,
                "Endpoint-s3",
                vpc_id=domain.vpc_id,
                service_name=f"com.amazonaws.{region}.s3",
                vpc_endpoint_type="Gateway",
                route_table_ids=list(domain.s3_gateway_route_table_ids),
            )
