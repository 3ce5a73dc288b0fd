"""Durable state of the service: SQLAlchemy models, sessions, the artifact store."""
