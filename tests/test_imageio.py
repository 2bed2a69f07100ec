"""Reading and writing image files: formats by content, bit depth, channels, alpha, palette, EXIF, ICC, errors."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest
from imagegen import (
    PALETTE_ALPHA,
    PALETTE_RGB,
    bomb_png,
    encode,
    exif_bytes,
    exif_libtiff_refuses,
    palette_image,
    pixels,
    png,
    png_gray_alpha16,
    srgb_icc,
)
from PIL import Image, ImageOps

from nalasr.errors import InputError
from nalasr.io.imageio import (
    Picture,
    decode_image,
    encode_image,
    format_for_path,
    normalise_ext,
    read_image,
    write_image,
)

# (format, channels, dtype, extra save arguments) that the format stores losslessly
LOSSLESS = [
    ("PNG", 1, np.uint8, {}), ("PNG", 2, np.uint8, {}), ("PNG", 3, np.uint8, {}), ("PNG", 4, np.uint8, {}),
    ("PNG", 1, np.uint16, {}), ("PNG", 3, np.uint16, {}), ("PNG", 4, np.uint16, {}),
    ("TIFF", 1, np.uint8, {}), ("TIFF", 3, np.uint8, {}), ("TIFF", 4, np.uint8, {}),
    ("TIFF", 1, np.uint16, {}), ("TIFF", 3, np.uint16, {}), ("TIFF", 4, np.uint16, {}),
    ("BMP", 1, np.uint8, {}), ("BMP", 3, np.uint8, {}),
    ("WEBP", 3, np.uint8, {"lossless": True}), ("WEBP", 4, np.uint8, {"lossless": True}),
]


def _write(tmp_path, name: str, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return path


# ------------------------------------------------------------------------------------------ reading


@pytest.mark.parametrize("fmt,c,dtype,kw", LOSSLESS, ids=lambda v: getattr(v, "__name__", str(v)))
def test_reads_every_format_exactly(tmp_path, fmt, c, dtype, kw):
    a = pixels(5, 7, c, dtype, seed=c)
    if fmt == "WEBP" and c == 4:
        a[..., :3][a[..., 3] == 0] = 0  # lossless WebP may rewrite the colour of fully clear pixels
    pic = read_image(_write(tmp_path, "img.bin", encode(a, fmt, **kw)))
    assert pic.format == fmt
    assert pic.pixels.dtype == dtype and pic.pixels.shape == a.shape
    np.testing.assert_array_equal(pic.pixels, a)


def test_format_is_read_from_content_not_extension(tmp_path):
    a = pixels(4, 6, 3)
    assert read_image(_write(tmp_path, "really_png.jpg", encode(a, "PNG"))).format == "PNG"
    assert read_image(_write(tmp_path, "really_jpeg.png", encode(a, "JPEG"))).format == "JPEG"
    assert read_image(_write(tmp_path, "no_extension", encode(a, "WEBP"))).format == "WEBP"


def test_jpeg_is_read(tmp_path):
    a = np.full((8, 8, 3), (200, 40, 90), np.uint8)
    pic = read_image(_write(tmp_path, "x.jpg", encode(a, "JPEG", quality=95)))
    assert pic.describe() == "RGB 8-bit"
    assert np.abs(pic.pixels.astype(int) - a).max() <= 3


def test_gray_alpha_16bit_png(tmp_path):
    a = pixels(4, 5, 2, np.uint16, seed=3)
    pic = read_image(_write(tmp_path, "la16.png", png_gray_alpha16(a)))
    assert pic.describe() == "gray+alpha 16-bit"
    np.testing.assert_array_equal(pic.pixels, a)


@pytest.mark.parametrize("transparency", [False, True])
def test_palette_images(tmp_path, transparency):
    im = palette_image(3, 5, transparency=transparency)
    buf = io.BytesIO()
    im.save(buf, "PNG")
    pic = read_image(_write(tmp_path, "p.png", buf.getvalue()))
    idx = np.asarray(im)
    expected = PALETTE_RGB[idx]
    if transparency:
        expected = np.concatenate([expected, PALETTE_ALPHA[idx][..., None]], axis=2)
    np.testing.assert_array_equal(pic.pixels, expected)
    assert any("palette" in n for n in pic.notes)


def test_colour_key_transparency_becomes_alpha(tmp_path):
    g = np.array([[0, 5, 9], [5, 7, 5]], np.uint8)
    pic = read_image(_write(tmp_path, "l.png", encode(g[..., None], "PNG", transparency=5)))
    np.testing.assert_array_equal(pic.pixels[..., 0], g)
    np.testing.assert_array_equal(pic.pixels[..., 1], np.where(g == 5, 0, 255))


def test_gray_stays_gray(tmp_path):
    for fmt in ("PNG", "JPEG", "TIFF", "BMP"):
        pic = read_image(_write(tmp_path, f"g.{fmt}", encode(pixels(4, 4, 1), fmt)))
        assert pic.channels == 1, fmt


@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation_applied_like_pillow(tmp_path, orientation):
    a = pixels(3, 5, 3, seed=orientation)
    data = encode(a, "PNG", exif=exif_bytes(orientation))
    pic = read_image(_write(tmp_path, "o.png", data))
    expected = np.asarray(ImageOps.exif_transpose(Image.open(io.BytesIO(data))))
    np.testing.assert_array_equal(pic.pixels, expected)
    exif = Image.Exif()
    exif.load(pic.exif)
    assert 0x0112 not in exif  # applied, so not applied again by a viewer of the output
    assert exif[0x010E] == "nalasr test"


def test_exif_orientation_of_a_jpeg(tmp_path):
    data = encode(pixels(8, 16, 3), "JPEG", quality=90, exif=exif_bytes(8))
    pic = read_image(_write(tmp_path, "o.jpg", data))
    np.testing.assert_array_equal(pic.pixels, np.asarray(ImageOps.exif_transpose(Image.open(io.BytesIO(data)))))
    assert pic.size == (8, 16)


def test_exif_orientation_applied_to_16bit_colour(tmp_path):
    """16-bit colour goes through OpenCV, which ignores EXIF: the rotation must still happen."""
    a = pixels(3, 5, 3, np.uint16)
    data, _ = encode_image(Picture(a, exif=exif_bytes(6)), "PNG")
    pic = read_image(_write(tmp_path, "o16.png", data))
    np.testing.assert_array_equal(pic.pixels, np.rot90(a, -1))


def test_icc_dropped_when_it_does_not_describe_the_pixels(tmp_path):
    pic = read_image(_write(tmp_path, "g.png", encode(pixels(4, 4, 1), "PNG", icc_profile=srgb_icc())))
    assert pic.icc is None
    assert any("ICC" in n for n in pic.notes)


def test_cmyk_jpeg_becomes_rgb(tmp_path):
    im = Image.new("CMYK", (6, 4), (0, 255, 255, 0))  # red
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=95)
    pic = read_image(_write(tmp_path, "cmyk.jpg", buf.getvalue()))
    assert pic.describe() == "RGB 8-bit"
    assert np.abs(pic.pixels.astype(int) - (255, 0, 0)).max() <= 6
    assert any("CMYK" in n for n in pic.notes)


# --- bad files: always an InputError that names the file


def _bad_files() -> dict[str, bytes]:
    good_png = encode(pixels(16, 16, 3), "PNG")
    good_jpeg = encode(pixels(16, 16, 3), "JPEG")
    header_end = good_png.index(b"IDAT") + 4
    return {
        "empty.png": b"",
        "text.png": b"this is not an image\n" * 10,
        "truncated.png": good_png[: len(good_png) // 2],
        "truncated.jpg": good_jpeg[: len(good_jpeg) // 2],
        "corrupt.png": good_png[:header_end] + bytes(range(256)) * 2,
        "header_only.webp": encode(pixels(16, 16, 3), "WEBP")[:30],
        "animation.gif": encode(pixels(4, 4, 3), "GIF"),
        "float.tif": _float_tiff(),
    }


def _float_tiff() -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.ones((3, 3), np.float32)).save(buf, "TIFF")
    return buf.getvalue()


@pytest.mark.parametrize("name", list(_bad_files()))
def test_bad_files_give_a_clean_error_naming_the_file(tmp_path, name):
    path = _write(tmp_path, name, _bad_files()[name])
    with pytest.raises(InputError) as e:
        read_image(path)
    assert str(path) in str(e.value)
    assert "\n" not in str(e.value)


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_image(tmp_path / "nope.png")
    with pytest.raises(InputError, match="folder"):
        read_image(tmp_path)


def test_empty_bytes():
    with pytest.raises(InputError, match="empty"):
        decode_image(b"", name="x")


# --- decompression bombs


def test_decompression_bomb_refused_before_decoding(tmp_path):
    path = _write(tmp_path, "bomb.png", bomb_png(60_000, 60_000))  # 3.6 G pixels in a few KB
    assert path.stat().st_size < 20_000
    with pytest.raises(InputError, match="decompression-bomb") as e:
        read_image(path)
    assert "3,600,000,000 pixels" in str(e.value)


def test_max_pixels_moves_the_limit(tmp_path):
    path = _write(tmp_path, "big.png", bomb_png(300, 200))
    with pytest.raises(InputError, match=r"300x200 = 60,000 pixels is over the limit of 59,999"):
        read_image(path, max_pixels=59_999)
    assert read_image(path, max_pixels=60_000).size == (300, 200)


def test_max_pixels_above_pillows_own_limit(tmp_path, monkeypatch):
    """Pillow refuses to open anything over twice its own (global) limit; a --max-pixels above that must
    still work, and Pillow's setting must be left as it was. Simulated with a small Pillow limit."""
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1_000)
    path = _write(tmp_path, "wide.png", bomb_png(100, 100))  # 10,000 pixels: 10x Pillow's limit
    with pytest.raises(Image.DecompressionBombError):
        Image.open(path)
    assert read_image(path, max_pixels=10_000).size == (100, 100)
    assert Image.MAX_IMAGE_PIXELS == 1_000
    with pytest.raises(InputError, match="10,000 pixels is over the limit of 9,999"):
        read_image(path, max_pixels=9_999)


