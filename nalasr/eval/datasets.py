"""Evaluation datasets: named sets under a data root, any folder of HR images, precomputed LR, downloads.

Data root: ``--data-root``, else ``$NALASR_DATA``, else the project's ``datasets/`` folder (layout in
datasets/README.md). A set is found as ``ROOT/<Name>/HR/*`` or ``ROOT/<Name>/*`` (folder names matched
case-insensitively), DIV2K as ``ROOT/DIV2K_valid_HR``. Images are read by content, never by extension.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import stat
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
from PIL import Image, UnidentifiedImageError

from .. import settings
from ..io import imageio
from ..errors import DatasetError, DownloadError, InputError

PROJECT_DATASETS = Path(__file__).resolve().parents[2] / "datasets"  # nalasr/eval/ → the checkout

# ------------------------------------------------------------------------------------------ reading


def read_image(path: str | os.PathLike, *, max_pixels: int = imageio.DEFAULT_MAX_PIXELS) -> np.ndarray:
    """The protocol's view of an image file → uint8 (H, W) for single-channel files, else (H, W, 3).

    Decoding (by content, one-line errors) is :func:`nalasr.io.imageio.read_image`'s; here alpha is dropped
    and 16-bit files are refused, because the protocol is 8-bit. ``max_pixels``: the decompression-bomb guard.
    """
    picture = imageio.read_image(path, max_pixels=max_pixels)
    if picture.bits != 8:
        raise InputError(f"{path}: {picture.describe()} images are not supported (the protocol is 8-bit); "
                         "convert it to 8-bit PNG")
    pixels = picture.pixels
    return pixels[..., 0] if picture.channels <= 2 else pixels[..., :3]


def image_size(path: Path) -> tuple[int, int] | None:
    """(width, height) from the header when ``path`` is an image (by content), else None."""
    try:
        with Image.open(path) as im:
            return im.size
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError):
        return None


# Names that say "image" although the content may not: such a file that does not decode is a bad image of the
# set (reported), not a stray file (ignored). Wider than what decodes (GIF, HEIC): those are reported too.
IMAGE_SUFFIXES = frozenset({*imageio.EXTENSIONS, ".gif", ".ppm", ".pgm", ".pnm", ".pbm", ".jp2", ".j2k",
                            ".heic", ".heif", ".avif", ".jxl", ".tga", ".exr", ".hdr"})


def has_image_header(path: Path) -> bool:
    """Whether Pillow recognises the file's header as some image format (a bomb or a broken body still counts)."""
    try:
        with Image.open(path):
            return True
    except UnidentifiedImageError:
        return False
    except OSError:  # cannot be opened at all (permissions): the name has to decide
        return False
    except Exception:  # noqa: BLE001 - a format plugin recognised the file, then failed on it: a broken image
        return True


def is_image_file(path: Path) -> bool:
    """A file meant as an image: named like one, or one by content. Stray files (notes.txt) are not."""
    return path.suffix.lower() in IMAGE_SUFFIXES or has_image_header(path)


