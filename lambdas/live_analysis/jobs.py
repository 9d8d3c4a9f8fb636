"""Which training jobs run now, as SageMaker says at this moment (never an event), and in what order the live
analysis serves them: the dispatcher's whole view (#42 item 10: fair by construction).

One run of the dispatcher (`run`):

1. **pages** ListTrainingJobs (StatusEquals=InProgress, sorted by name, 100 a page, NextToken) within a share of its
   time budget;
2. **judges** the jobs (DescribeTrainingJob + ListTags: running, a TensorBoard output, live not off, the tag filter,
   and whose it is, confirmed as the analyser confirms it) on a few threads, in this order: first the one job each
   owner was due to be served next (carried from the last run), then every other job starting after the cursor the
   last run left; it stops judging when the budget's judging share is spent, and the cursor says where;
3. **invokes** the analyser for the due jobs **round-robin by owner**: one job of every owner, then a second of every
   owner that has one, and so on, while the budget lasts;
4. returns the state for the next run: the cursor, and per owner the job to serve first next time (so an owner's
   jobs take turns across runs too).

So 1,200 running jobs of alice's cannot delay bob's one: his job is judged in the first run the budget covers it
(all 1,201 fit easily: docs/security.md has the numbers), is invoked in the first round, and from then on is judged
and invoked first in every run, whatever alice runs. The owner is the one the analyser would file the report under
(a ProfStack execution role's path, else the owner tag where the tag is trusted): a job nothing confirms is not
dispatched at all (the analyser would refuse it), and a job tagged bob but running as alice's role counts as no
one's, so it cannot take bob's turns.

Kept apart from the analyser's code so that the dispatcher's bundle carries no trace-processor code.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from botocore.exceptions import ClientError

from lambdas.common.owner import created_by_service, role_user
from profstack.actions import live_enabled

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

RUNNING = "InProgress"
#: ListTrainingJobs' largest page
LIST_PAGE = 100
#: DescribeTrainingJob + ListTags calls in flight (SageMaker's control plane throttles beyond a few per second per
#: API; botocore's standard retries back off on it)
JUDGE_WORKERS = 8
INVOKE_WORKERS = 8
#: shares of the time budget: listing stops after LIST_SHARE of it, judging after JUDGE_SHARE; the rest invokes
LIST_SHARE = 0.3
JUDGE_SHARE = 0.75


class JobSource(Protocol):
    def running_page(self, token: str | None) -> tuple[list[str], str | None]: ...
    def describe(self, job: str) -> Mapping[str, Any] | None: ...
    def tags(self, arn: str) -> dict[str, str]: ...


class TrainingJobs:
    """ListTrainingJobs / DescribeTrainingJob / ListTags."""

    def __init__(self, client: SageMakerClient) -> None:
        self._sm = client

    def running_page(self, token: str | None) -> tuple[list[str], str | None]:
        kwargs: dict[str, Any] = {
            "StatusEquals": RUNNING,
            "SortBy": "Name",
            "SortOrder": "Ascending",
            "MaxResults": LIST_PAGE,
        }
        if token:
            kwargs["NextToken"] = token
        page = self._sm.list_training_jobs(**kwargs)
        names = [str(s["TrainingJobName"]) for s in page.get("TrainingJobSummaries", [])]
        return names, page.get("NextToken") or None

    def describe(self, job: str) -> dict[str, Any] | None:
        try:
            return dict(self._sm.describe_training_job(TrainingJobName=job))
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code")) in {"ValidationException", "ResourceNotFound"}:
                return None
            raise

    def tags(self, arn: str) -> dict[str, str]:
        tags: dict[str, str] = {}
        for page in self._sm.get_paginator("list_tags").paginate(ResourceArn=arn):
            tags.update({str(t["Key"]): str(t["Value"]) for t in page.get("Tags", [])})
        return tags


def has_tensorboard_output(describe: Mapping[str, Any]) -> bool:
    config = describe.get("TensorBoardOutputConfig")
    path = config.get("S3OutputPath") if isinstance(config, Mapping) else None
    return isinstance(path, str) and path.startswith("s3://") and len(path) > len("s3://")


def eligible(describe: Mapping[str, Any] | None, tags: Mapping[str, str], tag_filter: tuple[str, str] | None) -> bool:
    """Worth an analyser invocation: running now, a TensorBoard output, live not turned off, the deployment's tag
    filter passed. Whose it is: OwnerRules."""
    if describe is None or describe.get("TrainingJobStatus") != RUNNING:
        return False
    if not has_tensorboard_output(describe):
        return False
    if not live_enabled(tags):
        return False
    return tag_filter is None or tags.get(tag_filter[0]) == tag_filter[1]


@dataclass(frozen=True)
class OwnerRules:
    """Whose a running job is, exactly as the analyser files it (lambdas/trace_processor/job.owner_of; a test holds
    the two together): the user whose ProfStack execution role it runs as; else, where the tag is trusted
    (ownership "tag", or the owner-tag guard on a directly created job), the configured user its tag names. None: the
    analyser would refuse the job (no confirmed owner, or a role and a tag that disagree)."""

    users: frozenset[str] = frozenset()
    user_tag_key: str = "profstack:user"
    ownership: str = "verified"
    owner_tag_guard: bool = False
    name_prefix: str = "profstack"

    def owner(self, describe: Mapping[str, Any], tags: Mapping[str, str]) -> str | None:
        claimed = tags.get(self.user_tag_key) or ""
        if claimed and claimed not in self.users:
            return None
        if self.ownership == "tag":
            return claimed or None
        by_role = role_user(describe.get("RoleArn"), self.name_prefix)
        if by_role is not None:
            return by_role if by_role in self.users and claimed in ("", by_role) else None
        if claimed and self.owner_tag_guard and created_by_service(describe, tags) is None:
            return claimed
        return None


@dataclass(frozen=True)
class Verdict:
    job: str
    owner: str | None = None
    due: bool = False
    failure: str | None = None  # the job could not be judged (denied, throttled past the retries)


def judge(jobs: JobSource, job: str, rules: OwnerRules, tag_filter: tuple[str, str] | None) -> Verdict:
    try:
        describe = jobs.describe(job)
        if describe is None or describe.get("TrainingJobStatus") != RUNNING:
            return Verdict(job)
        arn = str(describe.get("TrainingJobArn") or "")
        if not arn:
            return Verdict(job)
        tags = jobs.tags(arn)
    except ClientError as exc:
        return Verdict(job, failure=f"{job}: {exc.response.get('Error', {}).get('Code')!s}")
    owner = rules.owner(describe, tags)
    return Verdict(job, owner, owner is not None and eligible(describe, tags, tag_filter))


class DispatchError(RuntimeError):
    """Some jobs could not be judged (their DescribeTrainingJob or ListTags failed); every other job was."""


@dataclass
class DispatchState:
    """What one run leaves the next: where judging resumes, and per owner the job to serve first."""

    cursor: str = ""
    next_by_owner: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({"cursor": self.cursor, "next_by_owner": dict(sorted(self.next_by_owner.items()))})

    @classmethod
    def from_json(cls, text: str | None) -> DispatchState:
        """Untrusted: a state that does not read is a fresh start (a run is never lost for it)."""
        try:
            data = json.loads(text or "{}")
        except ValueError:
            return cls()
        if not isinstance(data, Mapping):
            return cls()
        cursor = data.get("cursor")
        owners = data.get("next_by_owner")
        return cls(
            cursor if isinstance(cursor, str) else "",
            {str(k): str(v) for k, v in owners.items() if isinstance(v, str)} if isinstance(owners, Mapping) else {},
        )


@dataclass
class Budget:
    """The run's time: `seconds` from `start` on `clock` (the Lambda's remaining time, less a margin)."""

    seconds: float
    clock: Callable[[], float]
    start: float = 0.0

    def __post_init__(self) -> None:
        self.start = self.clock()

    def used(self) -> float:
        return (self.clock() - self.start) / self.seconds if self.seconds > 0 else 1.0

    def left(self) -> float:
        return self.seconds - (self.clock() - self.start)


@dataclass
class RunResult:
    invoked: list[str]
    listed: int
    judged: int
    due: int
    listing_cut: bool
    failures: list[str]
    state: DispatchState
    #: the owners of the invoked jobs, in invocation order (round-robin: every owner once before anyone twice)
    owners: list[str] = field(default_factory=list)

    @property
    def deferred(self) -> int:
        """Running jobs this run did not serve (not judged, or due but not invoked in time): the next run's."""
        return self.listed - self.judged + self.due - len(self.invoked)


