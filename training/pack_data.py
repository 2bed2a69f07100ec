"""Pack training images into parts that each fit one device call beside the working tree.

A device call carries the working tree plus what ``carry`` names, 64 MiB in all, and a warm machine keeps
what earlier calls carried. So the training data (~131 MiB) travels as a deterministic tar split into
``.carry/parts/NN`` files sized to the room the tree leaves, one part a call, with ``.carry/parts.sha256``
(carried every call) naming them all. On the device ``training/device_data.sh`` checks the parts it has
against that list, unpacks them once complete, and otherwise names the parts a fresh machine lacks.

    python training/pack_data.py ../shared/datasets/train ../shared/datasets/train_extra
"""

from __future__ import annotations

import argparse
import hashlib
import io
import math
import subprocess
import tarfile
from pathlib import Path

CALL_LIMIT = 64 * 2**20  # bytes a device call may carry, the tree included
MARGIN = 2 * 2**20  # room for files the tree gains before the calls (scripts, logs) and the manifest


def travel_size(repo: Path) -> int:
    """Bytes of the tracked and untracked-not-ignored files: what travels with every call."""
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=repo, check=True,
                           capture_output=True).stdout.split(b"\0")
    return sum((repo / n.decode()).stat().st_size for n in names if n and (repo / n.decode()).is_file())


def tar_bytes(folders: list[Path]) -> bytes:
    """One tar of ``folders`` (each as its own top-level name), sorted, with fixed owners and times."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for folder in folders:
            for path in sorted(p for p in folder.rglob("*") if p.is_file()):
                info = tarfile.TarInfo(f"{folder.name}/{path.relative_to(folder).as_posix()}")
                info.size, info.mtime, info.mode = path.stat().st_size, 0, 0o644
                with path.open("rb") as f:
                    tar.addfile(info, f)
    return buf.getvalue()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="+", type=Path, help="image folders; each unpacks under its own name")
    ap.add_argument("--out", type=Path, default=Path(".carry"), help="where parts/ and parts.sha256 go")
    ap.add_argument("--tree-bytes", type=int, default=None, help="room the tree takes (default: measured)")
    args = ap.parse_args()

    repo = Path(__file__).resolve().parents[1]
    tree = args.tree_bytes if args.tree_bytes is not None else travel_size(repo)
    room = CALL_LIMIT - tree - MARGIN
    data = tar_bytes(args.folders)
    n = math.ceil(len(data) / room)
    size = math.ceil(len(data) / n)  # equal parts: each call carries about the same
    parts = args.out / "parts"
    parts.mkdir(parents=True, exist_ok=True)
    for old in parts.iterdir():
        old.unlink()
    lines = []
    for i in range(n):
        chunk = data[i * size:(i + 1) * size]
        (parts / f"{i:02d}").write_bytes(chunk)
        lines.append(f"{hashlib.sha256(chunk).hexdigest()}  {i:02d}\n")
    (args.out / "parts.sha256").write_text("".join(lines))
    print(f"tree {tree / 2**20:.1f} MiB, data {len(data) / 2**20:.1f} MiB: {n} parts of {size / 2**20:.1f} MiB "
          f"in {parts}; carry {args.out}/parts/NN and {args.out}/parts.sha256 in call NN")


if __name__ == "__main__":
    main()
