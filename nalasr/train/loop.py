"""The training loop: one process, or one per GPU under ``torchrun`` (DistributedDataParallel).

What makes it fast on a GPU: images live on the device and LR patches are made there in one batched
matmul resize; the trunk's forward and backward are replayed from CUDA graphs (eager PyTorch is bound by
launching its kernels at training sizes); bf16 autocast; the loss is read back to the host only every
``log_every`` steps. What makes it safe: atomic checkpoints of everything (model, EMA, optimiser,
step, data generator, RNG states), so a killed run resumes exactly where its last checkpoint was.
"""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager
import copy
import gc
import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

from .. import settings
from ..errors import InputError, NalasrError
from ..io.fsutil import atomic_write_bytes, remove_stale_temps, writable_folder
from ..inference.runtime import resolve_device
from ..io.weights import load_weights, save_weights, shipped_name
from .checkpoint import list_checkpoints, load_latest, mark_best, save_best, save_checkpoint
from .config import TrainConfig, load_toml, to_toml
from .data import MARGIN, PatchSampler, check_bad_share, load_images, name_files
from .multiscale import MultiScaleNaLaSR
from .validate import Validator

AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass
class TrainResult:
    step: int
    out: Path
    best_psnr: dict[str, float] = field(default_factory=dict)
    exported: list[Path] = field(default_factory=list)
    steps_per_s: float = 0.0


# ---------------------------------------------------------------------------------------- distributed


@dataclass
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0


def _init_dist(device_pref: str) -> tuple[Dist, torch.device]:
    env = settings.get()
    world, rank, local = env.world_size, env.rank, env.local_rank
    if world == 1:
        return Dist(), resolve_device(device_pref)
    use_cuda = torch.cuda.is_available() and device_pref != "cpu"
    if use_cuda:
        torch.cuda.set_device(local)
    dist.init_process_group("nccl" if use_cuda else "gloo")
    return Dist(rank, world, local), torch.device(f"cuda:{local}" if use_cuda else "cpu")