def short_reason(path: str | os.PathLike, error: BaseException) -> str:
    """What is wrong with ``path``, without its name and the advice: "empty file", "cannot read (...)".

    Messages of this package read "<path>: <what>; <what to do>" (nalasr.errors)."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    prefix = f"{path}: "
    if text.startswith(prefix):
        text = text[len(prefix):]
    return text.split("; ", 1)[0]


# ----------------------------------------------------------------------------------- the known sets


@dataclass(frozen=True)
class Archive:
    """A public archive holding a set, pinned by URL and digest."""

    url: str
    digest: str  # "sha256:<hex>", or "md5:<hex>" where only that is published
    size: int | None  # bytes, where published
    member_prefix: str  # the folder inside the archive that becomes ROOT/<install folder>
    max_bytes: int  # extraction cap: the archive's members may not add up to more
    max_files: int = 20_000

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[-1]


# EDSR's benchmark.tar (Set5, Set14, B100, Urban100 with HR and LR_bicubic/X2..X4); only its md5 is
# published (pinned by torchSR). DIV2K: the ETH archives, sha256 and size as pinned by TensorFlow Datasets.
_BENCHMARK = "https://cv.snu.ac.kr/research/EDSR/benchmark.tar"
_BENCHMARK_MD5 = "md5:4ace41d33c2384b97e6b320cd0afd6ba"
_GIB = 1 << 30


@dataclass(frozen=True)
class KnownSet:
    name: str  # canonical lower-case name
    title: str  # how papers spell it (table columns)
    folders: tuple[str, ...]  # folder names looked for under the root; the first is where downloads go
    images: int  # how many HR images the set has
    archive: Archive | None
    manual: str = ""  # how to get it when there is no public archive


KNOWN_SETS: dict[str, KnownSet] = {
    s.name: s
    for s in (
        KnownSet("set5", "Set5", ("Set5",), 5, Archive(_BENCHMARK, _BENCHMARK_MD5, None, "benchmark/Set5", _GIB)),
        KnownSet("set14", "Set14", ("Set14",), 14, Archive(_BENCHMARK, _BENCHMARK_MD5, None, "benchmark/Set14", _GIB)),
        KnownSet("bsd100", "BSD100", ("BSD100", "B100", "BSDS100"), 100,
                 Archive(_BENCHMARK, _BENCHMARK_MD5, None, "benchmark/B100", _GIB)),
        KnownSet("urban100", "Urban100", ("Urban100",), 100,
                 Archive(_BENCHMARK, _BENCHMARK_MD5, None, "benchmark/Urban100", _GIB)),
        KnownSet("manga109", "Manga109", ("Manga109",), 109, None,
                 "Manga109 is given out on request for academic use (manga109.org): put its images in ROOT/Manga109/HR"),
        KnownSet("div2k-valid", "DIV2K-val", ("DIV2K_valid_HR", "DIV2K/DIV2K_valid_HR"), 100,
                 Archive("https://data.vision.ee.ethz.ch/cvl/DIV2K/DIV2K_valid_HR.zip",
                         "sha256:20dd31fd84d777bc1cf5d6b7654a3f569c0aec74458ae094122ad1d0489900fc",
                         448_993_893, "DIV2K_valid_HR", 2 * _GIB)),
    )
}
ALIASES = {"b100": "bsd100", "bsds100": "bsd100", "div2k": "div2k-valid", "div2k_valid": "div2k-valid"}


def known_set(name: str) -> KnownSet | None:
    key = name.lower()
    return KNOWN_SETS.get(ALIASES.get(key, key))


def data_root(root: str | os.PathLike | None = None) -> Path:
    """The data root: ``root``, else $NALASR_DATA, else the project's datasets/ folder."""
    if root is not None:
        return Path(root)
    return settings.get().data or PROJECT_DATASETS


# ------------------------------------------------------------------------------------ resolving a set


@dataclass(frozen=True)
class BadFile:
    """A file of a set that could not be scored, and why (one line, without the file's name)."""

    name: str
    reason: str


@dataclass
class EvalSet:
    """One set to evaluate: its display name, HR folder and HR files (sorted, images by content or name)."""

    name: str
    hr_dir: Path
    files: list[Path]
    skipped: list[Path] = field(default_factory=list)  # stray files there that are not images (notes.txt)
    bad: list[BadFile] = field(default_factory=list)  # image names that are no regular file (FIFO, broken link)

    def lr_dir(self, scale: int) -> Path | None:
        """A precomputed bicubic LR folder for ``scale`` next to the HR folder, when one exists."""
        base = self.hr_dir.parent if self.hr_dir.name.lower() == "hr" else self.hr_dir
        cands = [base / "LR_bicubic" / f"X{scale}", base / "LR_bicubic" / f"x{scale}", base / f"LRbicx{scale}"]
        if self.hr_dir.name.endswith("_HR"):  # DIV2K: DIV2K_valid_HR beside DIV2K_valid_LR_bicubic/X4
            cands.append(self.hr_dir.parent / f"{self.hr_dir.name[:-3]}_LR_bicubic" / f"X{scale}")
        return next((c for c in cands if c.is_dir()), None)

    def lr_files(self, scale: int, files: list[Path] | None = None) -> list[Path] | None:
        """The precomputed LR file of every HR file (same order), or None when there is no LR folder.

        ``files``: the HR files to look up (default: all of the set; the scorable ones when some are bad).
        LR names: the HR stem, or the stem + ``x{s}`` (EDSR, DIV2K) or ``_x{s}``. A folder that lacks
        an HR image's LR is an error, not a silent fallback.
        """
        folder = self.lr_dir(scale)
        if folder is None:
            return None
        by_stem = {p.stem.lower(): p for p in folder.iterdir() if p.is_file()}
        out = []
        for hr in self.files if files is None else files:
            stem = hr.stem.lower()
            lr = next((by_stem[k] for k in (stem, f"{stem}x{scale}", f"{stem}_x{scale}") if k in by_stem), None)
            if lr is None:
                raise DatasetError(f"{folder}: no LR image for {hr.name}; complete or remove that LR folder")
            out.append(lr)
        return out


