"""Running the network on images: loading (:mod:`.loading`), one forward (:mod:`.infer`), CUDA-graph replay
(:mod:`.graphs`), self-ensemble (:mod:`.ensemble`), images and batches of files (:mod:`.upscaling`), and devices,
precisions, scales and peak memory (:mod:`.runtime`). Submodules are imported on use."""
