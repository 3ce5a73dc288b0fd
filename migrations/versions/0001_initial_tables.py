"""Initial tables: conversions (also the job queue), stage executions, artifacts,
IR dumps, CUPTI and correctness results, LLM usage, webhook deliveries, events.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "conversions",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("operator", sa.String(length=200), nullable=False),
        sa.Column("kernel", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=True),
        sa.Column("gate_verdict", sa.String(length=32), nullable=True),
        sa.Column("source_name", sa.String(length=255), nullable=False),
        sa.Column("spec_name", sa.String(length=255), nullable=False),
        sa.Column("source_sha256", sa.String(length=64), nullable=False),
        sa.Column("spec_sha256", sa.String(length=64), nullable=False),
        sa.Column("options", sa.JSON(), nullable=False),
        sa.Column("origin", sa.JSON(), nullable=False),
        sa.Column("submitted_by", sa.String(length=100), nullable=False),
        sa.Column("idempotency_key", sa.String(length=200), nullable=True),
        sa.Column("request_fingerprint", sa.String(length=64), nullable=False),
        sa.Column("headline", sa.JSON(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("llm_tokens", sa.Integer(), nullable=False),
        sa.Column("llm_cost_usd", sa.Float(), nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("lease_owner", sa.String(length=200), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("queued_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_conversions")),
        sa.UniqueConstraint("idempotency_key", name=op.f("uq_conversions_idempotency_key")),
    )
    with op.batch_alter_table("conversions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_conversions_operator"), ["operator"], unique=False)
        batch_op.create_index(
            "ix_conversions_status_queued_at", ["status", "queued_at"], unique=False
        )

    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("delivery_id", sa.String(length=100), nullable=True),
        sa.Column("claimed_delivery_id", sa.String(length=100), nullable=False),
        sa.Column("event", sa.String(length=64), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("signature_ok", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("payload_sha256", sa.String(length=64), nullable=False),
        sa.Column("conversion_ids", sa.JSON(), nullable=False),
        sa.Column("remote_addr", sa.String(length=100), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_deliveries")),
        sa.UniqueConstraint("delivery_id", name=op.f("uq_webhook_deliveries_delivery_id")),
    )
    op.create_table(
        "artifacts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("conversion_id", sa.String(length=32), nullable=False),
        sa.Column("path", sa.String(length=500), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["conversion_id"],
            ["conversions.id"],
            name=op.f("fk_artifacts_conversion_id_conversions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_artifacts")),
        sa.UniqueConstraint("conversion_id", "path", name=op.f("uq_artifacts_conversion_id_path")),
    )
    with op.batch_alter_table("artifacts", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_artifacts_conversion_id"), ["conversion_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_artifacts_sha256"), ["sha256"], unique=False)

    op.create_table(
        "correctness_results",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("conversion_id", sa.String(length=32), nullable=False),
        sa.Column("stage_attempt", sa.Integer(), nullable=False),
        sa.Column("config", sa.String(length=500), nullable=False),
        sa.Column("dtype", sa.String(length=32), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=True),
        sa.Column("passed", sa.Boolean(), nullable=False),
        sa.Column("max_abs_err", sa.Float(), nullable=True),
        sa.Column("max_rel_err", sa.Float(), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["conversion_id"],
            ["conversions.id"],
            name=op.f("fk_correctness_results_conversion_id_conversions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_correctness_results")),
    )
    with op.batch_alter_table("correctness_results", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_correctness_results_conversion_id"), ["conversion_id"], unique=False
        )

    op.create_table(
        "cupti_results",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("conversion_id", sa.String(length=32), nullable=False),
        sa.Column("stage_attempt", sa.Integer(), nullable=False),
        sa.Column("config", sa.String(length=500), nullable=False),
        sa.Column("variant", sa.String(length=200), nullable=True),
        sa.Column("baseline_us", sa.Float(), nullable=True),
        sa.Column("port_us", sa.Float(), nullable=True),
        sa.Column("ratio", sa.Float(), nullable=True),
        sa.Column("gpu", sa.String(length=200), nullable=False),
        sa.Column("driver", sa.String(length=100), nullable=False),
        sa.Column("clocks", sa.JSON(), nullable=False),
        sa.Column("toolchain", sa.JSON(), nullable=False),
        sa.Column("crate_versions", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["conversion_id"],
            ["conversions.id"],
            name=op.f("fk_cupti_results_conversion_id_conversions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cupti_results")),
    )
    with op.batch_alter_table("cupti_results", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_cupti_results_conversion_id"), ["conversion_id"], unique=False
        )

    op.create_table(
        "events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("conversion_id", sa.String(length=32), nullable=True),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["conversion_id"],
            ["conversions.id"],
            name=op.f("fk_events_conversion_id_conversions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
    )
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_events_conversion_id"), ["conversion_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_events_kind"), ["kind"], unique=False)

    op.create_table(
        "llm_usage",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("conversion_id", sa.String(length=32), nullable=False),
        sa.Column("stage", sa.String(length=32), nullable=True),
        sa.Column("model", sa.String(length=200), nullable=True),
        sa.Column("total_tokens", sa.Integer(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["conversion_id"],
            ["conversions.id"],
            name=op.f("fk_llm_usage_conversion_id_conversions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_llm_usage")),
    )
    with op.batch_alter_table("llm_usage", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_llm_usage_conversion_id"), ["conversion_id"], unique=False
        )

    op.create_table(
        "stage_executions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("conversion_id", sa.String(length=32), nullable=False),
        sa.Column("stage", sa.String(length=32), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("verdict", sa.String(length=32), nullable=False),
        sa.Column("verdict_class", sa.String(length=16), nullable=True),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("report_path", sa.String(length=500), nullable=True),
        sa.Column("validator_output", sa.JSON(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("worker_attempt", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["conversion_id"],
            ["conversions.id"],
            name=op.f("fk_stage_executions_conversion_id_conversions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_stage_executions")),
        sa.UniqueConstraint(
            "conversion_id",
            "stage",
            "attempt",
            name=op.f("uq_stage_executions_conversion_id_stage_attempt"),
        ),
    )
    op.create_table(
        "ir_dumps",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("conversion_id", sa.String(length=32), nullable=False),
        sa.Column("artifact_id", sa.Integer(), nullable=False),
        sa.Column("side", sa.String(length=16), nullable=False),
        sa.Column("variant", sa.String(length=200), nullable=False),
        sa.Column("format", sa.String(length=16), nullable=False),
        sa.ForeignKeyConstraint(
            ["artifact_id"],
            ["artifacts.id"],
            name=op.f("fk_ir_dumps_artifact_id_artifacts"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["conversion_id"],
            ["conversions.id"],
            name=op.f("fk_ir_dumps_conversion_id_conversions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ir_dumps")),
        sa.UniqueConstraint(
            "conversion_id",
            "side",
            "variant",
            "format",
            name=op.f("uq_ir_dumps_conversion_id_side_variant_format"),
        ),
    )


def downgrade() -> None:
    op.drop_table("ir_dumps")
    op.drop_table("stage_executions")
    with op.batch_alter_table("llm_usage", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_llm_usage_conversion_id"))

    op.drop_table("llm_usage")
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_events_kind"))
        batch_op.drop_index(batch_op.f("ix_events_conversion_id"))

    op.drop_table("events")
    with op.batch_alter_table("cupti_results", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_cupti_results_conversion_id"))

    op.drop_table("cupti_results")
    with op.batch_alter_table("correctness_results", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_correctness_results_conversion_id"))

    op.drop_table("correctness_results")
    with op.batch_alter_table("artifacts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_artifacts_sha256"))
        batch_op.drop_index(batch_op.f("ix_artifacts_conversion_id"))

    op.drop_table("artifacts")
    op.drop_table("webhook_deliveries")
    with op.batch_alter_table("conversions", schema=None) as batch_op:
        batch_op.drop_index("ix_conversions_status_queued_at")
        batch_op.drop_index(batch_op.f("ix_conversions_operator"))

    op.drop_table("conversions")
