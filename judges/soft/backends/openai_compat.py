"""A judge behind any OpenAI-compatible chat-completions endpoint (the openai SDK).

JSON mode (``response_format={"type": "json_object"}``), no SDK retries (``max_retries=0``: the one
retry the protocol allows is `judge_cell`'s, so every call is counted), no temperature sent.

The API key goes to the SDK client and nowhere else: it is not kept as an attribute of this object,
not shown by ``repr``, not put in an error message and not stored on a verdict (the verdict carries
only the backend name and the model id that served the call).
"""

from __future__ import annotations

import openai

from judges.soft.backends.base import JudgeBackendError


class OpenAICompatibleJudge:
    name = "openai-compatible"

    def __init__(self, base_url: str, api_key: str, model: str, timeout: float = 120):
        self.base_url = base_url
        self.model = model
        self.timeout = timeout
        self._served: str | None = None
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout)

    def __repr__(self) -> str:
        return f"OpenAICompatibleJudge(base_url={self.base_url!r}, model={self.model!r}, timeout={self.timeout!r})"

    @property
    def label(self) -> str:
        return f"openai-compatible endpoint ({self.model})"

    @property
    def version(self) -> str:
        """The model id the endpoint reported serving the last call (the requested id before any call)."""
        return self._served or self.model

    def complete(self, prompt: str) -> str:
        try:
            response = self._client.chat.completions.create(
                model=self.model,
                messages=[{"role": "user", "content": prompt}],
                response_format={"type": "json_object"},
            )
        except openai.APIStatusError as exc:
            raise JudgeBackendError(f"{self.base_url}: HTTP {exc.status_code} ({type(exc).__name__})") from None
        except openai.APIError as exc:  # connection errors, timeouts, malformed responses
            raise JudgeBackendError(f"{self.base_url}: {type(exc).__name__}") from None
        self._served = response.model or self.model
        if not response.choices:
            raise JudgeBackendError(f"{self.base_url}: reply without choices")
        content = response.choices[0].message.content
        if not isinstance(content, str) or not content.strip():
            raise JudgeBackendError(f"{self.base_url}: empty reply")
        return content

    def assert_sandboxed(self) -> None:
        """Nothing to probe: a model behind an HTTP chat endpoint gets no tools (none are sent) and no
        filesystem, so there is no tool policy to drift. What it sees is exactly the prompt."""
        return None