# ------------------------------------------------------------------------------------------- schedule


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Learning rate as a pure function of the step: resuming with a longer ``steps`` just extends it.

    The schedule (warm-up, then cosine or multistep) counts from ``cfg.schedule_start``: 0 for a run's own
    schedule, the resume step for a warm restart (see TrainConfig.restart)."""
    step = step - cfg.schedule_start
    if step < cfg.warmup:
        return cfg.lr * (max(step, 0) + 1) / cfg.warmup
    if cfg.schedule == "multistep":
        return cfg.lr * 0.5 ** sum(step >= m for m in cfg.milestones)
    t = min(1.0, (step - cfg.warmup) / max(1, cfg.steps - cfg.schedule_start - cfg.warmup))
    return cfg.min_lr + 0.5 * (cfg.lr - cfg.min_lr) * (1 + math.cos(math.pi * t))


def loss_fn(sr: Tensor, hr: Tensor, fft_weight: float, pixel: str = "l1") -> Tensor:
    """Pixel loss (``pixel``: "l1" or "l2") plus ``fft_weight`` × L1 on the FFT amplitude. sr, hr: (B, 3, H, W)."""
    loss = F.l1_loss(sr, hr) if pixel == "l1" else F.mse_loss(sr, hr)
    if fft_weight:
        loss = loss + fft_weight * F.l1_loss(torch.fft.rfft2(sr).abs(), torch.fft.rfft2(hr).abs())
    return loss


# ------------------------------------------------------------------------------------------- the loop


class Trainer:
    def __init__(self, cfg: TrainConfig, *, resume: bool = False, log: Callable[[str], None] = print) -> None:
        cfg.validate()
        self.cfg, self.log = cfg, log
        world = settings.get().world_size
        if cfg.batch % world:
            raise InputError(f"batch {cfg.batch} does not split over {world} processes")
        self.dist, self.device = _init_dist(cfg.device)
        try:
            self._setup(resume)
        except BaseException:
            if self.dist.world > 1 and dist.is_initialized():
                dist.destroy_process_group()
            raise

    def _setup(self, resume: bool) -> None:
        cfg, log = self.cfg, self.log
        self.out = writable_folder(cfg.out, "--out") if self.dist.main else Path(cfg.out)
        self.ckpt_dir = self.out / "checkpoints"
        if self.dist.main:  # before this run writes anything there (one run per folder: rank 0 is its writer)
            for folder in (self.out, self.ckpt_dir, self.out / "weights"):
                self._remove_stale_temps(folder)
        if list_checkpoints(self.ckpt_dir) and not resume:
            raise InputError(f"{self.out} already holds checkpoints: pass --resume to continue, or another --out")
        latest = load_latest(self.ckpt_dir) if resume else None
        if resume and latest is None:
            log(f"no checkpoint in {self.ckpt_dir}: starting from step 0")
        torch.manual_seed(cfg.seed + self.dist.rank)

        self.model = MultiScaleNaLaSR(cfg.model_config(), cfg.scales).to(self.device)
        if cfg.init and latest is None:  # a resumed run's weights come from its checkpoint
            done = self.model.init_from(load_weights(cfg.init))
            log(f"initialised the trunk from {cfg.init} (upsamplers: {done or 'none'})")
        for m in self.model.modules():
            if hasattr(m, "backend"):
                m.backend = cfg.attention_backend
        self.ema = copy.deepcopy(self.model).requires_grad_(False) if cfg.ema else None
        opt_cls = torch.optim.AdamW if cfg.optimizer == "adamw" else torch.optim.Adam
        # fused kernels on CUDA only: the CPU path stays the plain, deterministic for-loop implementation
        self._fused = self.device.type == "cuda"
        self.opt = opt_cls(self.model.parameters(), lr=cfg.lr, betas=tuple(cfg.betas), weight_decay=cfg.weight_decay,
                           fused=self._fused)
        self.step = 0
        self.best: dict[str, float] = {}
        self.history: list[dict[str, Any]] = []  # validation records
        # mean training loss since the last log line: part of the checkpoint, so a resumed log is exact
        self._loss_sum = torch.zeros((), device=self.device)
        self._n_sum = 0

        # Pillow decodes with the GIL released: 603 photos (276 MP) take seconds on a pool, a minute in turn.
        found = load_images(cfg.data)
        dropped = check_bad_share(found)  # InputError when too many are bad
        if dropped and self.dist.main:
            log(dropped)
        self.sampler = PatchSampler(found.images, patch=cfg.patch, device=self.device, seed=cfg.seed,
                                    quantize_lr=cfg.quantize_lr, rank=self.dist.rank, world=self.dist.world,
                                    hr_rescale=cfg.hr_rescale)
        self.n_images = len(found.images)
        for s in cfg.scales:  # fail now, not at the first step of that scale
            if len(self.sampler.usable(s)) == 0:
                raise InputError(f"no training image is at least {(cfg.patch + 2 * MARGIN) * s} px on each side "
                                 f"for x{s} with --patch {cfg.patch}: give larger images or a smaller patch")
        if latest is not None:
            self._restore(*latest)
            if cfg.restart:  # a new warm-up + decay from here (--lr sets its peak), instead of the run's own
                cfg.schedule_start = self.step
                cfg.restart = False  # saved as done: resuming this run again continues this schedule
        if self.dist.main:  # lines past the step this run starts from (0: a start before any checkpoint) go
            _truncate_log(self.out / "log.jsonl", self.step)

        self._amp = AUTOCAST.get(cfg.precision) if self.device.type == "cuda" else None
        # The trunk at LR 48² runs hundreds of small kernels a step: eager PyTorch is bound by the CPU launching
        # them, not by the GPU. Replaying the trunk's forward and backward from CUDA graphs removes that cost.
        # They are captured here, before DDP wraps the model (PyTorch's partial-network capture): DDP keeps the
        # parameters' gradient-accumulation nodes alive from the default stream, which a later capture's
        # backward may not wait on. Its all-reduce hooks then fire after each replayed backward, outside the
        # graph, and _check_in_sync fails the run at a checkpoint should a rank's weights drift from rank 0's.
        self._graphs = bool(cfg.cuda_graphs and self.device.type == "cuda" and not cfg.compile)
        self._graphed: tuple[tuple[int, ...], Callable[[Tensor], Tensor]] | None = None
        if self._graphs:  # every batch has this shape: LR patches of patch² from the global batch's share
            self._graphed_trunk(torch.zeros(cfg.batch // self.dist.world, 3, cfg.patch, cfg.patch, device=self.device))

        net: nn.Module = self.model
        if self.dist.world > 1:
            # several scales: each step leaves the other scales' upsamplers without gradients
            net = nn.parallel.DistributedDataParallel(
                net, device_ids=[self.device.index] if self.device.type == "cuda" else None,
                find_unused_parameters=len(cfg.scales) > 1)
        if cfg.compile and self.device.type == "cuda":
            # Only the trunk: it is shared by every scale, so it compiles once (the whole model would
            # compile once per scale, which cost minutes of a short GPU lease).
            self.model.trunk.compile()
        self.net = net
        self._paused = 0.0  # seconds spent validating and checkpointing: not training speed (see _fit_schedule)
        self._val_s = 0.0  # how long the latest validation took
        self.validator = Validator(cfg.val_set, cfg.scales, cfg.data_root, self.device) if cfg.val_set and self.dist.main else None
        if self.validator is not None and self.validator.bad:  # validation scores the rest: say which are out
            log(f"validation set {cfg.val_set}: left out {len(self.validator.bad)} files that cannot be scored: "
                f"{name_files(self.validator.bad)}")

    # -------------------------------------------------------------------------------------- state

    def state(self) -> dict[str, Any]:
        return {
            "format": "nalasr-checkpoint/1",
            "config": self.cfg.to_dict(),
            "model_config": self.model.cfg.to_dict(),
            "step": self.step,
            "model": self.model.state_dict(),
            "ema": self.ema.state_dict() if self.ema else None,
            "optimizer": self.opt.state_dict(),
            "sampler": self.sampler.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else None,
            "best": self.best,
            "history": self.history,
            "log_acc": {"loss_sum": self._loss_sum.detach().cpu(), "n": self._n_sum},
        }

    def _restore(self, state: dict[str, Any], path: Path) -> None:
        try:
            self.model.load_state_dict(state["model"])
            if self.ema is not None:
                self.ema.load_state_dict(state["ema"] if state["ema"] is not None else state["model"])
            self.opt.load_state_dict(state["optimizer"])
        except (RuntimeError, ValueError, KeyError) as e:
            raise InputError(f"{path}: this checkpoint does not fit the model of this config (scales "
                             f"{self.cfg.scales}, variant {self.cfg.variant}); resume with the run's own settings "
                             f"({str(e).splitlines()[0]})") from None
        for group in self.opt.param_groups:  # the saved flags are the saving device's
            group["fused"], group["foreach"] = self._fused, None
        self.sampler.load_state_dict(state["sampler"])
        if state.get("log_acc") is not None:
            self._loss_sum = state["log_acc"]["loss_sum"].to(self.device)
            self._n_sum = state["log_acc"]["n"]
        torch.set_rng_state(state["torch_rng"])
        if state["cuda_rng"] is not None and self.device.type == "cuda":
            torch.cuda.set_rng_state(state["cuda_rng"], self.device)
        self.step, self.best, self.history = state["step"], state["best"], state["history"]
        self.log(f"resumed from {path.name} at step {self.step}")

    # ---------------------------------------------------------------------------------------- run

    def close(self, together: bool) -> None:
        """Leave the process group (several processes; nothing otherwise). ``together``: after a finished run,
        wait for every rank first (rank 0 still writes the weights when the others are done); not after an
        error, where another rank may be gone.

        DDP's reducer holds the group, and the DDP module sits in a reference cycle: dropping it and collecting
        it here lets the group and its threads end now. Left to the interpreter's exit they aborted a rank in 3 of
        113 local runs of tests/test_train_ddp.py's resume test ("terminate called without an active exception",
        after a finished run; the CLI's teardown then dropped no reference at all); 0 of 45 since."""
        if self.dist.world == 1 or not dist.is_initialized():
            return
        if together:
            dist.barrier()
        self.net = self.model
        gc.collect()
        dist.destroy_process_group()

    def __enter__(self) -> Trainer:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        """``with trainer:`` leaves the process group as :meth:`close` says, together when the block finished."""
        self.close(together=exc_type is None)

    def run(self, progress: Callable[[dict[str, Any]], None] | None = None) -> TrainResult:
        cfg = self.cfg
        if self.dist.main:
            self.out.mkdir(parents=True, exist_ok=True)
            self._write_config()
        writer = _tensorboard(self.out) if self.dist.main else None
        params = [p for p in self.model.parameters()]
        ema_params = [p for p in self.ema.parameters()] if self.ema else []
        t_start, t_log, step_log = time.perf_counter(), time.perf_counter(), self.step
        last_ckpt = first_step = self.step
        rate, t_fit = 0.0, t_start
        paused_fit = 0.0
        cycle = cfg.scale_cycle()
        while self.step < cfg.steps:
            scale = cycle[self.step % len(cycle)]
            batch = self.sampler.sample(cfg.batch, scale)
            for group in self.opt.param_groups:
                group["lr"] = lr_at(self.step, cfg)
            with self._autocast():
                sr = self.net(batch.lr, scale, self._graphed_trunk(batch.lr) if self._graphs else None)
            loss = loss_fn(sr.float(), batch.hr, cfg.loss_fft, cfg.loss)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.grad_clip:
                torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
            self.opt.step()
            if self.ema is not None:
                torch._foreach_lerp_(ema_params, params, 1 - cfg.ema)
            self.step += 1
            self._loss_sum += loss.detach()
            self._n_sum += 1

            if self.step % cfg.log_every == 0 or self.step == cfg.steps:
                now = time.perf_counter()
                rate = (self.step - step_log) / (now - t_log)
                loss_sum = self._loss_sum.clone()
                if self.dist.world > 1:  # the global batch's loss, as one process would log it
                    dist.all_reduce(loss_sum)
                    loss_sum /= self.dist.world
                rec = {"step": self.step, "loss": loss_sum.item() / self._n_sum, "lr": lr_at(self.step - 1, cfg),
                       "it_s": round(rate, 2), "elapsed_s": round(now - t_start, 1)}
                self._loss_sum.zero_()
                self._n_sum, t_log, step_log = 0, now, self.step
                if self.dist.main:
                    _append_log(self.out / "log.jsonl", rec)
                    if writer:
                        writer.add_scalar("train/loss", rec["loss"], self.step)
                    if progress:
                        progress(rec)
            improved = False
            if self.validator and (self.step % cfg.val_every == 0 or self.step == cfg.steps):
                t_val = time.perf_counter()
                improved = self._validate(writer, progress)
                self._val_s = time.perf_counter() - t_val
                self._paused += self._val_s
            if cfg.fit_schedule and cfg.max_minutes and self.step == first_step + 200:
                self._fit_schedule(t_start, t_fit, self._paused - paused_fit)
            if self.step == first_step + 20:
                # the first steps pay for warm-up (allocator, cuDNN autotune, CUDA graph capture)
                t_fit, paused_fit = time.perf_counter(), self._paused
            stop = self._should_stop(t_start)
            ckpt_now = self.step % cfg.ckpt_every == 0 or self.step == cfg.steps or stop  # the same on every rank
            if ckpt_now and self.dist.world > 1:
                self._check_in_sync()
                # the running loss sum in the checkpoint must be the global batch's, which every rank resumes
                # from: the mean over ranks now, plus each rank's own steps later, averages the same
                dist.all_reduce(self._loss_sum)
                self._loss_sum /= self.dist.world
            if self.dist.main and ckpt_now:
                t_ck = time.perf_counter()
                path = self._checkpoint()
                self._paused += time.perf_counter() - t_ck
                last_ckpt = self.step
                if improved:
                    mark_best(self.ckpt_dir, path)
            elif improved:  # best.pt holds the state of the best validation, whenever that was
                save_best(self.ckpt_dir, self.state())
            if stop:
                break
        if self.dist.main and last_ckpt != self.step:
            self._checkpoint()
        exported = self.export(self.out / "weights") if self.dist.main else []
        if writer:
            writer.close()
        return TrainResult(self.step, self.out, self.best, exported, rate)

    def _autocast(self) -> contextlib.AbstractContextManager:
        # autocast's weight-cast cache must be off around CUDA graphs (torch.cuda.make_graphed_callables)
        return torch.autocast(self.device.type, dtype=self._amp, cache_enabled=not self._graphs) if self._amp \
            else contextlib.nullcontext()

    def _graphed_trunk(self, x: Tensor) -> Callable[[Tensor], Tensor]:
        """The trunk as a graphed callable for inputs shaped like x (x: B×3×h×w; captured for a new shape, which
        under DDP only setup may do: training batches all have the shape captured there)."""
        if self._graphed is None or self._graphed[0] != tuple(x.shape):
            with self._autocast():
                self._graphed = (tuple(x.shape), graph_trunk(self.model.trunk, x))
        return self._graphed[1]

    def _check_in_sync(self) -> None:
        """Raise unless every rank holds rank 0's weights (a collective: call it on every rank at once).

        Compares each parameter's sum across ranks, a cheap fingerprint that equal weights give bitwise: one
        all-reduce of (sums, −sums) with MAX gives the largest and the smallest at once."""
        sums = torch.stack([p.detach().float().sum() for p in self.model.parameters()])
        both = torch.cat([sums, -sums])
        dist.all_reduce(both, op=dist.ReduceOp.MAX)
        hi, lo = both.chunk(2)
        if not torch.equal(-lo, hi):
            raise NalasrError(f"the {self.dist.world} processes' weights differ at step {self.step}: their gradients "
                              "were not all-reduced alike; rerun with --no-cuda-graphs and report it")

    def _fit_schedule(self, t_start: float, t_fit: float, paused: float) -> None:
        """Stretch or shrink the LR schedule so it ends when ``max_minutes`` runs out (measured speed).

        The speed leaves out validation and checkpoint time (``paused`` seconds since t_fit); the time left
        leaves room for the validations still to come, at the cost of the last one."""
        now = time.perf_counter()
        rate = 180 / max(now - t_fit - paused, 1e-3)
        left = 60 * self.cfg.max_minutes - (now - t_start)
        vals = left * rate / self.cfg.val_every if self.validator else 0.0
        left -= vals * self._val_s
        steps = torch.tensor(self.step + max(1, int(0.97 * rate * max(left, 0.0))), device=self.device)
        if self.dist.world > 1:  # rank 0's measurement for all: every process must stop at the same step
            dist.broadcast(steps, src=0)
        self.cfg.steps = int(steps.item())
        if self.dist.main:  # the run folder's config.toml states the schedule the run follows, not the one it was given
            self._write_config()
        self.log(f"schedule fitted to the time budget: {rate:.1f} it/s, ending at step {self.cfg.steps}")

    def _write_config(self) -> None:
        atomic_write_bytes(self.out / "config.toml", to_toml(self.cfg.to_dict()).encode())

    def _should_stop(self, t_start: float) -> bool:
        if not self.cfg.max_minutes or self.step % 10:
            return False
        stop = torch.tensor(float(time.perf_counter() - t_start > 60 * self.cfg.max_minutes), device=self.device)
        if self.dist.world > 1:  # every process must stop at the same step
            dist.all_reduce(stop, op=dist.ReduceOp.MAX)
        return bool(stop.item())

    def _validate(self, writer, progress) -> bool:
        """Score the EMA (or raw) model; True when some scale's PSNR is the best yet."""
        model = self.ema if self.ema is not None else self.model
        rec: dict[str, Any] = {"step": self.step}
        for scale in self.cfg.scales:
            p, s = self.validator.run(model, scale)
            rec[f"psnr_x{scale}"], rec[f"ssim_x{scale}"] = round(p, 4), round(s, 5)
            if writer:
                writer.add_scalar(f"val/psnr_x{scale}", p, self.step)
        self.history.append(rec)
        _append_log(self.out / "log.jsonl", {"val": rec})
        improved = any(rec[f"psnr_x{s}"] > self.best.get(f"x{s}", -1.0) for s in self.cfg.scales)
        for s in self.cfg.scales:
            self.best[f"x{s}"] = max(self.best.get(f"x{s}", -1.0), rec[f"psnr_x{s}"])
        if progress:
            progress({"val": rec})
        return improved

    def _checkpoint(self) -> Path:
        return save_checkpoint(self.ckpt_dir, self.step, self.state(), self.cfg.keep_last)

    def _remove_stale_temps(self, folder: Path) -> None:
        """This tool's temp files that a killed writer left in ``folder`` (a checkpoint, the weights, the log being
        saved when SIGKILL came): removed once their process is gone (nalasr.io.fsutil), never anyone else's file."""
        removed = remove_stale_temps(folder)
        if removed:
            self.log(f"removed {len(removed)} temporary file{'s' * (len(removed) > 1)} that an interrupted save left "
                     f"in {folder}: {', '.join(p.name for p in removed[:3])}{' ...' if len(removed) > 3 else ''}")

    def export(self, folder: Path) -> list[Path]:
        """Write a weights file per scale from the EMA (or raw) model, with a card."""
        folder.mkdir(parents=True, exist_ok=True)
        src = self.ema if self.ema is not None else self.model
        paths = []
        for s in self.cfg.scales:
            model = src.export(s)
            card = {
                "variant": self.cfg.variant, "scale": s, "iterations": self.step,
                "scales_trained_jointly": self.cfg.scales, "scale_cycle": self.cfg.scale_cycle(),
                "batch": self.cfg.batch, "patch": self.cfg.patch,
                "training_data": [Path(d).name for d in self.cfg.data], "training_images": self.n_images,
                "hr_rescale": self.cfg.hr_rescale,
                "ema": self.cfg.ema, "lr": self.cfg.lr, "schedule_steps": self.cfg.steps,
                "validation": [{"step": h["step"], "psnr": h.get(f"psnr_x{s}"), "ssim": h.get(f"ssim_x{s}")}
                               for h in self.history],
            }
            paths.append(save_weights(model, folder / shipped_name(self.cfg.variant, s), card))
        return paths