# ------------------------------------------------------------------------------------------ writing


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "WEBP", "TIFF"])
def test_icc_and_exif_are_carried(tmp_path, fmt):
    pic = Picture(pixels(6, 8, 3), icc=srgb_icc(), exif=exif_bytes())
    path = tmp_path / f"out{'.jpg' if fmt == 'JPEG' else '.' + fmt.lower()}"
    assert write_image(path, pic) == []
    back = read_image(path)
    assert back.icc == pic.icc
    exif = Image.Exif()
    exif.load(back.exif)
    assert exif[0x010E] == "nalasr test"


def test_icc_and_exif_carried_at_16_bits(tmp_path):
    pic = Picture(pixels(6, 8, 3, np.uint16), icc=srgb_icc(), exif=exif_bytes())
    write_image(tmp_path / "deep.png", pic)
    back = read_image(tmp_path / "deep.png")
    np.testing.assert_array_equal(back.pixels, pic.pixels)
    assert back.icc == pic.icc and back.exif is not None


def test_exif_the_encoder_refuses_is_dropped_not_fatal(tmp_path):
    """EXIF from a damaged file that the TIFF encoder refuses: the pixels are written, the note says EXIF was
    dropped."""
    bad_exif = exif_libtiff_refuses()
    a = pixels(6, 7, 1, np.uint16, seed=2)
    notes = write_image(tmp_path / "x.tif", Picture(a, exif=bad_exif))
    assert any("EXIF" in n and "dropped" in n for n in notes)
    assert np.array_equal(read_image(tmp_path / "x.tif").pixels, a)


