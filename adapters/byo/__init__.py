"""Bring your own pipeline: run a team's LangGraph graph or AutoGen team, unchanged, under one planted fault.

The platform owns the seams (the model endpoint, through `proxy`; the framework's tool objects,
wrapped by name in `tools`), observes only the own-check surfaces the project's registered mapping
names (`langgraph_run`, `autogen_run`), and judges landing from what reached the pipeline (`seams`).
"""
