"""Where model calls go: the bundled scripted model (default), a real OpenAI-compatible provider, or a
local model server on this host.

A real provider is used only when both SABOT_MODEL_BASE_URL and SABOT_MODEL_API_KEY are set. The
key is held here and handed only to the run's model gateway (adapters/gateway/), which sends it
upstream; the pipelines' clients talk to the gateway with a local placeholder. The key is never
recorded in a trace, the store or a log.

SABOT_MODEL_LOCAL beside SABOT_MODEL_BASE_URL says that endpoint is a local model server (llama.cpp,
Ollama, vLLM) on a loopback address: no key is needed, the call policy's `local_model` profile
applies (its timeouts, completion limit and concurrency cap), its spend is $0 "local" unless priced,
and its waves are labelled "local model <id>". The id is the flag's value when it is one (what
scripts/local_model.sh sets: the id its server reported), else what the server reports at GET
/models, asked once per process: a label is part of a run's identity, and a busy local server
can take long to answer even that.
"""

import ipaddress
import os
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from sabot.provenance import LOCAL_MODEL_PREFIX

BASE_URL_ENV, API_KEY_ENV, LOCAL_MODEL_ENV = "SABOT_MODEL_BASE_URL", "SABOT_MODEL_API_KEY", "SABOT_MODEL_LOCAL"
SCRIPTED_KEY = "sk-scripted-local"
LOCAL_MODEL_KEY = "sk-local-model"  # what a local server gets when no key is set (most ignore it)


@dataclass(frozen=True)
class Endpoint:
    base_url: str
    api_key: str = field(repr=False)
    pipeline_model: str
    downgrade_model: str
    scripted: bool
    timeout: float = 30.0
    local_model: bool = False  # a local model server on a loopback address (SABOT_MODEL_LOCAL)

    @property
    def label(self) -> str:
        if self.scripted:
            return "simulation (scripted model on 127.0.0.1)"
        if self.local_model:
            return f"{LOCAL_MODEL_PREFIX}{served_model_id(self.base_url)} at {self.base_url}"  # sabot.provenance's kind
        return f"provider {self.base_url}"


def is_loopback(base_url: str) -> bool:
    host = urlsplit(base_url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def provider_from_env(pipeline_model: str, downgrade_model: str) -> Endpoint | None:
    base_url, key = os.environ.get(BASE_URL_ENV), os.environ.get(API_KEY_ENV)
    flag = (os.environ.get(LOCAL_MODEL_ENV) or "").strip()
    local = flag.lower() not in ("", "0", "false", "no")
    if local:
        if not base_url:
            raise ValueError(
                f"{LOCAL_MODEL_ENV} is set but {BASE_URL_ENV} is not: set it to the local server's URL, e.g. http://127.0.0.1:8088/v1"
            )
        if not is_loopback(base_url):
            raise ValueError(
                f"{LOCAL_MODEL_ENV} is set but {BASE_URL_ENV}={base_url} is not a loopback address (127.0.0.0/8, localhost, ::1)"
            )
        if flag.lower() not in ("1", "true", "yes"):
            _SERVED_IDS.setdefault(base_url, flag)  # the id the server reported when it was started
        return Endpoint(
            base_url,
            key or LOCAL_MODEL_KEY,
            pipeline_model,
            downgrade_model,
            scripted=False,
            timeout=120.0,
            local_model=True,
        )
    if not (base_url and key):
        return None
    return Endpoint(base_url, key, pipeline_model, downgrade_model, scripted=False, timeout=120.0)


_SERVED_IDS: dict[str, str] = {}  # base URL -> the id its server reported (an unreachable server is asked again)


def served_model_id(base_url: str) -> str:
    """The model id a local server reports first at GET /models (llama-cpp-python: its --model_alias,
    else the GGUF's path); "(no id reported)" when it answers none. A server that cannot be reached
    is named so; the wave's first call then fails with the connection error."""
    import httpx

    if base_url in _SERVED_IDS:
        return _SERVED_IDS[base_url]
    try:
        answer = httpx.get(base_url.rstrip("/") + "/models", timeout=30.0, trust_env=False).json()
        ids = [m.get("id") for m in answer.get("data") or () if isinstance(m, dict) and m.get("id")]
    except (httpx.HTTPError, ValueError, AttributeError):
        return "(not reachable for its id)"
    _SERVED_IDS[base_url] = str(ids[0]) if ids else "(no id reported)"
    return _SERVED_IDS[base_url]


def scripted(base_url: str, pipeline_model: str, downgrade_model: str) -> Endpoint:
    return Endpoint(base_url, SCRIPTED_KEY, pipeline_model, downgrade_model, scripted=True)
