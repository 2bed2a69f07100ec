"""A resident worker: ``nalasr worker start`` keeps the network loaded, so later ``nalasr upscale`` commands skip
the start-up a new process pays (importing torch, the CUDA start-up, the weights, the first forward of a size).

``nalasr upscale`` hands its job to a running worker when there is one (``--no-worker`` keeps it in the
command's own process) and prints the same table, JSON and exit code; the worker runs
:func:`nalasr.inference.batch.upscale_paths` in the command's folder with its options, so the outputs are the
same files. :mod:`.protocol` (the socket, the messages, who may be served) and :mod:`.client` import neither
torch nor the network; :mod:`.server` is the worker.
"""
