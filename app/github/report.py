"""When a conversion started by the PR bot settles (ends, or stops at the GPU
boundary to await its GPU run): a comment on the pull request with the outcome and
the figures, and the commit status."""

from __future__ import annotations

import logging
from collections.abc import Callable

from sqlalchemy.orm import Session, sessionmaker

from app import conversions
from app.github.client import GitHubClient, GitHubError
from app.github.status import commit_state, status_context
from app.settings import Settings
from app.storage.database import transaction
from app.storage.models import Conversion

log = logging.getLogger("tileport.github")

ClientFactory = Callable[[Settings], GitHubClient]


def default_client(settings: Settings) -> GitHubClient:
    return GitHubClient(settings.github_api_url, settings.github_token)


def comment_body(conversion: Conversion, run_url: str | None) -> str:
    description = commit_state(conversion)[1]
    lines = [
        f"**tileport** port of `{conversion.operator}`: **{conversion.status}** ({description})",
        "",
    ]
    if conversion.headline:
        lines += ["| figure | value |", "|---|---|"]
        lines += [f"| {name} | {value} |" for name, value in conversion.headline.items()]
        lines.append("")
    if conversion.stages:
        lines += ["| stage | attempt | verdict | seconds |", "|---|---|---|---|"]
        lines += [
            f"| {stage.stage} | {stage.attempt} | {stage.verdict} | {stage.duration_s:.1f} |"
            for stage in conversion.stages
        ]
        lines.append("")
    if run_url:
        lines.append(f"Details: {run_url}")
    return "\n".join(lines)


def report_conversion(
    settings: Settings,
    sessions: sessionmaker[Session],
    conversion_id: str,
    client_factory: ClientFactory = default_client,
) -> None:
    with sessions() as session:
        conversion = conversions.get(session, conversion_id)
        origin = dict(conversion.origin)
        if origin.get("kind") != "github":
            return
        base = settings.public_url.rstrip("/")
        run_url = f"{base}/runs/{conversion_id}" if base else None
        body = comment_body(conversion, run_url)
        state, description = commit_state(conversion)
        operator = conversion.operator
    repo, number, sha = str(origin["repo"]), int(origin["pull_request"]), str(origin["head_sha"])
    try:
        with client_factory(settings) as client:
            client.comment(repo, number, body)
            client.commit_status(repo, sha, state, status_context(operator), description, run_url)
    except GitHubError as error:
        log.warning("could not report %s to GitHub: %s", conversion_id, error)
        with transaction(sessions) as session:
            conversions.record_event(session, "github.report_failed", str(error), conversion_id)
        raise
    with transaction(sessions) as session:
        conversions.record_event(
            session, "github.reported", f"{state} on {repo}#{number}", conversion_id
        )


def notifier(settings: Settings, sessions: sessionmaker[Session]) -> Callable[[str], None]:
    """The executor's after-terminal hook."""

    def notify(conversion_id: str) -> None:
        report_conversion(settings, sessions, conversion_id)

    return notify
