"""The agent: a planner reads a MiSI-Bench question and its images, calls chemistry and
spatial tools through one registry, and answers in the task's exact format.

Modules: :mod:`~misi_agent.agent.registry` (tools), :mod:`~misi_agent.agent.toolset` (tool
names and providers), :mod:`~misi_agent.agent.chem_tools`, :mod:`~misi_agent.agent.store`
(structures by PDB ID), :mod:`~misi_agent.agent.context` (grounding, ligand choice),
:mod:`~misi_agent.agent.details` (what the question text states),
:mod:`~misi_agent.agent.parsing` (tool calls out of model text),
:mod:`~misi_agent.agent.planners` (router, transformers, openai), :mod:`~misi_agent.agent.loop`
(the loop and its trace), :mod:`~misi_agent.agent.cli` (``answer`` and ``run``).
"""
