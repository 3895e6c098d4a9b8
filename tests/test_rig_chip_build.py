"""The rig firmware builds for the real boards (Uno, Nano: ATmega328P; Mega 2560) with Debian's AVR
toolchain and the Arduino AVR core, warnings as errors in the firmware's own files, from Python
(``build_firmware``, what the chip tests use) and from ``make`` (the same recipe, the same image).
Nothing is skipped: without gcc-avr / avr-libc / arduino-core-avr the tests fail naming them."""

import os
import shutil
import subprocess

import pytest

from armtwin.envs.rig import FIRMWARE_DIR
from armtwin.envs.rig.chip import BOARDS, Board, build_firmware, firmware_size


def _need_toolchain():
    if shutil.which("avr-gcc") is None or not os.path.isdir("/usr/share/arduino/hardware/arduino/avr/cores"):
        pytest.fail("the AVR toolchain is missing: apt-get install gcc-avr avr-libc arduino-core-avr "
                    "(these tests are never skipped)", pytrace=False)


@pytest.mark.parametrize("board", list(Board))
def test_the_firmware_builds_for_every_board_and_fits(board, tmp_path):
    _need_toolchain()
    img = build_firmware(board, cache_dir=tmp_path)
    print(img.summary())
    with open(img.elf, "rb") as f:
        assert f.read(4) == b"\x7fELF"
    assert os.path.getsize(img.hex) > 0
    spec = BOARDS[board]
    # the budget: at most half of the flash and of the RAM on every board
    assert 0 < img.flash <= spec.flash_max // 2
    assert 0 < img.ram <= spec.ram_max // 2
    # cached: the second call builds nothing and returns the same files
    again = build_firmware(board, cache_dir=tmp_path)
    assert again == img


def test_make_builds_the_same_image_as_python(tmp_path):
    _need_toolchain()
    img = build_firmware(Board.UNO, cache_dir=tmp_path / "py")
    out = tmp_path / "make"
    r = subprocess.run(["make", "-s", "-C", FIRMWARE_DIR, "firmware", "BOARD=uno", f"FW={out}"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "servo_rig.elf" in r.stdout  # make prints the footprint (avr-size)
    assert firmware_size(str(out / "servo_rig.elf")) == (img.flash, img.ram)


def test_an_unknown_board_is_refused():
    with pytest.raises(ValueError):
        build_firmware("leonardo")