def train(cfg: TrainConfig, *, resume: bool = False, log: Callable[[str], None] = print,
          progress: Callable[[dict[str, Any]], None] | None = None) -> TrainResult:
    """Train (or resume) as ``cfg`` says; returns where things were written."""
    with Trainer(cfg, resume=resume, log=log) as trainer:
        return trainer.run(progress)


# A display for the main process: given the config and the starting step, a context manager that yields the
# (log, progress) callbacks to use while the run lasts (the CLI's progress bar).
Display = Callable[[TrainConfig, int], AbstractContextManager[tuple[Callable[[str], None], Callable[[dict[str, Any]], None]]]]


def run_config(options: dict[str, Any], *, config_file: str | Path | None = None, resume: bool = False) -> TrainConfig:
    """The config of ``nalasr train``: the resumed run's own settings (with ``resume`` and a checkpoint in the run
    folder), then ``config_file``'s fields, then the ``options`` that are not None."""
    from_file = load_toml(config_file) if config_file is not None else {}
    given = {k: v for k, v in options.items() if v is not None}
    out = Path(given.get("out") or from_file.get("out") or TrainConfig.out)
    if os.path.exists(out) and not os.path.isdir(out):  # os.path: False, not PermissionError, for a locked parent
        raise InputError(f"--out {out} is an existing file: give a folder")
    fields: dict[str, Any] = {}
    if resume and list_checkpoints(out / "checkpoints"):
        fields = resume_config(out).to_dict()
    cfg = TrainConfig.from_dict({**fields, **from_file, **given})
    if not cfg.data:
        if resume:  # --resume on a folder with nothing to resume: that is the problem to name, not the data
            raise InputError(f"--resume: no checkpoint in {out}; give the --out of an existing run, "
                             "or --data DIR to start a new run there")
        raise InputError("no training data: pass --data DIR (a folder of HR images, or a DIV2K root)")
    return cfg


