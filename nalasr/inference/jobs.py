"""The files of a batch: finding the inputs, naming the outputs, and what happened to each (no torch here).

Rules a user can rely on: inputs are taken in the order given, a folder's files sorted; a bad input becomes a
failed item and the rest go on; an input is never overwritten and no output is written twice in one run; files
named as this tool names its outputs (``photo_x2.png`` beside ``photo.png``) are not taken from folders or globs,
so running twice on a folder does not upscale its own outputs; an output folder inside a walked folder is not
walked.
"""

from __future__ import annotations

import errno
import glob
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import InputError, NalasrError
from ..io.formats import EXTENSIONS, FORMATS, check_regular_file

Existing = Literal["fail", "skip", "overwrite"]
Status = Literal["ok", "skipped", "failed", "interrupted"]
OUTPUT_NAME = re.compile(r"^(?P<stem>.+)_x[234]$")  # the stem of an output of this tool: {stem}_x{scale}


@dataclass
class ItemResult:
    """What happened to one input of a batch (also the rows of ``--json``). Times in ms, wall clock."""

    input: str
    output: str | None = None
    status: Status = "failed"
    error: str | None = None
    exit_code: int | None = None  # of the error (nalasr.errors), for the process's exit code
    input_size: tuple[int, int] | None = None  # (width, height)
    output_size: tuple[int, int] | None = None
    pixels: str | None = None  # e.g. "RGBA 16-bit"
    read_ms: float | None = None  # read + decode
    model_ms: float | None = None  # forward only, device synchronised
    device_ms: float | None = None  # to the device, forward, back to host integers (on CUDA the copy back is
    # only started: it overlaps the next image, and a writer's wait for it is in its write_ms)
    write_ms: float | None = None  # (the wait for the pixels) + encode + fsync + rename
    total_ms: float | None = None  # from the start of its read to the end of its write (stages overlap)
    peak_memory_bytes: int | None = None  # see memory_kind
    memory_kind: str | None = None  # "cuda-allocated" (growth during the forward) or "cpu-peak-rss" (process)
    precision: str | None = None  # what the output was computed in
    fell_back: bool = False  # half precision gave non-finite values and fp32 was used
    cuda_graph: bool = False  # the forward replayed a CUDA graph (an earlier image had this size)
    worker: str | None = None  # the device that ran it
    notes: list[str] = field(default_factory=list)

    def fail(self, error: NalasrError) -> "ItemResult":
        self.status, self.error, self.exit_code = "failed", str(error), error.exit_code
        return self

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ItemResult":
        """The inverse of :meth:`to_dict` (a resident worker's items, read back by the command that asked)."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        for key in ("input_size", "output_size"):
            if known.get(key) is not None:
                known[key] = tuple(known[key])
        return cls(**known)


@dataclass
class BatchReport:
    scale: int
    device: str
    precision: str  # the precision asked for, resolved; see each item for fallbacks
    weights: str | None
    self_ensemble: bool = False
    items: list[ItemResult] = field(default_factory=list)
    wall_s: float = 0.0  # from the call to the last file written
    warnings: list[str] = field(default_factory=list)
    interrupted: bool = False
    process: str | None = None  # who ran the job: None for this process, "worker pid N" for a resident worker

    def count(self, status: Status) -> int:
        return sum(item.status == status for item in self.items)

    @property
    def failures(self) -> list[ItemResult]:
        return [item for item in self.items if item.status == "failed"]

    @property
    def images_per_s(self) -> float:
        return self.count("ok") / self.wall_s if self.wall_s > 0 else 0.0

    def exit_code(self) -> int:
        """0 when nothing failed; the failures' own code (2 for bad input, ...) when nothing succeeded and they
        share it; otherwise 1 (some inputs failed, the others were done)."""
        failures = self.failures
        if not failures:
            return 0
        codes = {item.exit_code or 1 for item in failures}
        done = self.count("ok") + self.count("skipped")
        return codes.pop() if not done and len(codes) == 1 else 1

    def stage_totals_ms(self) -> dict[str, float]:
        return {k: round(sum(getattr(i, k) or 0.0 for i in self.items), 3)
                for k in ("read_ms", "device_ms", "model_ms", "write_ms")}

    def to_dict(self) -> dict[str, Any]:
        return {
            "scale": self.scale, "device": self.device, "precision": self.precision, "weights": self.weights,
            "self_ensemble": self.self_ensemble, "ok": self.count("ok"), "skipped": self.count("skipped"),
            "failed": self.count("failed"), "interrupted": self.interrupted, "wall_s": round(self.wall_s, 4),
            "images_per_s": round(self.images_per_s, 3), "stages_ms": self.stage_totals_ms(),
            "warnings": self.warnings, "process": self.process, "items": [item.to_dict() for item in self.items],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "BatchReport":
        """The inverse of :meth:`to_dict` (counts and rates are recomputed from the items)."""
        return cls(
            scale=data["scale"], device=data["device"], precision=data["precision"], weights=data["weights"],
            self_ensemble=data.get("self_ensemble", False), items=[ItemResult.from_dict(i) for i in data["items"]],
            wall_s=data.get("wall_s", 0.0), warnings=list(data.get("warnings", [])),
            interrupted=data.get("interrupted", False), process=data.get("process"),
        )


@dataclass(frozen=True)
class Job:
    source: Path
    out_dir: Path  # folder of the output (mirrors the input tree under -o with --recursive)
    out_file: Path | None = None  # the exact output path: `-o FILE` with a single input file


def input_of(entry: Job | ItemResult) -> str:
    """The input as the report names it."""
    return entry.input if isinstance(entry, ItemResult) else str(entry.source)


def claim_early(outputs: "Outputs", job: Job, item: ItemResult) -> bool:
    """Claim ``job``'s output when its name does not depend on the content (sets ``item.output``). True when that
    settled the item: skipped (exists, --skip-existing) or refused (its error is on the item)."""
    out = outputs.path_for(job, None)
    if out is None:
        return False
    item.output = str(out)
    try:
        if not outputs.claim(out, job.source):
            item.status = "skipped"
            return True
    except NalasrError as e:
        item.fail(e)
        return True
    return False


def failed(text: str, message: str, code: int = InputError.exit_code) -> ItemResult:
    return ItemResult(text, error=message, exit_code=code)


# ------------------------------------------------------------------------------------------- the inputs


def collect(
    inputs: Sequence[str | os.PathLike], output: str | os.PathLike | None, recursive: bool, suffix: str | None
) -> tuple[list[Job | ItemResult], list[Path]]:
    """Expand files, folders and globs into jobs, in order; inputs that match nothing become failed items.

    Also returns the files a folder or glob held that are named as outputs of other inputs (left out)."""
    if not inputs:
        raise InputError("no inputs given: pass image files, folders or globs")
    out_root = _output_root(inputs, output, suffix)
    skip_under = Path(os.path.abspath(output)) if output is not None and out_root is not None else None
    # (file, the folder it was found in for mirroring, found by a walk/glob), or a failed item in argument order
    found: list[tuple[Path, Path | None, bool] | ItemResult] = []
    for raw in inputs:
        text = os.fspath(raw)
        if not text.strip():  # Path("") is the current folder: an unset shell variable must not upscale it
            raise InputError("an input is empty (''): is a shell variable unset? Pass image files, folders or globs")
        path = Path(text)
        if path.is_dir():
            files = _walk(path, recursive, found, skip_under)
            found += [(f, path, True) if isinstance(f, Path) else f for f in files]
            if not files:
                hint = "" if recursive else " (add --recursive to include subfolders)"
                found.append(failed(text, f"{text}: no {'/'.join(s[1:] for s in EXTENSIONS)} files in this folder{hint}"))
        elif path.exists():
            found.append((path, None, False) if path.is_file() else _not_regular(text))
        elif glob.has_magic(text):
            matches = sorted(glob.glob(text, recursive=True))
            for m in map(Path, matches):
                if m.is_dir():
                    found += [(f, m, True) if isinstance(f, Path) else f for f in _walk(m, recursive, found, skip_under)]
                else:
                    found.append((m, None, True) if m.is_file() else _not_regular(str(m)))
            if not matches:
                found.append(failed(text, f"{text}: no file matches this pattern"))
        else:
            found.append(failed(text, f"{text}: no such file or folder"))

    walked = {Path(os.path.abspath(e[0])) for e in found if not isinstance(e, ItemResult)}
    entries: list[Job | ItemResult] = []
    left_out: list[Path] = []
    seen: set[Path] = set()
    for entry in found:
        if isinstance(entry, ItemResult):
            entries.append(entry)
            continue
        f, root, by_pattern = entry
        # The same path named twice (e.g. by a path and a glob) is done once. Not resolved through symlinks: a
        # link beside its target is an input of its own, and taking one for the other would drop the target.
        key = Path(os.path.abspath(f))
        if key in seen:
            continue
        if by_pattern and _is_output_of(key, walked):
            left_out.append(f)
            continue
        seen.add(key)
        if out_root is None:
            entries.append(Job(f, f.parent))
        elif out_root.suffix.lower() in EXTENSIONS and not out_root.is_dir():  # -o FILE
            entries.append(Job(f, out_root.parent, out_root))
        else:
            entries.append(Job(f, out_root / (f.parent.relative_to(root) if root is not None else Path())))
    return entries, left_out


def _output_root(inputs: Sequence[str | os.PathLike], output: str | os.PathLike | None, suffix: str | None) -> Path | None:
    """-o as given, checked: a file name for one input file (image extension), else a folder."""
    if output is None:
        return None
    text = os.fspath(output)
    root = Path(text)
    single_file = len(inputs) == 1 and Path(inputs[0]).is_file()
    as_folder = text.endswith(("/", os.sep)) or root.is_dir()
    if not as_folder and root.suffix.lower() in EXTENSIONS:
        if not single_file:
            raise InputError(f"-o {text} is a file name but the inputs are several files: give a folder")
        if suffix is not None and root.suffix.lower() != suffix:
            raise InputError(f"--ext {suffix[1:]} contradicts -o {text}: drop one of them")
        return root
    if root.exists() and not root.is_dir():
        raise InputError(f"-o {text} is an existing file: give a folder for these outputs, or one input file")
    if not as_folder and root.suffix and not root.exists():
        raise InputError(f"-o {text}: {root.suffix} is not an image extension ({', '.join(FORMATS.values())}); "
                         f"give an image file name, or end it with / for a folder of that name")
    return root


def _is_output_of(path: Path, inputs: set[Path]) -> bool:
    """``path`` is named {stem}_x{2,3,4} and an input {stem}.* sits beside it: an earlier run's output."""
    m = OUTPUT_NAME.match(path.stem)
    if m is None:
        return False
    return any(p.parent == path.parent and p.stem == m["stem"] for p in inputs if p != path)


