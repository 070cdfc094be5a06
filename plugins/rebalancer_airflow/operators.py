"""The approval gate: Airflow's human-in-the-loop ``ApprovalOperator`` that also records the decision.

The task parks in ``awaiting_input`` (Airflow 3.3) until an approver answers in the UI (Required Actions) or
through the REST API (``PATCH /api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/approve/-1/hitlDetails``
with ``{"chosen_options": ["Approve"]}``). When the answer arrives, before anything else happens, the decision is
written to ``RUN_DIR/approval.json`` with the plan's content hash (``rebalancer.runbook.record_decision``): the
execute task refuses to touch the cluster without that record for exactly this plan. Reject, or no answer within
the response timeout (the default option is Reject), records ``decision: rejected`` and skips everything
downstream except the throttle-cleanup teardown.

Approvers and the timeout come from the run's params at run time (``approvers``: user names, empty = anyone
allowed to answer; ``approval_timeout_hours``: 0 = wait forever), so a trigger can name them.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.providers.standard.operators.hitl import ApprovalOperator

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = ["PlanApprovalOperator"]


class PlanApprovalOperator(ApprovalOperator):
    """ApprovalOperator whose answer becomes the run directory's approval record (who, when, plan hash).

    :param required_param: name of a boolean DAG param that, when false, approves automatically (recorded as
        such) without asking anyone; ``None`` (default): approval is always required.
    """

    def __init__(self, *, required_param: str | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("defaults", self.REJECT)
        super().__init__(**kwargs)
        self.required_param = required_param

    # -- helpers --------------------------------------------------------------------------------------------
    @staticmethod
    def _run_dir(context: Context) -> str:
        from rebalancer.runbook import run_dir_for

        return str(run_dir_for(context["dag"].dag_id, context["dag_run"].run_id))

    def _configure_from_params(self, context: Context) -> None:
        params = context["params"]
        names = [str(n).strip() for n in (params.get("approvers") or []) if str(n).strip()]
        self.assigned_users = [{"id": n, "name": n} for n in names] or None
        hours = float(params.get("approval_timeout_hours") or 0)
        self.response_timeout = timedelta(hours=hours) if hours > 0 else None

    # -- the operator -----------------------------------------------------------------------------------------
    def execute(self, context: Context) -> Any:
        from rebalancer.runbook import record_decision

        if self.required_param and not context["params"].get(self.required_param, True):
            record = record_decision(self._run_dir(context), decision="approved", by="(automatic)",
                                     comment=f"approval not required: {self.required_param}=false")
            self.log.info("Approval not required (%s=false): recorded plan %s as approved", self.required_param,
                          record["plan_hash"][:12])
            return {"chosen_options": [self.APPROVE], "params_input": {}, "responded_by_user": None,
                    "responded_at": record["at"], "automatic": True}
        self._configure_from_params(context)
        if self.assigned_users:
            self.log.info("Waiting for one of: %s", ", ".join(u["name"] for u in self.assigned_users))
        return super().execute(context)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        from rebalancer.runbook import record_decision

        if "error" not in event:
            chosen = list(event.get("chosen_options") or [])
            self.validate_chosen_options(chosen)
            user = event.get("responded_by_user") or None
            approved = chosen == [self.APPROVE]
            if user:
                by = str(user.get("name") or user.get("id"))
                comment = ""
            else:  # the scheduler applied the default (Reject) when the response timeout passed
                by = "(timeout)"
                comment = "no answer within the response timeout: rejected by default"
            record = record_decision(self._run_dir(context), decision="approved" if approved else "rejected",
                                     by=by, comment=comment)
            self.log.info("Plan %s %s by %s at %s", record["plan_hash"][:12], record["decision"], by, record["at"])
        return super().execute_complete(context, event)
