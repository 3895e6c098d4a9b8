// rig_core.h — portable core of the servo-rig firmware (protocol v1, PID, state machine,
// watchdog) plus the DC motor model used by the host emulator. Protocol version 2.
//
// The same file compiles for the Arduino (servo_rig.ino) and on the host with g++
// (emulator.cpp). No dynamic memory, no exceptions, no <iostream>; time is passed in
// by the platform as a uint32_t microsecond clock that wraps (Arduino micros()).
//
// Protocol reference: docs/PROTOCOL.md. Python twin: armtwin/controllers/rigproto.py.
// Units: encoder pulses (37.5 per output degree), volts, seconds, microseconds.
#ifndef RIG_CORE_H
#define RIG_CORE_H

#include <stddef.h>
#include <stdint.h>

// The float PID (standard or the published formula) inside RigCore, for comparison: on the host
// only by default. The chip always runs PIDFixed (no FPU: the float PID cost half of a 1 kHz tick).
#ifndef RIG_FLOAT_PID
#ifdef __AVR__
#define RIG_FLOAT_PID 0
#else
#define RIG_FLOAT_PID 1
#endif
#endif

namespace rig {

// ----- protocol constants --------------------------------------------------------------
const uint8_t PROTOCOL_VERSION = 2;
const uint8_t N_MOTORS = 2;
const size_t HEADER_SIZE = 8;         // version u8, type u8, seq u16, t_us u32 (little-endian)
const size_t CRC_SIZE = 2;            // CRC-16/CCITT-FALSE, MSB first
const size_t MAX_FRAME = 64;          // longest decoded frame (header + body + crc)
const size_t MAX_ENCODED = MAX_FRAME + 2;  // COBS-encoded, without the delimiter
const uint16_t FIRMWARE_VERSION = 0x0201;  // 2.1 (protocol 2: boot id in HELLO; 2.1: timed targets, MODE flag TIMED)
const uint8_t HELLO_SIZE = 12;        // role, n_motors, control_hz, ppd_milli, firmware, boot_id

enum MsgType : uint8_t {
  MSG_HELLO = 0x01,
  MSG_MODE = 0x02,
  MSG_JOINT_TARGETS = 0x03,
  MSG_JOINT_STATES = 0x04,
  MSG_HEARTBEAT = 0x05,
  MSG_POWER = 0x06,
};

enum Mode : uint8_t { MODE_IDLE = 0, MODE_VIRTUAL_TO_REAL = 1, MODE_REAL_TO_VIRTUAL = 2 };
const uint8_t MODE_FLAG_LOCAL_DEMO = 0x01;
// VIRTUAL_TO_REAL: each JOINT_TARGETS' t_us is the time on the rig's clock at which the target
// applies (the host maps its clock onto the rig's from the states' t_us). The rig holds a target
// until then and extrapolates it from that time, so the link's jitter enters neither the moment a
// target takes over nor the setpoint (firmware >= 2.1; without it: at arrival, from the arrival).
const uint8_t MODE_FLAG_TIMED = 0x02;
const uint8_t TIMED_QUEUE = 4;             // targets held for their time (a power of 2; a full queue drops the oldest)
const uint32_t TIMED_AHEAD_MAX_US = 50000;  // a target stamped further ahead than this applies at once

enum FaultBits : uint8_t {
  FAULT_POWER = 0x01,     // motor supply below POWER_MIN_V
  FAULT_WATCHDOG = 0x02,  // no valid frame for WATCHDOG_US: motors stopped until the next MODE (latched)
  FAULT_STALL = 0x04,     // |pwm| >= STALL_PWM and no encoder motion for STALL_US: that motor cut until the next MODE
  FAULT_RANGE = 0x08,     // a position was saturated to int16
  FAULT_RX_ERROR = 0x10,  // a corrupt frame was dropped since the previous state
};

uint16_t crc16_ccitt_false(const uint8_t* data, size_t n, uint16_t crc = 0xFFFF);
// One byte of it: crc = (crc << 8) ^ (x << 12) ^ (x << 5) ^ x, written in bytes (8-bit shifts only on the AVR)
inline uint16_t crc16_byte(uint16_t crc, uint8_t b) {
  uint8_t x = (uint8_t)((crc >> 8) ^ b);
  x ^= (uint8_t)(x >> 4);
  uint8_t hi = (uint8_t)((uint8_t)crc ^ (uint8_t)(x << 4) ^ (uint8_t)(x >> 3));
  uint8_t lo = (uint8_t)((uint8_t)(x << 5) ^ x);
  return (uint16_t)((hi << 8) | lo);
}
// COBS: returns the encoded length (no delimiter); out must hold n + n/254 + 1 bytes.
size_t cobs_encode(const uint8_t* in, size_t n, uint8_t* out);
// Returns the decoded length, or -1 on a malformed input.
int cobs_decode(const uint8_t* in, size_t n, uint8_t* out, size_t out_cap);
// A whole wire frame (COBS + 0x00 delimiter) into out (>= MAX_ENCODED + 1 bytes); returns its length.
size_t encode_frame(uint8_t type, uint16_t seq, uint32_t t_us, const uint8_t* body, size_t body_len, uint8_t* out);
// Expected body length of a message type, or -1 for an unknown type.
int body_size(uint8_t type);

struct Frame {
  uint8_t version;
  uint8_t type;
  uint16_t seq;
  uint32_t t_us;
  uint8_t body[MAX_FRAME];
  uint8_t body_len;
};

// Streaming decoder: push bytes; a complete valid frame is returned through `out`.
// COBS decoding and the CRC run byte by byte as the bytes arrive, so the delimiter only compares
// the CRC: on the chip no single byte costs more than a few µs (a whole-frame decode at the
// delimiter took ~0.1 ms and delayed the control tick). Same verdicts as cobs_decode + CRC.
class Decoder {
 public:
  enum Result : uint8_t { NONE = 0, FRAME = 1, DROPPED = 2 };
  Decoder() : frames(0), dropped(0) { restart(); }
  // Inline: a data byte costs ~40 AVR cycles; the delimiter's checks are out of line.
  Result push(uint8_t b) {
    if (b == 0) return end_frame();
    if (encoded_ < 255) ++encoded_;
    if (encoded_ > MAX_ENCODED) bad_ = true;  // a run longer than any frame: dropped at the delimiter
    if (bad_) return NONE;
    if (block_ == 0) {  // a COBS code byte
      if (zero_pending_) append(0);
      block_ = (uint8_t)(b - 1);
      zero_pending_ = b != 0xFF;
    } else {
      append(b);
      --block_;
    }
    return NONE;
  }
  const Frame& frame() const { return frame_; }  // the frame push() just returned FRAME for
  uint32_t frames;   // good frames
  uint32_t dropped;  // corrupt frames dropped
 private:
  void restart() { n_ = 0; encoded_ = 0; block_ = 0; zero_pending_ = false; bad_ = false; crc_ = 0xFFFF; }
  Result end_frame();
  void append(uint8_t b) {
    if (n_ >= MAX_FRAME) { bad_ = true; return; }
    if (n_ >= 2) crc_ = crc16_byte(crc_, raw_[n_ - 2]);  // two bytes behind: the CRC does not cover itself
    raw_[n_++] = b;
  }
  uint8_t raw_[MAX_FRAME];
  uint8_t n_;             // decoded bytes so far
  uint8_t encoded_;       // encoded bytes since the last delimiter (saturates)
  uint8_t block_;         // data bytes left in the current COBS block (0: a code byte is next)
  bool zero_pending_;     // the block that just ended implies a 0x00 if more data follows
  bool bad_;              // too long: dropped at the delimiter
  uint16_t crc_;          // CRC of raw_[0 .. n_-2) (the last two bytes may be the CRC itself)
  Frame frame_;
};

// ----- PID ---------------------------------------------------------------------------------
struct PIDGains {
  float kp, ki, kd;      // volts per pulse, volts per pulse·s, volts per pulse/s
  float output_limit;    // volts
  float integral_limit;  // volts
  float derivative_tau;  // s
  bool published;        // use the published formula instead of the standard PID
};
PIDGains rig_gains();  // Kp 0.01, Ki 0.002, Kd 0.001, ±12 V, tau 4 ms

// Same algorithm as armtwin.controllers.pid.PID (standard: accumulating integral with
// conditional-integration anti-windup, filtered derivative of the error, output clamp).
class PID {
 public:
  PID() : g_(rig_gains()) { reset(); }
  explicit PID(const PIDGains& g) : g_(g) { reset(); }
  void set_gains(const PIDGains& g) { g_ = g; reset(); }
  void reset();
  float update(float setpoint, float measurement, float dt);  // dt in s (0 on the first call)
  float integral;
 private:
  PIDGains g_;
  float d_, e_prev_;
  bool first_;
};

// The chip's PID: the same standard form (conditional-integration anti-windup, filtered derivative
// of the error, output clamp) in 32-bit integers at a fixed sample period, with the output in PWM
// duty. An ATmega328P has no FPU: the float PID above costs ~0.5 ms a tick for two motors in
// soft-float (mostly divisions), this one a few dozen µs. Integer arithmetic also makes the host
// emulator and the chip agree bit for bit. The float PID stays for comparison (and for the
// published formula, `PIDGains::published`).
//   fixed-point formats: P, the derivative and the output in duty·2^14 (Q14), the integral in
//   duty·2^22 (Q22, so that Ki·e·dt of one pulse keeps 3 significant digits at 1 kHz). Every
//   rescaling is a shift by whole bytes: on the AVR a shift by k bits is a k-step loop, and those
//   loops cost more than the multiplications.
class PIDFixed {
 public:
  PIDFixed() { configure(rig_gains(), 255.0f / 12.0f, 0.001f); }
  // gains in volts (PIDGains), duty_per_volt = 255 / supply, period_s = the fixed sample period
  void configure(const PIDGains& g, float duty_per_volt, float period_s);
  void reset() { i_q22_ = 0; d_q14_ = 0; e_prev_ = 0; first_ = true; }
  int32_t update(int32_t error);  // error in pulses -> duty·2^14, within ±(255·2^14 when the limit is 12 V)
  int32_t integral_q22() const { return i_q22_; }
 private:
  int32_t kp_q14_, ki_q22_, kd_q14_, a_q8_, lim_q14_, ilim_q22_, e_max_, de_max_;
  int32_t i_q22_, d_q14_, e_prev_;
  bool first_;
};

// ----- DC gear motor model (emulator) ------------------------------------------------------
struct MotorParams {
  double nominal_voltage = 12.0;  // V
  double no_load_rpm = 145.0;     // output rpm at nominal voltage
  double gear_ratio = 27.0;
  int encoder_cpr = 500;          // counts per motor turn (x1 decoding)
  double resistance = 2.0;        // ohm
  double rotor_inertia = 4.0e-6;  // kg m^2 (motor side)
  double load_inertia = 2.0e-4;   // kg m^2 (output side)
  double coulomb_friction = 3.0e-3;  // N m (motor side)
  double viscous_friction = 2.0e-6;  // N m s/rad (motor side)
  double motor_constant() const;  // k = Kt = Ke chosen so that the no-load speed is met
  double inertia() const;
};

class MotorModel {
 public:
  explicit MotorModel(const MotorParams& p = MotorParams(), double substep = 1e-4);
  void step(double volts, double dt);
  int32_t pulses() const;         // encoder count (x1)
  double output_rpm() const;
  int encoder_cpr() const { return p_.encoder_cpr; }  // counts per motor turn (x1)
  bool powered;
  double supply;                  // V, the voltage limit
  double theta, omega, current;   // rad, rad/s, A (motor side)
 private:
  MotorParams p_;
  double k_, j_, h_;
};

// ----- the rig's state machine ---------------------------------------------------------------
struct RigConfig {
  uint16_t control_hz = 1000;
  uint32_t watchdog_us = 100000;   // stop motors when no valid frame for this long
  uint32_t keepalive_us = 20000;   // a JOINT_STATES at least this often, whatever the mode
  float pulses_per_deg = 37.5f;
  float supply_nominal = 12.0f;    // V; PWM = U * 255 / supply_nominal
  float power_min_v = 9.0f;        // supply below this -> FAULT_POWER
  float ff_pulses_per_s_per_volt = 145.0f * 6.0f * 37.5f / 12.0f;  // velocity feed-forward
  float ff_static_v = 0.21f;       // friction feed-forward when the target moves, V
  int16_t stall_pwm = 100;
  uint32_t stall_us = 50000;
  float demo_amplitude_deg = 30.0f;  // REAL_TO_VIRTUAL + LOCAL_DEMO sine
  float demo_period_s = 4.0f;
  PIDGains gains = rig_gains();
  uint16_t boot_id = 0;            // differs from boot to boot (EEPROM counter, random): sent in HELLO
  int16_t stale_window = 256;      // JOINT_TARGETS up to this many seq numbers behind the newest are stale
};

class RigCore {
 public:
  explicit RigCore(const RigConfig& cfg = RigConfig());
  // A received byte (any time). Frames are handled as their delimiter arrives.
  void on_rx_byte(uint8_t b, uint32_t now_us) {
    Decoder::Result r = dec_.push(b);
    if (r != Decoder::NONE) on_rx_result(r, now_us);
  }
  // One control cycle (at cfg.control_hz): positions from the encoders, the measured motor supply
  // in mV; writes PWM. Integer arithmetic only (unless cfg.gains.published selects the float PID).
  void control_tick(const int32_t pos[N_MOTORS], uint16_t supply_mv, uint32_t now_us, int16_t pwm_out[N_MOTORS]);
  // The next frame to put on the wire now (built fresh, so states are never stale), or 0.
  size_t next_tx_frame(uint8_t* out, uint32_t now_us);
  // Power command from a POWER message: -1 none pending, 0 cut, 1 restore (cleared on read).
  int take_power_command();
  // The platform dropped received bytes (its receive buffer was full): counted, and the next
  // state carries RX_ERROR.
  void note_rx_overrun(uint32_t bytes = 1);