def _not_regular(text: str) -> ItemResult:
    """A FIFO, socket, device or broken link given or found as an input: refused unopened (a FIFO would block),
    with imageio's reason."""
    try:
        check_regular_file(text)
    except InputError as e:
        return failed(text, str(e))
    return failed(text, f"{text}: changed while the inputs were listed; run again")


def _walk(folder: Path, recursive: bool, found: list, skip_under: Path | None) -> list[Path | ItemResult]:
    """Image files (by extension: a folder may hold anything) in ``folder``, sorted; hidden names (our temp files
    among them) and the output folder skipped. A FIFO, device or broken link with an image name is a failed item
    in its place (reading it could block; leaving it out would say nothing). A folder that cannot be listed
    becomes a failed item in ``found``."""
    files: list[Path | ItemResult] = []

    def unreadable(e: OSError) -> None:
        where = e.filename or folder
        found.append(failed(str(where), f"{where}: cannot read this folder ({e.strerror or e}); its images are left out"))

    for top, dirs, names in os.walk(folder, onerror=unreadable, followlinks=False):
        base = Path(top)
        dirs[:] = sorted(d for d in dirs if recursive and not d.startswith(".")
                         and (skip_under is None or Path(os.path.abspath(base / d)) != skip_under))
        for name in names:
            p = base / name
            if p.suffix.lower() not in EXTENSIONS or name.startswith("."):
                continue
            if p.is_file():
                files.append(p)
            elif not p.is_dir():
                files.append(_not_regular(str(p)))
        if not recursive:
            break
    return sorted(files, key=lambda f: str(f) if isinstance(f, Path) else f.input)


