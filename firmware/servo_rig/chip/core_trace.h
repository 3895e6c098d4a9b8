// core_trace.h — one deterministic session of RigCore, run the same way on the chip
// (core_trace.ino on the simulated ATmega328P) and on the host (`rig_emulator --core-trace`).
//
// The inputs come from a fixed generator, not from a motor or a wire: a host's HELLO and MODE,
// JOINT_TARGETS every 2 ticks along a random walk, 200 ms of silence (the watchdog trips and
// stays latched until a new MODE), a dip of the supply (POWER), a corrupt frame, and a crude
// plant that moves the encoders with the PWM — with the clock starting at `start_us`, so a run can
// cross the micros() wrap. Every tick's PWM and faults and every frame the core sends go into a
// CRC-16. The core's control path is integer arithmetic, so the two builds must agree bit for bit.
#ifndef RIG_CORE_TRACE_H
#define RIG_CORE_TRACE_H

#include "../rig_core.h"

namespace rig_trace {

struct Lcg {  // Numerical Recipes' 32-bit LCG: the same sequence on every platform
  uint32_t s;
  uint32_t next() { s = s * 1664525UL + 1013904223UL; return s; }
};

inline uint16_t crc_bytes(uint16_t crc, const uint8_t* p, size_t n) { return rig::crc16_ccitt_false(p, n, crc); }

// Runs `ticks` control ticks of 1 ms from start_us; returns the CRC of everything the core produced.
inline uint16_t run(uint32_t ticks, uint32_t start_us) {
  rig::RigConfig cfg;
  cfg.boot_id = 7;
  static rig::RigCore core(cfg);  // static: the AVR's stack is small
  Lcg g = {12345UL};
  int32_t pos[rig::N_MOTORS] = {0, 0};
  int16_t pwm[rig::N_MOTORS] = {0, 0};
  int16_t target[rig::N_MOTORS] = {0, 0};
  uint8_t buf[rig::MAX_ENCODED + 2];
  uint16_t crc = 0xFFFF, seq = 0;
  for (uint32_t k = 0; k < ticks; ++k) {
    uint32_t now = start_us + k * 1000UL;
    bool silent = k >= 1500 && k < 1700;
    uint8_t body[rig::HELLO_SIZE] = {0};
    size_t n = 0;
    if (k == 0) {
      body[1] = rig::N_MOTORS;
      n = rig::encode_frame(rig::MSG_HELLO, seq++, now, body, rig::HELLO_SIZE, buf);
    } else if (k == 1 || k == 1700) {
      body[0] = rig::MODE_VIRTUAL_TO_REAL; body[1] = 500 & 0xFF; body[2] = 500 >> 8;
      n = rig::encode_frame(rig::MSG_MODE, seq++, now, body, 4, buf);
    } else if (k % 2 == 0 && !silent) {
      for (int i = 0; i < rig::N_MOTORS; ++i) {
        target[i] = (int16_t)(target[i] + (int16_t)((g.next() >> 24) & 0x3F) - 31);
        body[2 * i] = (uint8_t)(target[i] & 0xFF);
        body[2 * i + 1] = (uint8_t)((uint16_t)target[i] >> 8);
      }
      n = rig::encode_frame(rig::MSG_JOINT_TARGETS, seq++, now, body, 4, buf);
      if (k == 2222) buf[3] ^= 0x10;  // one corrupt frame: dropped, RX_ERROR in the next state
    }
    for (size_t b = 0; b < n; ++b) core.on_rx_byte(buf[b], now);
    for (int i = 0; i < rig::N_MOTORS; ++i) pos[i] += pwm[i] / 16 + (int32_t)((g.next() >> 29) & 3) - 1;
    uint16_t supply_mv = (k >= 2500 && k < 2600) ? 8000 : 12000;
    core.control_tick(pos, supply_mv, now, pwm);
    uint8_t out[5] = {(uint8_t)(pwm[0] & 0xFF), (uint8_t)((uint16_t)pwm[0] >> 8), (uint8_t)(pwm[1] & 0xFF),
                      (uint8_t)((uint16_t)pwm[1] >> 8), core.faults()};
    crc = crc_bytes(crc, out, sizeof(out));
    while ((n = core.next_tx_frame(buf, now)) > 0) crc = crc_bytes(crc, buf, n);
  }
  return crc;
}

}  // namespace rig_trace

#endif  // RIG_CORE_TRACE_H
