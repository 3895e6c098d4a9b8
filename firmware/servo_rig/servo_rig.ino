// servo_rig.ino — firmware of the two-motor servo rig (Arduino Uno / Nano, ATmega328P).
//
// Hardware (see docs/PROTOCOL.md and docs/RIG.md):
//   * 2 DC gear motors, 12 V, 1:27, 145 rpm, quadrature encoders 500 CPR (A, B);
//   * an L298N-style dual H-bridge: ENA/ENB take PWM, IN1..IN4 set the direction;
//   * the 12 V motor supply sensed on A0 through a 10 k / 3.3 k divider (power-cut detection);
//   * optional supply relay on RELAY_PIN (the POWER message switches it).
// Encoders are counted x1: an interrupt on channel A's rising edge (INT0/INT1; INT4/INT5 on a Mega)
// reads channel B for the direction -> 500 counts per motor turn = 37.5 counts per output degree.
//
// All protocol, PID, watchdog and state-machine logic lives in rig_core.{h,cpp}, the same
// code the host emulator (emulator.cpp, `armtwin rig emulate`) runs.
#include <Arduino.h>
#include <avr/eeprom.h>

#include "rig_core.h"

// ----- pins ----------------------------------------------------------------------------------
static const uint8_t ENC_A[rig::N_MOTORS] = {2, 3};  // external interrupts INT0, INT1
static const uint8_t ENC_B[rig::N_MOTORS] = {4, 5};
static const uint8_t PWM_PIN[rig::N_MOTORS] = {9, 10};
static const uint8_t DIR_PIN_A[rig::N_MOTORS] = {7, 11};
static const uint8_t DIR_PIN_B[rig::N_MOTORS] = {8, 12};
static const uint8_t SUPPLY_SENSE_PIN = A0;
// supply mV per ADC count (5 V reference, 10-bit, divider (10 k + 3.3 k) / 3.3 k = 19.698), ·2^10
static const uint32_t SUPPLY_MV_PER_COUNT_Q10 = 20171;
// #define RELAY_PIN 6   // uncomment when a supply relay is fitted
// High while a control tick runs: a scope (or the simulated chip's harness, firmware/servo_rig/chip)
// reads the tick's duration and period from it. D13 is the on-board LED (dimly lit at 1 kHz).
static const uint8_t TIMING_PIN = 13;

// 115200 by default; 250000, 500000 and 1000000 are exact on a 16 MHz AVR (U2X, UBRR 7 / 3 / 1):
// build with -DRIG_BAUD=1000000 (build_firmware(defines=("RIG_BAUD=1000000",))).
#ifndef RIG_BAUD
#define RIG_BAUD 115200
#endif
static const unsigned long BAUD = RIG_BAUD;
// The PID rate. A tick (two fixed-point PIDs, feed-forward, faults) takes ~0.1 ms on a 16 MHz
// ATmega328P (the chip tests measure it on simavr), so 1 kHz leaves most of the CPU for the
// encoder interrupts and the serial link. HELLO reports this rate; the tests check the chip
// really keeps it.
static const uint16_t CONTROL_HZ = 1000;
static const uint32_t CONTROL_PERIOD_US = 1000000UL / CONTROL_HZ;

// The boot id (protocol 2, HELLO): a counter in EEPROM, +1 at every boot, so that a host can
// tell a reboot (an Arduino resets when its port is opened) from repeated or reordered frames.
static uint16_t* const BOOT_COUNTER_ADDR = (uint16_t*)0;

static uint16_t next_boot_id() {
  uint16_t id = (uint16_t)(eeprom_read_word(BOOT_COUNTER_ADDR) + 1);
  eeprom_update_word(BOOT_COUNTER_ADDR, id);  // one write per boot: 100 000 boots of endurance
  return id;
}