  Mode mode() const { return mode_; }
  uint8_t faults() const { return faults_; }
  const Decoder& decoder() const { return dec_; }
  int32_t target(int i) const { return target_[i]; }
  uint32_t frames_sent;
  uint32_t rx_overruns;     // bytes the platform dropped before the decoder saw them
  uint32_t stale_targets;   // JOINT_TARGETS ignored: repeated or older than the newest (reordered)
  uint32_t mode_changes;    // MODE messages that changed the mode (a repeated MODE changes nothing)
  uint32_t late_targets;    // timed JOINT_TARGETS that arrived after their time (applied at once)
 private:
  void queue_hello();
  void on_rx_result(Decoder::Result r, uint32_t now_us);
  void handle(const Frame& f, uint32_t now_us);
  void queue_ctrl(uint8_t type, const uint8_t* body, size_t n);
  size_t build_state(uint8_t* out, uint32_t now_us);

  void start_mode(uint32_t now_us);
  int32_t demo_setpoint(int i, int32_t& vel_q20) const;

  RigConfig cfg_;
  Decoder dec_;
  PIDFixed pid_[N_MOTORS];
#if RIG_FLOAT_PID
  PID pid_float_[N_MOTORS];  // only with cfg.gains.published (the published formula, for comparison)
#endif
  Mode mode_;
  uint8_t mode_flags_;
  uint16_t stream_hz_;
  uint32_t stream_period_us_;  // 1 / stream_hz_ (0: no stream)
  uint8_t faults_;         // sticky bits reported in the next state (RX_ERROR) + live bits
  bool rx_error_;
  bool watchdog_latched_;  // the watchdog stopped a running mode: motors off until the next MODE
  bool stall_cut_[N_MOTORS];  // a stall cut this motor's PWM: off until the next MODE
  uint16_t tx_seq_;
  uint8_t last_rx_seq_;
  bool have_rx_;
  uint32_t last_rx_us_, last_state_us_, last_tick_us_;
  bool state_requested_;
  bool ticked_;
  int32_t target_[N_MOTORS];  // pulses
  int32_t vel_q20_[N_MOTORS];   // target velocity, pulses per µs · 2^20
  int16_t vel_dp_[N_MOTORS];    // the newest target step, pulses (its division by vel_dth_ waits for the tick)
  uint32_t vel_dth_;            // host µs between the two newest targets (0: no velocity)
  bool vel_dirty_;
  uint32_t last_stream_us_;     // the REAL_TO_VIRTUAL stream's clock (a fixed grid of stream_period_us_)
  uint32_t target_rx_us_, target_host_us_;  // the newest target: the time it is extrapolated from, its t_us
  bool have_target_;
  uint16_t target_seq_;     // seq of the newest JOINT_TARGETS taken
  bool have_target_seq_;
  // targets waiting for their time (timed; an untimed one waits for nothing), oldest first: targets, the step from the target before
  // (pulses) and the host-time gap to it (µs), their time on the rig's clock
  struct Timed {
    int16_t target[N_MOTORS];
    int16_t dp[N_MOTORS];
    uint16_t dth;   // < 50 000 µs, or 0: no velocity
    uint32_t at_us;
  };
  Timed timed_[TIMED_QUEUE];
  uint8_t timed_head_, timed_n_;
  bool have_rx_target_;  // a target was received in this mode (the next one's step and gap are known)
  int32_t last_rx_target_[N_MOTORS];  // the newest target received (timed: maybe not yet applied)
  void apply_timed(uint32_t now_us);
  int32_t pos_[N_MOTORS], demo_center_[N_MOTORS], stall_pos_[N_MOTORS];
  uint32_t stall_since_us_[N_MOTORS];
  int16_t pwm_[N_MOTORS];
  // constants derived from cfg_ once (no float arithmetic in a tick)
  uint16_t power_min_mv_;
  uint32_t period_us_;      // the control period, µs
  int32_t ff_q0_;           // velocity feed-forward: duty·2^14 per (pulses/µs·2^20)
  int32_t ff_static_q14_;   // friction feed-forward, duty·2^14
  float duty_per_volt_;
  // the demo sine (REAL_TO_VIRTUAL + LOCAL_DEMO): phase as a fraction of a turn ·2^32, advanced by
  // the elapsed µs each tick, so it runs on smoothly across the micros() wrap
  uint32_t demo_phase_;
  uint16_t demo_phase_frac_;
  uint32_t demo_inc_q8_;    // phase per µs ·2^8
  uint32_t demo_last_us_;
  int32_t demo_amp_q1_[N_MOTORS];   // pulses ·2
  int32_t demo_vel_q21_[N_MOTORS];  // peak velocity, pulses per µs ·2^21
  int power_cmd_;
  // small queue of control replies (HELLO, MODE echo)
  uint8_t ctrl_type_[4];
  uint8_t ctrl_body_[4][HELLO_SIZE];
  uint8_t ctrl_len_[4];
  uint8_t ctrl_n_;
};

}  // namespace rig

#endif  // RIG_CORE_H
