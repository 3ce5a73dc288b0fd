"""`tileport gpu-run BUNDLE --upload URL`: send the result folder to the service that
holds the run, `POST /v1/conversions/{id}/gpu-results` as multipart form data with
one `files` part per file. Standard library only, so the GPU job bundle carries it.
The token is `--token` or the TILEPORT_API_TOKEN environment variable."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from schemas.gpu import RESULT_FILES

TOKEN_ENV = "TILEPORT_API_TOKEN"
TIMEOUT_S = 120


class UploadError(RuntimeError):
    pass


def multipart(files: dict[str, bytes], boundary: str) -> bytes:
    parts: list[bytes] = []
    for name, data in files.items():
        head = (
            f"--{boundary}\r\n"
            f'Content-Disposition: form-data; name="files"; filename="{name}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        )
        parts += [head.encode(), data, b"\r\n"]
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts)


def upload_results(folder: Path, url: str, token: str) -> dict[str, Any]:
    """Send the folder's result files; returns the service's answer."""
    present = [name for name in RESULT_FILES if (folder / name).is_file()]
    files = {name: (folder / name).read_bytes() for name in present}
    boundary = uuid.uuid4().hex
    request = urllib.request.Request(
        url,
        data=multipart(files, boundary),
        method="POST",
        headers={
            "Content-Type": f"multipart/form-data; boundary={boundary}",
            "Authorization": f"Bearer {token}",
            "Accept": "application/json",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            answer: dict[str, Any] = json.loads(response.read())
            return answer
    except urllib.error.HTTPError as error:
        body = error.read().decode("utf-8", errors="replace")
        raise UploadError(f"{url} answered {error.code}: {body[:2000]}") from None
    except (urllib.error.URLError, OSError) as error:
        raise UploadError(f"could not reach {url}: {error}") from None
