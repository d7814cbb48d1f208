"""The model-file format of kueri's trained models (offline quality, stance, the cross-encoders' tuned weights).

A model file is an ``.npz`` of plain arrays (no pickle) plus a JSON header (the array ``meta``), written so its
bytes depend only on its contents: the shipped files' SHA-256 (``kueri/resources/models/SHA256SUMS``) hold
whoever writes them again.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np

from kueri.errors import SetupError
from kueri.files import write_bytes_atomic

T = TypeVar("T")


def load_model_file(path: str | Path, what: str, rebuild: str,
                    build: Callable[[dict[str, object], dict[str, np.ndarray]], T],
                    arrays: Sequence[str] | None = None) -> T:
    """``build(JSON header, arrays)`` of the model file at ``path`` (only the named ``arrays``, else all); a missing
    or unreadable file is a :class:`SetupError` naming ``what`` and the command that rebuilds it."""
    path = Path(path)
    if not path.is_file():
        raise SetupError(f"{what} {path} not found: kueri ships kueri/resources/models/; rebuild it with {rebuild}")
    try:
        with np.load(path, allow_pickle=False) as data:
            read = {name: data[name] for name in (data.files if arrays is None else arrays)}
        return build(json.loads(read.pop("meta").tobytes().decode("utf-8")), read)
    except (KeyError, ValueError, OSError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
        raise SetupError(f"{what} {path} is unreadable ({exc}): rebuild it with {rebuild}") from None


def read_model_header(path: str | Path, what: str, rebuild: str) -> dict[str, object]:
    """The JSON header of the model file at ``path`` (its arrays are not read); errors as :func:`load_model_file`'s."""
    return load_model_file(path, what, rebuild, lambda meta, arrays: meta, arrays=("meta",))


def write_model_file(path: str | Path, meta: Mapping[str, object], arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``meta`` and ``arrays`` as an ``.npz`` whose bytes depend only on its contents (no timestamps)."""
    arrays = {"meta": np.frombuffer(json.dumps(meta, sort_keys=True).encode("utf-8"), dtype=np.uint8), **arrays}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for name in sorted(arrays):
            member = io.BytesIO()
            np.lib.format.write_array(member, np.ascontiguousarray(arrays[name]), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, member.getvalue(), compresslevel=9)
    write_bytes_atomic(path, buffer.getvalue())
