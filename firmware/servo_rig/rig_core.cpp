// rig_core.cpp — see rig_core.h. Portable C++11 (Arduino AVR and host g++).
#include "rig_core.h"

#include <math.h>
#include <string.h>

#ifdef __AVR__
#include <avr/pgmspace.h>
#define RIG_ROM PROGMEM
static inline int16_t rom_i16(const int16_t* p) { return (int16_t)pgm_read_word(p); }
#else
#define RIG_ROM
static inline int16_t rom_i16(const int16_t* p) { return *p; }
#endif

namespace rig {

// ----- little-endian helpers -------------------------------------------------------------
static inline void put_u16(uint8_t* p, uint16_t v) { p[0] = v & 0xFF; p[1] = v >> 8; }
static inline void put_u32(uint8_t* p, uint32_t v) { for (int i = 0; i < 4; ++i) p[i] = (v >> (8 * i)) & 0xFF; }
static inline uint16_t get_u16(const uint8_t* p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t get_u32(const uint8_t* p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline int16_t sat16(int32_t v, bool& saturated) {
  if (v > 32767) { saturated = true; return 32767; }
  if (v < -32768) { saturated = true; return -32768; }
  return (int16_t)v;
}

// ----- CRC-16/CCITT-FALSE: poly 0x1021, init 0xFFFF, no reflection, xorout 0 ---------------
// A byte at a time without a table (the polynomial's shifts folded in): ~20 AVR cycles a byte
// instead of ~100 for the bit loop, and no 512-byte table.
uint16_t crc16_ccitt_false(const uint8_t* data, size_t n, uint16_t crc) {
  for (size_t i = 0; i < n; ++i) crc = crc16_byte(crc, data[i]);
  return crc;
}

// ----- COBS -------------------------------------------------------------------------------
size_t cobs_encode(const uint8_t* in, size_t n, uint8_t* out) {
  size_t code_i = 0, o = 1;
  uint8_t code = 1;
  for (size_t i = 0; i < n; ++i) {
    if (in[i] == 0) {
      out[code_i] = code; code_i = o++; code = 1;
    } else {
      out[o++] = in[i];
      if (++code == 0xFF) { out[code_i] = code; code_i = o++; code = 1; }
    }
  }
  out[code_i] = code;
  return o;
}

int cobs_decode(const uint8_t* in, size_t n, uint8_t* out, size_t out_cap) {
  size_t i = 0, o = 0;
  while (i < n) {
    uint8_t code = in[i];
    if (code == 0 || i + code > n) return -1;
    for (size_t k = i + 1; k < i + code; ++k) {
      if (in[k] == 0 || o >= out_cap) return -1;
      out[o++] = in[k];
    }
    i += code;
    if (code != 0xFF && i < n) {
      if (o >= out_cap) return -1;
      out[o++] = 0;
    }
  }
  return (int)o;
}

int body_size(uint8_t type) {
  switch (type) {
    case MSG_HELLO: return HELLO_SIZE;  // role u8, n_motors u8, control_hz u16, ppd_milli u32, firmware u16, boot_id u16
    case MSG_MODE: return 4;            // mode u8, stream_hz u16, flags u8
    case MSG_JOINT_TARGETS: return 4;   // 2 x int16 pulses
    case MSG_JOINT_STATES: return 10;   // echo u8, faults u8, 2 x int16 pulses, 2 x int16 pwm
    case MSG_HEARTBEAT: return 0;
    case MSG_POWER: return 1;           // on u8
    default: return -1;
  }
}

size_t encode_frame(uint8_t type, uint16_t seq, uint32_t t_us, const uint8_t* body, size_t body_len, uint8_t* out) {
  uint8_t raw[MAX_FRAME];
  if (body_len + HEADER_SIZE + CRC_SIZE > MAX_FRAME) return 0;
  raw[0] = PROTOCOL_VERSION;
  raw[1] = type;
  put_u16(raw + 2, seq);
  put_u32(raw + 4, t_us);
  if (body_len) memcpy(raw + HEADER_SIZE, body, body_len);
  size_t n = HEADER_SIZE + body_len;
  uint16_t crc = crc16_ccitt_false(raw, n);
  raw[n++] = crc >> 8;
  raw[n++] = crc & 0xFF;
  size_t m = cobs_encode(raw, n, out);
  out[m++] = 0;
  return m;
}


Decoder::Result Decoder::end_frame() {
  Frame& out = frame_;
  // the delimiter
  bool empty = encoded_ == 0;
  bool ok = !bad_ && block_ == 0 && n_ >= HEADER_SIZE + CRC_SIZE;
  if (ok) {
    uint16_t crc = (uint16_t)((raw_[n_ - 2] << 8) | raw_[n_ - 1]);
    int bl = body_size(raw_[1]);
    ok = crc == crc_ && raw_[0] == PROTOCOL_VERSION && bl >= 0 && bl == n_ - (int)(HEADER_SIZE + CRC_SIZE);
    if (ok) {
      out.version = raw_[0];
      out.type = raw_[1];
      out.seq = get_u16(raw_ + 2);
      out.t_us = get_u32(raw_ + 4);
      out.body_len = (uint8_t)bl;
      memcpy(out.body, raw_ + HEADER_SIZE, bl);
    }
  }
  restart();
  if (empty) return NONE;  // a bare delimiter
  if (!ok) { ++dropped; return DROPPED; }
  ++frames;
  return FRAME;
}

// ----- PID --------------------------------------------------------------------------------
PIDGains rig_gains() {
  PIDGains g;
  g.kp = 0.01f; g.ki = 0.002f; g.kd = 0.001f;
  g.output_limit = 12.0f; g.integral_limit = 12.0f; g.derivative_tau = 0.004f;
  g.published = false;
  return g;
}

void PID::reset() { integral = 0; d_ = 0; e_prev_ = 0; first_ = true; }

float PID::update(float setpoint, float measurement, float dt) {
  float e = setpoint - measurement;
  float lim = g_.output_limit, raw;
  if (first_) dt = 0;
  if (g_.published) {
    float ep = first_ ? 0.0f : e_prev_;
    raw = g_.kp * e + g_.ki * (ep + e * dt) + (dt > 0 ? g_.kd * (e - ep) / dt : 0.0f);
  } else {
    if (dt > 0) {
      float d_raw = g_.kd * (e - e_prev_) / dt;
      float a = g_.derivative_tau > 0 ? dt / (g_.derivative_tau + dt) : 1.0f;
      d_ += a * (d_raw - d_);
    }
    float cand = integral + g_.ki * e * dt;
    float un = g_.kp * e + cand + d_;
    if ((un > lim && e > 0) || (un < -lim && e < 0)) cand = integral;
    if (cand > g_.integral_limit) cand = g_.integral_limit;
    if (cand < -g_.integral_limit) cand = -g_.integral_limit;
    integral = cand;
    raw = g_.kp * e + integral + d_;
  }
  e_prev_ = e;
  first_ = false;
  return raw > lim ? lim : (raw < -lim ? -lim : raw);
}

static inline int32_t clamp32(int32_t v, int32_t lim) { return v > lim ? lim : (v < -lim ? -lim : v); }
static int32_t fixed(float v, float scale, float max) {  // round(v * scale), saturated to ±max
  float x = v * scale;
  if (x > max) x = max;
  if (x < -max) x = -max;
  return (int32_t)(x >= 0 ? x + 0.5f : x - 0.5f);
}

void PIDFixed::configure(const PIDGains& g, float duty_per_volt, float period_s) {
  const float two30 = 1073741824.0f;
  kp_q14_ = fixed(g.kp * duty_per_volt, 16384.0f, two30);
  ki_q22_ = fixed(g.ki * duty_per_volt * period_s, 4194304.0f, two30);
  kd_q14_ = fixed(g.kd * duty_per_volt / period_s, 16384.0f, two30);
  a_q8_ = fixed(g.derivative_tau > 0 ? period_s / (g.derivative_tau + period_s) : 1.0f, 256.0f, 256.0f);
  lim_q14_ = fixed(g.output_limit * duty_per_volt, 16384.0f, 255.0f * 16384.0f);
  ilim_q22_ = fixed(g.integral_limit * duty_per_volt, 4194304.0f, 255.0f * 4194304.0f);
  // the largest error (pulses) whose products stay inside 32 bits: |P| <= 2^30, |Ki·e| <= 2^29
  e_max_ = 32767;
  if (kp_q14_ > 0 && (1L << 30) / kp_q14_ < e_max_) e_max_ = (1L << 30) / kp_q14_;
  if (ki_q22_ > 0 && (1L << 29) / ki_q22_ < e_max_) e_max_ = (1L << 29) / ki_q22_;
  de_max_ = 32767;
  if (kd_q14_ > 0 && (1L << 30) / kd_q14_ < de_max_) de_max_ = (1L << 30) / kd_q14_;
  reset();
}

int32_t PIDFixed::update(int32_t e) {
  e = clamp32(e, e_max_);
  int32_t p = e * kp_q14_;
  if (!first_) {  // the first call has no dt: no derivative, no integration (as the float PID)
    // |d_raw| <= 2^29 (32 768 duty): the filter's difference then fits, and so does p + i + d
    int32_t d_raw = clamp32(clamp32(e - e_prev_, de_max_) * kd_q14_, 1L << 29);
    d_q14_ += ((d_raw - d_q14_) >> 8) * a_q8_;  // the filter step in 1/64-duty resolution: no overflow
    int32_t cand = i_q22_ + e * ki_q22_;
    int32_t un = p + (cand >> 8) + d_q14_;
    if ((un > lim_q14_ && e > 0) || (un < -lim_q14_ && e < 0)) cand = i_q22_;  // conditional integration
    i_q22_ = clamp32(cand, ilim_q22_);
  }
  e_prev_ = e;
  first_ = false;
  return clamp32(p + (i_q22_ >> 8) + d_q14_, lim_q14_);
}

// ----- motor model -------------------------------------------------------------------------
double MotorParams::motor_constant() const {
  double w = no_load_rpm * gear_ratio * 2 * M_PI / 60.0;
  double disc = nominal_voltage * nominal_voltage - 4 * w * resistance * (coulomb_friction + viscous_friction * w);
  if (disc < 0) return -1;
  return (nominal_voltage + sqrt(disc)) / (2 * w);
}
double MotorParams::inertia() const { return rotor_inertia + load_inertia / (gear_ratio * gear_ratio); }

MotorModel::MotorModel(const MotorParams& p, double substep)
    : powered(true), supply(p.nominal_voltage), theta(0), omega(0), current(0), p_(p),
      k_(p.motor_constant()), j_(p.inertia()), h_(substep) {}

void MotorModel::step(double volts, double dt) {
  int n = (int)ceil(dt / h_ - 1e-9);
  if (n < 1) n = 1;
  double h = dt / n;
  for (int s = 0; s < n; ++s) {
    if (powered && supply > 0) {
      double v = volts > supply ? supply : (volts < -supply ? -supply : volts);
      current = (v - k_ * omega) / p_.resistance;
    } else {
      current = 0;
    }
    double t_drive = k_ * current - p_.viscous_friction * omega;
    double tc = p_.coulomb_friction;
    if (fabs(omega) < 1e-9 && fabs(t_drive) <= tc) { omega = 0; continue; }
    double sgn = omega != 0 ? (omega > 0 ? 1.0 : -1.0) : (t_drive > 0 ? 1.0 : -1.0);
    double w_new = omega + h * (t_drive - tc * sgn) / j_;
    if (omega != 0 && w_new * omega < 0) w_new = 0;
    theta += 0.5 * (omega + w_new) * h;
    omega = w_new;
  }
}

int32_t MotorModel::pulses() const { return (int32_t)floor(theta / (2 * M_PI) * p_.encoder_cpr + 1e-9); }
double MotorModel::output_rpm() const { return omega / p_.gear_ratio * 60.0 / (2 * M_PI); }

// ----- RigCore ---------------------------------------------------------------------------------
// A quarter sine, Q15, 64 steps: round(32767 · sin(k·π/128)), k = 0..64 (in flash on the AVR).
static const int16_t QUARTER_SINE[65] RIG_ROM = {
    0, 804, 1608, 2410, 3212, 4011, 4808, 5602, 6393, 7179, 7962, 8739, 9512, 10278, 11039, 11793, 12539,
    13279, 14010, 14732, 15446, 16151, 16846, 17530, 18204, 18868, 19519, 20159, 20787, 21403, 22005, 22594,
    23170, 23731, 24279, 24811, 25329, 25832, 26319, 26790, 27245, 27683, 28105, 28510, 28898, 29268, 29621,
    29956, 30273, 30571, 30852, 31113, 31356, 31580, 31785, 31971, 32137, 32285, 32412, 32521, 32609, 32678,
    32728, 32757, 32767};

// sin(2π · phase / 2^32), Q15, by the table and linear interpolation (error < 2e-4)
static int32_t sin_q15(uint32_t phase) {
  uint8_t quadrant = (uint8_t)(phase >> 30);
  uint16_t x = (uint16_t)((phase >> 16) & 0x3FFF);  // 14 bits within the quadrant
  if (quadrant & 1) x = (uint16_t)(0x4000 - x);
  uint8_t k = (uint8_t)(x >> 8), f = (uint8_t)(x & 0xFF);
  int32_t v = rom_i16(&QUARTER_SINE[k]);
  if (k < 64) v += ((rom_i16(&QUARTER_SINE[k + 1]) - v) * f) >> 8;
  return (quadrant & 2) ? -v : v;
}

static const int32_t VEL_MAX_Q20 = 62914;  // 60 000 pulses/s (the motor's top speed is ~32 600)

RigCore::RigCore(const RigConfig& cfg)
    : frames_sent(0), cfg_(cfg), mode_(MODE_IDLE), mode_flags_(0), stream_hz_(500), stream_period_us_(2000),
      faults_(0), rx_error_(false), watchdog_latched_(false), tx_seq_(0), last_rx_seq_(0), have_rx_(false),
      last_rx_us_(0), last_state_us_(0), last_tick_us_(0), state_requested_(false), ticked_(false),
      target_rx_us_(0), target_host_us_(0), have_target_(false), target_seq_(0), have_target_seq_(false),
      timed_head_(0), timed_n_(0), have_rx_target_(false), power_cmd_(-1), ctrl_n_(0) {
  rx_overruns = 0;
  late_targets = 0;
  stale_targets = 0;
  mode_changes = 0;
  // everything a tick needs in integers, computed once here
  duty_per_volt_ = 255.0f / cfg.supply_nominal;
  float period_s = 1.0f / (float)cfg.control_hz;
  period_us_ = 1000000UL / cfg.control_hz;
  power_min_mv_ = (uint16_t)(cfg.power_min_v * 1000.0f + 0.5f);
  // duty·2^14 per (pulses/µs·2^20): (1e6 / 2^20) pulses/s · duty/(pulses/s) · 2^14
  ff_q0_ = fixed(1e6f / 1048576.0f * duty_per_volt_ / cfg.ff_pulses_per_s_per_volt * 16384.0f, 1.0f, 30000.0f);
  ff_static_q14_ = fixed(cfg.ff_static_v * duty_per_volt_, 16384.0f, 255.0f * 16384.0f);
  float period_us = cfg.demo_period_s * 1e6f;
  demo_inc_q8_ = (uint32_t)(1099511627776.0f / period_us + 0.5f);  // 2^40 / period
  float w = 2.0f * (float)M_PI / cfg.demo_period_s;
  for (int i = 0; i < N_MOTORS; ++i) {
    float amp = cfg.demo_amplitude_deg * cfg.pulses_per_deg * (i == 0 ? 1.0f : 0.5f);
    demo_amp_q1_[i] = fixed(amp, 2.0f, 65000.0f);
    demo_vel_q21_[i] = fixed(amp * w * 1e-6f, 2097152.0f, 2.0f * VEL_MAX_Q20);
    pid_[i].configure(cfg.gains, duty_per_volt_, period_s);
#if RIG_FLOAT_PID
    pid_float_[i].set_gains(cfg.gains);
#endif
    target_[i] = vel_q20_[i] = 0;
    vel_dp_[i] = 0;
    last_rx_target_[i] = 0;
    pos_[i] = demo_center_[i] = stall_pos_[i] = 0;
    stall_since_us_[i] = 0;
    stall_cut_[i] = false;
    pwm_[i] = 0;
  }
  demo_phase_ = 0;
  demo_phase_frac_ = 0;
  demo_last_us_ = 0;
  vel_dth_ = 0;
  vel_dirty_ = false;
  last_stream_us_ = 0;
  queue_hello();  // announce this boot (its boot id) without being asked: a host sees a reboot at once
}

void RigCore::queue_hello() {
  uint8_t b[HELLO_SIZE];
  b[0] = 1;  // role: rig
  b[1] = N_MOTORS;
  put_u16(b + 2, cfg_.control_hz);
  put_u32(b + 4, (uint32_t)(cfg_.pulses_per_deg * 1000.0f + 0.5f));
  put_u16(b + 8, FIRMWARE_VERSION);
  put_u16(b + 10, cfg_.boot_id);
  queue_ctrl(MSG_HELLO, b, HELLO_SIZE);
}

void RigCore::note_rx_overrun(uint32_t bytes) {
  rx_overruns += bytes;
  rx_error_ = true;
}

void RigCore::on_rx_result(Decoder::Result r, uint32_t now_us) {
  if (r == Decoder::FRAME) handle(dec_.frame(), now_us);
  else if (r == Decoder::DROPPED) rx_error_ = true;
}

void RigCore::queue_ctrl(uint8_t type, const uint8_t* body, size_t n) {
  if (ctrl_n_ >= 4 || n > HELLO_SIZE) return;
  ctrl_type_[ctrl_n_] = type;
  memcpy(ctrl_body_[ctrl_n_], body, n);
  ctrl_len_[ctrl_n_] = (uint8_t)n;
  ++ctrl_n_;
}

// A mode starts afresh: PIDs reset, targets = where the motors are, the latches released.
void RigCore::start_mode(uint32_t now_us) {
  ++mode_changes;
  watchdog_latched_ = false;
  for (int i = 0; i < N_MOTORS; ++i) {
    pid_[i].reset();
#if RIG_FLOAT_PID
    pid_float_[i].reset();
#endif
    target_[i] = pos_[i];  // hold where we are until targets arrive
    last_rx_target_[i] = pos_[i];
    vel_q20_[i] = 0;
    demo_center_[i] = pos_[i];
    stall_cut_[i] = false;
    stall_pos_[i] = pos_[i];
    stall_since_us_[i] = now_us;
  }
  demo_phase_ = 0;
  demo_phase_frac_ = 0;
  demo_last_us_ = now_us;
  last_stream_us_ = now_us;
  vel_dirty_ = false;
  vel_dth_ = 0;
  have_target_ = false;
  have_target_seq_ = false;
  timed_n_ = 0;
  have_rx_target_ = false;
}

void RigCore::handle(const Frame& f, uint32_t now_us) {
  last_rx_us_ = now_us;
  last_rx_seq_ = (uint8_t)(f.seq & 0xFF);
  have_rx_ = true;
  switch (f.type) {
    case MSG_HELLO:
      if (f.body[0] == 0) have_target_seq_ = false;  // a host's HELLO starts its session: new seq numbers
      queue_hello();
      break;
    case MSG_MODE: {
      uint8_t m = f.body[0];
      if (m > MODE_REAL_TO_VIRTUAL) m = MODE_IDLE;
      uint16_t hz = get_u16(f.body + 1);
      // The same MODE again (a host re-sending it after a reconnect, a repeated frame) changes
      // nothing: the PIDs and targets of a running mode are not reset. A new mode starts afresh,
      // and so does any MODE after the watchdog or a stall stopped the motors: it is the host's
      // explicit word that motion may resume.
      bool stopped = watchdog_latched_;
      for (int i = 0; i < N_MOTORS; ++i) stopped = stopped || stall_cut_[i];
      if (m != mode_ || hz != stream_hz_ || f.body[3] != mode_flags_ || stopped) {
        mode_ = (Mode)m;
        stream_hz_ = hz;
        stream_period_us_ = hz ? 1000000UL / hz : 0;
        mode_flags_ = f.body[3];
        start_mode(now_us);
      }
      uint8_t b[4] = {m, f.body[1], f.body[2], f.body[3]};
      queue_ctrl(MSG_MODE, b, 4);
      break;
    }
    case MSG_JOINT_TARGETS: {
      // Targets are latest-value data: one that is not newer than the newest taken (a repeated
      // or reordered frame) would move the motors back; it is ignored and counted.
      int16_t behind = (int16_t)(uint16_t)(target_seq_ - f.seq);
      if (have_target_seq_ && behind >= 0 && behind < cfg_.stale_window) { ++stale_targets; break; }
      target_seq_ = f.seq;
      have_target_seq_ = true;
      uint32_t dth = f.t_us - target_host_us_;  // the sender's clock: wrap-safe difference
      // the velocity's division (~40 µs each on the AVR) is left to the next tick: a frame's handling
      // stays short, so it never delays a tick
      dth = (have_rx_target_ && dth > 0 && dth < 50000) ? dth : 0;
      target_host_us_ = f.t_us;
      have_rx_target_ = true;
      if (mode_ == MODE_VIRTUAL_TO_REAL) state_requested_ = true;
      // Every target goes through the queue, which the next tick empties up to its time: an untimed
      // one applies there (extrapolated from its arrival), a timed one is held until its time (the
      // tick at or after t_us; MODE flag TIMED). A full queue drops its oldest (a newer target
      // supersedes it: targets are latest-value data). Handling a frame stays short: it never
      // delays a tick.
      bool timed = mode_ == MODE_VIRTUAL_TO_REAL && (mode_flags_ & MODE_FLAG_TIMED);
      if (timed_n_ == TIMED_QUEUE) {
        timed_head_ = (uint8_t)((timed_head_ + 1) & (TIMED_QUEUE - 1));
        --timed_n_;
      }
      Timed& e = timed_[(uint8_t)(timed_head_ + timed_n_) & (TIMED_QUEUE - 1)];
      for (int i = 0; i < N_MOTORS; ++i) {
        int16_t t = (int16_t)get_u16(f.body + 2 * i);
        e.dp[i] = (int16_t)clamp32((int32_t)t - last_rx_target_[i], 2047);  // 2047·2^20 still fits: faster saturates anyway
        e.target[i] = t;
        last_rx_target_[i] = t;
      }
      e.dth = (uint16_t)dth;
      // timed, stamped in the past: late (applied at the next tick, extrapolated from its time); too
      // far ahead (a clock the host has wrong): applied at the next tick, from now
      int32_t ahead = (int32_t)(f.t_us - now_us);
      if (timed && ahead < 0) ++late_targets;
      e.at_us = (!timed || ahead > (int32_t)TIMED_AHEAD_MAX_US) ? now_us : f.t_us;
      ++timed_n_;
      break;
    }
    case MSG_HEARTBEAT:
      break;
    case MSG_POWER:
      power_cmd_ = f.body[0] ? 1 : 0;
      break;
    default:
      break;
  }
}

int RigCore::take_power_command() {
  int c = power_cmd_;
  power_cmd_ = -1;
  return c;
}

// The demo sine's setpoint (pulses) and velocity (pulses/µs·2^20) of motor i at the current phase.
int32_t RigCore::demo_setpoint(int i, int32_t& vel_q20) const {
  vel_q20 = (demo_vel_q21_[i] * sin_q15(demo_phase_ + 0x40000000UL)) >> 16;  // cos
  return demo_center_[i] + ((demo_amp_q1_[i] * sin_q15(demo_phase_)) >> 16);
}

// Apply the timed targets whose time has come (at or before now_us), oldest first: the newest of
// them becomes the target, extrapolated from its own time.
void RigCore::apply_timed(uint32_t now_us) {
  while (timed_n_ && (int32_t)(now_us - timed_[timed_head_].at_us) >= 0) {
    const Timed& e = timed_[timed_head_];
    for (int i = 0; i < N_MOTORS; ++i) {
      target_[i] = e.target[i];
      vel_dp_[i] = e.dp[i];
    }
    vel_dth_ = e.dth;
    vel_dirty_ = true;
    have_target_ = true;
    target_rx_us_ = e.at_us;
    timed_head_ = (uint8_t)((timed_head_ + 1) & (TIMED_QUEUE - 1));
    --timed_n_;
  }
}

void RigCore::control_tick(const int32_t pos[N_MOTORS], uint16_t supply_mv, uint32_t now_us,
                           int16_t pwm_out[N_MOTORS]) {
  // every time difference below is (uint32_t)(now - then): right across the micros() wrap
#if RIG_FLOAT_PID
  uint32_t dt_us = ticked_ ? (uint32_t)(now_us - last_tick_us_) : 0;
#endif
  ticked_ = true;
  last_tick_us_ = now_us;
  if (timed_n_) apply_timed(now_us);  // timed targets whose time has come
  for (int i = 0; i < N_MOTORS; ++i) pos_[i] = pos[i];
  uint8_t live = 0;
  if (supply_mv < power_min_mv_) live |= FAULT_POWER;
  // silent: by the next tick watchdog_us would have passed, so the motors stop within watchdog_us
  // of the last frame (plus this tick's own run time), not up to a period later
  bool silent = !have_rx_ || (uint32_t)(now_us - last_rx_us_) + period_us_ >= cfg_.watchdog_us;
  if (silent && mode_ != MODE_IDLE) watchdog_latched_ = true;  // stays stopped until the next MODE
  if (silent || watchdog_latched_) live |= FAULT_WATCHDOG;
  bool demo = mode_ == MODE_REAL_TO_VIRTUAL && (mode_flags_ & MODE_FLAG_LOCAL_DEMO);
  bool drive = (mode_ == MODE_VIRTUAL_TO_REAL && have_target_) || demo;
  if (live & (FAULT_POWER | FAULT_WATCHDOG)) drive = false;
  if (demo) {  // the sine's phase runs on with the clock
    uint32_t el = (uint32_t)(now_us - demo_last_us_);
    demo_last_us_ = now_us;
    while (el > 0) {
      uint32_t chunk = el > 1000 ? 1000 : el;  // chunk · inc_q8 < 2^32 for periods >= 0.3 s
      uint32_t acc = chunk * demo_inc_q8_;
      demo_phase_ += acc >> 8;
      demo_phase_frac_ = (uint16_t)(demo_phase_frac_ + (acc & 0xFF));
      if (demo_phase_frac_ >= 256) { demo_phase_frac_ = (uint16_t)(demo_phase_frac_ - 256); ++demo_phase_; }
      el -= chunk;
    }
  }
  if (vel_dirty_) {  // one division (~40 µs on the AVR) per new target: 2^30 / dth, then products
    int32_t recip_q30 = vel_dth_ ? (int32_t)(1073741824UL / vel_dth_) : 0;  // dth >= 1 µs: <= 2^30
    for (int i = 0; i < N_MOTORS; ++i) {
      // dp · 2^30 / dth / 2^10 = dp · 2^20 / dth; |dp| <= 2047 and recip <= 2^30 / 1 would overflow, so
      // the product is taken in two halves of the reciprocal
      int32_t dp = vel_dp_[i];
      int32_t v = dp * (recip_q30 >> 10) + ((dp * (recip_q30 & 1023)) >> 10);
      vel_q20_[i] = clamp32(v, VEL_MAX_Q20);
    }
    vel_dirty_ = false;
  }
  uint32_t ts_us = (uint32_t)(now_us - target_rx_us_);
  if (ts_us > 20000) ts_us = 20000;  // extrapolate at most 20 ms past the last target
  for (int i = 0; i < N_MOTORS; ++i) {
    int32_t u_q14 = 0;
    if (drive && !stall_cut_[i]) {
      int32_t sp, vel;
      if (demo) {
        sp = demo_setpoint(i, vel);
      } else {
        vel = vel_q20_[i];
        // vel·ts >> 20, as a byte shift then a 4-bit shift of 16 bits (|vel·ts| < 2^31, >> 16 < 2^15)
        sp = target_[i] + ((int16_t)((vel * (int32_t)ts_us) >> 16) >> 4);
      }
#if RIG_FLOAT_PID
      if (cfg_.gains.published) {  // the float PID (the published formula), for comparison
        float u = pid_float_[i].update((float)sp, (float)pos[i], dt_us * 1e-6f);
        u_q14 = (int32_t)(u * duty_per_volt_ * 16384.0f);
      } else {
        u_q14 = pid_[i].update(sp - pos[i]);
      }
#else
      u_q14 = pid_[i].update(sp - pos[i]);
#endif
      if (vel > 1 || vel < -1) u_q14 += vel * ff_q0_ + (vel > 0 ? ff_static_q14_ : -ff_static_q14_);
    } else {
      pid_[i].reset();
#if RIG_FLOAT_PID
      pid_float_[i].reset();
#endif
    }
    // duty = round(u), half away from zero
    int32_t mag = clamp32(u_q14 >= 0 ? u_q14 : -u_q14, 511L * 16384);  // beyond ±511 duty: clamped anyway (and >> 8 fits 16 bits)
    int16_t m = (int16_t)(((int16_t)(mag >> 8) + 32) >> 6);  // round(|u| / 2^14): byte shift, then 6 bits of 16
    int32_t pw = clamp32(u_q14 >= 0 ? m : -m, 255);
    // stall: high PWM and the encoder does not move for stall_us -> this motor is cut until the next MODE
    if ((pw >= cfg_.stall_pwm || pw <= -cfg_.stall_pwm) && pos[i] == stall_pos_[i]) {
      if ((uint32_t)(now_us - stall_since_us_[i]) >= cfg_.stall_us) stall_cut_[i] = true;
    } else {
      stall_pos_[i] = pos[i];
      stall_since_us_[i] = now_us;
    }
    if (stall_cut_[i]) {
      live |= FAULT_STALL;
      pw = 0;
      pid_[i].reset();
    }
    pwm_[i] = (int16_t)pw;
    pwm_out[i] = pwm_[i];
  }
  if (live != faults_) state_requested_ = true;  // a fault appearing/clearing is reported at once
  faults_ = live;
  // streaming
  uint32_t since = (uint32_t)(now_us - last_state_us_);
  // the stream on a fixed grid of ticks: a state that left a little late does not push the next
  // request to the tick after (at 500 Hz that halved the rate to 333 Hz)
  if (mode_ == MODE_REAL_TO_VIRTUAL && stream_period_us_ > 0 &&
      (uint32_t)(now_us - last_stream_us_) >= stream_period_us_) {
    state_requested_ = true;
    last_stream_us_ += stream_period_us_;
    if ((uint32_t)(now_us - last_stream_us_) >= stream_period_us_) last_stream_us_ = now_us;  // far behind: resync
  }
  if (since >= cfg_.keepalive_us) state_requested_ = true;
}

size_t RigCore::build_state(uint8_t* out, uint32_t now_us) {
  uint8_t b[10];
  bool sat = false;
  b[0] = last_rx_seq_;
  for (int i = 0; i < N_MOTORS; ++i) put_u16(b + 2 + 2 * i, (uint16_t)sat16(pos_[i], sat));
  for (int i = 0; i < N_MOTORS; ++i) put_u16(b + 6 + 2 * i, (uint16_t)pwm_[i]);
  uint8_t f = faults_;
  if (sat) f |= FAULT_RANGE;
  if (rx_error_) f |= FAULT_RX_ERROR;
  rx_error_ = false;
  b[1] = f;
  last_state_us_ = now_us;
  return encode_frame(MSG_JOINT_STATES, tx_seq_++, now_us, b, 10, out);
}

size_t RigCore::next_tx_frame(uint8_t* out, uint32_t now_us) {
  size_t n = 0;
  if (ctrl_n_ > 0) {
    n = encode_frame(ctrl_type_[0], tx_seq_++, now_us, ctrl_body_[0], ctrl_len_[0], out);
    for (uint8_t k = 1; k < ctrl_n_; ++k) {
      ctrl_type_[k - 1] = ctrl_type_[k];
      memcpy(ctrl_body_[k - 1], ctrl_body_[k], HELLO_SIZE);
      ctrl_len_[k - 1] = ctrl_len_[k];
    }
    --ctrl_n_;
  } else if (state_requested_) {
    state_requested_ = false;
    n = build_state(out, now_us);
  }
  if (n) ++frames_sent;
  return n;
}

}  // namespace rig
