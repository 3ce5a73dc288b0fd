"""Reading one model from a JSON file, with an error that says where and why."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


class ModelFileError(ValueError):
    """A file that cannot be read, or does not hold the model; the message names it."""


def read_model(path: Path, model: type[M]) -> M:
    try:
        return model.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelFileError(f"{path}: cannot be read: {exc}") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the file"
        raise ModelFileError(
            f"{path}: not a valid {model.__name__} ({exc.error_count()} error(s); "
            f"first, at {where}: {first['msg']})"
        ) from exc
