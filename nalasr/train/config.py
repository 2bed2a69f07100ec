"""Training configuration: one dataclass, read from TOML, written beside the checkpoints.

Importing it costs no torch (``nalasr train --help`` shows these defaults): the model and ops modules are
imported only to validate a config.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InputError

if TYPE_CHECKING:
    from ..model import NaLaSRConfig

# nalasr.model.DEFAULT_VARIANT, written out so that this module does not import torch (a test pins the two equal)
DEFAULT_VARIANT = "default"


@dataclass
class TrainConfig:
    """Every hyperparameter of a run. Saved as ``config.toml`` in the run folder."""

    scales: list[int] = field(default_factory=lambda: [4])  # several: one shared trunk, one upsampler each
    # Steps given to each scale per cycle (empty: one each), e.g. [1, 1, 2] with scales [2, 3, 4] trains x4 on
    # every other step: the shared trunk then leans toward the scale whose quality matters most.
    scale_weights: list[int] = field(default_factory=list)
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
    # "l1" (robust, the usual SR loss) or "l2": PSNR is a log of the MSE, so an L2 fine-tune of an L1-trained
    # model aims the last steps at the metric itself (EDSR/RCAN-era practice for the final PSNR figures).
    loss: str = "l1"
    loss_fft: float = 0.0  # weight of an L1 term on the FFT amplitude (0: the pixel loss alone)
    ema: float = 0.999  # decay; 0 disables
    precision: str = "bf16"  # autocast dtype on CUDA: bf16, fp16 or fp32
    compile: bool = False  # torch.compile the trunk on CUDA (unmeasured; turns cuda_graphs off)
    # Replay the trunk's forward+backward from CUDA graphs (CUDA; under torchrun too): 21.0 against 8.5 it/s on the
    # H200 at batch 64, LR 48², with bitwise-equal gradients (benchmarks/results/h200/graphs_2026-11-29.json).
    cuda_graphs: bool = True
    attention_backend: str = "auto"
    quantize_lr: bool = True  # round LR to 8 bits, as an LR image saved to disk is
    # Extra HR copies of every training image, downscaled by these factors (each in (0, 1)) when loaded, e.g.
    # [0.9, 0.8, 0.7, 0.6] as VDSR/DRRN did with 291 images; crops are drawn by area, so smaller copies weigh less.
    hr_rescale: list[float] = field(default_factory=list)
    seed: int = 0
    val_set: str = "set5"  # dataset name or folder; "" disables validation
    val_every: int = 1000
    data_root: str | None = None  # for val_set names
    log_every: int = 50
    ckpt_every: int = 1000
    keep_last: int = 2
    max_minutes: float = 0.0  # stop (and checkpoint) after this much training time; 0: run to `steps`
    fit_schedule: bool = False  # with max_minutes: after 200 steps, set `steps` so the schedule ends on time
    restart: bool = False  # on resume: a new warm-up + decay from the resume step (peak `lr`), a warm restart
    schedule_start: int = 0  # the step the schedule counts from (set by `restart`; saved so a resume keeps it)
    device: str = "auto"

    def validate(self) -> None:
        from ..model import SCALES
        from ..ops import BACKENDS

        bad = [s for s in self.scales if s not in SCALES]
        if not self.scales or bad:
            raise InputError(f"scales must be among {SCALES}, got {self.scales}")
        if self.scale_weights and (len(self.scale_weights) != len(self.scales) or min(self.scale_weights) < 1):
            raise InputError(f"scale_weights must give a whole number ≥ 1 for each of the scales {self.scales}, "
                             f"got {self.scale_weights}")
        if self.batch < 1 or self.patch < 4 or self.steps < 1:
            raise InputError("batch must be ≥ 1, patch ≥ 4 and steps ≥ 1")
        if self.schedule not in ("cosine", "multistep"):
            raise InputError(f"schedule must be cosine or multistep, got {self.schedule!r}")
        if self.loss not in ("l1", "l2"):
            raise InputError(f"loss must be l1 or l2, got {self.loss!r}")
        if self.optimizer not in ("adam", "adamw"):
            raise InputError(f"optimizer must be adam or adamw, got {self.optimizer!r}")
        if self.precision not in ("bf16", "fp16", "fp32"):
            raise InputError(f"precision must be bf16, fp16 or fp32, got {self.precision!r}")
        if self.attention_backend not in BACKENDS:
            raise InputError(f"attention_backend must be one of {', '.join(BACKENDS)}, got {self.attention_backend!r}")
        if not 0 <= self.ema < 1:
            raise InputError(f"ema must be in [0, 1) (0 disables it), got {self.ema}")
        if min(self.log_every, self.ckpt_every, self.val_every, self.keep_last) < 1:
            raise InputError("log_every, ckpt_every, val_every and keep_last must be ≥ 1")
        if self.lr <= 0 or self.min_lr < 0 or self.warmup < 0 or self.grad_clip < 0 or self.loss_fft < 0:
            raise InputError("lr must be > 0; min_lr, warmup, grad_clip and loss_fft ≥ 0")
        if any(not 0 < f < 1 for f in self.hr_rescale):
            raise InputError(f"hr_rescale factors must each be in (0, 1), got {self.hr_rescale}")
        if self.max_minutes < 0 or len(self.betas) != 2:
            raise InputError("max_minutes must be ≥ 0 and betas two numbers")
        self.model_config()

    def scale_cycle(self) -> list[int]:
        """The scales in the order the steps take them, repeating: scale at step t is cycle[t % len(cycle)]."""
        weights = self.scale_weights or [1] * len(self.scales)
        cycle: list[int] = []
        for turn in range(max(weights)):  # interleaved (2, 3, 4, 4), not blocked, so no scale waits long
            cycle += [s for s, w in zip(self.scales, weights) if turn < w]
        return cycle

    def model_config(self) -> NaLaSRConfig:
        """The network's config at the first scale (variant + model_overrides), or InputError."""
        from ..model import VARIANTS, config_for

        if self.variant not in VARIANTS:
            raise InputError(f"unknown variant {self.variant!r}; choose one of {', '.join(VARIANTS)}")
        try:
            return config_for(self.variant, self.scales[0], **self.model_overrides)
        except (TypeError, ValueError) as e:
            raise InputError(f"bad model_overrides {self.model_overrides}: {e}") from None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TrainConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise InputError(f"unknown training config keys: {', '.join(unknown)}")
        types = {f.name: f.type for f in dataclasses.fields(cls)}
        return cls(**{k: _checked(k, v, types[k]) for k, v in d.items()})


def _checked(key: str, value: Any, kind: str) -> Any:
    """``value`` if it has the field's type (ints are taken for floats), else InputError."""
    def ok(v: Any, t: str) -> bool:
        if t.startswith("list["):
            return isinstance(v, list) and all(ok(x, t[5:-1]) for x in v)
        if t.endswith(" | None"):
            return v is None or ok(v, t[:-7])
        if t == "bool":
            return isinstance(v, bool)
        if t == "int":
            return isinstance(v, int) and not isinstance(v, bool)
        if t == "float":
            return isinstance(v, (int, float)) and not isinstance(v, bool)
        if t == "str":
            return isinstance(v, str)
        return isinstance(v, dict) if t.startswith("dict[") else True

    if not ok(value, kind):
        raise InputError(f"training config key {key!r} must be {kind}, got {value!r}")
    if kind == "float":
        return float(value)
    if kind == "list[float]":
        return [float(x) for x in value]
    return value


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


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):  # a basic string: escape what TOML forbids raw (quote, backslash, controls)
        return '"' + "".join(_ESCAPES.get(c) or (f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F else c)
                             for c in v) + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")
