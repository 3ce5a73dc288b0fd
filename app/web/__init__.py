"""The server-rendered web pages: views, charts, templates, static files."""
