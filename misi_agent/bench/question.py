"""One benchmark question, its JSON/JSONL forms and LLaVA/ShareGPT conversation records.

A :class:`Question` is plain data::

    {"id": "translation-6yqw-0", "task": "translation",
     "question": "<the full prompt>", "images": ["img/translation-6yqw-0_1.png", ...],
     "answer": "move x 3", "options": null,
     "meta": {"pdb_id": "6yqw", "split": "test", "params": {...}, "renderer": "raster", ...}}

``images`` are paths relative to the JSON file that holds the question (so a question set
can be moved as one folder). ``options`` holds the option texts A-D of a multiple-choice
question whose options are text (interaction location); it is ``null`` where the options
are images (T5, T6) and for cloze tasks. A question set is a ``.jsonl`` file (one object a
line) or a ``.json`` file holding one object (the ``question.json`` single-item form) or a
list. Records in LLaVA (``conversations`` with ``from``/``value``, ``image`` or ``images``)
or ShareGPT (``messages`` with ``role``/``content``, ``images``) form are read into the same
type; ``<image>`` tokens in the human turn mark the images.

Every error is a :class:`QuestionError` with a one-line message that names the file, the
line and the question.
"""
from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from misi_agent.bench import tasks as T
from misi_agent.errors import MisiError


class QuestionError(MisiError):
    """A question file or record that cannot be used (one-line message)."""


REQUIRED_FIELDS = ("id", "task", "question", "images", "answer")
IMAGE_TOKEN = "<image>"


@dataclass
class Question:
    """A benchmark item: the prompt, its images (relative paths), the gold answer and metadata."""

    id: str
    task: str
    question: str
    images: list[str]
    answer: str
    options: list[str] | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def info(self) -> T.TaskInfo:
        return T.task_info(self.task)

    @property
    def column(self) -> str:
        """The scored column: the task id, or residue_ligand_pos/neg for T4 (OURS["t4_column"])."""
        if self.task == T.RESIDUE_LIGAND:
            return T.COL_RESLIG_POS if self.answer.strip().lower().startswith("yes") else T.COL_RESLIG_NEG
        return self.task

    def image_paths(self, base_dir: str | Path) -> list[Path]:
        """The images resolved against the folder of the JSON file."""
        base = Path(base_dir)
        return [base / p for p in self.images]

    def to_dict(self) -> dict[str, Any]:
        """The JSON object (every key present, so all rows of a JSONL file share one schema)."""
        return {
            "id": self.id,
            "task": self.task,
            "question": self.question,
            "images": list(self.images),
            "answer": self.answer,
            "options": None if self.options is None else list(self.options),
            "meta": dict(self.meta),
        }

    @classmethod
    def from_dict(cls, obj: Any, where: str = "record") -> "Question":
        """Build from a JSON object; ``where`` prefixes error messages (e.g. ``q.jsonl:3``)."""
        if not isinstance(obj, dict):
            raise QuestionError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        if "conversations" in obj or "messages" in obj:
            return from_llava(obj, where=where)
        missing = [k for k in REQUIRED_FIELDS if k not in obj]
        if missing:
            raise QuestionError(f"{where}: missing field(s) {', '.join(missing)}")
        qid = obj["id"]
        if isinstance(qid, int) and not isinstance(qid, bool):
            qid = str(qid)
        for key, value in (("id", qid), ("task", obj["task"]), ("question", obj["question"]), ("answer", obj["answer"])):
            if not isinstance(value, str) or (key != "question" and not value.strip()):
                raise QuestionError(f"{where}: field {key!r} must be a non-empty string")
        images = obj["images"]
        if isinstance(images, str):
            images = [images]
        if not isinstance(images, list) or not all(isinstance(p, str) and p for p in images):
            raise QuestionError(f"{where}: field 'images' must be a list of paths")
        options = obj.get("options")
        if options is not None and (not isinstance(options, list) or not all(isinstance(o, str) for o in options)):
            raise QuestionError(f"{where}: field 'options' must be a list of strings or null")
        meta = obj.get("meta")
        meta = {} if meta is None else meta
        if not isinstance(meta, dict):
            raise QuestionError(f"{where}: field 'meta' must be an object")
        if obj["task"] not in T.TASKS:
            raise QuestionError(f"{where}: unknown task {obj['task']!r} (expected one of {', '.join(T.TASK_IDS)})")
        return cls(qid, obj["task"], obj["question"], list(images), obj["answer"], options, dict(meta))


# ----------------------------------------------------------------------------- LLaVA / ShareGPT


