"""Reading answers: gold answers strictly, model predictions robustly.

A model's output may wrap its answer in prose, markdown, code fences, ``<think>`` /
``<answer>`` tags, ``Answer: C`` or ``(C)``; write commands in another order with the same
meaning; or list H-bonds in any order, case or spacing. This module turns such text into
typed answers; :mod:`misi_agent.bench.scoring` compares them. Parsing a prediction never
raises: what cannot be read is ``None`` (scored 0, counted as unparsed). Parsing a gold
answer raises :class:`AnswerError`, because a gold answer that does not parse is a bug in
the question set.

Answer forms (MiSI-Bench):

* commands: ``move x 3``, ``roll y 15``, ``roll x 75, move x -14`` (parsed by
  :func:`misi_agent.camera.parse_commands` after the command phrases are located);
* a letter A-D for multiple choice;
* residue-ligand interaction: ``No`` or ``Yes: ARG NH2, O1B; ARG NE, O2G``;
* pocket-ligand interaction: ``ARG 45 NH2 A, O1B; LYS 47 NZ A, O1A`` (name, number,
  residue atom, chain, ligand atom).

The H-bond items are parsed here (tools/hbond_format.py did not exist when this was
written); :class:`BondItem` also formats both written forms for the generator.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from misi_agent.bench import tasks as T
from misi_agent.camera import Command, CommandError, compose_rigid, parse_commands
from misi_agent.errors import MisiError


class AnswerError(MisiError):
    """A gold answer that does not have its task's form (one-line message)."""


# ----------------------------------------------------------------------------- typed answers


NO_AXIS = ""  # axis of a readable command answer that has no single axis (scores 0, OURS["net_motion"])


@dataclass(frozen=True)
class AxisValue:
    """A single-axis command: ``move x 3`` -> AxisValue("move", "x", 3.0); axis NO_AXIS: no single axis."""

    op: str
    axis: str
    value: float


@dataclass(frozen=True)
class DockingAnswer:
    """The two parts of a docking answer: the roll about the ligand centre and the net move.

    ``roll`` is None when the prediction has no roll or rolls about more than one axis;
    ``move`` is the net (x, y, z) translation, None when there is no move at all.
    """

    roll: AxisValue | None
    move: tuple[float, float, float] | None


@dataclass(frozen=True)
class BondItem:
    """One pocket-ligand H-bond as written in an answer; residue number and chain may be absent (T4 form)."""

    residue_name: str
    residue_atom: str
    ligand_atom: str
    residue_number: str | None = None
    chain: str | None = None

    def residue_form(self) -> str:
        """T4 form: ``ARG NH2, O1B``."""
        return f"{self.residue_name} {self.residue_atom}, {self.ligand_atom}"

    def pocket_form(self) -> str:
        """T9 form: ``ARG 45 NH2 A, O1B``."""
        if self.residue_number is None or self.chain is None:
            raise AnswerError(f"bond {self.residue_form()!r} needs a residue number and chain for the pocket form")
        return f"{self.residue_name} {self.residue_number} {self.residue_atom} {self.chain}, {self.ligand_atom}"


@dataclass(frozen=True)
class InteractionAnswer:
    """``verdict`` is "yes", "no" or None (unreadable); ``bonds`` holds each distinct bond once."""

    verdict: str | None
    bonds: tuple[BondItem, ...] = ()


def format_residue_answer(bonds: list[BondItem] | tuple[BondItem, ...]) -> str:
    """The gold T4 string: ``No`` or ``Yes: ARG NH2, O1B; ARG NE, O2G``."""
    return "No" if not bonds else "Yes: " + "; ".join(b.residue_form() for b in bonds)


def format_pocket_answer(bonds: list[BondItem] | tuple[BondItem, ...]) -> str:
    """The gold T9 string: ``ARG 45 NH2 A, O1B; LYS 47 NZ A, O1A`` (``None`` when empty, OURS["empty_truth"])."""
    return "None" if not bonds else "; ".join(b.pocket_form() for b in bonds)


# ----------------------------------------------------------------------------- text clean-up

