"""The execution state (``RUN_DIR/execution/state.json``, ``rollback_state.json``) as types: what execute and
rollback write after every step, what a restarted run resumes from, and what the runbook and the report read.

The file is JSON; these TypedDicts say which keys it has and what they hold. Keys a batch gains as it runs are
optional (``total=False``): a batch is ``pending`` with only its steps, and records when it was submitted, copied
and finished, what it throttled, what it skipped and why it failed as those happen.
"""

from __future__ import annotations

from typing import Any, TypedDict

__all__ = ["BatchState", "ExecutionState", "StepDoc"]

# A step as ``batches.Step.to_dict`` writes it: topic, partition, from, to, size_bytes, bytes, seq.
StepDoc = dict[str, Any]


class _Batch(TypedDict):
    index: int
    status: str                  # pending, submitting, submitted, done, failed
    steps: list[StepDoc]
    skipped: list[dict[str, Any]]  # steps whose partition drifted: the step, what was found, and why
    events: list[dict[str, Any]]


class BatchState(_Batch, total=False):
    todo: list[StepDoc]          # the steps this batch submits (its steps less those done or skipped)
    throttled: dict[str, list[Any]]  # brokers and topic replicas it throttled
    submitting_at: float         # time.time() stamps
    submitted_at: float
    copied_at: float
    finished_at: float
    error: str
    leaders_not_preferred: list[str]     # "topic-partition" whose preferred leader did not take over
    ingest_outpaces_throttle: list[str]  # "topic-partition" whose producers outpace the throttle
    settle_until: float          # rolling: throttled, submitted once the brokers have seen the throttles
    leaders_only: bool           # the rolling schedule's batches made up front: reorders, nothing to copy


class _Execution(TypedDict):
    kind: str                    # execute or rollback
    plan_hash: str
    throttle_bytes_per_s: int
    params: dict[str, Any]       # per_broker, total, max_batch_bytes, order: how the batches were made
    started_at: str
    finished: bool
    batches: list[BatchState]


class ExecutionState(_Execution, total=False):
    finished_at: str
    failed: str                  # the one-line reason a batch failed
    schedule: str                # "rolling" (absent: batches, all made when the execution started)
    steps: list[StepDoc]         # rolling: every step that copies; its batches are made as moves start
    verified: bool               # set by verify after the execution
    progress: dict[str, Any]     # moves and bytes done of the whole, elapsed and ETA seconds, at (epoch s), the
    #                              critical throttles (``progress.RunProgress.snapshot``), with each finished batch
    disk_peak: dict[str, dict[str, int]]  # rolling, disk capacities known: broker -> {"peak", "limit"} bytes
