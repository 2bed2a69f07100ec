"""Training data: HR images decoded once and kept on the training device; LR made there, batched.

Every batch is drawn from one seeded ``torch.Generator`` shared by all processes: each process draws
the whole global batch's crop positions and keeps its own slice. So the data order is part of the
checkpoint (the generator state), and N processes see exactly the batches one process would.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from ..eval.datasets import read_image
from ..errors import InputError
from ..eval.protocol import imresize

# LR pixels of context cropped around each patch before the bicubic downscale: the antialiased kernel
# reaches 2 LR pixels each side, so with this margin a patch's LR equals the whole image's LR there.
MARGIN = 2


def find_images(folders: list[str | Path]) -> list[Path]:
    """HR image files under ``folders`` (recursive). DIV2K roots resolve to ``DIV2K_train_HR``."""
    files: list[Path] = []
    for folder in map(Path, folders):
        if not folder.is_dir():
            raise InputError(f"{folder}: training data folder not found")
        if (folder / "DIV2K_train_HR").is_dir():
            folder = folder / "DIV2K_train_HR"
        found = sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))
        files += [p for p in found if "LR_bicubic" not in p.parts and p.suffix.lower() not in (".txt", ".tsv", ".md")]
    if not files:
        raise InputError(f"no files found in {', '.join(map(str, folders))}; give folders of HR images")
    return files


def decode_rgb(path: Path) -> np.ndarray | None:
    """(H, W, 3) uint8, or None for a file that is not an 8-bit image (it is skipped, not fatal)."""
    try:
        img = read_image(path)
    except InputError:
        return None
    return np.repeat(img[..., None], 3, axis=2) if img.ndim == 2 else img


@dataclass
class Batch:
    lr: Tensor  # (b, 3, P, P) float in [0, 1]
    hr: Tensor  # (b, 3, sP, sP) float in [0, 1]
    scale: int


class PatchSampler:
    """Random LR/HR patch pairs with the 8 flips/rotations, LR by the protocol's MATLAB bicubic."""

    def __init__(
        self,
        images: list[np.ndarray],
        *,
        patch: int,
        device: torch.device,
        seed: int,
        quantize_lr: bool = True,
        rank: int = 0,
        world: int = 1,
        hr_rescale: list[float] | tuple[float, ...] = (),
    ) -> None:
        if not images:
            raise InputError("no decodable training images")
        self.patch, self.device, self.quantize_lr = patch, device, quantize_lr
        self.rank, self.world = rank, world
        # (3, H, W) uint8 on the training device: 318 images of the bundled set are ~130 MB.
        self.images = [torch.from_numpy(np.ascontiguousarray(im.transpose(2, 0, 1))).to(device) for im in images]
        self.images += [rescaled(im, f) for f in hr_rescale for im in self.images[:len(images)]]
        self.sizes = torch.tensor([im.shape[1:] for im in self.images], dtype=torch.long)  # (n, 2)
        self.generator = torch.Generator().manual_seed(seed)

    def usable(self, scale: int) -> Tensor:
        """Indices of images large enough for a patch with its margin at ``scale``."""
        side = (self.patch + 2 * MARGIN) * scale
        return torch.nonzero((self.sizes >= side).all(1)).flatten()

    def sample(self, batch: int, scale: int) -> Batch:
        """This process's slice of a global batch of ``batch`` pairs."""
        idx = self.usable(scale)
        if len(idx) == 0:
            raise InputError(f"no training image is at least {(self.patch + 2 * MARGIN) * scale} px on each side for x{scale}")
        g = self.generator
        area = self.sizes[idx].prod(1).double()
        pick = idx[torch.multinomial(area, batch, replacement=True, generator=g)]  # each pixel equally likely
        side = (self.patch + 2 * MARGIN) * scale
        room = self.sizes[pick] - side + 1  # (batch, 2)
        top = (torch.rand(batch, generator=g) * room[:, 0]).long()
        left = (torch.rand(batch, generator=g) * room[:, 1]).long()
        flips = torch.randint(0, 2, (batch, 3), generator=g).bool()  # hflip, vflip, transpose
        per = batch // self.world
        mine = slice(self.rank * per, (self.rank + 1) * per)
        crops = torch.stack([
            self.images[i][:, t:t + side, l:l + side]
            for i, t, l in zip(pick[mine].tolist(), top[mine].tolist(), left[mine].tolist())
        ])
        crops = _augment(crops.float(), flips[mine].to(self.device))  # (b, 3, side, side) in [0, 255]
        lr = imresize(crops, scale=1 / scale)[..., MARGIN:-MARGIN, MARGIN:-MARGIN]
        if self.quantize_lr:
            lr = lr.round().clamp_(0, 255)
        m = MARGIN * scale
        hr = crops[..., m:-m, m:-m]
        return Batch(lr=lr / 255, hr=hr / 255, scale=scale)

    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"])


def rescaled(image: Tensor, factor: float) -> Tensor:
    """(3, H, W) uint8 → (3, ⌈H·f⌉, ⌈W·f⌉) uint8 by the protocol's bicubic: an extra, smaller HR image.

    The recipe of the 291-image SR papers (VDSR, DRRN: factors 0.9 … 0.6): on a small training set, copies of
    each photo at smaller sizes add the same scenes at other scales of detail."""
    return imresize(image.float(), scale=factor).round_().clamp_(0, 255).to(torch.uint8)


def _augment(x: Tensor, flips: Tensor) -> Tensor:
    """Per-sample dihedral transforms without a Python loop. x: (b, C, S, S), flips: (b, 3) bool."""
    def pick(mask: Tensor, a: Tensor, b: Tensor) -> Tensor:
        return torch.where(mask[:, None, None, None], a, b)

    x = pick(flips[:, 0], x.flip(-1), x)
    x = pick(flips[:, 1], x.flip(-2), x)
    return pick(flips[:, 2], x.transpose(-1, -2), x)
