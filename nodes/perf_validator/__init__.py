"""Stage E, the perf validator: the measurement protocol (`measure`)."""
