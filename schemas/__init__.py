"""Every model that crosses a boundary: specs, state, verdicts, reports, API bodies."""
