"""Training configuration: one dataclass, read from TOML, written beside the checkpoints."""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..model import DEFAULT_VARIANT, SCALES


@dataclass
class TrainConfig:
    """Every hyperparameter of a run. Saved as ``config.toml`` in the run folder."""

    scales: list[int] = field(default_factory=lambda: [4])  # several: one shared trunk, one upsampler each
    data: list[str] = field(default_factory=list)  # folders of HR images (any layout, DIV2K's included)
    out: str = "runs/nalasr"
    variant: str = DEFAULT_VARIANT
    model_overrides: dict[str, Any] = field(default_factory=dict)  # NaLaSRConfig fields
    init: str | None = None  # weights (safetensors) or checkpoint to start the trunk from
    steps: int = 100_000  # length of the LR schedule; a run may stop earlier (max_minutes)
    batch: int = 64  # global batch (split across processes)
    patch: int = 48  # LR patch side
    lr: float = 5e-4
    min_lr: float = 1e-6
    warmup: int = 500
    schedule: str = "cosine"  # "cosine" or "multistep"
    milestones: list[int] = field(default_factory=lambda: [50_000, 75_000])  # multistep: ×0.5 at each
    optimizer: str = "adamw"  # "adam" or "adamw"
    weight_decay: float = 0.0
    betas: list[float] = field(default_factory=lambda: [0.9, 0.99])
    grad_clip: float = 1.0  # max global grad norm; 0 disables
    loss_fft: float = 0.0  # weight of an L1 term on the FFT amplitude (0: plain L1)
    ema: float = 0.999  # decay; 0 disables
    precision: str = "bf16"  # autocast dtype on CUDA: bf16, fp16 or fp32
    compile: bool = True  # torch.compile the trunk on CUDA
    attention_backend: str = "auto"
    quantize_lr: bool = True  # round LR to 8 bits, as an LR image saved to disk is
    seed: int = 0
    val_set: str = "set5"  # dataset name or folder; "" disables validation
    val_every: int = 1000
    data_root: str | None = None  # for val_set names
    log_every: int = 50
    ckpt_every: int = 1000
    keep_last: int = 2
    max_minutes: float = 0.0  # stop (and checkpoint) after this much training time; 0: run to `steps`
    fit_schedule: bool = False  # with max_minutes: after 200 steps, set `steps` so the schedule ends on time
    device: str = "auto"

    def validate(self) -> None:
        bad = [s for s in self.scales if s not in SCALES]
        if not self.scales or bad:
            raise InputError(f"scales must be among {SCALES}, got {self.scales}")
        if self.batch < 1 or self.patch < 4 or self.steps < 1:
            raise InputError("batch must be ≥ 1, patch ≥ 4 and steps ≥ 1")
        if self.schedule not in ("cosine", "multistep"):
            raise InputError(f"schedule must be cosine or multistep, got {self.schedule!r}")
        if self.optimizer not in ("adam", "adamw"):
            raise InputError(f"optimizer must be adam or adamw, got {self.optimizer!r}")
        if self.precision not in ("bf16", "fp16", "fp32"):
            raise InputError(f"precision must be bf16, fp16 or fp32, got {self.precision!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TrainConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise InputError(f"unknown training config keys: {', '.join(unknown)}")
        return cls(**d)


def load_toml(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"{path}: config file not found") from None
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{path}: not valid TOML ({e})") from None


def to_toml(d: dict[str, Any]) -> str:
    """TOML for the flat config (tables one level deep): the stdlib reads TOML but does not write it."""
    lines, tables = [], []
    for key, value in d.items():
        if value is None:
            continue  # TOML has no null: an absent key means the default (None)
        if isinstance(value, dict):
            tables.append((key, value))
        else:
            lines.append(f"{key} = {_toml_value(value)}")
    for name, table in tables:
        lines += ["", f"[{name}]"] + [f"{k} = {_toml_value(v)}" for k, v in table.items() if v is not None]
    return "\n".join(lines) + "\n"


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")
