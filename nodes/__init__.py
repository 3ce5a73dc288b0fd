"""One module or package per pipeline stage."""
