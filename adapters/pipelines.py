"""The pipelines a run can drive, by framework: plug-ins registered by "module:Class".

Each is imported when a run executes: loading the asset definitions (and every scoring command)
never pays for importing an agent framework. This module imports nothing of the runner either, so a
command that only asks which frameworks can run (a wave whose runs are all reused) does not load the
model gateway and the fork server (about 0.35 s of CPU).
"""

from sabot import plugins

plugins.register("pipeline", "langgraph", "adapters.langgraph_pipeline:LangGraphPipeline")
plugins.register("pipeline", "crewai", "adapters.crewai_pipeline:CrewAIPipeline")
plugins.register("pipeline", "autogen", "adapters.autogen_pipeline:AutoGenPipeline")
plugins.register("pipeline", "agent_framework", "adapters.agent_framework_pipeline:AgentFrameworkPipeline")
PIPELINES = plugins.registered("pipeline")
