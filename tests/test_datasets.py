"""Datasets: layouts, reading by content, precomputed LR, and downloads against a local HTTP server."""

from __future__ import annotations

import hashlib
import http.server
import io
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from nalasr import settings
from nalasr.eval import datasets as D
from nalasr.cli import run
from nalasr.errors import DatasetError, DownloadError, InputError


def _png(path: Path, w: int = 24, h: int = 20, mode: str = "RGB", fmt: str = "PNG", seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    shape = (h, w) if mode == "L" else (h, w, len(mode))
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8), mode).save(path, format=fmt)
    return path


# ------------------------------------------------------------------------------------------- reading


def test_read_image_by_content(tmp_path: Path) -> None:
    gray = D.read_image(_png(tmp_path / "g.png", mode="L"))
    assert gray.shape == (20, 24) and gray.dtype == np.uint8
    assert D.read_image(_png(tmp_path / "a.png", mode="RGBA")).shape == (20, 24, 3)
    # a lossless WebP named .png and a PNG named .jpg: decoded by content, pixel-exact
    src = _png(tmp_path / "src.png", seed=3)
    Image.open(src).save(tmp_path / "lossless.png", format="WEBP", lossless=True)
    assert np.array_equal(D.read_image(tmp_path / "lossless.png"), D.read_image(src))
    (tmp_path / "renamed.jpg").write_bytes(src.read_bytes())
    assert np.array_equal(D.read_image(tmp_path / "renamed.jpg"), D.read_image(src))


def test_read_image_refuses_garbage_and_16_bit(tmp_path: Path) -> None:
    (tmp_path / "x.png").write_bytes(b"not an image")
    with pytest.raises(InputError, match=r"x\.png: not an image"):
        D.read_image(tmp_path / "x.png")
    Image.fromarray(np.zeros((4, 4), np.uint16)).save(tmp_path / "d.png")
    with pytest.raises(InputError, match="8-bit"):
        D.read_image(tmp_path / "d.png")


# ------------------------------------------------------------------------------------------- layouts


def test_data_root_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NALASR_DATA", raising=False)
    settings.reload()  # nalasr reads the environment once
    assert D.data_root() == D.PROJECT_DATASETS
    monkeypatch.setenv("NALASR_DATA", str(tmp_path / "env"))
    settings.reload()  # nalasr reads the environment once
    assert D.data_root() == tmp_path / "env"
    assert D.data_root(tmp_path / "cli") == tmp_path / "cli"


def test_named_sets_in_every_layout(tmp_path: Path) -> None:
    _png(tmp_path / "set5" / "HR" / "baby.png")  # NAME/HR/*, folder name in another case
    _png(tmp_path / "B100" / "1.png")  # NAME/* under the alias folder name
    _png(tmp_path / "DIV2K" / "DIV2K_valid_HR" / "0801.png")  # DIV2K layout
    (tmp_path / "set5" / "HR" / "notes.txt").write_text("not an image")
    s5 = D.resolve_set("set5", tmp_path)
    assert s5.name == "Set5" and [p.name for p in s5.files] == ["baby.png"] and len(s5.skipped) == 1
    assert D.resolve_set("b100", tmp_path).files == D.resolve_set("BSD100", tmp_path).files
    assert D.resolve_set("div2k-valid", tmp_path).hr_dir.name == "DIV2K_valid_HR"
    folder = D.resolve_set(str(tmp_path / "set5" / "HR"), None)  # a folder given directly, HR itself
    assert folder.name == "set5" and folder.files == s5.files
    rows = {r["name"]: r for r in D.list_sets(tmp_path)}
    assert rows["set5"]["images"] == 1 and rows["urban100"]["folder"] is None and rows["manga109"]["download"] is False


@pytest.mark.parametrize(("spec", "match"), [
    ("set15", "unknown set 'set15'"),
    ("urban100", "Urban100 not found under the data root"),
    ("manga109", "manga109.org"),
    ("./no/such/folder", "does not exist"),
])
def test_resolve_errors(tmp_path: Path, spec: str, match: str) -> None:
    with pytest.raises(DatasetError, match=match):
        D.resolve_set(spec, tmp_path)


def test_empty_folder_and_file_are_errors(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "readme.txt").write_text("x")
    with pytest.raises(DatasetError, match="no images"):
        D.resolve_set(str(tmp_path / "empty"))
    with pytest.raises(DatasetError, match="is a file"):
        D.resolve_set(str(tmp_path / "empty" / "readme.txt"))


def test_lr_folders_edsr_and_div2k_naming(tmp_path: Path) -> None:
    _png(tmp_path / "Set5" / "HR" / "baby.png")
    _png(tmp_path / "Set5" / "LR_bicubic" / "X2" / "babyx2.png", 12, 10)
    s = D.resolve_set("set5", tmp_path)
    assert s.lr_files(2) == [tmp_path / "Set5" / "LR_bicubic" / "X2" / "babyx2.png"]
    assert s.lr_files(4) is None
    _png(tmp_path / "DIV2K_valid_HR" / "0801.png")
    _png(tmp_path / "DIV2K_valid_LR_bicubic" / "X4" / "0801x4.png", 6, 5)
    assert D.resolve_set("div2k-valid", tmp_path).lr_files(4)[0].name == "0801x4.png"  # type: ignore[index]
    _png(tmp_path / "Set5" / "HR" / "bird.png")  # an LR folder lacking an image is an error, not a fallback
    with pytest.raises(DatasetError, match="no LR image for bird.png"):
        D.resolve_set("set5", tmp_path).lr_files(2)


