"""GitHub webhook deliveries: signature check, replay protection, and the two
commands: a `/tileport port <op>` comment on a pull request by someone with
write access, and a pull request labelled for porting (every kernel it
changes). The kernel files are fetched from the pull request's head commit."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from app import conversions
from app.context import ServiceContext
from app.errors import ApiError
from app.github.client import GitHubClient, GitHubError
from app.github.report import default_client
from app.github.status import status_context
from app.github.tilegym_pr import DeliveryError, comment_for, deliver_op, is_tilegym_layout
from app.intake import RawSubmission, build_submission, load_spec, reference_module_path
from app.storage.blobs import sha256_bytes
from app.storage.database import transaction
from app.storage.models import WebhookDelivery
from schemas.api import ErrorCode
from schemas.pipeline import RunOptions

log = logging.getLogger("tileport.webhook")

COMMAND = re.compile(r"^\s*/tileport\s+port\s+([A-Za-z_][A-Za-z0-9_]{0,99})\s*$", re.MULTILINE)
DELIVERY_ID = re.compile(r"^[A-Za-z0-9-]{1,100}$")
TRUSTED_ASSOCIATIONS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})
MAX_OPS_PER_DELIVERY = 10


@dataclass
class Delivery:
    event: str
    delivery_id: str
    signature: str
    body: bytes
    remote_addr: str


@dataclass
class PortRequest:
    """What a delivery asks for: ports of some operators at a PR's head commit."""

    repo: str
    number: int
    head_sha: str
    operators: list[str]
    trigger: str
    actor: str


@dataclass
class Decision:
    status: str
    reason: str = ""
    conversion_ids: list[str] = field(default_factory=list)
    # Work the answer does not wait for (a TileGym delivery), run after it is sent.
    deferred: Callable[[], None] | None = None


def signature_valid(secret: str, body: bytes, header: str) -> bool:
    """X-Hub-Signature-256: `sha256=` + hex HMAC-SHA256 of the raw body."""
    if not secret or not header.startswith("sha256="):
        return False
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), header.encode())


def record_rejection(
    sessions: sessionmaker[Session], delivery: Delivery, status: str, reason: str, signed: bool
) -> None:
    log.warning(
        "webhook delivery %r from %s rejected: %s",
        delivery.delivery_id[:100],
        delivery.remote_addr,
        reason,
    )
    with transaction(sessions) as session:
        session.add(
            WebhookDelivery(
                delivery_id=None,
                claimed_delivery_id=delivery.delivery_id[:100],
                event=delivery.event[:64],
                signature_ok=signed,
                status=status,
                reason=reason,
                payload_sha256=sha256_bytes(delivery.body),
                remote_addr=delivery.remote_addr[:100],
            )
        )


def claim_delivery(sessions: sessionmaker[Session], delivery: Delivery) -> int | None:
    """Record a verified delivery under its unique id; None if the id was seen before."""
    try:
        with transaction(sessions) as session:
            row = WebhookDelivery(
                delivery_id=delivery.delivery_id,
                claimed_delivery_id=delivery.delivery_id,
                event=delivery.event[:64],
                signature_ok=True,
                status="processing",
                payload_sha256=sha256_bytes(delivery.body),
                remote_addr=delivery.remote_addr[:100],
            )
            session.add(row)
            session.flush()
            return row.id
    except IntegrityError:
        return None


def settle_delivery(
    sessions: sessionmaker[Session], row_id: int, action: str, decision: Decision
) -> None:
    with transaction(sessions) as session:
        row = session.get_one(WebhookDelivery, row_id)
        row.action = action[:64]
        row.status = decision.status
        row.reason = decision.reason
        row.conversion_ids = decision.conversion_ids


def reject(status: int, code: ErrorCode, message: str) -> ApiError:
    return ApiError(status, code, message)