def train_with_options(options: dict[str, Any], *, config_file: str | Path | None = None, resume: bool = False,
                       log: Callable[[str], None] = print, display: Display | None = None) -> TrainResult:
    """``nalasr train``: :func:`run_config`, then the run; ``display`` (main process only) shows its progress.
    Everything that can be wrong with the input fails before the display starts."""
    cfg = run_config(options, config_file=config_file, resume=resume)
    with Trainer(cfg, resume=resume, log=log) as trainer:
        if display is None or not trainer.dist.main:  # one display per run: rank 0's
            return trainer.run()
        with display(cfg, trainer.step) as (trainer.log, progress):
            return trainer.run(progress)


def resume_config(out: str | Path) -> TrainConfig:
    """The config a run folder was started with (from its newest checkpoint)."""
    found = load_latest(Path(out) / "checkpoints")
    if found is None:
        raise InputError(f"{out}: no checkpoint to resume from")
    return TrainConfig.from_dict(found[0]["config"])


def graph_trunk(trunk: nn.Module, x: Tensor) -> Callable[[Tensor], Tensor]:
    """``trunk`` as a callable that replays CUDA graphs of its forward and backward for inputs shaped like x
    (torch.cuda.make_graphed_callables; call it under the autocast it will run in, with cache_enabled=False)."""
    return torch.cuda.make_graphed_callables(_TrunkCall(trunk), (x.clone(),))