# ------------------------------------------------------------------------------------ download server


class _Handler(http.server.BaseHTTPRequestHandler):
    """Serves ``files`` with HTTP Range; ``cut_once`` names a file whose first GET stops half-way."""

    files: dict[str, bytes] = {}
    cut_once: set[str] = set()
    ranges: list[str] = []

    def do_GET(self) -> None:  # noqa: N802
        name = self.path.lstrip("/")
        data = self.files.get(name)
        if data is None:
            self.send_error(404)
            return
        start = 0
        rng = self.headers.get("Range")
        if rng:
            self.ranges.append(rng)
            start = int(rng.split("=")[1].split("-")[0])
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        body = data[start:]
        if name in self.cut_once:
            self.cut_once.discard(name)
            body = body[: len(body) // 2]  # then drop the connection: the client sees a short read
            self.close_connection = True
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, type[_Handler]]]:
    """A local HTTP server on 127.0.0.1 (a free port) for this test only; stopped afterwards."""
    handler = type("H", (_Handler,), {"files": {}, "cut_once": set(), "ranges": []})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.timeout = 5
    t = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    finally:
        httpd.shutdown()
        httpd.server_close()
        t.join(timeout=5)


def _tar(members: dict[str, bytes], extra: list[tarfile.TarInfo] | None = None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        for info in extra or []:
            t.addfile(info)
    return buf.getvalue()


def _png_bytes(seed: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(seed).integers(0, 256, (16, 16, 3), dtype=np.uint8)).save(buf, "PNG")
    return buf.getvalue()


def _benchmark_tar() -> bytes:
    return _tar({"benchmark/Set5/HR/baby.png": _png_bytes(1), "benchmark/Set5/HR/bird.png": _png_bytes(2),
                 "benchmark/Set14/HR/zebra.png": _png_bytes(3)})


def _pin(monkeypatch: pytest.MonkeyPatch, name: str, url: str, data: bytes, prefix: str, *,
         md5_only: bool = False) -> None:
    """Point a known set at the test server's archive, pinned by its real sha256 and size (or md5 alone)."""
    known = D.KNOWN_SETS[name]
    if md5_only:  # like EDSR's benchmark.tar: no published size
        arc = D.Archive(url, "md5:" + hashlib.md5(data).hexdigest(), None, prefix, 1 << 20)
    else:
        arc = D.Archive(url, "sha256:" + hashlib.sha256(data).hexdigest(), len(data), prefix, 1 << 20)
    monkeypatch.setitem(D.KNOWN_SETS, name, D.KnownSet(known.name, known.title, known.folders, known.images, arc))


def test_download_installs_only_the_asked_set(tmp_path: Path, server, monkeypatch: pytest.MonkeyPatch) -> None:
    url, h = server
    data = _benchmark_tar()
    h.files["benchmark.tar"] = data
    _pin(monkeypatch, "set5", f"{url}/benchmark.tar", data, "benchmark/Set5")
    seen: list[int] = []
    folder = D.download("set5", tmp_path, progress=lambda done, total: seen.append(done))
    assert folder == tmp_path / "Set5"
    assert sorted(p.name for p in (folder / "HR").iterdir()) == ["baby.png", "bird.png"]
    assert not (tmp_path / "Set14").exists() and seen[-1] == len(data)
    assert D.resolve_set("set5", tmp_path).name == "Set5"
    assert not list(tmp_path.glob(".nalasr-extract-*"))  # staging cleaned up
    assert D.download("set5", tmp_path) == folder  # already there: nothing fetched


@pytest.mark.parametrize("md5_only", [False, True])
def test_download_resumes_with_range(tmp_path: Path, server, monkeypatch: pytest.MonkeyPatch, md5_only: bool) -> None:
    url, h = server
    data = _benchmark_tar()
    h.files["benchmark.tar"] = data
    h.cut_once.add("benchmark.tar")
    _pin(monkeypatch, "set5", f"{url}/benchmark.tar", data, "benchmark/Set5", md5_only=md5_only)
    with pytest.raises(DownloadError, match="run again to resume"):
        D.download("set5", tmp_path)
    part = tmp_path / ".downloads" / "benchmark.tar.part"
    assert 0 < part.stat().st_size < len(data)
    D.download("set5", tmp_path)
    assert h.ranges == [f"bytes={len(data) // 2}-"]
    assert (tmp_path / ".downloads" / "benchmark.tar").read_bytes() == data and not part.exists()


def test_download_checksum_mismatch_deletes(tmp_path: Path, server, monkeypatch: pytest.MonkeyPatch) -> None:
    url, h = server
    data = _benchmark_tar()
    h.files["benchmark.tar"] = data[:-1] + bytes([data[-1] ^ 1])  # same size, one bit flipped
    _pin(monkeypatch, "set5", f"{url}/benchmark.tar", data, "benchmark/Set5")
    with pytest.raises(DownloadError, match="checksum mismatch"):
        D.download("set5", tmp_path)
    assert not list((tmp_path / ".downloads").iterdir()) and not (tmp_path / "Set5").exists()


def test_download_offline_is_one_clear_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _pin(monkeypatch, "set5", f"http://127.0.0.1:{port}/benchmark.tar", b"x", "benchmark/Set5")
    with pytest.raises(DownloadError) as e:
        D.download("set5", tmp_path)
    assert f"cannot download from 127.0.0.1:{port}" in str(e.value) and "\n" not in str(e.value)


def test_download_zip_div2k_layout(tmp_path: Path, server, monkeypatch: pytest.MonkeyPatch) -> None:
    url, h = server
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("DIV2K_valid_HR/0801.png", _png_bytes(4))
        z.writestr("DIV2K_valid_HR/0802.png", _png_bytes(5))
    h.files["DIV2K_valid_HR.zip"] = buf.getvalue()
    _pin(monkeypatch, "div2k-valid", f"{url}/DIV2K_valid_HR.zip", buf.getvalue(), "DIV2K_valid_HR")
    folder = D.download("div2k", tmp_path)
    assert folder == tmp_path / "DIV2K_valid_HR" and len(D.resolve_set("div2k-valid", tmp_path).files) == 2


def _link(name: str, kind: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = "/etc/passwd"
    return info


@pytest.mark.parametrize(("members", "extra", "match"), [
    ({"/abs/evil.png": b"x"}, None, "outside"),
    ({"benchmark/Set5/../../evil.png": b"x"}, None, "outside"),
    ({"benchmark/Set5/HR/a.png": b"x"}, [_link("benchmark/Set5/HR/l.png", tarfile.SYMTYPE)], "link"),
    ({"benchmark/Set5/HR/a.png": b"x"}, [_link("benchmark/Set5/HR/h.png", tarfile.LNKTYPE)], "link"),
    ({"benchmark/Set5/HR/a.png": b"x" * 5000}, None, "bytes unpacked"),
    ({f"benchmark/Set5/HR/{i}.png": b"x" for i in range(30)}, None, "more than 20 members"),
])
def test_extraction_refuses_unsafe_archives(tmp_path: Path, members: dict[str, bytes], extra, match: str) -> None:
    arc = tmp_path / "a.tar"
    arc.write_bytes(_tar(members, extra))
    dest = tmp_path / "out"
    dest.mkdir()
    with pytest.raises(DownloadError, match=match):
        D.safe_extract(arc, dest, prefix="benchmark/Set5", max_bytes=4096, max_files=20)
    assert not list(dest.iterdir())  # refused before anything was written


def test_extraction_refuses_zip_symlink(tmp_path: Path) -> None:
    arc = tmp_path / "a.zip"
    with zipfile.ZipFile(arc, "w") as z:
        info = zipfile.ZipInfo("DIV2K_valid_HR/link.png")
        info.external_attr = (0o120777 << 16)
        z.writestr(info, "/etc/passwd")
    with pytest.raises(DownloadError, match="link"):
        D.safe_extract(arc, tmp_path, max_bytes=1 << 20)


# ---------------------------------------------------------------------------------------------- CLI


def _error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1, err
    return err[0]


def test_cli_download_and_list(tmp_path: Path, server, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    url, h = server
    data = _benchmark_tar()
    h.files["benchmark.tar"] = data
    _pin(monkeypatch, "set14", f"{url}/benchmark.tar", data, "benchmark/Set14")
    assert run(["datasets", "download", "set14", "--data-root", str(tmp_path)]) == 0
    assert str(tmp_path / "Set14") in capsys.readouterr().out
    assert run(["datasets", "list", "--data-root", str(tmp_path), "--json"]) == 0
    assert '"images": 1' in capsys.readouterr().out


def test_cli_download_errors(tmp_path: Path, server, monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture[str]) -> None:
    url, h = server
    h.files["benchmark.tar"] = _benchmark_tar()  # not the published archive: the pinned md5 refuses it
    monkeypatch.setenv("NALASR_DATASETS_MIRROR", url)
    settings.reload()  # nalasr reads the environment once
    assert run(["datasets", "download", "urban100", "--data-root", str(tmp_path)]) == DownloadError.exit_code
    assert "checksum mismatch" in _error_line(capsys)
    assert run(["datasets", "download", "manga109", "--data-root", str(tmp_path)]) == DatasetError.exit_code
    assert "manga109.org" in _error_line(capsys)
    assert run(["datasets", "download", "set6", "--data-root", str(tmp_path)]) == DatasetError.exit_code
    assert "unknown set 'set6'" in _error_line(capsys)