def verify(context: ServiceContext, delivery: Delivery) -> int:
    """Check signature, id and replay; returns the delivery's row id or raises."""
    secret = context.settings.github_webhook_secret
    sessions = context.sessions
    if not signature_valid(secret, delivery.body, delivery.signature):
        reason = "no webhook secret configured" if not secret else "bad signature"
        record_rejection(sessions, delivery, "rejected", reason, signed=False)
        raise reject(401, ErrorCode.BAD_SIGNATURE, f"delivery refused: {reason}")
    if not DELIVERY_ID.fullmatch(delivery.delivery_id) or not delivery.event:
        record_rejection(sessions, delivery, "rejected", "missing delivery id or event", True)
        raise reject(400, ErrorCode.MALFORMED_DELIVERY, "missing X-GitHub-Delivery or event")
    row_id = claim_delivery(sessions, delivery)
    if row_id is None:
        record_rejection(sessions, delivery, "replayed", "delivery id seen before", True)
        raise reject(409, ErrorCode.REPLAYED_DELIVERY, "this delivery was already received")
    return row_id


def parse_payload(body: bytes) -> dict[str, Any]:
    try:
        payload = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise reject(400, ErrorCode.MALFORMED_DELIVERY, "the payload is not JSON") from error
    if not isinstance(payload, dict):
        raise reject(400, ErrorCode.MALFORMED_DELIVERY, "the payload is not a JSON object")
    return payload


def field_of(payload: dict[str, Any], *path: str) -> Any:
    value: Any = payload
    for key in path:
        if not isinstance(value, dict) or key not in value:
            raise reject(400, ErrorCode.MALFORMED_DELIVERY, f"the payload lacks {'.'.join(path)}")
        value = value[key]
    return value


def comment_request(payload: dict[str, Any], client: GitHubClient) -> PortRequest | Decision:
    if payload.get("action") != "created":
        return Decision("ignored", "comment not newly created")
    issue = field_of(payload, "issue")
    if not isinstance(issue, dict) or "pull_request" not in issue:
        return Decision("ignored", "comment is not on a pull request")
    body = str(field_of(payload, "comment", "body"))
    operators = list(dict.fromkeys(COMMAND.findall(body)))
    if not operators:
        return Decision("ignored", "no /tileport command")
    association = str(field_of(payload, "comment", "author_association"))
    if association not in TRUSTED_ASSOCIATIONS:
        return Decision("ignored", f"commenter is {association}, not a collaborator")
    repo = str(field_of(payload, "repository", "full_name"))
    number = int(field_of(payload, "issue", "number"))
    head_sha = str(client.pull_request(repo, number)["head"]["sha"])
    return PortRequest(
        repo=repo,
        number=number,
        head_sha=head_sha,
        operators=operators[:MAX_OPS_PER_DELIVERY],
        trigger="comment",
        actor=str(field_of(payload, "comment", "user", "login")),
    )


def operators_changed(files: list[str], kernel_dir: str) -> list[str]:
    found: list[str] = []
    for name in files:
        path = PurePosixPath(name)
        if str(path.parent) != kernel_dir.strip("/"):
            continue
        stem = path.name.removesuffix(".port.yaml") if path.name.endswith(".port.yaml") else None
        if stem is None and path.suffix == ".py":
            stem = path.stem
        if stem and stem.isidentifier() and stem not in found:
            found.append(stem)
    return found


def label_request(
    payload: dict[str, Any], client: GitHubClient, label: str, kernel_dir: str
) -> PortRequest | Decision:
    if payload.get("action") != "labeled":
        return Decision("ignored", "pull request action is not 'labeled'")
    if str(field_of(payload, "label", "name")) != label:
        return Decision("ignored", f"label is not {label}")
    repo = str(field_of(payload, "repository", "full_name"))
    number = int(field_of(payload, "pull_request", "number"))
    head_sha = str(field_of(payload, "pull_request", "head", "sha"))
    operators = operators_changed(client.pull_request_files(repo, number), kernel_dir)
    if not operators:
        return Decision("ignored", f"the pull request changes no kernel in {kernel_dir}")
    return PortRequest(
        repo=repo,
        number=number,
        head_sha=head_sha,
        operators=operators[:MAX_OPS_PER_DELIVERY],
        trigger="label",
        actor=str(field_of(payload, "sender", "login")),
    )


