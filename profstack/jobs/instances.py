"""GPUs per SageMaker training instance type: a pinned table, and the hosts of a job.

SageMaker sums GPUUtilization and GPUMemoryUtilization over a host's GPUs and CPUUtilization over its
vCPUs (docs/platform-facts.md A8), so every per-GPU or per-core number ProfStack shows or alarms on
divides by the counts in this table. Pure data and pure functions: no AWS calls.

Which types: every NVIDIA GPU type in the `TrainingInstanceType` enum of the SageMaker API model that
botocore 1.44.8 ships (tests/unit/monitoring/test_instances.py fails when a newer botocore names a GPU
type this table lacks). Trainium types (ml.trn*) have no NVIDIA GPU and publish no GPU metrics.

Where the numbers come from (checked 2026-12-01):
- `ec2-api`: EC2 `DescribeInstanceTypes` as AWS returns it (`GpuInfo.Gpus[].Count`, `MemoryInfo.SizeInMiB`,
  `VCpuInfo.DefaultVCpus`), in the snapshot moto 5.2.5 ships (`moto/ec2/resources/instance_types.json.gz`).
  tests/unit/monitoring/test_instances.py compares every such row with that snapshot. GPU memory is the
  API's MiB / 1024: an A10G or L4 is 22.35 GiB (the "24 GB" of the product pages is decimal), an L40S 44.7.
- `aws-batch`: the AWS Batch user guide, "Run GPU jobs" (GPUs, total GPU memory, vCPUs per type), for the
  older types the snapshot no longer lists (p2, p3).
- `ec2-product`: the Amazon EC2 product pages of the instance family, as known to the author but NOT
  re-read against an AWS page in this check. Those rows carry `verified=False`; ProfStack still uses them,
  and says so (alarm descriptions and the report name the row as unverified).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

TABLE_CHECKED = "2026-12-01"
SOURCES = {
    "ec2-api": "EC2 DescribeInstanceTypes, the snapshot in moto 5.2.5 (moto/ec2/resources/instance_types.json.gz)",
    "aws-batch": "https://docs.aws.amazon.com/batch/latest/userguide/gpu-jobs.html",
    "ec2-product": "https://aws.amazon.com/ec2/instance-types/ (accelerated computing), not re-read",
}
Source = Literal["ec2-api", "aws-batch", "ec2-product"]


@dataclass(frozen=True, kw_only=True)
class GpuInstanceType:
    instance_type: str  # ml.<family>.<size>
    gpus: int
    gpu_model: str
    gpu_memory_gib: float  # per GPU
    vcpus: int
    source: Source
    verified: bool

    @property
    def total_gpu_memory_gib(self) -> float:
        return self.gpus * self.gpu_memory_gib


def _family(
    family: str,
    model: str,
    memory_gib: float,
    sizes: Sequence[tuple[str, int, int]],
    *,
    source: Source,
    verified: bool,
) -> list[GpuInstanceType]:
    return [
        GpuInstanceType(
            instance_type=f"ml.{family}.{size}",
            gpus=gpus,
            gpu_model=model,
            gpu_memory_gib=memory_gib,
            vcpus=vcpus,
            source=source,
            verified=verified,
        )
        for size, gpus, vcpus in sizes
    ]


_G_SIZES = [  # the G5/G6/G6e layout: (size, GPUs, vCPUs)
    ("xlarge", 1, 4),
    ("2xlarge", 1, 8),
    ("4xlarge", 1, 16),
    ("8xlarge", 1, 32),
    ("16xlarge", 1, 64),
    ("12xlarge", 4, 48),
    ("24xlarge", 4, 96),
    ("48xlarge", 8, 192),
]
_G7_SIZES = [
    ("2xlarge", 1, 8),
    ("4xlarge", 1, 16),
    ("8xlarge", 1, 32),
    ("12xlarge", 2, 48),
    ("24xlarge", 4, 96),
    ("48xlarge", 8, 192),
]

_A10G_L4_GIB = 22888 / 1024  # DescribeInstanceTypes: 22,888 MiB per GPU
_L40S_GIB = 45776 / 1024

_ROWS: list[GpuInstanceType] = [
    *_family(
        "g4dn",
        "NVIDIA T4",
        16,
        [
            ("xlarge", 1, 4),
            ("2xlarge", 1, 8),
            ("4xlarge", 1, 16),
            ("8xlarge", 1, 32),
            ("12xlarge", 4, 48),
            ("16xlarge", 1, 64),
        ],
        source="ec2-api",
        verified=True,
    ),
    *_family("g5", "NVIDIA A10G", _A10G_L4_GIB, _G_SIZES, source="ec2-api", verified=True),
    *_family("g6", "NVIDIA L4", _A10G_L4_GIB, _G_SIZES, source="ec2-api", verified=True),
    *_family("g6e", "NVIDIA L40S", _L40S_GIB, _G_SIZES, source="ec2-api", verified=True),
    *_family("g7e", "NVIDIA RTX PRO 6000 Blackwell Server Edition", 96, _G7_SIZES, source="ec2-api", verified=True),
    *_family("g7", "NVIDIA RTX PRO 4500 Blackwell Server Edition", 32, _G7_SIZES, source="ec2-api", verified=True),
    *_family(
        "p2",
        "NVIDIA K80",
        12,
        [("xlarge", 1, 4), ("8xlarge", 8, 32), ("16xlarge", 16, 64)],
        source="aws-batch",
        verified=True,
    ),
    *_family(
        "p3",
        "NVIDIA V100",
        16,
        [("2xlarge", 1, 8), ("8xlarge", 4, 32), ("16xlarge", 8, 64)],
        source="aws-batch",
        verified=True,
    ),
    *_family("p3dn", "NVIDIA V100", 32, [("24xlarge", 8, 96)], source="ec2-api", verified=True),
    *_family("p4d", "NVIDIA A100", 40, [("24xlarge", 8, 96)], source="ec2-api", verified=True),
    *_family("p4de", "NVIDIA A100", 80, [("24xlarge", 8, 96)], source="ec2-api", verified=True),
    *_family("p5", "NVIDIA H100", 80, [("4xlarge", 1, 16), ("48xlarge", 8, 192)], source="ec2-api", verified=True),
    *_family("p5e", "NVIDIA H200", 141, [("48xlarge", 8, 192)], source="ec2-api", verified=True),
    *_family("p5en", "NVIDIA H200", 141, [("48xlarge", 8, 192)], source="ec2-api", verified=True),
    *_family("p6-b200", "NVIDIA B200", 183359 / 1024, [("48xlarge", 8, 192)], source="ec2-api", verified=True),
    *_family("p6-b300", "NVIDIA B300", 275040 / 1024, [("48xlarge", 8, 192)], source="ec2-api", verified=True),
    # not in the snapshot: the author's reading of the product page, unverified
    *_family("p6e-gb200", "NVIDIA B200 (GB200)", 185, [("36xlarge", 4, 144)], source="ec2-product", verified=False),
]


GPU_INSTANCE_TYPES: Mapping[str, GpuInstanceType] = {row.instance_type: row for row in _ROWS}
# Accelerated types without NVIDIA GPUs: SageMaker publishes no GPU metrics for them.
NON_GPU_ACCELERATOR_FAMILIES = frozenset({"trn1", "trn1n", "trn2", "inf1", "inf2"})
GPU_FAMILY_PREFIXES = ("ml.g", "ml.p")


def gpu_spec(instance_type: str) -> GpuInstanceType | None:
    return GPU_INSTANCE_TYPES.get(instance_type)


def looks_like_gpu_type(instance_type: str) -> bool:
    """ml.g*/ml.p* types are NVIDIA GPU types; used to warn about a type the table does not know."""
    return instance_type.startswith(GPU_FAMILY_PREFIXES)


# --- the hosts of a training job -------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class HostSpec:
    """One host of a job: `algo-<index>`, with what ProfStack knows about its hardware."""

    index: int
    instance_type: str | None  # None: a heterogeneous cluster whose host-to-group mapping is unknown
    gpus: int | None  # None: unknown (type missing from the table, or the group is ambiguous)
    vcpus: int | None
    verified: bool
    note: str = ""

    @property
    def name(self) -> str:
        return f"algo-{self.index}"

    def dimension(self, job: str) -> str:
        """The `Host` dimension value of SageMaker's instance metrics (docs/platform-facts.md A8)."""
        return f"{job}/{self.name}"