_DASHES = str.maketrans({"\u2212": "-", "\u2013": "-", "\u2014": "-", "\uff0c": ",", "\uff1b": ";", "\uff1a": ":"})
_THINK_END = re.compile(r"</think>", re.IGNORECASE)
_ANSWER_TAG = re.compile(r"<answer>(.*?)(?:</answer>|$)", re.IGNORECASE | re.DOTALL)
_MARKER = re.compile(r"\b(?:final\s+answer|answer)\s*(?:is\s*:?|:|=)", re.IGNORECASE)
_FENCE = re.compile(r"```(?:[\w+-]*[ \t]*\n)?(.*?)```", re.DOTALL)


def answer_region(text: str) -> tuple[str, bool]:
    """The part of ``text`` that holds the answer, and whether an explicit marker located it.

    In order: text after the last ``</think>``; the last ``<answer>...</answer>``; text after
    the last ``Answer:`` / ``answer is`` / ``Final answer:``; the last fenced code block; else
    all of it. Markdown emphasis, back-ticks and fences are removed; dashes normalised.
    """
    s = text.translate(_DASHES).replace("\r\n", "\n")
    marked = False
    parts = _THINK_END.split(s)
    s = parts[-1]
    tags = _ANSWER_TAG.findall(s)
    if tags:
        s, marked = tags[-1], True
    s = s.replace("**", "").replace("__", "")
    markers = list(_MARKER.finditer(s))
    if markers and s[markers[-1].end():].strip():
        s, marked = s[markers[-1].end():], True
    elif not marked:
        fences = _FENCE.findall(s)
        if fences and fences[-1].strip():
            s = fences[-1]
    s = re.sub(r"```(?:[\w+-]*[ \t]*\n)?", "", s).replace("`", "")
    s = re.sub(r"(?m)^\s*(?:#+|>)\s*", "", s)
    return s.strip(), marked


# ----------------------------------------------------------------------------- commands

_CMD_FIND = re.compile(
    r"\b(move|roll|translate|rotate|turn)\s+(?:(?:along|about|around)\s+)?(?:the\s+)?([xyz])"
    r"(?:\s*-?\s*axis)?\s*(?:by\s+)?[:=]?\s*([+-]?\s*\d+(?:\.\d+)?)",
    re.IGNORECASE,
)


def extract_commands(text: str) -> list[Command] | None:
    """All commands in the answer region of ``text``, in order; None when there is none."""
    if not isinstance(text, str):
        return None
    region, _ = answer_region(text)
    found = [f"{m.group(1)} {m.group(2)} {m.group(3).replace(' ', '')}" for m in _CMD_FIND.finditer(region)]
    if not found:
        return None
    try:
        return parse_commands(", ".join(found))
    except CommandError:
        return None


def wrap_angle(angle: float) -> float:
    """An angle in (-180, 180] (OURS["angle_wrap"])."""
    a = math.fmod(angle, 360.0)
    if a <= -180.0:
        a += 360.0
    elif a > 180.0:
        a -= 360.0
    return a


def single_axis(commands: list[Command], op: str) -> AxisValue | None:
    """The net single-axis motion of ``op`` commands (OURS["net_motion"]), or None.

    Commands of the other kind must all be zero. Values add up per axis (angles modulo
    360°). If only one axis is named, that axis is the answer even with a net of 0;
    otherwise exactly one axis may have a non-zero net.
    """
    if any(c.op != op and abs(c.value) > 1e-9 for c in commands):
        return None
    mine = [c for c in commands if c.op == op]
    if not mine:
        return None
    sums: dict[str, float] = {}
    for c in mine:
        sums[c.axis] = sums.get(c.axis, 0.0) + c.value
    if op == "roll":
        sums = {a: wrap_angle(v) for a, v in sums.items()}
    if len(sums) == 1:
        (axis, value), = sums.items()
        return AxisValue(op, axis, value)
    nonzero = [(a, v) for a, v in sums.items() if abs(v) > 1e-9]
    if len(nonzero) == 1:
        return AxisValue(op, *nonzero[0])
    return None


def docking_parts(commands: list[Command]) -> DockingAnswer:
    """Split a docking answer into its roll and its net move (order-free, OURS["net_motion"])."""
    rolls = [c for c in commands if c.op == "roll"]
    moves = [c for c in commands if c.op == "move"]
    roll = single_axis(rolls, "roll") if rolls else None
    move = None
    if moves:
        v = [0.0, 0.0, 0.0]
        for c in moves:
            v["xyz".index(c.axis)] += c.value
        move = (v[0], v[1], v[2])
    return DockingAnswer(roll, move)


