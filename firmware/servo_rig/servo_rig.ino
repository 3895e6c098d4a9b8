// servo_rig.ino — firmware of the two-motor servo rig (Arduino Uno / Nano, ATmega328P).
//
// Hardware (see docs/PROTOCOL.md and docs/RIG.md):
//   * 2 DC gear motors, 12 V, 1:27, 145 rpm, quadrature encoders 500 CPR (A, B);
//   * an L298N-style dual H-bridge: ENA/ENB take PWM, IN1..IN4 set the direction;
//   * the 12 V motor supply sensed on A0 through a 10 k / 3.3 k divider (power-cut detection);
//   * optional supply relay on RELAY_PIN (the POWER message switches it).
// Encoders are counted x1: an interrupt on channel A's rising edge reads channel B for the
// direction -> 500 counts per motor turn = 37.5 counts per output degree.
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
static const float SUPPLY_DIVIDER = (10.0f + 3.3f) / 3.3f;  // V_supply / V_pin
// #define RELAY_PIN 6   // uncomment when a supply relay is fitted
// High while a control tick runs: a scope (or the simulated chip's harness, firmware/servo_rig/chip)
// reads the tick's duration and period from it. D13 is the on-board LED (dimly lit at 1 kHz).
static const uint8_t TIMING_PIN = 13;

static const unsigned long BAUD = 115200;
static const uint32_t CONTROL_PERIOD_US = 1000;  // PID at 1 kHz

// The boot id (protocol 2, HELLO): a counter in EEPROM, +1 at every boot, so that a host can
// tell a reboot (an Arduino resets when its port is opened) from repeated or reordered frames.
static uint16_t* const BOOT_COUNTER_ADDR = (uint16_t*)0;

static uint16_t next_boot_id() {
  uint16_t id = (uint16_t)(eeprom_read_word(BOOT_COUNTER_ADDR) + 1);
  eeprom_update_word(BOOT_COUNTER_ADDR, id);  // one write per boot: 100 000 boots of endurance
  return id;
}

// ----- state ---------------------------------------------------------------------------------
static volatile int32_t g_enc[rig::N_MOTORS] = {0, 0};
static rig::RigCore* g_core = nullptr;
static uint32_t g_next_tick_us = 0;
static uint8_t g_tx[rig::MAX_ENCODED + 2];
static volatile uint8_t* g_timing_port = nullptr;  // TIMING_PIN's output register and bit: 2 cycles a write
static uint8_t g_timing_bit = 0;

// Quadrature x1: on A rising, B high means one direction, low the other.
static void on_enc_a0() { if (digitalRead(ENC_B[0])) ++g_enc[0]; else --g_enc[0]; }
static void on_enc_a1() { if (digitalRead(ENC_B[1])) ++g_enc[1]; else --g_enc[1]; }

static void apply_pwm(uint8_t i, int16_t pwm) {
  digitalWrite(DIR_PIN_A[i], pwm > 0 ? HIGH : LOW);
  digitalWrite(DIR_PIN_B[i], pwm < 0 ? HIGH : LOW);
  analogWrite(PWM_PIN[i], pwm >= 0 ? pwm : -pwm);
}

static float read_supply_volts() { return analogRead(SUPPLY_SENSE_PIN) * (5.0f / 1023.0f) * SUPPLY_DIVIDER; }

void setup() {
  static rig::RigConfig cfg;
  cfg.boot_id = next_boot_id();
  static rig::RigCore core(cfg);  // static storage: no heap on the AVR; it announces this boot
  g_core = &core;
  for (uint8_t i = 0; i < rig::N_MOTORS; ++i) {
    pinMode(ENC_A[i], INPUT_PULLUP);
    pinMode(ENC_B[i], INPUT_PULLUP);
    pinMode(PWM_PIN[i], OUTPUT);
    pinMode(DIR_PIN_A[i], OUTPUT);
    pinMode(DIR_PIN_B[i], OUTPUT);
    apply_pwm(i, 0);
  }
  pinMode(TIMING_PIN, OUTPUT);
  digitalWrite(TIMING_PIN, LOW);
  g_timing_port = portOutputRegister(digitalPinToPort(TIMING_PIN));
  g_timing_bit = digitalPinToBitMask(TIMING_PIN);
  attachInterrupt(digitalPinToInterrupt(ENC_A[0]), on_enc_a0, RISING);
  attachInterrupt(digitalPinToInterrupt(ENC_A[1]), on_enc_a1, RISING);
#ifdef RELAY_PIN
  pinMode(RELAY_PIN, OUTPUT);
  digitalWrite(RELAY_PIN, HIGH);
#endif
  Serial.begin(BAUD);
  g_next_tick_us = micros();
}

void loop() {
  // 1. bytes in: frames are handled as their delimiter arrives
  while (Serial.available() > 0) g_core->on_rx_byte((uint8_t)Serial.read(), micros());

  // 2. the control cycle at a fixed rate
  uint32_t now = micros();
  if ((int32_t)(now - g_next_tick_us) >= 0) {
    *g_timing_port |= g_timing_bit;
    g_next_tick_us += CONTROL_PERIOD_US;
    if ((int32_t)(now - g_next_tick_us) > 50000) g_next_tick_us = now;  // fell far behind: resync
    int32_t pos[rig::N_MOTORS];
    noInterrupts();
    for (uint8_t i = 0; i < rig::N_MOTORS; ++i) pos[i] = g_enc[i];
    interrupts();
    int16_t pwm[rig::N_MOTORS];
    g_core->control_tick(pos, read_supply_volts(), now, pwm);
    for (uint8_t i = 0; i < rig::N_MOTORS; ++i) apply_pwm(i, pwm[i]);
    int pc = g_core->take_power_command();
#ifdef RELAY_PIN
    if (pc >= 0) digitalWrite(RELAY_PIN, pc ? HIGH : LOW);
#else
    (void)pc;  // no relay fitted: POWER is an emulator-only command
#endif
    *g_timing_port &= (uint8_t)~g_timing_bit;
  }

  // 3. bytes out: only when the UART buffer is empty, so each state is built fresh
  if (Serial.availableForWrite() >= SERIAL_TX_BUFFER_SIZE - 1) {
    size_t n = g_core->next_tx_frame(g_tx, micros());
    if (n) Serial.write(g_tx, n);
  }
}