def _image_files(folder: Path) -> tuple[list[Path], list[Path], list[BadFile]]:
    """(image files, stray files, bad entries) of ``folder``; hidden names (.DS_Store, temp files) are left out.

    Images by content or by name: a 0-byte, unreadable or broken ``x.png`` is an image of the set that will
    fail to decode (and be reported), not a file to drop. Non-regular entries are never opened (a FIFO blocks).
    """
    images, other, bad = [], [], []
    for p in sorted(folder.iterdir()):
        if p.name.startswith(".") or p.is_dir():
            continue
        if not p.is_file():
            if p.suffix.lower() in IMAGE_SUFFIXES:
                bad.append(BadFile(p.name, "not a regular file (a FIFO, device or broken link)"))
            continue
        (images if is_image_file(p) else other).append(p)
    return images, other, bad


def _find_folder(root: Path, names: tuple[str, ...]) -> Path | None:
    """ROOT/<name> for the first name found, matching each path part case-insensitively."""
    for name in names:
        cur: Path | None = root
        for part in PurePosixPath(name).parts:
            assert cur is not None
            hit = [d for d in cur.iterdir() if d.is_dir() and d.name.lower() == part.lower()] if cur.is_dir() else []
            cur = sorted(hit)[0] if hit else None
            if cur is None:
                break
        if cur is not None:
            return cur
    return None


def resolve_set(spec: str | os.PathLike, root: str | os.PathLike | None = None) -> EvalSet:
    """A set name (set5, set14, bsd100/b100, urban100, manga109, div2k-valid) or a folder of HR images."""
    path = Path(spec)
    known = known_set(str(spec)) if isinstance(spec, str) else None
    if known is not None and not path.is_dir():
        base = _find_folder(data_root(root), known.folders)
        if base is None:
            where = data_root(root)
            how = f"run `nalasr datasets download {known.name}`" if known.archive else known.manual.replace("ROOT", str(where))
            raise DatasetError(f"{known.title} not found under the data root {where} (looked for "
                               f"{', '.join(known.folders)}); {how}, or set --data-root / NALASR_DATA")
        name = known.title
    else:
        if not path.exists():
            if os.sep in str(spec) or str(spec).startswith("."):
                raise DatasetError(f"folder {spec} does not exist; pass a folder of HR images or a set name")
            names = ", ".join(sorted(KNOWN_SETS))
            raise DatasetError(f"unknown set {str(spec)!r}: use one of {names} (b100 = bsd100) or a folder of HR images")
        if not path.is_dir():
            raise DatasetError(f"{spec} is a file, not a folder; pass the folder of HR images")
        full = path.resolve()
        base, name = path, (full.parent.name if full.name.lower() == "hr" else full.name)
    hr_dir = next((d for d in base.iterdir() if d.is_dir() and d.name.lower() == "hr"), base)
    files, other, bad = _image_files(hr_dir)
    if not files:
        raise DatasetError(f"{hr_dir}: no images in this folder ({len(other) + len(bad)} other files); "
                           "put HR images there")
    return EvalSet(name, hr_dir, files, other, bad)


