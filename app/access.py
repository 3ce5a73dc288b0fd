"""Who is calling and what they may do with a conversion.

A caller is the name of an API token (`API_TOKENS`), with the roles its name is
given: an admin (`API_ADMINS`) acts on every conversion, a GPU worker
(`API_GPU_WORKERS`) reads every conversion and sends GPU results that can make a
run pass; every other caller acts on and reads the conversions it submitted.
Anonymous reads exist only when `PUBLIC_READ` is set."""

from __future__ import annotations

import hashlib
import hmac
import time
from dataclasses import dataclass

from app.errors import ApiError
from app.settings import Settings
from app.storage.models import Conversion
from schemas.api import ErrorCode, ResultsTrust

# A page session lasts this long; rotating the token ends it sooner.
SESSION_S = 12 * 3600


@dataclass(frozen=True)
class Caller:
    name: str
    admin: bool = False
    gpu_worker: bool = False

    @classmethod
    def named(cls, settings: Settings, name: str) -> Caller:
        return cls(name, name in settings.api_admins, name in settings.api_gpu_workers)

    def may_act_on(self, conversion: Conversion) -> bool:
        return self.admin or conversion.submitted_by == self.name

    def may_read(self, conversion: Conversion) -> bool:
        return self.gpu_worker or self.may_act_on(conversion)

    @property
    def results_trust(self) -> ResultsTrust:
        return ResultsTrust.GPU_WORKER if self.gpu_worker else ResultsTrust.USER_REPORTED


Reader = Caller | None
"""Who reads: a caller, or None: no restriction (the service itself, or anyone
under PUBLIC_READ)."""


def check_owner(conversion: Conversion, caller: Caller, action: str) -> None:
    """403 unless `caller` submitted the conversion or is an admin (`API_ADMINS`)."""
    if not caller.may_act_on(conversion):
        raise ApiError(
            403,
            ErrorCode.FORBIDDEN,
            f"only the caller that submitted the conversion, or an admin, may {action}",
        )


def may_read(reader: Reader, conversion: Conversion) -> bool:
    return reader is None or reader.may_read(conversion)


def token_owner(tokens: dict[str, str], presented: str) -> str | None:
    """The name of the token equal to `presented`, compared in constant time; every
    configured token is compared so the time does not say which one was close."""
    owner = None
    for name, token in tokens.items():
        if hmac.compare_digest(token.encode(), presented.encode()):
            owner = name
    return owner


def _session_mac(token: str, name: str, expires: int) -> str:
    # Keyed by the token itself: rotating or removing a token ends its sessions.
    key = hashlib.sha256(b"tileport page session\0" + token.encode()).digest()
    return hmac.new(key, f"{name}\0{expires}".encode(), hashlib.sha256).hexdigest()


def session_cookie(settings: Settings, name: str, now: float | None = None) -> str:
    """The page-session cookie value for token `name`: name, expiry, MAC."""
    expires = int(now if now is not None else time.time()) + SESSION_S
    return f"{name}.{expires}.{_session_mac(settings.api_tokens[name], name, expires)}"


def session_owner(settings: Settings, cookie: str, now: float | None = None) -> str | None:
    """The token name a page-session cookie was made for, if it is valid and current."""
    parts = cookie.rsplit(".", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    name, expires_text, mac = parts
    expires = int(expires_text)
    token = settings.api_tokens.get(name)
    if token is None or expires < (now if now is not None else time.time()):
        return None
    if not hmac.compare_digest(mac, _session_mac(token, name, expires)):
        return None
    return name
