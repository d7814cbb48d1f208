"""A stage's settings, each declared once: the configuration's field, its flags, its PyTerrier parameter, its row of
the docs' table.

kueri's stages declare their settings as the fields of a frozen dataclass (:func:`setting`: the default, the help line
and the rest of the :class:`Option`); the configuration (:class:`kueri.config.RunConfig`) is made of those classes,
so a type checker and an editor follow every setting to its declaration, and :func:`options_of` reads the options
back for the registry. A setting is one flag, or several (:class:`Flag`: the analysis is ``--stoplist``,
``--stemmer``, ``--tokenizer``...; its ``combine`` makes the new value from the configuration's and the flags
given). Each setting's flags belong to a group (:data:`FLAG_GROUPS`): a command takes the groups it offers.
"""

from __future__ import annotations

import argparse
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from kueri.errors import deprecated

#: What the words of a setting mean, in every configuration, flag, class and function: a depth is how many of a
#: topic's top hits (None, ``all`` on the command line: every hit); a stage's model or source None (``none``) is
#: the stage switched off.
ALL, OFF = "all", "none"

#: The groups of flags, by name, with their titles in a command's help: a command takes the groups it offers.
FLAG_GROUPS = {
    "analysis": "analysis (replaces that part of the configuration's analyzer; the default configuration's is "
                "kueristopv2 + Porter)",
    "ranking": "ranking (replaces that part of the configuration)",
    "stages": "later stages (replace the configuration's)",
}


def depth_flag(text: str) -> int | str:
    """A depth flag's value: a number of hits (at least 0: an old spelling may still mean something by 0) or
    ``all``."""
    if text.strip() == ALL:
        return ALL
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"depth {text!r}: give a number of hits or {ALL}")
    return int(text)


@dataclass(frozen=True)
class Flag:
    """One flag of a setting that several flags make: its spellings, the name of its value among the flags given
    (``dest``), its help, argparse's other keywords (``type``, ``choices``, ``action``, ``const``, ``nargs``...) and,
    for flags of which one at most may be given (``--bm25``, ``--lmd``, ``--tfidf``), the name of their group."""

    names: tuple[str, ...]
    dest: str
    help: str
    keywords: tuple[tuple[str, Any], ...] = ()
    exclusive: str | None = None


def flag(*names: str, help: str, dest: str | None = None, exclusive: str | None = None, **keywords: Any) -> Flag:
    """A :class:`Flag` (``dest``: the first spelling without its dashes, unless given)."""
    return Flag(names, dest or names[0].lstrip("-").replace("-", "_"), help, tuple(keywords.items()), exclusive)


@dataclass(frozen=True)
class Option:
    """One setting of a stage, declared once in the stage's module: the configuration's field ``name`` (its
    ``default``), the command-line flag (``--name-with-dashes`` unless ``flag`` says otherwise; none when
    ``command_line`` is False), the help line, and the PyTerrier transformer's parameter (``param``, taking ``on``
    when not given; None: the default). A setting that ``needs`` its stage's switch turns the stage on (the switch's
    ``on``) when given to a configuration that has it off. ``group``: the flags' group (:data:`FLAG_GROUPS`).

    A setting several flags make lists them (``flags``); ``combine(value, given)`` is its new value from the
    configuration's and the flags given (by ``dest``).

    ``off`` says what the flag value ``none`` does (the field becomes None: the stage is off, or the setting
    unset); a depth's ``all`` becomes None (every hit). ``deprecated`` maps an old flag value to the message
    naming the new spelling and the changes it still makes for one release."""

    name: str
    default: Any
    help: str
    type: Callable[[str], Any] | None = None
    metavar: str | None = None
    off: str | None = None
    flag: str | None = None
    action: str | None = None
    aliases: tuple[str, ...] = ()  # other spellings of the flag
    param: str | None = None
    on: Any = None
    command_line: bool = True
    annotation: Any = Any
    deprecated: tuple[tuple[Any, str, tuple[tuple[str, Any], ...]], ...] = ()  # (old value, new spelling, changes)
    needs: str | None = None  # the setting that switches its stage on: given without it, that one takes its ``on``
    group: str = "stages"
    flags: tuple[Flag, ...] = ()
    combine: Callable[[Any, Mapping[str, Any]], Any] | None = None

    @property
    def flag_name(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def help_line(self) -> str:
        return f"{self.help}; {OFF}: {self.off}" if self.off else self.help

    @property
    def dests(self) -> tuple[str, ...]:
        """The names its flags' values have among a command's values (its own name, for a setting of one flag)."""
        return tuple(each.dest for each in self.flags) if self.flags else (self.name,) if self.command_line else ()

    def add_to(self, group: Any) -> None:
        if not self.command_line:
            return
        if self.flags:
            exclusive: dict[str, Any] = {}
            for each in self.flags:
                if each.exclusive is not None and each.exclusive not in exclusive:
                    exclusive[each.exclusive] = group.add_mutually_exclusive_group()
                into = group if each.exclusive is None else exclusive[each.exclusive]
                into.add_argument(*each.names, dest=each.dest, help=each.help, **dict(each.keywords))
        elif self.action:
            group.add_argument(self.flag_name, *self.aliases, dest=self.name, action=self.action, default=None,
                               help=self.help_line)
        else:
            group.add_argument(self.flag_name, *self.aliases, dest=self.name, type=self.type, metavar=self.metavar,
                               help=self.help_line)

    def changes(self, given: Any, current: Any = None) -> dict[str, Any]:
        """The configuration's changes a flag value asks for (for a setting of several flags, ``given`` are their
        values by ``dest``, ``current`` the configuration's value): ``none`` (with ``off``) and a depth's ``all`` are
        None, an old spelling what it meant (with a warning)."""
        if self.combine is not None:
            return {self.name: self.combine(current, given)}
        for old, new, changes in self.deprecated:
            if given == old:
                deprecated(f"{self.flag_name} {old}", new)
                return dict(changes)
        if (self.off and given == OFF) or given == ALL:
            return {self.name: None}
        return {self.name: given}

    def row(self) -> str:
        """This setting as a row of the settings table (docs/architecture.md)."""
        flag = f"`{self.flag_name}`" if self.command_line and not self.flags else ""
        param = f"`{self.param}`" if self.param else ""
        return f"| `{self.name}` | `{self.default!r}` | {flag} | {param} | {self.help_line} |"


def setting(default: Any, help: str, **declared: Any) -> Any:
    """A stage's setting, declared as a field of its settings class: its default, its help line and the rest of its
    :class:`Option` (flags, PyTerrier parameter...)."""
    return field(default=default, metadata={"option": {"help": help, **declared}})


def options_of(settings: type) -> tuple[Option, ...]:
    """The options a settings class declares (:func:`setting`), in its order; each typed as its field."""
    hints = typing.get_type_hints(settings)
    return tuple(Option(each.name, each.default, annotation=hints[each.name], **each.metadata["option"])
                 for each in fields(settings) if "option" in each.metadata)


def add_option_flags(parser: argparse.ArgumentParser, options: Iterable[Option], group: str = "stages",
                     title: str | None = None) -> Any:
    """The flags of ``options`` of the flag group ``group``, under ``title`` (the group's, unless given); the
    argparse group they went in (None: there were none)."""
    chosen = [option for option in options if option.group == group and option.command_line]
    if not chosen:
        return None
    into = parser.add_argument_group(title or FLAG_GROUPS[group])
    for option in chosen:
        option.add_to(into)
    return into
