"""Atomic writes and the temp files a killed writer leaves behind (issue 39 defect 9)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nalasr.io import fsutil
from nalasr.io.fsutil import atomic_path, is_temp_name, remove_stale_temps

posix_only = pytest.mark.skipif(os.name != "posix", reason="process liveness is checked with POSIX signals")
OTHER_HOST = "00000000" if fsutil._HOST != "00000000" else "ffffffff"


def _temp(folder: Path, pid: int, host: str = fsutil._HOST, stem: str = "photo_x2", suffix: str = ".png") -> Path:
    p = folder / f".{stem}.nalasr-{pid}-{host}-k3j_9x0a.tmp{suffix}"
    p.write_bytes(b"half an image")
    return p


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _age(p: Path, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(p, (t, t), follow_symlinks=False)


def test_temp_is_named_as_ours_with_pid_and_keeps_the_suffix(tmp_path):
    target = tmp_path / "photo_x2.png"
    with atomic_path(target) as tmp:
        assert tmp.parent == tmp_path
        assert tmp.name.startswith(f".photo_x2.nalasr-{os.getpid()}-{fsutil._HOST}-")
        assert tmp.name.endswith(".tmp.png") and tmp.suffix == ".png"  # writers pick the format by extension
        assert is_temp_name(tmp.name)
        tmp.write_bytes(b"data")
    assert target.read_bytes() == b"data"
    assert os.listdir(tmp_path) == ["photo_x2.png"]


def test_temp_name_without_suffix_and_with_a_very_long_stem(tmp_path):
    with atomic_path(tmp_path / "noext") as tmp:
        assert is_temp_name(tmp.name) and tmp.name.endswith(".tmp")
        tmp.write_bytes(b"x")
    long_name = "a" * 240 + ".png"  # fits the filesystem; with our tag it would not: the stem is shortened
    with atomic_path(tmp_path / long_name) as tmp:
        assert len(tmp.name.encode()) <= 255 and is_temp_name(tmp.name)
        tmp.write_bytes(b"y")
    assert sorted(os.listdir(tmp_path)) == sorted(["noext", long_name])


@posix_only
def test_temp_of_a_killed_writer_is_removed(tmp_path):
    """A writer SIGKILLed between writing and renaming leaves its temp; once it is dead the temp goes."""
    code = (
        "import os, signal, sys; from nalasr.io.fsutil import atomic_path\n"
        f"with atomic_path({str(tmp_path / 'out_x4.png')!r}) as tmp:\n"
        "    tmp.write_bytes(b'partial'); print(tmp.name, flush=True); os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGKILL
    left = tmp_path / done.stdout.strip()
    assert left.is_file() and os.listdir(tmp_path) == [left.name]
    assert remove_stale_temps(tmp_path) == [left]
    assert os.listdir(tmp_path) == []


@posix_only
def test_stale_temp_of_a_dead_pid_removed_live_pid_kept(tmp_path):
    dead = _temp(tmp_path, _dead_pid(), stem="a_x2")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = _temp(tmp_path, sleeper.pid, stem="b_x2")
        assert remove_stale_temps(tmp_path) == [dead]
        assert live.exists() and not dead.exists()
    finally:
        sleeper.kill()
        sleeper.wait()
    assert remove_stale_temps(tmp_path) == [live]  # its writer is gone now
    assert os.listdir(tmp_path) == []


def test_temp_of_this_process_is_kept_while_it_writes(tmp_path):
    with atomic_path(tmp_path / "x.png") as tmp:
        tmp.write_bytes(b"in progress")
        assert remove_stale_temps(tmp_path) == []
        assert tmp.exists()
    assert os.listdir(tmp_path) == ["x.png"]


@posix_only
def test_other_hosts_temps_only_go_when_old(tmp_path):
    """On a shared filesystem a pid from another host says nothing here: only the age decides."""
    young = _temp(tmp_path, _dead_pid(), host=OTHER_HOST, stem="young")
    old = _temp(tmp_path, _dead_pid(), host=OTHER_HOST, stem="old")
    _age(old, 25 * 3600)
    assert remove_stale_temps(tmp_path) == [old]
    assert young.exists()
    assert remove_stale_temps(tmp_path, min_age_s=0.0) == [young]


def test_an_old_temp_goes_even_if_its_pid_looks_alive(tmp_path):
    """A pid can be reused by an unrelated process; a day-old temp is no write in progress."""
    ours = _temp(tmp_path, os.getppid())
    _age(ours, 2 * 24 * 3600)
    assert remove_stale_temps(tmp_path) == [ours]


@posix_only
def test_other_files_are_never_removed(tmp_path):
    dead = _dead_pid()
    keep = {
        ".x.tmp.png": "a foreign temp file (another program's, or our old naming)",
        f".x.{dead}.tmp.png": "a dotfile with a number",
        f".x.nalasr-{dead}.tmp.png": "our tag without host and random part",
        f"x.nalasr-{dead}-{fsutil._HOST}-abcdefgh.tmp.png": "no leading dot",
        f".x.nalasr-{dead}-{fsutil._HOST}-abcdefgh.tmp.png.bak": "something after the suffix",
        f".x.nalasr-0-{fsutil._HOST}-abcdefgh.tmp.png": "pid 0 (os.kill(0, 0) would signal our process group)",
        f".x.nalasr-{dead}-{fsutil._HOST.upper()}-abcdefgh.tmp.png": "not our host tag's spelling",
        f".x.nalasr-{dead}-{fsutil._HOST}-abcdefg.tmp.png": "random part of the wrong length",
        "photo_x2.png": "an output",
        ".hidden": "a dotfile",
    }
    for name in keep:
        (tmp_path / name).write_bytes(b"keep")
        _age(tmp_path / name, 30 * 24 * 3600)
    folder_like = tmp_path / f".d.nalasr-{dead}-{fsutil._HOST}-abcdefgh.tmp.png"  # a folder with our pattern
    folder_like.mkdir()
    target = tmp_path / "photo_x2.png"
    link = tmp_path / f".l.nalasr-{dead}-{fsutil._HOST}-abcdefgh.tmp.png"  # a symlink with our pattern
    link.symlink_to(target)
    _age(link, 30 * 24 * 3600)
    sub = tmp_path / "sub"
    sub.mkdir()
    below = _temp(sub, dead)  # only the folder given is cleaned, not below it
    before = sorted(os.listdir(tmp_path))
    assert remove_stale_temps(tmp_path) == []
    assert sorted(os.listdir(tmp_path)) == before
    assert target.read_bytes() == b"keep" and below.exists()


def test_missing_folder_is_nothing_to_clean(tmp_path):
    assert remove_stale_temps(tmp_path / "nope") == []
    (tmp_path / "file").write_bytes(b"")
    assert remove_stale_temps(tmp_path / "file") == []


@pytest.mark.parametrize("exc", [ValueError, KeyboardInterrupt, SystemExit, GeneratorExit])
@pytest.mark.parametrize("overwrite", [True, False])
def test_atomic_write_leaves_nothing_on_an_exception(tmp_path, exc, overwrite):
    target = tmp_path / "x_x2.png"
    with pytest.raises(exc):
        with atomic_path(target, overwrite=overwrite) as tmp:
            tmp.write_bytes(b"half")
            raise exc()
    assert os.listdir(tmp_path) == []
    target.write_bytes(b"old")  # an existing output survives a failed replacement too
    with pytest.raises(exc):
        with atomic_path(target, overwrite=True) as tmp:
            tmp.write_bytes(b"new")
            raise exc()
    assert os.listdir(tmp_path) == ["x_x2.png"] and target.read_bytes() == b"old"


def test_no_overwrite_refuses_an_existing_target_and_cleans_up(tmp_path):
    target = tmp_path / "x.png"
    target.write_bytes(b"keep")
    with pytest.raises(FileExistsError):
        with atomic_path(target, overwrite=False) as tmp:
            tmp.write_bytes(b"new")
    assert os.listdir(tmp_path) == ["x.png"] and target.read_bytes() == b"keep"


@posix_only
def test_permissions_are_those_of_a_plain_open(tmp_path):
    plain = tmp_path / "plain.png"
    plain.write_bytes(b"")
    with atomic_path(tmp_path / "atomic.png") as tmp:
        tmp.write_bytes(b"x")
    assert (tmp_path / "atomic.png").stat().st_mode & 0o7777 == plain.stat().st_mode & 0o7777
    plain.chmod(0o640)
    with atomic_path(plain) as tmp:  # a replaced file keeps its mode
        tmp.write_bytes(b"y")
    assert plain.stat().st_mode & 0o7777 == 0o640 and plain.read_bytes() == b"y"


def test_long_multibyte_name_is_shortened_by_whole_characters(tmp_path):
    """NAME_MAX counts bytes: a stem of 2-byte characters is cut by characters, never inside one."""
    long_name = "é" * 120 + ".png"  # 244 bytes
    with atomic_path(tmp_path / long_name) as tmp:
        assert len(os.fsencode(tmp.name)) <= 255 and is_temp_name(tmp.name)
        assert tmp.name.encode("utf-8").decode("utf-8") == tmp.name and tmp.name.endswith(".tmp.png")
        tmp.write_bytes(b"z")
    assert os.listdir(tmp_path) == [long_name]


def test_temp_names_are_recognised_for_any_stem():
    for stem in ("", "a.b", "x_x2", "with space", "new\nline", ".dot"):
        assert is_temp_name(f".{stem}.nalasr-123-{fsutil._HOST}-ab_12xyz.tmp.png")
    assert is_temp_name(f".x.nalasr-123-{fsutil._HOST}-ab_12xyz.tmp")  # target without a suffix


@posix_only
def test_host_tag_names_the_pid_namespace_too():
    """Containers sharing a hostname and a folder do not share pids: their temps must not look like ours."""
    if not os.path.exists("/proc/self/ns/pid"):
        pytest.skip("no PID namespaces here")
    import hashlib
    import socket

    ident = socket.gethostname() + "\0" + os.readlink("/proc/self/ns/pid")
    assert fsutil._HOST == hashlib.sha1(ident.encode("utf-8", "surrogateescape")).hexdigest()[:8]
