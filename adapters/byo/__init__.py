"""Bring your own pipeline: run a team's LangGraph graph, CrewAI crew or AutoGen team, unchanged, under one planted fault.

The platform owns the seams (the model endpoint, through the fault layer in `proxy` in front of the
run's model gateway; the framework's tool objects, wrapped by name in `tools`), runs the team's code
in a process of its own without the provider key (`confine`), observes only the own-check surfaces
the project's registered mapping names (`langgraph_run`, `crewai_run`, `autogen_run`), and judges
landing from what reached the pipeline (`seams`).
"""