def fetch_submission(
    client: GitHubClient, request: PortRequest, operator: str, kernel_dir: str
) -> RawSubmission:
    """The spec, source and reference module of `operator` at the PR's head commit."""
    folder = PurePosixPath(kernel_dir.strip("/"))
    spec = client.file_content(
        request.repo, str(folder / f"{operator}.port.yaml"), request.head_sha
    )
    parsed = load_spec(spec)
    source = client.file_content(request.repo, str(folder / parsed.source), request.head_sha)
    extra: dict[str, bytes] = {}
    reference = reference_module_path(parsed)
    if reference is not None and reference != parsed.source:
        extra[PurePosixPath(reference).name] = client.file_content(
            request.repo, str(folder / reference), request.head_sha
        )
    return RawSubmission(spec=spec, source=source, extra_files=extra)


def run_key(request: PortRequest, operator: str) -> str:
    """The Idempotency-Key of the bot's run of `operator` at the PR's head commit: a
    comment and a label on the same commit share one run (and one status context)."""
    repo = hashlib.sha256(request.repo.encode()).hexdigest()[:16]
    return f"github:{repo}:{request.head_sha}:{operator}"


def start_one(
    context: ServiceContext,
    client: GitHubClient,
    request: PortRequest,
    operator: str,
    delivery_id: str,
) -> tuple[str, bool]:
    """Start the port, or find the run that already ports `operator` at this commit;
    returns its id and whether it already existed."""
    settings = context.settings
    raw = fetch_submission(client, request, operator, settings.github_kernel_dir)
    origin = {
        "kind": "github",
        "repo": request.repo,
        "pull_request": request.number,
        "head_sha": request.head_sha,
        "trigger": request.trigger,
        "actor": request.actor,
        "delivery": delivery_id,
    }
    submission = build_submission(raw, RunOptions(), settings.max_upload_bytes, origin)
    try:
        conversion, duplicate = conversions.submit(
            context.sessions,
            settings,
            submission,
            f"github:{request.actor}"[:100],
            idempotency_key=run_key(request, operator),
        )
    except ApiError as error:
        if error.code is not ErrorCode.IDEMPOTENCY_CONFLICT:
            raise
        # Another trigger (its origin differs) already started this run.
        return str(error.detail["conversion_id"]), True
    if not duplicate:
        context.metrics.submitted.labels("github").inc()
        context.dispatcher.dispatch(conversion.id)
    return conversion.id, duplicate


def run_url(context: ServiceContext, conversion_id: str) -> str | None:
    base = context.settings.public_url.rstrip("/")
    return f"{base}/runs/{conversion_id}" if base else None


def announce_start(
    context: ServiceContext, client: GitHubClient, request: PortRequest, operator: str, cid: str
) -> None:
    client.commit_status(
        request.repo,
        request.head_sha,
        "pending",
        status_context(operator),
        f"porting {operator}: queued",
        run_url(context, cid),
    )


def failure_details(error: ApiError) -> list[str]:
    """The field-by-field problems an error carries (an invalid spec's), as list items."""
    problems = error.detail.get("problems", [])
    return [f"- `{item['field']}`: {item['message']}" for item in problems if "field" in item]


def announce_failure(
    client: GitHubClient, request: PortRequest, operator: str, message: str, details: list[str]
) -> None:
    text = f"tileport could not start the port of `{operator}`: {message}"
    client.comment(request.repo, request.number, "\n".join([text, *details]))
    client.commit_status(
        request.repo,
        request.head_sha,
        "error",
        status_context(operator),
        f"could not start: {message}",
    )