def same_motion(a: list[Command], b: list[Command]) -> bool:
    """True when two command lists move any point set the same way (checked about two centres)."""
    for center in (np.zeros(3), np.array([1.3, -2.1, 0.7])):
        Ra, ta = compose_rigid(a, center)
        Rb, tb = compose_rigid(b, center)
        if not (np.allclose(Ra, Rb, atol=1e-6) and np.allclose(ta, tb, atol=1e-6)):
            return False
    return True


# ----------------------------------------------------------------------------- multiple choice

_LETTERS = "".join(T.CHOICE_LETTERS)
_ONLY_LETTER = re.compile(rf"[\s(\[{{]*(?:(?:option|choice)\s*)?[(\[]?([{_LETTERS}{_LETTERS.lower()}])[)\]]?[\s.):\]}}!]*",
                          re.IGNORECASE)
_LEAD_LETTER = re.compile(rf"^[\s(\[]*(?:(?i:option|choice)\s*)?\(?([{_LETTERS}])\b(?!['\u2019`]\w)")
_EXPLICIT = (
    re.compile(rf"\(([{_LETTERS}])\)"),
    re.compile(rf"\b(?i:option|choice)\s*\(?([{_LETTERS}])\b"),
    re.compile(rf"(?:^|\s)([{_LETTERS}])[).:](?=\s|$)", re.MULTILINE),
)
_STANDALONE = re.compile(rf"\b([{_LETTERS}])\b(?!['\u2019`-]\w)")


_NOT_NOUNS = {"or", "and", "is", "was", "seems", "looks", "matches", "fits", "because", "since", "as", "then"}


def _is_article(text: str, start: int, end: int) -> bool:
    """True for a capital ``A`` that opens a sentence and is followed by a lower-case word ("A rotation ...")."""
    before = text[:start].rstrip(" \t\n([")
    if text[start:end] != "A" or (before and before[-1] not in ".!?:;"):
        return False
    nxt = re.match(r"\s+([a-z]+)", text[end:])
    return bool(nxt) and nxt.group(1) not in _NOT_NOUNS


def parse_choice(text: Any, options: list[str] | None = None) -> str | None:
    """The chosen letter A-D, or None when there is none or the text names several (OURS["choice_parsing"]).

    With text ``options`` (interaction location), an answer written as commands is matched
    to the option with the same net motion.
    """
    if not isinstance(text, str) or not text.strip():
        return None
    region, marked = answer_region(text)
    m = _ONLY_LETTER.fullmatch(region)
    if m:
        return m.group(1).upper()
    if marked:
        m = _LEAD_LETTER.match(region)
        if m and not _is_article(region, m.start(1), m.end(1)):
            return m.group(1)
    scan = re.sub(r"\bchain\s+\w+", " ", region, flags=re.IGNORECASE)
    explicit = {m.group(1) for pat in _EXPLICIT for m in pat.finditer(scan)}
    if len(explicit) == 1:
        return explicit.pop()
    if not explicit:
        loose = {m.group(1) for m in _STANDALONE.finditer(scan) if not _is_article(scan, m.start(), m.end())}
        if len(loose) == 1:
            return loose.pop()
    if options:
        cmds = extract_commands(region)
        if cmds:
            hits = []
            for letter, opt in zip(T.CHOICE_LETTERS, options):
                try:
                    if same_motion(cmds, parse_commands(opt)):
                        hits.append(letter)
                except CommandError:
                    continue
            if len(hits) == 1:
                return hits[0]
    return None


# ----------------------------------------------------------------------------- H-bond lists

_NUM = re.compile(r"^-?\d+[A-Z]?$")
_NAME = re.compile(r"^[A-Z0-9]{1,5}$")
_ATOM = re.compile(r"^[A-Z0-9][A-Z0-9'\"*]{0,4}$")
_CHAIN = re.compile(r"^[A-Z0-9]{1,4}$")
_PAIR_SEP = re.compile(r"\s*(?:,|<-+>|-+>|<-+|\.\.\.+|\u00b7{2,}|\u2026|\s-+\s|\s(?:to|with|and)\s)\s*", re.IGNORECASE)
_FILLER = {"CHAIN", "RESIDUE", "RES", "ATOM", "LIGAND", "OF", "THE", "LIG", "HBOND", "H-BOND"}


