"""Question files (JSON, JSONL, question.json, LLaVA/ShareGPT), validation, Hugging Face loading, prompts."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from bench_gold import complex_, gold_questions

from misi_agent.bench import tasks as T
from misi_agent.bench.prompts import PROMPT_PARAMS, PromptError, build_prompt
from misi_agent.bench.question import (
    Question,
    QuestionError,
    from_llava,
    read_question,
    read_questions,
    to_llava,
    validate_question,
    write_question,
    write_questions,
)
from misi_agent.render.base import get_renderer
from misi_agent.scene import scene_from_complex


@pytest.fixture(scope="module")
def question_dir(tmp_path_factory) -> Path:
    """The gold set written as a folder: questions.jsonl + real renderings of 6yqw as every image."""
    d = tmp_path_factory.mktemp("qs")
    (d / "img").mkdir()
    render = get_renderer("raster")
    images = [render.render(scene_from_complex(complex_("6yqw"), v), 96) for v in ("front", "left")]
    qs = gold_questions()
    for k, q in enumerate(qs):
        for n, rel in enumerate(q.images):
            images[(k + n) % 2].save(d / rel)
    write_questions(d / "questions.jsonl", qs)
    return d


def test_jsonl_round_trip_and_image_check(question_dir):
    qs = read_questions(question_dir / "questions.jsonl", check_images=True)
    assert [q.to_dict() for q in qs] == [q.to_dict() for q in gold_questions()]
    assert {q.task for q in qs} == set(T.TASK_IDS)
    assert all(p.is_file() for q in qs for p in q.image_paths(question_dir))


def test_question_json_single_item_form(question_dir):
    q = gold_questions()[-1]
    write_question(question_dir / "question.json", q)
    back = read_question(question_dir / "question.json", check_images=True)
    assert back == q
    text = (question_dir / "question.json").read_text()
    assert text.startswith("{\n") and json.loads(text)["task"] == T.POCKET_LIGAND
    # a .json list is a question set; read_question insists on exactly one
    (question_dir / "two.json").write_text(json.dumps([q.to_dict(), {**q.to_dict(), "id": "other"}]))
    assert len(read_questions(question_dir / "two.json")) == 2
    with pytest.raises(QuestionError, match="expected one question, found 2"):
        read_question(question_dir / "two.json")


def _one_line(exc: pytest.ExceptionInfo) -> str:
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize("mutate,pattern", [
    (lambda d: d.pop("answer"), r"questions\.jsonl:2: missing field\(s\) answer"),
    (lambda d: d.update(task="spinning"), r"unknown task 'spinning'"),
    (lambda d: d.update(images=d["images"][:3]), r"takes 4 images, question 'translation-2' has 3"),
    (lambda d: d.update(answer="roll x 3"), r"gold answer 'roll x 3'"),
    (lambda d: d.update(images="not-a-list.png"), r"takes 4 images"),
    (lambda d: d.update(images=[1, 2]), r"'images' must be a list of paths"),
    (lambda d: d.update(meta=[]), r"'meta' must be an object"),
    (lambda d: d.update(id=""), r"'id' must be a non-empty string"),
])
def test_bad_records_give_one_line_errors(question_dir, tmp_path, mutate, pattern):
    lines = (question_dir / "questions.jsonl").read_text().splitlines()
    rec = json.loads(lines[1])
    mutate(rec)
    lines[1] = json.dumps(rec)
    p = tmp_path / "questions.jsonl"
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(QuestionError) as exc:
        read_questions(p)
    assert re.search(pattern, _one_line(exc))


def test_file_level_errors(question_dir, tmp_path):
    with pytest.raises(QuestionError) as exc:
        read_questions(tmp_path / "nope.jsonl")
    assert "not found" in _one_line(exc)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(gold_questions()[0].to_dict()) + "\n{not json\n")
    with pytest.raises(QuestionError) as exc:
        read_questions(bad)
    assert _one_line(exc).startswith("bad.jsonl:2: malformed JSON")
    dup = tmp_path / "dup.jsonl"
    dup.write_text(2 * (json.dumps(gold_questions()[0].to_dict()) + "\n"))
    with pytest.raises(QuestionError, match=r"dup.jsonl:2: duplicate question id 'translation-1' \(first at dup.jsonl:1\)"):
        read_questions(dup)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(QuestionError, match="no questions"):
        read_questions(empty)
    with pytest.raises(QuestionError, match="directory"):
        read_questions(tmp_path)
    (tmp_path / "list.json").write_text("[1]")
    with pytest.raises(QuestionError, match=r"list.json\[0\]: expected a JSON object"):
        read_questions(tmp_path / "list.json")


def test_missing_and_unreadable_images_are_reported(question_dir, tmp_path):
    q = gold_questions()[0]
    with pytest.raises(QuestionError) as exc:
        validate_question(q, tmp_path)
    assert f"image '{q.images[0]}' of question 'translation-1' not found" in _one_line(exc)
    (tmp_path / "img").mkdir()
    for rel in q.images:
        (tmp_path / rel).write_bytes((question_dir / rel).read_bytes())
    validate_question(q, tmp_path)  # all four present and real PNGs
    (tmp_path / q.images[2]).write_text("this is not a PNG")
    with pytest.raises(QuestionError) as exc:
        validate_question(q, tmp_path)
    assert f"image '{q.images[2]}' of question 'translation-1' is unreadable" in _one_line(exc)


def test_images_resolve_relative_to_the_json_file(question_dir, tmp_path):
    q = gold_questions()[0]
    sub = tmp_path / "set"
    sub.mkdir()
    write_question(sub / "question.json", q)
    with pytest.raises(QuestionError, match="not found"):
        read_question(sub / "question.json", check_images=True)
    (sub / "img").mkdir()
    for rel in q.images:
        (sub / rel).write_bytes((question_dir / rel).read_bytes())
    assert read_question(sub / "question.json", check_images=True) == q


def test_llava_record_conversion():
    q = gold_questions()[6]  # zooming, 4 images
    rec = to_llava(q)
    assert rec["conversations"][0]["value"].count("<image>") == 4
    back = from_llava(rec)
    assert (back.id, back.task, back.question, back.images, back.answer) == (q.id, q.task, q.question, q.images, q.answer)
    # LLaVA with a single "image", no task field: task from the id prefix (longest first)
    one = {"id": "rotation_rotation_00017", "image": ["a.png", "b.png", "c.png", "d.png", "e.png", "f.png", "g.png", "h.png"],
           "conversations": [{"from": "system", "value": "You are helpful."},
                             {"from": "human", "value": "Reference: <image><image><image> after: <image>\nOptions "
                                                        "<image> <image> <image> <image> Which option?"},
                             {"from": "gpt", "value": " B "}]}
    q2 = from_llava(one)
    assert q2.task == T.ROTATION_ROTATION and q2.answer == "B" and len(q2.images) == 8
    assert q2.question.startswith("Reference: [image 1][image 2][image 3] after: [image 4]")
    assert q2.question.endswith("[image 8] Which option?")
    # ShareGPT form with role/content and "images"; task given by the caller
    sg = {"id": "item-9", "images": ["x.png"] * 6,
          "messages": [{"role": "user", "content": "<image>" * 6 + "List every H-bond."},
                       {"role": "assistant", "content": "ARG 45 NH2 A, O1B"}]}
    q3 = from_llava(sg, task=T.POCKET_LIGAND)
    assert q3.question == "List every H-bond." and q3.meta["source_format"] == "sharegpt"
    validate_question(q3, check_images=False)


@pytest.mark.parametrize("record,pattern", [
    ({"id": "translation-1", "image": "a.png", "conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "move x 1"}]},
     r"0 <image> token\(s\) in the question but 1 image"),
    ({"id": "t-1", "images": [], "conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "A"}]},
     r"cannot tell the task"),
    ({"id": "translation-1", "conversations": [{"from": "human", "value": "q"}]}, r"needs one human turn and one gpt turn"),
    ({"id": "translation-1", "conversations": [{"from": "gpt", "value": "x"}, {"from": "human", "value": "q"}]},
     r"answer turn comes before"),
    ({"id": "translation-1", "conversations": [{"from": "bot", "value": "x"}]}, r"unknown conversation role 'bot'"),
    ({"id": "translation-1", "conversations": "hi"}, r"non-empty list of turns"),
    ({"task": "warp", "id": "1", "conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "A"}]},
     r"unknown task 'warp'"),
])
def test_llava_errors(record, pattern):
    with pytest.raises(QuestionError) as exc:
        from_llava(record)
    assert re.search(pattern, _one_line(exc))


def test_llava_records_in_a_question_file(question_dir, tmp_path):
    recs = [to_llava(q) for q in gold_questions()]
    p = tmp_path / "llava.json"
    p.write_text(json.dumps(recs))
    qs = read_questions(p)  # validates every gold answer and image count
    assert [q.answer for q in qs] == [q.answer for q in gold_questions()]


def test_huggingface_datasets_loads_questions_jsonl(question_dir):
    import datasets

    ds = datasets.load_dataset("json", data_files=str(question_dir / "questions.jsonl"), split="train")
    gold = gold_questions()
    assert ds.num_rows == len(gold)
    assert ds.column_names == ["id", "task", "question", "images", "answer", "options", "meta"]
    row = ds[len(gold) - 4]  # an interaction-location item with text options
    assert row["task"] == T.INTERACTION_LOCATION and len(row["options"]) == 4
    assert ds[0]["options"] is None and ds[0]["meta"]["pdb_id"] == "6yqw"
    back = Question.from_dict(dict(ds[3]))
    validate_question(back, question_dir)
    assert back.answer == gold[3].answer


# ----------------------------------------------------------------------------- prompts


def test_every_prompt_carries_the_required_information():
    for q in gold_questions():
        text = q.question
        info = T.TASKS[q.task]
        assert q.meta["pdb_id"].upper() in text
        for phrase in ("black background", "red", "blue", "grey", "purple", "orange", "x points to the right",
                       "y points up", "toward you", "Image 1:", f"Image {info.n_images}:"):
            assert phrase in text, (q.id, phrase)
        assert f"Image {info.n_images + 1}:" not in text
        assert "{" not in text and "}" not in text
        assert info.answer_example.split(";")[0] in text or q.task in (T.TRANSLATION_ROTATION, T.ROTATION_ROTATION,
                                                                       T.INTERACTION_LOCATION)
        if info.format == T.MC:
            assert "one letter only: A, B, C or D" in text
        else:
            assert "roll <" in text or "move <" in text or "<ligand atom>" in text
    t4 = next(q for q in gold_questions() if q.task == T.RESIDUE_LIGAND and q.answer != "No")
    r = complex_("7rh3")
    assert re.search(r"one residue, [A-Z]{3} \d+ of chain A", t4.question)
    # OURS["prompt_no_ligand_code"]: the ligand's code never appears in a prompt
    assert r.ligand_code == "59O" and "59O" not in t4.question
    t8 = next(q for q in gold_questions() if q.task == T.INTERACTION_LOCATION)
    for letter, opt in zip(T.CHOICE_LETTERS, t8.options):
        assert f"{letter}. {opt}" in t8.question
    assert "chain A, ASP 25 OD1 forms a hydrogen bond with the ligand atom O4" in t8.question


def test_prompt_parameter_errors():
    good = {"pdb_id": "6YQW"}
    assert build_prompt(T.TRANSLATION, **good) == build_prompt(T.TRANSLATION, options=None, **good)
    with pytest.raises(PromptError, match="missing parameter\\(s\\) pdb_id"):
        build_prompt(T.DOCKING)
    with pytest.raises(PromptError, match="unknown parameter\\(s\\) ligand"):
        build_prompt(T.DOCKING, ligand="82I", **good)  # the ligand code is never stated
    with pytest.raises(PromptError, match="unknown parameter\\(s\\) roll_axis"):
        build_prompt(T.DOCKING, roll_axis="x", **good)  # an answer must never reach the prompt
    with pytest.raises(PromptError, match="'options' must be 4"):
        build_prompt(T.INTERACTION_LOCATION, chain="A", residue_name="LYS", residue_number="47", residue_atom="NZ",
                     ligand_atom="O1A", options=["move x 1"], **good)
    with pytest.raises(PromptError, match="non-empty"):
        build_prompt(T.ZOOMING, pdb_id="")
    with pytest.raises(Exception, match="unknown task"):
        build_prompt("flying", **good)
    assert set(PROMPT_PARAMS) == set(T.TASK_IDS)


def test_prompts_state_the_value_grid():
    good = {"pdb_id": "6YQW"}
    assert "a whole number of angstroms from -4 to 4 (never 0)" in build_prompt(T.TRANSLATION, **good)
    assert "a multiple of 15 degrees from -90 to 90 (never 0)" in build_prompt(T.ROTATION, **good)
    assert "a whole number of angstroms from 40 to 60" in build_prompt(T.ZOOMING, **good)
    assert "Give the turn first and the shift second" in build_prompt(T.DOCKING, **good)


def test_task_table_is_consistent():
    assert len(T.TASK_IDS) == 9 and len(T.COLUMNS) == 10
    assert [T.TASKS[t].number for t in T.TASK_IDS] == list(range(1, 10))
    assert sum(T.TASKS[t].paper_share for t in T.TASK_IDS) == pytest.approx(100.0, abs=0.05)
    assert T.TRANSLATION_GRID.values() == (-4, -3, -2, -1, 1, 2, 3, 4)
    assert len(T.ROTATION_GRID.values()) == 12 and 0 not in T.ROTATION_GRID.values()
    assert T.ZOOM_GRID.values()[0] == 40 and T.ZOOM_GRID.values()[-1] == 60
    assert T.DOCKING_SHIFT_GRID.contains(-14) and not T.DOCKING_SHIFT_GRID.contains(5)
    for key in ("magnitude_score", "docking_move_score", "list_share", "net_motion", "predictions_file"):
        assert T.OURS[key]
    assert [T.TASKS[t].n_images for t in T.TASK_IDS] == [4, 4, 4, 6, 11, 8, 7, 6, 6]
    with pytest.raises(Exception, match="unknown task"):
        T.task_info("nope")