def _infer_task(record: dict, task: str | None, where: str) -> str:
    cand = task or record.get("task") or (record.get("meta") or {}).get("task")
    if cand:
        if cand not in T.TASKS:
            raise QuestionError(f"{where}: unknown task {cand!r} (expected one of {', '.join(T.TASK_IDS)})")
        return cand
    rid = str(record.get("id", ""))
    for t in sorted(T.TASK_IDS, key=len, reverse=True):  # longest first: rotation_rotation before rotation
        if rid == t or rid.startswith(t + "-") or rid.startswith(t + "_") or rid.startswith(t + "/"):
            return t
    raise QuestionError(f"{where}: cannot tell the task (no 'task' field and the id does not start with a task id)")


def _strip_image_tokens(text: str, n_images: int, where: str) -> str:
    """Remove ``<image>`` tokens: a leading/trailing block is dropped, inner ones become ``[image k]``."""
    count = text.count(IMAGE_TOKEN)
    if count != n_images:
        raise QuestionError(f"{where}: {count} {IMAGE_TOKEN} token(s) in the question but {n_images} image(s)")
    lead = re.match(r"^(?:\s*<image>)+\s*", text)
    n_lead = lead.group(0).count(IMAGE_TOKEN) if lead else 0
    text = text[lead.end():] if lead else text
    tail = re.search(r"\s*(?:<image>\s*)+$", text)
    text = text[: tail.start()] if tail else text
    parts = text.split(IMAGE_TOKEN)
    out = parts[0]
    for k, part in enumerate(parts[1:], start=n_lead + 1):
        out += f"[image {k}]" + part
    return out.strip()


def from_llava(record: dict, task: str | None = None, where: str = "record") -> Question:
    """A LLaVA (``conversations``/``from``/``value``) or ShareGPT (``messages``/``role``/``content``) record.

    The first human/user turn is the question, the next gpt/assistant turn the answer;
    images come from ``images`` (list) or ``image`` (path or list). The task comes from
    ``task`` (argument), the record's ``task`` or ``meta.task``, or an id that starts with a
    task id (``rotation_00017``).
    """
    turns = record.get("conversations", record.get("messages"))
    if not isinstance(turns, list) or not turns:
        raise QuestionError(f"{where}: 'conversations' must be a non-empty list of turns")
    human, answer = None, None
    for turn in turns:
        if not isinstance(turn, dict):
            raise QuestionError(f"{where}: every conversation turn must be an object")
        role = str(turn.get("from", turn.get("role", ""))).lower()
        value = turn.get("value", turn.get("content"))
        if role == "system":
            continue
        if not isinstance(value, str):
            raise QuestionError(f"{where}: conversation turn without a text 'value'")
        if role in ("human", "user"):
            if human is not None:
                raise QuestionError(f"{where}: multi-turn conversations are not benchmark questions")
            human = value
        elif role in ("gpt", "assistant"):
            if human is None:
                raise QuestionError(f"{where}: the answer turn comes before the question turn")
            if answer is None:
                answer = value
        else:
            raise QuestionError(f"{where}: unknown conversation role {role!r}")
    if human is None or answer is None:
        raise QuestionError(f"{where}: the conversation needs one human turn and one gpt turn")
    images = record.get("images", record.get("image"))
    if images is None:
        images = []
    if isinstance(images, str):
        images = [images]
    if not isinstance(images, list) or not all(isinstance(p, str) and p for p in images):
        raise QuestionError(f"{where}: 'image'/'images' must be a path or a list of paths")
    task_id = _infer_task(record, task, where)
    rid = record.get("id")
    if rid is None or (isinstance(rid, str) and not rid.strip()):
        raise QuestionError(f"{where}: missing field(s) id")
    meta = dict(record.get("meta") or {})
    meta.setdefault("source_format", "llava" if "conversations" in record else "sharegpt")
    options = record.get("options")
    return Question(str(rid), task_id, _strip_image_tokens(human, len(images), where), list(images),
                    answer.strip(), options, meta)


def to_llava(q: Question) -> dict[str, Any]:
    """The LLaVA training/eval record of a question (one ``<image>`` line per image before the prompt)."""
    return {
        "id": q.id,
        "task": q.task,
        "images": list(q.images),
        "conversations": [
            {"from": "human", "value": "".join(f"{IMAGE_TOKEN}\n" for _ in q.images) + q.question},
            {"from": "gpt", "value": q.answer},
        ],
    }


# ----------------------------------------------------------------------------- files


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise QuestionError(f"{what} file not found: {path}") from None
    except IsADirectoryError:
        raise QuestionError(f"{what} path is a directory, not a file: {path}") from None
    except UnicodeDecodeError:
        raise QuestionError(f"{what} file is not UTF-8 text: {path}") from None
    except OSError as exc:
        raise QuestionError(f"cannot read {what} file {path}: {exc.strerror or exc}") from None


def _json_error(exc: json.JSONDecodeError) -> str:
    return f"malformed JSON ({exc.msg} at column {exc.colno})"