class _TrunkCall(nn.Module):
    """Calls a trunk. make_graphed_callables replaces the forward of the module it is given: giving it this
    wrapper leaves the trunk itself (validation, export, checkpoints) untouched, its parameters shared."""

    def __init__(self, trunk: nn.Module) -> None:
        super().__init__()
        self.trunk = trunk

    def forward(self, x: Tensor) -> Tensor:
        return self.trunk(x)


# -------------------------------------------------------------------------------------------- logging


def _append_log(path: Path, rec: dict[str, Any]) -> None:
    with open(path, "a") as f:
        f.write(json.dumps(rec) + "\n")


def _truncate_log(path: Path, step: int) -> None:
    """Drop log lines past the checkpoint being resumed, so the log reads as one uninterrupted run."""
    if not path.exists():
        return
    keep = []
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a line cut by a kill
        if rec.get("step", rec.get("val", {}).get("step", 0)) <= step:
            keep.append(line)
    atomic_write_bytes(path, ("\n".join(keep) + "\n" if keep else "").encode())


def _tensorboard(out: Path):
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # tensorboard is optional
        return None
    return SummaryWriter(str(out / "tb"))


__all__ = ["Display", "TrainResult", "Trainer", "lr_at", "resume_config", "run_config", "train", "train_with_options"]
