"""The HTTP application: REST routes under /v1, the PR-bot webhook, web pages."""