def _tokens(part: str) -> list[str]:
    s = re.sub(r"[():@/\[\]{}]", " ", part.upper())
    s = re.sub(r"(?<=\s)\.|\.(?=\s|$)", " ", " " + s)
    toks = []
    for t in s.split():
        t = t.strip(".,;")
        if not t or t in _FILLER:
            continue
        glued = re.fullmatch(r"([A-Z]{3})(-?\d+[A-Z]?)", t)
        toks.extend(glued.groups() if glued else (t,))
    return toks


def _residue_part(toks: list[str]) -> tuple[str, str | None, str, str | None] | None:
    """(name, number, atom, chain) from the protein side of a bond."""
    n = len(toks)
    if n == 2:
        name, atom, num, chain = toks[0], toks[1], None, None
    elif n == 3 and _NUM.match(toks[1]):
        name, num, atom, chain = toks[0], toks[1], toks[2], None
    elif n == 3:
        name, atom, chain, num = toks[0], toks[1], toks[2], None
    elif n == 4 and _NUM.match(toks[1]):
        name, num, atom, chain = toks
    elif n == 4 and _NUM.match(toks[2]):
        chain, name, num, atom = toks
    else:
        return None
    if not (_NAME.match(name) and _ATOM.match(atom) and not _NUM.match(atom)):
        return None
    if not re.search(r"[A-Z]", name) or (chain is not None and not _CHAIN.match(chain)):
        return None
    return name, num, atom, chain


def _ligand_atom(toks: list[str]) -> str | None:
    cands = [t for t in toks if _ATOM.match(t) and not _NUM.match(t)]
    if not cands:
        return None
    with_digit = [t for t in cands if re.search(r"\d", t)]
    return with_digit[0] if len(with_digit) == 1 else cands[0]


def parse_bond(item: str) -> BondItem | None:
    """One bond ``ARG NH2, O1B`` / ``ARG 45 NH2 A, O1B`` (also ``ARG45 NH2 (chain A) - O1B``, ligand atom first, ...)."""
    s = re.sub(r"^\s*(?:[-*\u2022]+|\d+[.)])\s+", "", item).strip().strip("()[]{}").strip()
    if not s:
        return None
    parts = [p for p in _PAIR_SEP.split(s) if p.strip()]
    if len(parts) != 2:
        return None
    a, b = _tokens(parts[0]), _tokens(parts[1])
    if len(a) <= 1 and len(b) >= 2:  # written ligand atom first
        a, b = b, a
    res = _residue_part(a)
    lig = _ligand_atom(b) if len(b) <= 2 else None
    if res is None or lig is None:
        return None
    name, num, atom, chain = res
    return BondItem(name, atom, lig, num.lstrip("+") if num else None, chain)


def _split_items(body: str) -> list[str]:
    return [p for p in re.split(r"[;\n]+", body) if p.strip()]


def parse_bond_list(body: str, *, strict: bool = False) -> tuple[BondItem, ...]:
    """Distinct bonds in a ``;``- or line-separated list, in first-seen order (OURS["bond_dedup"]).

    With ``strict`` an item that is not a bond raises :class:`AnswerError` (gold answers);
    otherwise it is skipped (predictions: prose lines around the list).
    """
    out: list[BondItem] = []
    for item in _split_items(body):
        b = parse_bond(item)
        if b is None:
            if strict:
                raise AnswerError(f"not an H-bond {item.strip()!r} (expected e.g. 'ARG 45 NH2 A, O1B')")
            continue
        if b not in out:
            out.append(b)
    return tuple(out)


_NO = re.compile(r"^\W*(?:no|none)\b", re.IGNORECASE)
_NO_PHRASE = re.compile(r"\b(?:no|not\s+any|none\s+of\s+the)\s+(?:hydrogen[\s-]+bonds?|h[\s-]*bonds?|interactions?)\b",
                        re.IGNORECASE)
_YES = re.compile(r"^\W*yes\b[\s:,.\-]*", re.IGNORECASE)


def parse_interactions(text: Any) -> InteractionAnswer:
    """A T4/T9 answer: verdict and bonds. ``No``/``None`` -> no bonds; a list with or without ``Yes:``."""
    if not isinstance(text, str) or not text.strip():
        return InteractionAnswer(None)
    region, _ = answer_region(text)
    if _NO.match(region):
        return InteractionAnswer("no")
    yes = _YES.match(region)
    bonds = parse_bond_list(region[yes.end():] if yes else region)
    if bonds:
        return InteractionAnswer("yes", bonds)
    if yes:
        return InteractionAnswer("yes")
    if _NO_PHRASE.search(region):
        return InteractionAnswer("no")
    return InteractionAnswer(None)


