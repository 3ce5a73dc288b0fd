"""tileport's service side: HTTP API, storage, workers and the command line."""
