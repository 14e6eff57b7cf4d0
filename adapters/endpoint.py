"""Where model calls go: the bundled scripted model (default) or a real OpenAI-compatible provider.

A real provider is used only when both SABOT_MODEL_BASE_URL and SABOT_MODEL_API_KEY are set. The
key is held here and handed only to the run's model gateway (adapters/gateway/), which sends it
upstream; the pipelines' clients talk to the gateway with a local placeholder. The key is never
recorded in a trace, the store or a log.
"""

import os
from dataclasses import dataclass, field

BASE_URL_ENV, API_KEY_ENV = "SABOT_MODEL_BASE_URL", "SABOT_MODEL_API_KEY"
SCRIPTED_KEY = "sk-scripted-local"


@dataclass(frozen=True)
class Endpoint:
    base_url: str
    api_key: str = field(repr=False)
    pipeline_model: str
    downgrade_model: str
    scripted: bool
    timeout: float = 30.0

    @property
    def label(self) -> str:
        return "simulation (scripted model on 127.0.0.1)" if self.scripted else f"provider {self.base_url}"


def provider_from_env(pipeline_model: str, downgrade_model: str) -> Endpoint | None:
    base_url, key = os.environ.get(BASE_URL_ENV), os.environ.get(API_KEY_ENV)
    if not (base_url and key):
        return None
    return Endpoint(base_url, key, pipeline_model, downgrade_model, scripted=False, timeout=120.0)


def scripted(base_url: str, pipeline_model: str, downgrade_model: str) -> Endpoint:
    return Endpoint(base_url, SCRIPTED_KEY, pipeline_model, downgrade_model, scripted=True)
