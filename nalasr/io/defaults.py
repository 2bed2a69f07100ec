"""Defaults of the image I/O that the CLI shows in --help: kept apart so --help imports no numpy, cv2 or torch."""

# Pillow's own decompression-bomb threshold (~9459 x 9459), fixed here so another library changing
# Image.MAX_IMAGE_PIXELS does not change ours.
DEFAULT_MAX_PIXELS = 89_478_485
DEFAULT_QUALITY = 95  # JPEG / WebP
DEFAULT_PNG_COMPRESSION = 2  # zlib 0-9: smallest level whose 8K encode (~2.4 s on the H200 host; level 3 ~3.2 s) fits the 6 s 1080p->8K target; 1.17x level 6's size at 0.29x its time (benchmarks/results/png_encode.md)