def list_sets(root: str | os.PathLike | None = None) -> list[dict[str, object]]:
    """Every known set: where it is under the data root (or None), its image count, whether it downloads."""
    rows: list[dict[str, object]] = []
    for s in KNOWN_SETS.values():
        base = _find_folder(data_root(root), s.folders)
        count = None
        if base is not None:
            hr = next((d for d in base.iterdir() if d.is_dir() and d.name.lower() == "hr"), base)
            count = len(_image_files(hr)[0])
        rows.append({"name": s.name, "title": s.title, "folder": str(base) if base else None, "images": count,
                     "expected": s.images, "download": s.archive is not None})
    return rows


# ----------------------------------------------------------------------------------------- download

Progress = Callable[[int, int | None], None]  # (bytes done, total or None)
_CHUNK = 1 << 20


def _hasher(digest: str) -> tuple[Any, str]:
    algo, _, hexd = digest.partition(":")
    if algo not in ("sha256", "md5") or not hexd:
        raise ValueError(f"bad digest {digest!r}")
    return hashlib.new(algo), hexd.lower()


def _file_digest(path: Path, digest: str) -> bool:
    h, want = _hasher(digest)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest() == want


def fetch(url: str, dest: Path, *, digest: str, size: int | None, max_bytes: int,
          progress: Progress | None = None, timeout: float = 30.0) -> Path:
    """Download ``url`` to ``dest``, resuming a ``dest.part`` left by an interrupted run (HTTP Range).

    The finished file must have ``size`` bytes (when given) and ``digest``; otherwise it is deleted and
    DownloadError raised. A file already at ``dest`` with the right digest is not downloaded again.
    """
    if dest.is_file() and _file_digest(dest, digest):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    have = part.stat().st_size if part.is_file() else 0
    limit = size if size is not None else max_bytes
    req = urllib.request.Request(url, headers={"User-Agent": "nalasr", **({"Range": f"bytes={have}-"} if have else {})})
    host = urllib.parse.urlsplit(url).netloc
    total = size  # what a complete file has: the published size, else what the server announces
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            if have and resp.status != 206:  # the server ignored Range: start over
                have = 0
            length = resp.headers.get("Content-Length")
            total = have + int(length) if length and length.isdigit() else size
            with open(part, "ab" if have else "wb") as f:
                done = have
                while chunk := resp.read(_CHUNK):
                    done += len(chunk)
                    if done > limit:
                        raise DownloadError(f"{url}: the server sent more than the expected {limit} bytes; refusing it")
                    f.write(chunk)
                    if progress:
                        progress(done, total)
    except urllib.error.HTTPError as e:
        if e.code == 416 and have:  # nothing left to send: the .part is complete; its digest decides below
            pass
        else:
            raise DownloadError(f"{url}: HTTP {e.code} {e.reason}; try again later or fetch it by hand into {dest}") from None
    except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
        reason = getattr(e, "reason", e)
        kept = f" ({part.stat().st_size} bytes kept; run again to resume)" if part.is_file() and part.stat().st_size else ""
        raise DownloadError(f"cannot download from {host} ({reason}){kept}; check the connection, "
                            f"or fetch {url} by hand into {dest}") from None
    got = part.stat().st_size
    if total is not None and got < total:
        raise DownloadError(f"{url}: download incomplete ({got} of {total} bytes); run again to resume")
    if (size is not None and got != size) or not _file_digest(part, digest):
        part.unlink()
        raise DownloadError(f"{url}: checksum mismatch (expected {digest}); the file was deleted, try again")
    os.replace(part, dest)
    return dest


def _safe_name(name: str) -> PurePosixPath:
    """A member name as a relative path; absolute names, drive letters and '..' are refused."""
    norm = name.replace("\\", "/")
    p = PurePosixPath(norm)
    if norm.startswith("/") or (len(norm) > 1 and norm[1] == ":") or ".." in p.parts:
        raise DownloadError(f"archive member {name!r} points outside the extraction folder; refusing the archive")
    return p


@dataclass
class _Member:
    path: PurePosixPath
    is_dir: bool
    size: int
    open: Callable[[], object]  # → a binary file object