// ----- state ---------------------------------------------------------------------------------
// Encoder counts as the interrupts keep them: 16 bits (two bytes to read, one register pair to
// increment); the tick extends them to 32 bits (at most ~33 counts a tick, far from a 16-bit wrap).
static volatile int16_t g_enc16[rig::N_MOTORS] = {0, 0};
static int16_t g_enc16_seen[rig::N_MOTORS] = {0, 0};
static int32_t g_enc[rig::N_MOTORS] = {0, 0};
static volatile uint8_t* g_enc_b_in[rig::N_MOTORS];  // channel B's input register and bit (fast ISR)
static uint8_t g_enc_b_bit[rig::N_MOTORS];
static rig::RigCore* g_core = nullptr;
static uint32_t g_last_tick_us = 0;
static uint16_t g_supply_adc = 0;  // the newest conversion of SUPPLY_SENSE_PIN
static int16_t g_pwm_applied[rig::N_MOTORS] = {0, 0};
static uint8_t g_tx[rig::MAX_ENCODED + 2];
// A frame is queued behind the one on the wire when at most this many bytes of it remain: longer
// than a control tick plus an encoding (~0.5 ms), shorter than a state (22 bytes).
static const int TX_AHEAD_BYTES = 8;
static const uint8_t TX_CHUNK = 4;  // bytes handed to Serial per loop pass
static const uint8_t RX_BATCH = 8;  // received bytes decoded per loop pass
static uint8_t g_tx_len = 0, g_tx_pos = 0;  // the frame in g_tx, and how much of it went to Serial
static volatile uint8_t* g_timing_port = nullptr;  // TIMING_PIN's output register and bit: 2 cycles a write
static uint8_t g_timing_bit = 0;

// Quadrature x1: on A rising, B high means one direction, low the other.
// Up to ~33 000 edges a second per motor at full speed: the B level is read straight from its
// port register (digitalRead would cost ~4 µs an edge).
// At full speed (145 rpm at the output) each encoder gives ~33 000 A edges a second: through
// attachInterrupt's dispatcher (~140 cycles an edge with digitalRead) the two took 45 % of the CPU
// and starved the serial link (measured on the simulated chip). Plain vectors with the B level read
// from its port register cost ~40 cycles an edge. The one board-specific block of the sketch:
// which external interrupt serves D2 / D3.
#if defined(__AVR_ATmega2560__) || defined(__AVR_ATmega1280__)
#define ENC0_VECT INT4_vect  // D2
#define ENC1_VECT INT5_vect  // D3
static void enable_encoder_interrupts() {
  EICRB |= _BV(ISC41) | _BV(ISC40) | _BV(ISC51) | _BV(ISC50);  // rising edges
  EIFR = _BV(INTF4) | _BV(INTF5);
  EIMSK |= _BV(INT4) | _BV(INT5);
}
#else  // ATmega328P / 168: Uno, Nano
#define ENC0_VECT INT0_vect  // D2
#define ENC1_VECT INT1_vect  // D3
static void enable_encoder_interrupts() {
  EICRA |= _BV(ISC01) | _BV(ISC00) | _BV(ISC11) | _BV(ISC10);  // rising edges
  EIFR = _BV(INTF0) | _BV(INTF1);
  EIMSK |= _BV(INT0) | _BV(INT1);
}
#endif
ISR(ENC0_VECT) { if (*g_enc_b_in[0] & g_enc_b_bit[0]) ++g_enc16[0]; else --g_enc16[0]; }
ISR(ENC1_VECT) { if (*g_enc_b_in[1] & g_enc_b_bit[1]) ++g_enc16[1]; else --g_enc16[1]; }

static void apply_pwm(uint8_t i, int16_t pwm) {
  int16_t was = g_pwm_applied[i];
  if (pwm == was) return;  // unchanged: no pin writes
  g_pwm_applied[i] = pwm;
  int8_t sign = (pwm > 0) - (pwm < 0);
  if (sign != (was > 0) - (was < 0)) {  // direction pins only when the direction changes
    digitalWrite(DIR_PIN_A[i], sign > 0 ? HIGH : LOW);
    digitalWrite(DIR_PIN_B[i], sign < 0 ? HIGH : LOW);
  }
  uint8_t duty = (uint8_t)(pwm >= 0 ? pwm : -pwm);
  if (duty != (uint8_t)(was >= 0 ? was : -was)) analogWrite(PWM_PIN[i], duty);
}

// The motor supply, mV. The ADC converts in the background (104 µs): each tick takes the finished
// conversion and starts the next, instead of waiting in analogRead.
static uint16_t read_supply_mv() {
  if (!(ADCSRA & _BV(ADSC))) {
    g_supply_adc = ADC;
    ADCSRA |= _BV(ADSC);
  }
  return (uint16_t)(((uint32_t)g_supply_adc * SUPPLY_MV_PER_COUNT_Q10) >> 10);
}