def iter_json_records(path: str | Path, what: str = "question") -> Iterable[tuple[str, Any]]:
    """(location, object) for every record of a .jsonl file or a .json file (object or list)."""
    p = Path(path)
    text = _read_text(p, what)
    if p.suffix.lower() == ".jsonl" or (p.suffix.lower() != ".json" and not text.lstrip().startswith("[")
                                        and text.count("\n") > 1):
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                yield f"{p.name}:{n}", json.loads(line)
            except json.JSONDecodeError as exc:
                raise QuestionError(f"{p.name}:{n}: {_json_error(exc)}") from None
        return
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise QuestionError(f"{p.name}: {_json_error(exc)} on line {exc.lineno}") from None
    if isinstance(obj, list):
        for i, item in enumerate(obj):
            yield f"{p.name}[{i}]", item
    else:
        yield p.name, obj


def read_questions(path: str | Path, *, task: str | None = None, validate: bool = True,
                   check_images: bool = False) -> list[Question]:
    """All questions of a .jsonl/.json file (native or LLaVA/ShareGPT records).

    ``task`` names the task of LLaVA records that carry none. With ``validate`` each
    question is checked by :func:`validate_question` (images too with ``check_images``);
    duplicate ids are an error. An empty file is an error.
    """
    p = Path(path)
    out: list[Question] = []
    seen: dict[str, str] = {}
    for where, obj in iter_json_records(p):
        if isinstance(obj, dict) and ("conversations" in obj or "messages" in obj):
            q = from_llava(obj, task=task, where=where)
        else:
            q = Question.from_dict(obj, where=where)
        if q.id in seen:
            raise QuestionError(f"{where}: duplicate question id {q.id!r} (first at {seen[q.id]})")
        seen[q.id] = where
        if validate:
            validate_question(q, p.parent, check_images=check_images, where=where)
        out.append(q)
    if not out:
        raise QuestionError(f"no questions in {p}")
    return out


def read_question(path: str | Path, **kwargs) -> Question:
    """The single question of a ``question.json`` file (exactly one record)."""
    qs = read_questions(path, **kwargs)
    if len(qs) != 1:
        raise QuestionError(f"{Path(path).name}: expected one question, found {len(qs)}")
    return qs[0]


def _atomic_write(path: Path, text: str) -> None:
    path = Path(path)
    if not path.parent.exists():
        raise QuestionError(f"output folder does not exist: {path.parent}")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_questions(path: str | Path, questions: Iterable[Question]) -> None:
    """Write a JSONL file (one question a line), atomically."""
    lines = [json.dumps(q.to_dict(), ensure_ascii=False) for q in questions]
    _atomic_write(Path(path), "".join(line + "\n" for line in lines))


def write_question(path: str | Path, question: Question) -> None:
    """Write the single-item ``question.json`` form, atomically."""
    _atomic_write(Path(path), json.dumps(question.to_dict(), ensure_ascii=False, indent=2) + "\n")


# ----------------------------------------------------------------------------- validation


def validate_question(q: Question, base_dir: str | Path | None = None, *, check_images: bool = True,
                      where: str | None = None) -> None:
    """Check one question; raise :class:`QuestionError` with a one-line message.

    Checks: known task; image count equals the task's (``TaskInfo.images``); the gold
    answer parses for its task (:func:`misi_agent.bench.answers.parse_gold`); multiple
    choice answers are a letter A-D and text options, where given, are four; with
    ``check_images`` every image exists under ``base_dir`` and opens as an image.
    """
    from misi_agent.bench.answers import parse_gold  # answers imports tasks only; kept local to avoid a cycle

    at = where or f"question {q.id!r}"
    info = T.TASKS.get(q.task)
    if info is None:
        raise QuestionError(f"{at}: unknown task {q.task!r} (expected one of {', '.join(T.TASK_IDS)})")
    if len(q.images) != info.n_images:
        raise QuestionError(f"{at}: task {q.task} takes {info.n_images} images, question {q.id!r} has {len(q.images)}")
    if q.options is not None and len(q.options) != len(T.CHOICE_LETTERS):
        raise QuestionError(f"{at}: question {q.id!r} has {len(q.options)} options, expected {len(T.CHOICE_LETTERS)}")
    try:
        parse_gold(q)
    except MisiError as exc:
        raise QuestionError(f"{at}: {exc}") from None
    if check_images:
        if base_dir is None:
            raise QuestionError(f"{at}: cannot check images without the question file's folder")
        _check_images(q, Path(base_dir), at)


def _check_images(q: Question, base: Path, at: str) -> None:
    from PIL import Image, UnidentifiedImageError

    for rel, path in zip(q.images, q.image_paths(base)):
        if not path.is_file():
            raise QuestionError(f"{at}: image {rel!r} of question {q.id!r} not found (looked at {path})")
        try:
            with Image.open(path) as im:
                im.verify()
        except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
            raise QuestionError(f"{at}: image {rel!r} of question {q.id!r} is unreadable ({type(exc).__name__})") from None