def list_running(jobs: JobSource, budget: Budget) -> tuple[list[str], bool]:
    """Every running job's name (ListTrainingJobs, paged), unless the listing share of the budget runs out first
    (second value: cut short)."""
    names: list[str] = []
    token: str | None = None
    while True:
        page, token = jobs.running_page(token)
        names.extend(page)
        if not token:
            return sorted(set(names)), False
        if budget.used() >= LIST_SHARE:
            return sorted(set(names)), True


def judging_order(names: Sequence[str], state: DispatchState) -> tuple[list[str], list[str]]:
    """(each owner's next job, still running; every other job starting after the cursor, wrapping around)."""
    running = set(names)
    first = [job for _, job in sorted(state.next_by_owner.items()) if job in running]
    chosen = set(first)
    rest = [n for n in names if n not in chosen]
    after = [n for n in rest if n > state.cursor]
    return first, after + [n for n in rest if n <= state.cursor]


T = TypeVar("T")
R = TypeVar("R")


def ordered_while(
    fn: Callable[[T], R], items: Iterable[T], *, workers: int, more: Callable[[], bool]
) -> Iterator[tuple[T, R]]:
    """(item, fn(item)) in the items' order, `workers` at a time; no new item is started once `more()` is False."""
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dispatch") as pool:
        pending: deque[tuple[T, Future[R]]] = deque()
        for item in items:
            if not more():
                break
            pending.append((item, pool.submit(fn, item)))
            if len(pending) >= 2 * workers:
                head, future = pending.popleft()
                yield head, future.result()
        while pending:
            head, future = pending.popleft()
            yield head, future.result()