# ----------------------------------------------------------------------------- per task


def _gold_commands(answer: str) -> list[Command]:
    try:
        return parse_commands(answer)
    except CommandError as exc:
        raise AnswerError(f"gold answer {answer!r}: {exc}") from None


def parse_gold(question) -> Any:
    """The typed gold answer of a :class:`~misi_agent.bench.question.Question`; AnswerError if malformed.

    translation/rotation/zooming -> AxisValue; docking -> DockingAnswer; multiple choice ->
    letter; residue-ligand / pocket-ligand -> InteractionAnswer.
    """
    info = T.task_info(question.task)
    ans = question.answer.strip()
    if info.metric in ("translation", "rotation", "accuracy_zoom"):
        op = "roll" if info.metric == "rotation" else "move"
        grid = {"translation": T.TRANSLATION_GRID, "rotation": T.ROTATION_GRID, "accuracy_zoom": T.ZOOM_GRID}[info.metric]
        cmds = _gold_commands(ans)
        if len(cmds) != 1 or cmds[0].op != op or cmds[0].axis not in grid.axes:
            raise AnswerError(f"gold answer {ans!r} is not one '{op} {'|'.join(grid.axes)} VALUE' command")
        return AxisValue(op, cmds[0].axis, cmds[0].value)
    if info.metric == "docking":
        cmds = _gold_commands(ans)
        parts = docking_parts(cmds)
        if len(cmds) != 2 or parts.roll is None or parts.move is None or abs(parts.move[0]) < 1e-9 \
                or abs(parts.move[1]) > 1e-9 or abs(parts.move[2]) > 1e-9:
            raise AnswerError(f"gold answer {ans!r} is not 'roll AXIS ANGLE, move x D'")
        return parts
    if info.metric == "choice":
        if ans not in T.CHOICE_LETTERS:
            raise AnswerError(f"gold answer {ans!r} is not one of {', '.join(T.CHOICE_LETTERS)}")
        if question.options is not None:
            for letter, opt in zip(T.CHOICE_LETTERS, question.options):
                try:
                    parse_commands(opt)
                except CommandError as exc:
                    raise AnswerError(f"option {letter} {opt!r}: {exc}") from None
        return ans
    if info.metric == "interactions_residue":
        if re.fullmatch(r"no\.?", ans, re.IGNORECASE):
            return InteractionAnswer("no")
        m = re.match(r"yes\s*:\s*", ans, re.IGNORECASE)
        if not m:
            raise AnswerError(f"gold answer {ans!r} is neither 'No' nor 'Yes: RES ATOM, LIGATOM; ...'")
        bonds = parse_bond_list(ans[m.end():], strict=True)
        if not bonds:
            raise AnswerError(f"gold answer {ans!r} says Yes but lists no H-bond")
        return InteractionAnswer("yes", bonds)
    if info.metric == "interactions_pocket":
        if re.fullmatch(r"none\.?", ans, re.IGNORECASE):  # OURS["empty_truth"]
            return InteractionAnswer("no")
        bonds = parse_bond_list(ans, strict=True)
        for b in bonds:
            if b.residue_number is None or b.chain is None:
                raise AnswerError(f"gold bond {b.residue_form()!r} lacks a residue number or chain")
        return InteractionAnswer("yes", bonds)
    raise AnswerError(f"no answer rule for task {question.task!r}")  # pragma: no cover - TASKS is closed


def parse_prediction(question, text: Any) -> Any:
    """The typed prediction for a question (same types as :func:`parse_gold`), or None if unreadable."""
    if not isinstance(text, str) or not text.strip():
        return None
    metric = T.task_info(question.task).metric
    if metric in ("translation", "rotation", "accuracy_zoom"):
        cmds = extract_commands(text)
        if not cmds:
            return None
        op = "roll" if metric == "rotation" else "move"
        return single_axis(cmds, op) or AxisValue(op, NO_AXIS, math.nan)
    if metric == "docking":
        cmds = extract_commands(text)
        return docking_parts(cmds) if cmds else None
    if metric == "choice":
        return parse_choice(text, question.options)
    ans = parse_interactions(text)
    return ans if ans.verdict is not None else None
