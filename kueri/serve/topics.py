"""Which topic a question is: a known Touché topic (its own record, so its ranking is ``kueri run``'s), or a free
one with its two objects given, extracted, or none."""

from __future__ import annotations

from collections.abc import Sequence

from kueri.config import RunConfig
from kueri.questions import extract_objects
from kueri.records import Topic
from kueri.serve.checks import BadQuestion

FREE_TOPIC = "q"  # the topic number of a question that is not a known topic's


def title_key(question: str) -> str:
    """A question as a key: lower case, its words joined by one space."""
    return " ".join(question.lower().split())


def without_objects(config: RunConfig) -> RunConfig:
    """``config`` without the stages that read a topic's two objects (a question that names none), and without its
    weak-evidence threshold (learned for the scores of those stages)."""
    changed = config.with_changes(second_stage=None, stance_model=None, filter_objects="off", weak_score=None)
    if any(stage.needs_objects for stage in changed.stages()):
        raise BadQuestion(f"configuration {config.name} needs the question's two objects; name them")
    return changed


class Topics:
    """The known topics, by their titles (:func:`title_key`)."""

    def __init__(self, topics: Sequence[Topic] = ()) -> None:
        self.known = {title_key(t.title): t for t in topics}

    def of(self, question: str, objects: tuple[str, str] | None) -> tuple[Topic, str]:
        """The topic a question is, and where its objects come from (``topic N``, ``given``, ``extracted``,
        ``none``: ("", ""))."""
        known = self.known.get(title_key(question))
        if known is not None:
            if objects is None or objects == known.objects:
                return known, f"topic {known.number}"
            return known._replace(objects=objects), "given"
        if objects is not None:
            return Topic(FREE_TOPIC, question, objects), "given"
        found = extract_objects(question)
        if found is not None:
            return Topic(FREE_TOPIC, question, (found.first, found.second)), "extracted"
        return Topic(FREE_TOPIC, question, ("", "")), "none"

    def ranked(self, question: str, objects: tuple[str, str] | None, config: RunConfig
               ) -> tuple[Topic, str, RunConfig]:
        """The topic, where its objects come from, and the configuration that ranks it (without the stages that read
        the objects when the question names none)."""
        topic, objects_from = self.of(question, objects)
        return topic, objects_from, without_objects(config) if objects_from == "none" else config