def _members(archive: Path) -> Iterator[_Member]:
    """Members of a tar or zip (by content), each checked: no links, devices or unsafe names."""
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as z:
            for info in z.infolist():
                kind = (info.external_attr >> 16) & 0o170000
                if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
                    raise DownloadError(f"archive member {info.filename!r} is a link or special file; refusing the archive")
                yield _Member(_safe_name(info.filename), info.is_dir(), info.file_size,
                              lambda info=info: z.open(info))
    elif tarfile.is_tarfile(archive):
        with tarfile.open(archive) as t:
            for m in t:
                if not (m.isfile() or m.isdir()):
                    raise DownloadError(f"archive member {m.name!r} is a link or special file; refusing the archive")
                yield _Member(_safe_name(m.name), m.isdir(), m.size, lambda m=m: t.extractfile(m))
    else:
        raise DownloadError(f"{archive}: neither a zip nor a tar archive; delete it and download again")


def safe_extract(archive: Path, dest: Path, *, prefix: str = "", max_bytes: int, max_files: int = 20_000) -> int:
    """Extract the members of ``archive`` under ``prefix`` into ``dest`` (prefix stripped); returns files written.

    The whole archive is checked first: any absolute or '..' name, link or special file, more than
    ``max_files`` members or more than ``max_bytes`` in total refuses it before anything is written.
    Writing is bounded too (a member longer than it declared is cut off with an error).
    """
    total = count = 0
    for m in _members(archive):
        total += m.size
        count += 1
        if count > max_files or total > max_bytes:
            raise DownloadError(f"{archive.name}: more than {max_files} members or {max_bytes} bytes unpacked; refusing it")
    pre = PurePosixPath(prefix) if prefix else None
    written = 0
    for m in _members(archive):
        rel = m.path
        if pre is not None:
            if rel.parts[: len(pre.parts)] != pre.parts:
                continue
            rel = PurePosixPath(*rel.parts[len(pre.parts):])
        if not rel.parts:
            continue
        target = dest.joinpath(*rel.parts)
        if m.is_dir:
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        src = m.open()
        with src as fin, open(target, "wb") as fout:  # type: ignore[attr-defined]
            left = m.size
            while chunk := fin.read(min(_CHUNK, left + 1)):  # type: ignore[attr-defined]
                left -= len(chunk)
                if left < 0:
                    raise DownloadError(f"{archive.name}: member {m.path} is longer than it declares; refusing it")
                fout.write(chunk)
        written += 1
    return written


def download(name: str, root: str | os.PathLike | None = None, *, force: bool = False,
             progress: Progress | None = None, mirror: str | None = None) -> Path:
    """Fetch a known set's public archive (pinned digest), extract it safely to ROOT/<folder>; returns that folder.

    The archive is kept in ROOT/.downloads (several sets share EDSR's benchmark.tar). ``mirror`` (or
    $NALASR_DATASETS_MIRROR) replaces the URL's directory, for users behind a mirror; the digest still holds.
    """
    known = known_set(name)
    if known is None:
        raise DatasetError(f"unknown set {name!r}: downloadable sets are "
                           f"{', '.join(s.name for s in KNOWN_SETS.values() if s.archive)}")
    if known.archive is None:
        raise DatasetError(f"{known.title} cannot be downloaded automatically: {known.manual}")
    base = data_root(root)
    existing = _find_folder(base, known.folders)
    target = base / known.folders[0]
    if existing is not None and not force:
        return existing
    arc = known.archive
    mirror = mirror or settings.get().datasets_mirror
    url = f"{mirror.rstrip('/')}/{arc.filename}" if mirror else arc.url
    cache = base / ".downloads"
    path = fetch(url, cache / arc.filename, digest=arc.digest, size=arc.size, max_bytes=arc.max_bytes, progress=progress)
    base.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".nalasr-extract-", dir=base))
    try:
        n = safe_extract(path, staging, prefix=arc.member_prefix, max_bytes=arc.max_bytes, max_files=arc.max_files)
        if n == 0:
            raise DownloadError(f"{arc.filename} holds no {arc.member_prefix}/ folder; the archive changed upstream")
        if target.exists():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