def deliver_tilegym_ops(
    context: ServiceContext, client: GitHubClient, request: PortRequest, row_id: int
) -> None:
    """Each requested op delivered as TileGym's cutile-rs backend on a branch; the pull
    request gets a status per op and a comment with the evidence or the reason."""
    settings = context.settings
    outcomes: list[str] = []
    delivered_all = True
    for op in request.operators:
        context_name = status_context(op)
        try:
            client.commit_status(
                request.repo, request.head_sha, "pending", context_name, f"porting {op}"
            )
            delivered = deliver_op(
                client, request.repo, request.head_sha, op, settings.github_tilegym_launches
            )
            client.comment(request.repo, request.number, comment_for(delivered, request.head_sha))
            state = "success" if delivered.branch else "failure"
            summary = f"on {delivered.branch}" if delivered.branch else "not delivered"
            client.commit_status(request.repo, request.head_sha, state, context_name, summary)
            outcomes.append(f"{op}: {summary}")
            delivered_all &= bool(delivered.branch)
        except (GitHubError, DeliveryError) as error:
            log.warning("TileGym delivery of %s failed: %s", op, error)
            outcomes.append(f"{op}: {error}")
            delivered_all = False
            try:
                client.comment(
                    request.repo, request.number, f"tileport could not deliver `{op}`: {error}"
                )
                client.commit_status(
                    request.repo, request.head_sha, "error", context_name, str(error)
                )
            except GitHubError:
                log.exception("could not report a failed delivery to GitHub")
    settle_delivery(
        context.sessions,
        row_id,
        "tilegym",
        Decision("delivered" if delivered_all else "failed", "; ".join(outcomes)),
    )


def start_ports(
    context: ServiceContext,
    client: GitHubClient,
    request: PortRequest,
    delivery_id: str,
    row_id: int,
) -> Decision:
    if is_tilegym_layout(client, request.repo, request.head_sha):

        def deliver() -> None:
            with default_client(context.settings) as own:
                deliver_tilegym_ops(context, own, request, row_id)

        return Decision(
            "accepted",
            "TileGym layout: delivering " + ", ".join(request.operators) + " as cutile-rs",
            deferred=deliver,
        )
    started: list[str] = []
    failures: list[str] = []
    for operator in request.operators:
        try:
            cid, duplicate = start_one(context, client, request, operator, delivery_id)
        except (ApiError, GitHubError) as error:
            message = error.message if isinstance(error, ApiError) else str(error)
            details = failure_details(error) if isinstance(error, ApiError) else []
            failures.append(f"{operator}: {message}")
            try:
                announce_failure(client, request, operator, message, details)
            except GitHubError:
                log.exception("could not report a failed start to GitHub")
            continue
        started.append(cid)
        if duplicate:
            continue  # its status context already tells how it goes
        try:
            announce_start(context, client, request, operator, cid)
        except GitHubError:
            log.exception("could not set the pending status on GitHub")
    status = "accepted" if started else "failed"
    return Decision(status, "; ".join(failures), started)


def handle(context: ServiceContext, delivery: Delivery, client: GitHubClient) -> Decision:
    """Verify and act on one delivery; raises ApiError for a rejected delivery."""
    row_id = verify(context, delivery)
    action = ""
    try:
        payload = parse_payload(delivery.body)
        action = str(payload.get("action", ""))
        decision = decide(context, delivery, payload, client, row_id)
    except ApiError as error:
        settle_delivery(context.sessions, row_id, action, Decision("rejected", error.message))
        log.warning("webhook delivery %s malformed: %s", delivery.delivery_id, error.message)
        raise
    except GitHubError as error:
        decision = Decision("failed", f"GitHub API: {error}")
    settle_delivery(context.sessions, row_id, action, decision)
    return decision


def decide(
    context: ServiceContext,
    delivery: Delivery,
    payload: dict[str, Any],
    client: GitHubClient,
    row_id: int,
) -> Decision:
    settings = context.settings
    if delivery.event == "ping":
        return Decision("accepted", "pong")
    request: PortRequest | Decision
    if delivery.event == "issue_comment":
        request = comment_request(payload, client)
    elif delivery.event == "pull_request":
        request = label_request(
            payload, client, settings.github_port_label, settings.github_kernel_dir
        )
    else:
        request = Decision("ignored", f"event {delivery.event} is not handled")
    if isinstance(request, Decision):
        return request
    return start_ports(context, client, request, delivery.delivery_id, row_id)
