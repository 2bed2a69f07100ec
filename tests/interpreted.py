"""Run a kernel test file as a script under the Triton interpreter and read back the JSON it writes.

TRITON_INTERPRET must be set before Triton is imported and must not leak into the rest of the suite (a later
CUDA run in the same process would silently interpret), hence a subprocess per test file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_under_interpreter(script: str, out: Path, *args: str, timeout: int = 300) -> dict:
    """``python script *args out`` with TRITON_INTERPRET=1 and no GPU visible; the JSON the script wrote to out."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "kernels"), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, script, *args, str(out)], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)
    if proc.returncode != 0:
        raise AssertionError(f"interpreter worker failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    return json.loads(Path(out).read_text())