def test_bmp_says_metadata_is_not_written(tmp_path):
    notes = write_image(tmp_path / "x.bmp", Picture(pixels(4, 4, 3), icc=srgb_icc(), exif=exif_bytes()))
    assert any("BMP" in n and "metadata" in n for n in notes)


@pytest.mark.parametrize("c,dtype", [(1, np.uint8), (2, np.uint8), (3, np.uint8), (4, np.uint8),
                                     (1, np.uint16), (2, np.uint16), (3, np.uint16), (4, np.uint16)])
@pytest.mark.parametrize("fmt", ["PNG", "TIFF"])
def test_lossless_writers_keep_pixels_and_depth(tmp_path, fmt, c, dtype):
    a = pixels(5, 6, c, dtype, seed=c)
    notes = write_image(tmp_path / f"x.{fmt.lower()}", Picture(a))
    back = read_image(tmp_path / f"x.{fmt.lower()}").pixels
    assert back.dtype == dtype
    if c == 2 and dtype == np.uint16:  # no writer for 16-bit gray+alpha: stored as RGBA, said so
        assert any("RGBA" in n for n in notes)
        np.testing.assert_array_equal(back, a[..., [0, 0, 0, 1]])
    else:
        assert notes == []
        np.testing.assert_array_equal(back, a)