# ------------------------------------------------------------------------------------------ the outputs


class Outputs:
    """Output naming and the rules: never an input, never twice in one run, existing files per policy.

    Claims are made in input order by the one thread that schedules the batch, so the rules do not depend on
    which image finishes first."""

    def __init__(self, jobs: list[Job], scale: int, suffix: str | None, existing: Existing) -> None:
        self.scale, self.suffix, self.existing = scale, suffix, existing
        self.input_paths = {Path(os.path.realpath(j.source)) for j in jobs}
        self.input_ids = {_file_id(j.source) for j in jobs} - {None}
        self.claimed: dict[Path, str] = {}

    def path_for(self, job: Job, fmt: str | None) -> Path | None:
        """The output path; None while it depends on the content's format (input without an image extension)."""
        if job.out_file is not None:
            return job.out_file
        suffix = self.suffix or (job.source.suffix if job.source.suffix.lower() in EXTENSIONS else None)
        if suffix is None:
            if fmt is None:
                return None
            suffix = FORMATS[fmt]
        return job.out_dir / f"{job.source.stem}_x{self.scale}{suffix}"

    def claim(self, out: Path, source: Path) -> bool:
        """Reserve ``out`` for ``source``. False: skip (exists and --skip-existing). InputError: not allowed."""
        _check_name(out)
        key = Path(os.path.realpath(out))
        if key in self.input_paths or _file_id(out) in self.input_ids:
            raise InputError(f"{out}: this output path is one of the inputs, and inputs are never overwritten; "
                             "choose another -o or --ext")
        if self.claimed.get(key) == str(source):  # decided already (a sharded batch's parent claims first)
            return True
        if key in self.claimed:
            raise InputError(f"{out}: already written in this run for {self.claimed[key]}; "
                             "rename one of the inputs, or use a folder with --recursive to mirror subfolders")
        try:
            exists = out.exists() or out.is_symlink()
        except OSError as e:
            raise InputError(f"{out}: cannot look at the output place ({e.strerror or e}); check its permissions") from None
        if exists:
            if out.is_dir():
                raise InputError(f"{out}: a folder has the output's name; choose another -o or --ext")
            if self.existing == "skip":
                return False
            if self.existing == "fail":
                raise InputError(f"{out}: output exists; pass --overwrite to replace it or --skip-existing to keep it")
        self.claimed[key] = str(source)
        return True

    def release(self, out: Path) -> None:
        """The claimed output was not written (its item failed): a later input may take the name."""
        self.claimed.pop(Path(os.path.realpath(out)), None)


def _check_name(out: Path) -> None:
    limit = _name_max(out.parent)
    if len(os.fsencode(out.name)) > limit:
        raise InputError(f"{out.name[:40]}...: the output name is {len(os.fsencode(out.name))} bytes, over this "
                         f"filesystem's limit of {limit}; rename the input or give -o FILE")


def _name_max(folder: Path) -> int:
    while True:
        try:
            return os.pathconf(folder, "PC_NAME_MAX")
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.ENOTDIR) or folder == folder.parent:
                return 255  # the common limit (ext4, XFS, APFS, NTFS)
            folder = folder.parent  # not created yet: its nearest existing ancestor decides
        except (ValueError, AttributeError):  # no pathconf (Windows)
            return 255


def _file_id(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino
