"""POST /v1/webhooks/github: the PR bot's entry point."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, BackgroundTasks, Header, Request, Response
from starlette.concurrency import run_in_threadpool

from app.api.deps import ContextDep
from app.api.routes.conversions import ERRORS
from app.errors import ApiError
from app.github.report import default_client
from app.github.webhook import Delivery, handle
from schemas.api import WebhookAnswer

router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"])


@router.post("/github", response_model=WebhookAnswer, responses=ERRORS)
async def github_webhook(
    request: Request,
    response: Response,
    context: ContextDep,
    background: BackgroundTasks,
    x_github_event: Annotated[str, Header()] = "",
    x_github_delivery: Annotated[str, Header()] = "",
    x_hub_signature_256: Annotated[str, Header()] = "",
) -> WebhookAnswer:
    delivery = Delivery(
        event=x_github_event,
        delivery_id=x_github_delivery,
        signature=x_hub_signature_256,
        body=await request.body(),
        remote_addr=request.client.host if request.client else "",
    )

    def process() -> WebhookAnswer:
        with default_client(context.settings) as client:
            decision = handle(context, delivery, client)
        if decision.deferred is not None:
            background.add_task(decision.deferred)  # runs once the answer is sent
        return WebhookAnswer(
            delivery=delivery.delivery_id,
            status=decision.status,
            reason=decision.reason,
            conversions=decision.conversion_ids,
        )

    try:
        answer = await run_in_threadpool(process)
    except ApiError as error:
        context.metrics.webhooks.labels(error.code.value).inc()
        raise
    context.metrics.webhooks.labels(answer.status).inc()
    response.status_code = 202 if answer.conversions or answer.status == "accepted" else 200
    return answer