def test_lossy_and_8bit_formats_say_what_they_drop(tmp_path):
    deep_rgba = Picture(pixels(4, 4, 4, np.uint16))
    notes = write_image(tmp_path / "x.jpg", deep_rgba)
    assert any("8 bits" in n for n in notes) and any("alpha" in n for n in notes)
    assert read_image(tmp_path / "x.jpg").describe() == "RGB 8-bit"
    notes = write_image(tmp_path / "g.webp", Picture(pixels(4, 4, 1)))
    assert any("grayscale" in n for n in notes)
    notes = write_image(tmp_path / "a.bmp", Picture(pixels(4, 4, 4)))
    assert any("alpha" in n for n in notes)


def test_16_to_8_bit_rounds(tmp_path):
    a = np.array([[[0], [128], [257], [65535], [65407]]], np.uint16)
    write_image(tmp_path / "x.bmp", Picture(a))
    np.testing.assert_array_equal(read_image(tmp_path / "x.bmp").pixels[..., 0], [[0, 0, 1, 255, 255]])


def test_quality_changes_jpeg(tmp_path):
    pic = Picture(pixels(32, 32, 3))
    small, _ = encode_image(pic, "JPEG", quality=10)
    large, _ = encode_image(pic, "JPEG", quality=95)
    assert len(small) < len(large)
    with pytest.raises(InputError, match="quality"):
        encode_image(pic, "JPEG", quality=0)


def test_write_never_clobbers_without_overwrite(tmp_path):
    path = tmp_path / "x.png"
    path.write_bytes(b"keep me")
    with pytest.raises(FileExistsError):
        write_image(path, Picture(pixels(4, 4, 3)))
    assert path.read_bytes() == b"keep me"
    write_image(path, Picture(pixels(4, 4, 3)), overwrite=True)
    assert read_image(path).size == (4, 4)
    assert sorted(os.listdir(tmp_path)) == ["x.png"]  # no temporary files left behind


def test_output_format_from_extension():
    assert format_for_path("a/b.JPEG") == "JPEG"
    assert format_for_path("x.tif") == "TIFF"
    with pytest.raises(InputError, match="unknown image extension"):
        format_for_path("x.gif")
    assert normalise_ext("PNG") == ".png" and normalise_ext(".webp") == ".webp"
    with pytest.raises(InputError):
        normalise_ext("gif")


def test_handwritten_png_helper_is_a_valid_png():
    """The fuzz and bomb tests build PNGs by hand; make sure Pillow agrees they are well-formed."""
    data = png(3, 2, 8, 0, b"\x00abc\x00def")
    np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(data))), [[97, 98, 99], [100, 101, 102]])
