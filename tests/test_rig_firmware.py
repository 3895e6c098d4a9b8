"""The firmware sources build cleanly on the host: the portable core with -Werror, the
emulator, and the Arduino sketch against a stub Arduino.h (a syntax/type check — the AVR
build itself needs the Arduino toolchain, which CI does not have). Nothing here is skipped:
without g++ the tests fail with a message naming the missing compiler."""

import os
import shutil
import subprocess

import pytest

from armtwin.envs.rig import FIRMWARE_DIR

ARDUINO_STUB = r"""
#pragma once
#include <stdint.h>
#include <stddef.h>
#define HIGH 1
#define LOW 0
#define INPUT_PULLUP 2
#define OUTPUT 1
#define RISING 3
#define A0 14
#define SERIAL_TX_BUFFER_SIZE 64
struct HardwareSerial {
  void begin(unsigned long) {}
  int available() { return 0; }
  int read() { return -1; }
  int availableForWrite() { return 63; }
  size_t write(const uint8_t*, size_t n) { return n; }
};
extern HardwareSerial Serial;
void pinMode(uint8_t, uint8_t);
int digitalRead(uint8_t);
void digitalWrite(uint8_t, uint8_t);
void analogWrite(uint8_t, int);
int analogRead(uint8_t);
unsigned long micros();
void attachInterrupt(uint8_t, void (*)(), int);
uint8_t digitalPinToInterrupt(uint8_t);
void noInterrupts();
void interrupts();
"""

EEPROM_STUB = r"""
#pragma once
#include <stdint.h>
uint16_t eeprom_read_word(const uint16_t*);
void eeprom_update_word(uint16_t*, uint16_t);
"""


def gxx(*args, cwd=None):
    """Run g++ with warnings as errors. Nothing is skipped: issue 7 requires the firmware to build
    on CI, so a missing compiler fails the test with a message saying what to install."""
    if shutil.which("g++") is None:
        pytest.fail("g++ was not found on PATH: the firmware tests need a C++11 compiler "
                    "(install it, e.g. `apt-get install g++`); these tests are never skipped", pytrace=False)
    return subprocess.run(["g++", "-std=c++11", "-Wall", "-Wextra", "-Werror", *args], capture_output=True,
                          text=True, cwd=cwd)


def test_core_compiles_without_warnings(tmp_path):
    r = gxx("-c", os.path.join(FIRMWARE_DIR, "rig_core.cpp"), "-o", str(tmp_path / "core.o"))
    assert r.returncode == 0, r.stderr


def test_emulator_compiles_without_warnings(tmp_path):
    r = gxx("-O2", os.path.join(FIRMWARE_DIR, "emulator.cpp"), os.path.join(FIRMWARE_DIR, "rig_core.cpp"),
            "-o", str(tmp_path / "emu"))
    assert r.returncode == 0, r.stderr


def test_sketch_compiles_against_a_stub_arduino(tmp_path):
    (tmp_path / "Arduino.h").write_text(ARDUINO_STUB)
    (tmp_path / "avr").mkdir()
    (tmp_path / "avr" / "eeprom.h").write_text(EEPROM_STUB)
    sketch = os.path.join(FIRMWARE_DIR, "servo_rig.ino")
    r = gxx("-DARDUINO=10819", "-fsyntax-only", "-I", str(tmp_path), "-I", FIRMWARE_DIR, "-x", "c++", sketch)
    assert r.returncode == 0, r.stderr
    # with ARDUINO defined, emulator.cpp (host only) compiles to nothing
    r = gxx("-DARDUINO=10819", "-c", "-x", "c++", os.path.join(FIRMWARE_DIR, "emulator.cpp"), "-o",
            str(tmp_path / "e.o"))
    assert r.returncode == 0, r.stderr
    nm = subprocess.run(["nm", str(tmp_path / "e.o")], capture_output=True, text=True).stdout
    assert "main" not in nm