void setup() {
  static rig::RigConfig cfg;
  cfg.boot_id = next_boot_id();
  cfg.control_hz = CONTROL_HZ;
  static rig::RigCore core(cfg);  // static storage: no heap on the AVR; it announces this boot
  g_core = &core;
  for (uint8_t i = 0; i < rig::N_MOTORS; ++i) {
    pinMode(ENC_A[i], INPUT_PULLUP);
    pinMode(ENC_B[i], INPUT_PULLUP);
    pinMode(PWM_PIN[i], OUTPUT);
    pinMode(DIR_PIN_A[i], OUTPUT);
    pinMode(DIR_PIN_B[i], OUTPUT);
    g_enc_b_in[i] = portInputRegister(digitalPinToPort(ENC_B[i]));
    g_enc_b_bit[i] = digitalPinToBitMask(ENC_B[i]);
    g_pwm_applied[i] = 1;  // force the first write
    apply_pwm(i, 0);
  }
  g_supply_adc = analogRead(SUPPLY_SENSE_PIN);  // selects the channel and reference; then background conversions
  ADCSRA |= _BV(ADSC);
  pinMode(TIMING_PIN, OUTPUT);
  digitalWrite(TIMING_PIN, LOW);
  g_timing_port = portOutputRegister(digitalPinToPort(TIMING_PIN));
  g_timing_bit = digitalPinToBitMask(TIMING_PIN);
  enable_encoder_interrupts();
#ifdef RELAY_PIN
  pinMode(RELAY_PIN, OUTPUT);
  digitalWrite(RELAY_PIN, HIGH);
#endif
  Serial.begin(BAUD);
  g_last_tick_us = micros();
}

// One thing per pass, the control tick first: it waits at most for a few received bytes or one
// frame's encoding (tens of µs), never for a whole burst of bytes, so it keeps its period.
void loop() {
  // 1. the control cycle on a fixed grid; (uint32_t)(now - then) >= interval holds across the
  // micros() wrap after 71.6 min
  uint32_t now = micros();
  if ((uint32_t)(now - g_last_tick_us) >= CONTROL_PERIOD_US) {
    *g_timing_port |= g_timing_bit;
    g_last_tick_us += CONTROL_PERIOD_US;  // on a fixed grid: a late tick does not shift the next ones
    if ((uint32_t)(now - g_last_tick_us) >= 50000UL) g_last_tick_us = now;  // fell far behind: resync
    int32_t pos[rig::N_MOTORS];
    for (uint8_t i = 0; i < rig::N_MOTORS; ++i) {
      noInterrupts();  // two bytes the ISR may change between them: read whole
      int16_t c = g_enc16[i];
      interrupts();
      g_enc[i] += (int16_t)(uint16_t)(c - g_enc16_seen[i]);  // wrap-safe difference
      g_enc16_seen[i] = c;
      pos[i] = g_enc[i];
    }
    int16_t pwm[rig::N_MOTORS];
    g_core->control_tick(pos, read_supply_mv(), now, pwm);
    for (uint8_t i = 0; i < rig::N_MOTORS; ++i) apply_pwm(i, pwm[i]);
    int pc = g_core->take_power_command();
#ifdef RELAY_PIN
    if (pc >= 0) digitalWrite(RELAY_PIN, pc ? HIGH : LOW);
#else
    (void)pc;  // no relay fitted: POWER is an emulator-only command
#endif
    *g_timing_port &= (uint8_t)~g_timing_bit;
    return;
  }

  // 2. bytes out: the next frame is built when the transmit buffer holds at most TX_AHEAD_BYTES
  // (0.7 ms of wire at 115200 baud), so the wire never idles while a tick runs or the frame is
  // encoded, and a state is still at most that old when its first byte leaves
  if (g_tx_pos < g_tx_len) {  // a few bytes a pass (~7 µs each into the buffer): the tick never waits long
    uint8_t k = g_tx_len - g_tx_pos < TX_CHUNK ? g_tx_len - g_tx_pos : TX_CHUNK;
    Serial.write(g_tx + g_tx_pos, k);
    g_tx_pos += k;
    return;
  }
  if (Serial.availableForWrite() >= SERIAL_TX_BUFFER_SIZE - 1 - TX_AHEAD_BYTES) {
    g_tx_len = (uint8_t)g_core->next_tx_frame(g_tx, now);
    g_tx_pos = 0;
    if (g_tx_len) return;
  }

  // 3. a few received bytes (~15 µs each): a frame is handled as its delimiter arrives
  for (uint8_t k = 0; k < RX_BATCH && Serial.available() > 0; ++k) g_core->on_rx_byte((uint8_t)Serial.read(), now);
}
