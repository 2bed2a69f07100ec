"""Defaults of the image I/O that the CLI shows in --help: kept apart so --help imports no numpy, cv2 or torch."""

# Pillow's own decompression-bomb threshold (~9459 x 9459), fixed here so another library changing
# Image.MAX_IMAGE_PIXELS does not change ours.
DEFAULT_MAX_PIXELS = 89_478_485
DEFAULT_QUALITY = 95  # JPEG / WebP
# zlib 0-9 for 8-bit PNG (nalasr.io.png). Level 4 writes smaller files than Pillow's level 2 (the default
# before the banded encoder) for less CPU: 4K photos 10.2 MB in 444 ms of CPU against 10.3 MB in 595 ms;
# levels 5-9 cost 1.7-23x level 4's CPU for 2.5-10 % less (benchmarks/results/png_encode.md).
DEFAULT_PNG_COMPRESSION = 4
