"""Training data: HR images decoded once and kept on the training device; LR made there, batched.

Every batch is drawn from one seeded ``torch.Generator`` shared by all processes: each process draws
the whole global batch's crop positions and keeps its own slice. So the data order is part of the
checkpoint (the generator state), and N processes see exactly the batches one process would.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from ..eval.datasets import BadFile, is_image_file, short_reason
from ..errors import InputError
from ..eval.protocol import imresize
from ..io import imageio

# LR pixels of context cropped around each patch before the bicubic downscale: the antialiased kernel
# reaches 2 LR pixels each side, so with this margin a patch's LR equals the whole image's LR there.
MARGIN = 2
# At most this share of a run's image files may fail to decode: they are left out, and the log names them.
# More than that means the data is not what the user thinks (a wrong folder, a broken copy): the run is refused.
MAX_BAD_SHARE = 0.10
_NAMED = 3  # bad files named in a message before "and N more"


@dataclass
class TrainingImages:
    """What :func:`load_images` found: the decoded images, the files that did not decode, the stray files."""

    images: list[np.ndarray]  # (H, W, 3) uint8 each
    files: int  # image files found (decoded or not)
    bad: list[BadFile]  # names relative to their data folder
    ignored: list[str]  # files there that are not images (LICENSE, meta.json), relative to their data folder


def _data_folder(folder: Path) -> Path:
    if not folder.is_dir():
        raise InputError(f"{folder}: training data folder not found")
    return folder / "DIV2K_train_HR" if (folder / "DIV2K_train_HR").is_dir() else folder


def _walk(folder: Path) -> tuple[list[Path], list[Path]]:
    """(image files, stray files) under ``folder``, recursively; hidden names and LR folders are left out.

    An image is one by content or by name (imageio decides later whether it decodes). Only regular files are
    looked at: a FIFO would block the reader."""
    images, stray = [], []
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).parts
        if any(part.startswith(".") for part in rel) or "LR_bicubic" in rel or not p.is_file():
            continue
        (images if is_image_file(p) else stray).append(p)
    return images, stray


def decode_rgb(path: Path) -> np.ndarray:
    """(H, W, 3) uint8 of an image file, by content; InputError (one line) for one that does not decode.

    Training pairs are 8-bit as the protocol's are: 16-bit pixels are rounded to 8 bits, gray is replicated,
    alpha is dropped."""
    px = imageio.read_image(path).pixels  # (H, W, C) uint8 or uint16, C in 1..4
    if px.dtype == np.uint16:
        px = ((px.astype(np.uint32) * 255 + 32767) // 65535).astype(np.uint8)
    rgb = np.repeat(px[..., :1], 3, axis=2) if px.shape[2] <= 2 else px[..., :3]
    return np.ascontiguousarray(rgb)


def load_images(folders: list[str | Path], *, workers: int | None = None) -> TrainingImages:
    """Decode every image file under ``folders`` (a thread pool: Pillow decodes with the GIL released).

    A file that does not decode is left out and listed in ``bad``; :func:`check_bad_share` says what to do."""
    images: list[np.ndarray] = []
    bad: list[BadFile] = []
    ignored: list[str] = []
    for folder in map(Path, folders):
        root = _data_folder(folder)
        files, stray = _walk(root)
        ignored += [str(p.relative_to(root)) for p in stray]
        with ThreadPoolExecutor(max_workers=workers or min(16, os.cpu_count() or 1)) as pool:
            for p, got in zip(files, pool.map(_try_decode, files)):
                if isinstance(got, np.ndarray):
                    images.append(got)
                else:
                    bad.append(BadFile(str(p.relative_to(root)), got))
    total = len(images) + len(bad)
    if total == 0:
        raise InputError(f"no image files found in {', '.join(map(str, folders))} ({len(ignored)} other files); "
                         "give folders of HR images")
    return TrainingImages(images, total, bad, ignored)


def _try_decode(path: Path) -> np.ndarray | str:
    """The decoded image, or why it does not decode."""
    try:
        return decode_rgb(path)
    except InputError as e:
        return short_reason(path, e)


def check_bad_share(found: TrainingImages) -> str | None:
    """The log line naming the files left out (None when all decoded); InputError when more than
    MAX_BAD_SHARE of them are bad."""
    if not found.bad:
        return None
    k, n = len(found.bad), found.files
    if k > MAX_BAD_SHARE * n:
        raise InputError(f"{k} of {n} training images could not be decoded: {name_files(found.bad)}; fix or remove "
                         f"them (up to {MAX_BAD_SHARE:.0%} are left out with a warning)")
    return f"left out {k} of {n} training images that could not be decoded: {name_files(found.bad)}"


def name_files(bad: list[BadFile]) -> str:
    """The first few files and their reasons, then how many more: a message stays one readable line."""
    more = f", and {len(bad) - _NAMED} more" if len(bad) > _NAMED else ""
    return ", ".join(f"{b.name} ({b.reason})" for b in bad[:_NAMED]) + more


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
