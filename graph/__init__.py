"""The conversion pipeline as a LangGraph graph: wiring and routing only."""
