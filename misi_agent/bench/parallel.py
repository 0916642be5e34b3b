"""Evaluate independent benchmark items in worker processes, with the results in the items' order.

Why: the image-only tools spend minutes per item on small numpy fits (a PyMOL T9 item 2–9 minutes on one core),
and the items share nothing, so the evaluation scripts in ``eval/`` spread them over processes (``--jobs``).
Workers are spawned, not forked: a fork would copy the parent's threads and RDKit/OpenMM state, and PLIP's worker
is spawned for the same reason. Each worker's numerical libraries run one thread (the jobs are the parallelism,
and the fits' matrices are far too small for threaded BLAS), set through the environment the workers inherit.
Every item is computed by the same function with the same inputs either way, so ``jobs`` does not change a result.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from multiprocessing import get_context
from typing import Any, TypeVar

from tqdm import tqdm

T = TypeVar("T")

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")


class JobsError(ValueError):
    """An unusable ``--jobs`` value (one-line message)."""


def check_jobs(jobs: int) -> int:
    """``jobs`` if it is a usable worker count (1 or more), else a :class:`JobsError`."""
    if int(jobs) < 1:
        raise JobsError(f"--jobs must be 1 or more, got {jobs}")
    return int(jobs)


def jobs_argument(text: str) -> int:
    """``--jobs`` for argparse (``type=jobs_argument``): :func:`check_jobs` on the integer, its message as argparse's
    one-line usage error."""
    from argparse import ArgumentTypeError

    try:
        return check_jobs(int(text))
    except (JobsError, ValueError) as exc:
        raise ArgumentTypeError(str(exc)) from None


@contextmanager
def _single_threaded_children() -> Iterator[None]:
    """The thread variables set to 1 while workers are spawned (they read them at start), then put back."""
    saved = {k: os.environ.get(k) for k in THREAD_VARIABLES}
    os.environ.update({k: "1" for k in THREAD_VARIABLES})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def map_items(fn: Callable[[Any], T], items: Sequence[Any], *, jobs: int = 1, desc: str | None = None,
              unit: str = "item") -> list[T]:
    """``[fn(x) for x in items]`` with a progress bar, over ``jobs`` spawned worker processes when ``jobs`` > 1.

    ``fn`` must be picklable (a module-level function, or a :func:`functools.partial` of one) and should catch the
    failures it wants to count: an exception it raises stops the run and is raised here, as in the serial loop."""
    jobs = check_jobs(jobs)
    if jobs == 1 or len(items) <= 1:
        return [fn(x) for x in tqdm(items, desc=desc, unit=unit, file=sys.stderr)]
    out: list[Any] = [None] * len(items)
    with _single_threaded_children(), ProcessPoolExecutor(max_workers=min(jobs, len(items)),
                                                          mp_context=get_context("spawn")) as pool:
        futures = {pool.submit(fn, x): k for k, x in enumerate(items)}
        try:
            for f in tqdm(as_completed(futures), total=len(futures), desc=desc, unit=unit, file=sys.stderr):
                out[futures[f]] = f.result()
        except BaseException:  # an item's failure (or Ctrl-C) ends the run without waiting for the queued items
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    return out
