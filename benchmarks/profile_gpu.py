"""Where the time of one whole-image forward goes on CUDA (default variant, x4, fp16, 540x960 LR).

    PYTHONPATH=.:kernels python benchmarks/profile_gpu.py
"""

from __future__ import annotations

import torch
from forward_ab import lr_image  # first: it puts the repository on sys.path

from nalasr.model import create_model


def main() -> None:
    model = create_model("default", 4).cuda().half().eval().to(memory_format=torch.channels_last)
    x = lr_image(540, 960)
    with torch.inference_mode():
        for _ in range(3):
            model(x)
        torch.cuda.synchronize()
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=acts, record_shapes=True) as prof:
            model(x)
            torch.cuda.synchronize()
    # By kernel, then by the aten op (and input shapes) that launched it: the kernel names of PyTorch's
    # elementwise ops do not say which op they belong to.
    print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=25, max_name_column_width=90))
    print(prof.key_averages(group_by_input_shape=True).table(
        sort_by="cuda_time_total", row_limit=40, max_name_column_width=40, max_shapes_column_width=70))


if __name__ == "__main__":
    main()
