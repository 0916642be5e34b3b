"""Planner backends behind one interface (:class:`~misi_agent.agent.planners.base.Planner`).

``router`` (deterministic programs, the default), ``transformers:PATH`` (a local Hugging
Face VLM) and ``openai:URL`` (an OpenAI-compatible endpoint). :func:`make_planner` builds one
from the CLI's ``--planner`` value.
"""
from __future__ import annotations

from pathlib import Path

from misi_agent.agent.planners.base import Planner, PlannerError

PLANNER_FORMS = "router | transformers:PATH | openai:URL"


def make_planner(spec: str, *, model: str | None = None, min_pixels: int | None = None, max_pixels: int | None = None,
                 max_new_tokens: int | None = None, trust_remote_code: bool = False, api_key_env: str | None = None,
                 chat_template: str | None = None, device: str = "cpu", dtype: str = "auto") -> Planner:
    """The planner named by ``spec`` (``router``, ``transformers:PATH`` or ``openai:URL``)."""
    spec = (spec or "").strip()
    if spec == "router":
        from misi_agent.agent.planners.router import RouterPlanner

        return RouterPlanner()
    kind, sep, target = spec.partition(":")
    if not sep or not target.strip():
        raise PlannerError(f"--planner {spec!r}: expected {PLANNER_FORMS}")
    if kind == "transformers":
        from misi_agent.agent.planners.transformers_vlm import TransformersPlanner

        kwargs = {k: v for k, v in (("min_pixels", min_pixels), ("max_pixels", max_pixels),
                                    ("max_new_tokens", max_new_tokens)) if v is not None}
        return TransformersPlanner(Path(target).expanduser(), trust_remote_code=trust_remote_code,
                                   chat_template=chat_template, model_name=model, device=device, dtype=dtype,
                                   **kwargs)
    if kind == "openai":
        from misi_agent.agent.planners.openai_api import OpenAIPlanner

        kwargs = {"max_tokens": max_new_tokens} if max_new_tokens is not None else {}
        return OpenAIPlanner(target, model=model, api_key_env=api_key_env, **kwargs)
    raise PlannerError(f"--planner {spec!r}: unknown planner {kind!r} (expected {PLANNER_FORMS})")