MAX_HOSTS = 512  # bounds what a malformed resource config can make ProfStack create


def _host(index: int, instance_type: str) -> HostSpec:
    spec = gpu_spec(instance_type)
    if spec is not None:
        return HostSpec(
            index=index,
            instance_type=instance_type,
            gpus=spec.gpus,
            vcpus=spec.vcpus,
            verified=spec.verified,
            note="" if spec.verified else f"GPU count of {instance_type} from an unverified table row",
        )
    if looks_like_gpu_type(instance_type):
        note = f"{instance_type} is not in ProfStack's GPU table (profstack/jobs/instances.py): GPU count unknown"
    else:
        note = f"{instance_type} has no NVIDIA GPU"
    gpus = None if looks_like_gpu_type(instance_type) else 0
    return HostSpec(index=index, instance_type=instance_type, gpus=gpus, vcpus=None, verified=False, note=note)


def hosts_of(resource_config: Mapping[str, Any] | None) -> list[HostSpec]:
    """Hosts algo-1..N from a ResourceConfig (InstanceType + InstanceCount, or InstanceGroups).

    SageMaker names the hosts of a heterogeneous cluster algo-1..N across all groups, but neither the
    event nor DescribeTrainingJob says which host belongs to which group. When every group has the same
    GPU and vCPU counts that does not matter; otherwise the counts are left unknown (None) rather than
    guessed, and `note` says why.
    """
    if not isinstance(resource_config, Mapping):
        return []
    groups = resource_config.get("InstanceGroups")
    if isinstance(groups, list) and groups:
        pairs = [
            (str(g.get("InstanceType", "")), _count(g.get("InstanceCount"))) for g in groups if isinstance(g, Mapping)
        ]
        total = min(sum(n for _, n in pairs), MAX_HOSTS)
        kinds = {_host(1, t) for t, n in pairs if n > 0}
        shapes = {(h.gpus, h.vcpus) for h in kinds}
        if len(shapes) == 1:
            (one,) = list(kinds)[:1]
            types = sorted({t for t, n in pairs if n > 0})
            return [
                HostSpec(
                    index=i,
                    instance_type=types[0] if len(types) == 1 else None,
                    gpus=one.gpus,
                    vcpus=one.vcpus,
                    verified=all(k.verified for k in kinds),
                    note=one.note if len(types) == 1 else f"instance groups {', '.join(types)} share GPU/vCPU counts",
                )
                for i in range(1, total + 1)
            ]
        listed = ", ".join(sorted({t for t, n in pairs if n > 0}))
        return [
            HostSpec(
                index=i,
                instance_type=None,
                gpus=None,
                vcpus=None,
                verified=False,
                note=f"heterogeneous cluster ({listed}): SageMaker does not say which host runs which type",
            )
            for i in range(1, total + 1)
        ]
    instance_type = str(resource_config.get("InstanceType") or "")
    count = min(_count(resource_config.get("InstanceCount")), MAX_HOSTS)
    if not instance_type:
        return []
    return [_host(i, instance_type) for i in range(1, count + 1)]


def _count(value: Any) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        return 0
    return max(n, 0)


def accelerator_count(resource_config: Mapping[str, Any] | None) -> int | None:
    """The job's GPUs in all (InstanceType x InstanceCount, or summed over InstanceGroups), when every type is in
    the table and has GPUs; None when unknown (a type the table lacks, or a CPU-only job, whose ranks are processes
    the table cannot count). The ranks of a job's traces are below it (profstack/actions.py: a finding about a rank
    beyond it is not this job's evidence)."""
    if not isinstance(resource_config, Mapping):
        return None
    groups = resource_config.get("InstanceGroups")
    if isinstance(groups, list) and groups:
        pairs = [
            (str(g.get("InstanceType", "")), _count(g.get("InstanceCount"))) for g in groups if isinstance(g, Mapping)
        ]
    else:
        pairs = [(str(resource_config.get("InstanceType") or ""), _count(resource_config.get("InstanceCount")))]
    total = 0
    for instance_type, count in pairs:
        if count == 0:
            continue
        spec = gpu_spec(instance_type)
        if spec is None or spec.gpus <= 0:
            return None
        total += spec.gpus * min(count, MAX_HOSTS)
    return total or None
