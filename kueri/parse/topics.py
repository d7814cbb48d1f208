"""Read Touché topics (``<topics><topic><number/><title/><objects/>...``) into records."""

from __future__ import annotations

from pathlib import Path

from lxml import etree

from kueri.errors import KueriError
from kueri.records import Topic

REQUIRED = ("number", "title", "objects")
OPTIONAL = ("description", "narrative")


def parse_objects(text: str, where: str) -> tuple[str, str]:
    """``"laptop, desktop"`` -> ``("laptop", "desktop")``; anything but two items is an error."""
    items = [item.strip() for item in text.split(",")]
    if len(items) != 2 or not all(items):
        raise KueriError(f"{where}: <objects> must hold two items separated by a comma, got {text!r}")
    return items[0], items[1]


def read_topics(path: str | Path) -> list[Topic]:
    """All topics of the file, in file order. Broken XML or a missing field raises KueriError."""
    path = Path(path)
    try:
        # huge_tree off, no network, no entities beyond XML's own: topics are small and trusted
        parser = etree.XMLParser(resolve_entities=False, no_network=True)
        root = etree.parse(str(path), parser).getroot()
    except OSError as exc:
        raise KueriError(f"{path}: cannot read topics: {exc}") from exc
    except etree.XMLSyntaxError as exc:
        raise KueriError(f"{path}:{exc.lineno}: broken topics XML: {exc.msg}") from exc
    topics: list[Topic] = []
    seen: set[str] = set()
    for element in root.iter("topic"):
        where = f"{path}:{element.sourceline}"
        values: dict[str, str] = {}
        for name in REQUIRED + OPTIONAL:
            child = element.find(name)
            text = "".join(child.itertext()) if child is not None else ""
            if name in REQUIRED and not text.strip():
                raise KueriError(f"{where}: topic without <{name}>")
            values[name] = text
        number = values["number"].strip()
        if number in seen:
            raise KueriError(f"{where}: duplicate topic number {number}")
        seen.add(number)
        topics.append(
            Topic(
                number=number,
                title=values["title"].strip(),
                objects=parse_objects(values["objects"], where),
                description=values["description"].strip(),
                narrative=values["narrative"].strip(),
            )
        )
    if not topics:
        raise KueriError(f"{path}: no <topic> elements")
    return topics
