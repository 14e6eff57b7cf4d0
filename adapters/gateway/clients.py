"""HTTP clients for a pipeline's OpenAI clients, which only ever reach the gateway on 127.0.0.1.

Left to themselves, langchain-openai and autogen-ext build their httpx clients with a fresh TLS
context each, loading the CA bundle every time (~24 ms of CPU a client, measured; a LangGraph run
makes a sync and an async client per model, an AutoGen run one per agent). These share the
process's one context (`loopback_tls`, made in the fork server before it forks) and ignore proxy
variables, which must never route a call to 127.0.0.1.
"""

import openai

from adapters.gateway.server import loopback_tls


def gateway_http_client(timeout: float) -> openai.DefaultHttpxClient:
    return openai.DefaultHttpxClient(verify=loopback_tls(), timeout=timeout, trust_env=False)


def gateway_async_http_client(timeout: float) -> openai.DefaultAsyncHttpxClient:
    return openai.DefaultAsyncHttpxClient(verify=loopback_tls(), timeout=timeout, trust_env=False)
