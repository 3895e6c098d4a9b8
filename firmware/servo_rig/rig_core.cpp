// rig_core.cpp — see rig_core.h. Portable C++11 (Arduino AVR and host g++).
#include "rig_core.h"

#include <math.h>
#include <string.h>

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
uint16_t crc16_ccitt_false(const uint8_t* data, size_t n, uint16_t crc) {
  for (size_t i = 0; i < n; ++i) {
    crc ^= (uint16_t)data[i] << 8;
    for (int b = 0; b < 8; ++b) crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
  }
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

Decoder::Result Decoder::push(uint8_t b, Frame& out) {
  if (b != 0) {
    if (overflow_) return NONE;
    if (len_ >= MAX_ENCODED) { overflow_ = true; len_ = 0; return NONE; }
    buf_[len_++] = b;
    return NONE;
  }
  if (overflow_) { overflow_ = false; ++dropped; return DROPPED; }
  if (len_ == 0) return NONE;  // bare delimiter
  uint8_t raw[MAX_FRAME];
  int n = cobs_decode(buf_, len_, raw, sizeof(raw));
  len_ = 0;
  if (n < (int)(HEADER_SIZE + CRC_SIZE)) { ++dropped; return DROPPED; }
  uint16_t crc = (uint16_t)((raw[n - 2] << 8) | raw[n - 1]);
  if (crc16_ccitt_false(raw, n - 2) != crc || raw[0] != PROTOCOL_VERSION) { ++dropped; return DROPPED; }
  int bl = body_size(raw[1]);
  if (bl < 0 || bl != n - (int)(HEADER_SIZE + CRC_SIZE)) { ++dropped; return DROPPED; }
  out.version = raw[0];
  out.type = raw[1];
  out.seq = get_u16(raw + 2);
  out.t_us = get_u32(raw + 4);
  out.body_len = (uint8_t)bl;
  memcpy(out.body, raw + HEADER_SIZE, bl);
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
RigCore::RigCore(const RigConfig& cfg)
    : frames_sent(0), cfg_(cfg), mode_(MODE_IDLE), mode_flags_(0), stream_hz_(500), faults_(0), rx_error_(false),
      tx_seq_(0), last_rx_seq_(0), have_rx_(false), last_rx_us_(0), last_state_us_(0), last_tick_us_(0),
      mode_since_us_(0), state_requested_(false), ticked_(false), target_rx_us_(0), target_host_us_(0),
      have_target_(false), target_seq_(0), have_target_seq_(false), power_cmd_(-1), ctrl_n_(0) {
  rx_overruns = 0;
  stale_targets = 0;
  mode_changes = 0;
  for (int i = 0; i < N_MOTORS; ++i) {
    pid_[i].set_gains(cfg.gains);
    target_[i] = target_vel_[i] = 0;
    pos_[i] = demo_center_[i] = stall_pos_[i] = 0;
    stall_since_us_[i] = 0;
    pwm_[i] = 0;
  }
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

void RigCore::on_rx_byte(uint8_t b, uint32_t now_us) {
  Frame f;
  Decoder::Result r = dec_.push(b, f);
  if (r == Decoder::FRAME) handle(f, now_us);
  else if (r == Decoder::DROPPED) rx_error_ = true;
}

void RigCore::queue_ctrl(uint8_t type, const uint8_t* body, size_t n) {
  if (ctrl_n_ >= 4 || n > HELLO_SIZE) return;
  ctrl_type_[ctrl_n_] = type;
  memcpy(ctrl_body_[ctrl_n_], body, n);
  ctrl_len_[ctrl_n_] = (uint8_t)n;
  ++ctrl_n_;
}

void RigCore::handle(const Frame& f, uint32_t now_us) {
  last_rx_us_ = now_us;
  last_rx_seq_ = (uint8_t)(f.seq & 0xFF);
  have_rx_ = true;
  faults_ &= ~FAULT_WATCHDOG;
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
      // nothing: the PIDs and targets of a running mode are not reset. A new mode starts afresh.
      if (m != mode_ || hz != stream_hz_ || f.body[3] != mode_flags_) {
        mode_ = (Mode)m;
        stream_hz_ = hz;
        mode_flags_ = f.body[3];
        mode_since_us_ = now_us;
        ++mode_changes;
        for (int i = 0; i < N_MOTORS; ++i) {
          pid_[i].reset();
          target_[i] = (float)pos_[i];  // hold where we are until targets arrive
          target_vel_[i] = 0;
          demo_center_[i] = pos_[i];
        }
        have_target_ = false;
        have_target_seq_ = false;
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
      uint32_t dth = f.t_us - target_host_us_;
      for (int i = 0; i < N_MOTORS; ++i) {
        float t = (float)(int16_t)get_u16(f.body + 2 * i);
        if (have_target_ && dth > 0 && dth < 50000) target_vel_[i] = (t - target_[i]) * 1e6f / (float)dth;
        else target_vel_[i] = 0;
        target_[i] = t;
      }
      target_host_us_ = f.t_us;
      target_rx_us_ = now_us;
      have_target_ = true;
      if (mode_ == MODE_VIRTUAL_TO_REAL) state_requested_ = true;
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

void RigCore::control_tick(const int32_t pos[N_MOTORS], float supply_v, uint32_t now_us, int16_t pwm_out[N_MOTORS]) {
  float dt = ticked_ ? (float)(uint32_t)(now_us - last_tick_us_) * 1e-6f : 0.0f;
  ticked_ = true;
  last_tick_us_ = now_us;
  for (int i = 0; i < N_MOTORS; ++i) pos_[i] = pos[i];
  uint8_t live = 0;
  if (supply_v < cfg_.power_min_v) live |= FAULT_POWER;
  if (!have_rx_ || (uint32_t)(now_us - last_rx_us_) > cfg_.watchdog_us) live |= FAULT_WATCHDOG;
  bool drive = (mode_ == MODE_VIRTUAL_TO_REAL && have_target_) ||
               (mode_ == MODE_REAL_TO_VIRTUAL && (mode_flags_ & MODE_FLAG_LOCAL_DEMO));
  if (live & (FAULT_POWER | FAULT_WATCHDOG)) drive = false;
  float ts = (float)(uint32_t)(now_us - target_rx_us_) * 1e-6f;
  if (ts > 0.02f) ts = 0.02f;  // extrapolate at most 20 ms past the last target
  for (int i = 0; i < N_MOTORS; ++i) {
    float u = 0;
    if (drive) {
      float sp, vel;
      if (mode_ == MODE_REAL_TO_VIRTUAL) {
        float tt = (float)(uint32_t)(now_us - mode_since_us_) * 1e-6f;
        float w = 2.0f * (float)M_PI / cfg_.demo_period_s;
        float amp = cfg_.demo_amplitude_deg * cfg_.pulses_per_deg * (i == 0 ? 1.0f : 0.5f);
        sp = demo_center_[i] + amp * sinf(w * tt);
        vel = amp * w * cosf(w * tt);
      } else {
        sp = target_[i] + target_vel_[i] * ts;
        vel = target_vel_[i];
      }
      u = pid_[i].update(sp, (float)pos[i], dt);
      if (fabsf(vel) > 1.0f) u += vel / cfg_.ff_pulses_per_s_per_volt + (vel > 0 ? cfg_.ff_static_v : -cfg_.ff_static_v);
    } else {
      pid_[i].reset();
    }
    float p = u * 255.0f / cfg_.supply_nominal;
    int32_t pw = (int32_t)(p >= 0 ? p + 0.5f : p - 0.5f);
    if (pw > 255) pw = 255;
    if (pw < -255) pw = -255;
    pwm_[i] = (int16_t)pw;
    pwm_out[i] = pwm_[i];
    // stall: high PWM and the encoder does not move
    if ((pw >= cfg_.stall_pwm || pw <= -cfg_.stall_pwm) && pos[i] == stall_pos_[i]) {
      if ((uint32_t)(now_us - stall_since_us_[i]) > cfg_.stall_us) live |= FAULT_STALL;
    } else {
      stall_pos_[i] = pos[i];
      stall_since_us_[i] = now_us;
    }
  }
  if (live != faults_) state_requested_ = true;  // a fault appearing/clearing is reported at once
  faults_ = live;
  // streaming
  uint32_t since = (uint32_t)(now_us - last_state_us_);
  if (mode_ == MODE_REAL_TO_VIRTUAL && stream_hz_ > 0 && since >= 1000000UL / stream_hz_) state_requested_ = true;
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
