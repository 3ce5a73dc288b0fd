"""/v1/docs: the API reference, rendered on the server from the OpenAPI document
(/v1/openapi.json). It needs nothing from outside, so it works offline and under
the pages' Content-Security-Policy."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from app.api.routes.web import render

router = APIRouter(include_in_schema=False)

METHODS = ("get", "post", "put", "patch", "delete")
REF_PREFIX = "#/components/schemas/"


@dataclass(frozen=True)
class FieldDoc:
    name: str
    type: str
    required: bool
    description: str


@dataclass
class Operation:
    method: str
    path: str
    summary: str
    description: str
    auth: bool
    parameters: list[FieldDoc] = field(default_factory=list)
    body: list[tuple[str, str]] = field(default_factory=list)  # content type, schema
    responses: list[tuple[str, str]] = field(default_factory=list)  # status, what

    @property
    def anchor(self) -> str:
        return f"{self.method}-{self.path}".replace("/", "-").replace("{", "").replace("}", "")


@dataclass
class SchemaDoc:
    name: str
    description: str
    fields: list[FieldDoc]
    values: list[str]


def type_text(schema: dict[str, Any]) -> str:
    """A schema as a short type: `ConversionStatus`, `list of string`, `integer | null`."""
    if "$ref" in schema:
        return str(schema["$ref"]).removeprefix(REF_PREFIX)
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return " | ".join(type_text(part) for part in schema[key])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {type_text(schema.get('items', {}))}"
    if kind == "object" and "additionalProperties" in schema:
        extra = schema["additionalProperties"]
        return f"map of {type_text(extra) if isinstance(extra, dict) else 'any'}"
    if "format" in schema:
        return f"{kind} ({schema['format']})"
    return str(kind)


def object_fields(schema: dict[str, Any]) -> list[FieldDoc]:
    required = set(schema.get("required", []))
    return [
        FieldDoc(name, type_text(prop), name in required, str(prop.get("description", "")))
        for name, prop in schema.get("properties", {}).items()
    ]


def body_text(schema: dict[str, Any]) -> str:
    if "$ref" in schema or "properties" not in schema:
        return type_text(schema)
    return ", ".join(f"{f.name}: {f.type}" for f in object_fields(schema))


def operation(path: str, method: str, spec: dict[str, Any]) -> Operation:
    parameters = [
        FieldDoc(
            f"{p['name']} ({p['in']})",
            type_text(p.get("schema", {})),
            bool(p.get("required")),
            str(p.get("description", "")),
        )
        for p in spec.get("parameters", [])
    ]
    content = spec.get("requestBody", {}).get("content", {})
    responses = []
    for status, answer in spec.get("responses", {}).items():
        schema = answer.get("content", {}).get("application/json", {}).get("schema")
        what = str(answer.get("description", ""))
        responses.append((status, f"{what}: {type_text(schema)}" if schema else what))
    return Operation(
        method=method.upper(),
        path=path,
        summary=str(spec.get("summary", "")),
        description=str(spec.get("description", "")),
        auth=bool(spec.get("security")),
        parameters=parameters,
        body=[(kind, body_text(part.get("schema", {}))) for kind, part in content.items()],
        responses=responses,
    )


def reference(document: dict[str, Any]) -> tuple[list[Operation], list[SchemaDoc]]:
    operations = [
        operation(path, method, item[method])
        for path, item in document.get("paths", {}).items()
        for method in METHODS
        if method in item
    ]
    schemas = [
        SchemaDoc(
            name,
            str(schema.get("description", "")),
            object_fields(schema),
            [str(value) for value in schema.get("enum", [])],
        )
        for name, schema in sorted(document.get("components", {}).get("schemas", {}).items())
    ]
    return operations, schemas


@router.get("/v1/docs", response_class=HTMLResponse)
def api_docs(request: Request) -> HTMLResponse:
    document = request.app.openapi()
    operations, schemas = reference(document)
    return render(
        request, "docs.html", info=document["info"], operations=operations, schemas=schemas
    )
