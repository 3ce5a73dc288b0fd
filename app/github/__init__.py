"""The PR bot: webhook verification and commands, and reports through the GitHub REST API."""