def turn(jobs: Sequence[str], first: str) -> list[str]:
    """`jobs` in name order, cyclically from `first` (or the next name after it, when it is gone)."""
    ordered = sorted(jobs)
    return [j for j in ordered if j >= first] + [j for j in ordered if j < first]


def round_robin(queues: Mapping[str, Sequence[str]]) -> list[tuple[str, str]]:
    """(owner, job): one job of each owner (owners in name order), then the second of each, and so on."""
    out: list[tuple[str, str]] = []
    depth = max((len(q) for q in queues.values()), default=0)
    for i in range(depth):
        out.extend((owner, queue[i]) for owner, queue in sorted(queues.items()) if i < len(queue))
    return out


def run(
    jobs: JobSource,
    invoke: Callable[[str], None],
    *,
    rules: OwnerRules,
    tag_filter: tuple[str, str] | None,
    state: DispatchState,
    budget: Budget,
) -> RunResult:
    """One dispatcher run (module docstring). Never raises for a job that cannot be judged: it is named in
    `failures`, skipped, and judged again next run."""
    names, cut = list_running(jobs, budget)
    first, rest = judging_order(names, state)
    lock = threading.Lock()
    judged: list[Verdict] = []

    def judging() -> bool:
        return budget.used() < JUDGE_SHARE

    cursor = state.cursor
    in_rest = set(rest)
    for name, verdict in ordered_while(
        lambda n: judge(jobs, n, rules, tag_filter), [*first, *rest], workers=JUDGE_WORKERS, more=judging
    ):
        judged.append(verdict)
        if name in in_rest:
            cursor = name
    queues: dict[str, list[str]] = {}
    for verdict in judged:
        if verdict.due and verdict.owner is not None:
            queues.setdefault(verdict.owner, []).append(verdict.job)
    # each owner's jobs in name order, starting at the one this owner was due to be served first (take turns)
    queues = {owner: turn(jobs_, state.next_by_owner.get(owner, "")) for owner, jobs_ in queues.items()}
    order = round_robin(queues)
    invoked: list[tuple[str, str]] = []

    def call(pair: tuple[str, str]) -> None:
        invoke(pair[1])
        with lock:
            invoked.append(pair)

    for _ in ordered_while(call, order, workers=INVOKE_WORKERS, more=lambda: budget.left() > 0):
        pass
    sent = {job for _, job in invoked}
    in_order = [pair for pair in order if pair[1] in sent]
    next_by_owner = {owner: queue[1] if len(queue) > 1 else queue[0] for owner, queue in queues.items()}
    return RunResult(
        invoked=[job for _, job in in_order],
        listed=len(names),
        judged=len(judged),
        due=sum(len(q) for q in queues.values()),
        listing_cut=cut,
        failures=[v.failure for v in judged if v.failure],
        state=DispatchState(cursor, next_by_owner),
        owners=[owner for owner, _ in in_order],
    )
