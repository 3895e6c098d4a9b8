// core_trace.ino — the chip side of the emulator/chip agreement test: runs rig_trace::run (the
// same deterministic RigCore session `rig_emulator --core-trace` runs on the host) and prints
// "TRACE <ticks> <start_us> <crc>" on the serial port. Built by the tests with
// build_firmware(board, sketch="chip/core_trace.ino"); not part of the rig's firmware.
#include <Arduino.h>

#include "core_trace.h"

static const uint32_t TICKS = 3000;
static const uint32_t START_US = 4294000000UL;  // 0.967 s before the micros() wrap: the run crosses it

void setup() {
  Serial.begin(115200);
  uint16_t crc = rig_trace::run(TICKS, START_US);
  Serial.print("TRACE ");
  Serial.print(TICKS);
  Serial.print(' ');
  Serial.print(START_US);
  Serial.print(' ');
  Serial.println(crc);
  Serial.flush();
}

void loop() {}
