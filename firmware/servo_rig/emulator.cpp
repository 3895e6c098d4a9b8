// emulator.cpp — the servo rig on the host: RigCore + two motor models behind a
// pseudo-terminal whose bytes are paced at the configured baud rate (10 bits per byte,
// both directions), so that rates and latencies hold for a real serial cable.
//
//   ./rig_emulator [--baud 115200] [--control-hz 1000] [--link PATH] [--rx-buffer 64] [--boot-id N] [--quiet]
//                  [--motor-params FILE] [--motor2-params FILE]
//   ./rig_emulator --motor-trace VOLTS SECONDS   (prints "t rpm pulses" every 10 ms, then exits)
//
// --motor-params FILE (before --motor-trace, if both): "name = value" lines ('#' starts a comment)
// setting the MotorParams fields rotor_inertia, load_inertia, coulomb_friction, viscous_friction,
// no_load_rpm, resistance, gear_ratio, encoder_cpr, nominal_voltage, and dead_band (V: the H-bridge
// passes no current below it) — the file `armtwin fit --save` writes (controllers/ident.py). Its
// delay_down and delay_up (s, >= 0) are the fitted link's delays: the host's virtual rig uses them;
// the emulator has its own link (the pty at the baud rate) and ignores them. --motor2-params FILE
// (after --motor-params, if both) gives motor 2 its own file (`armtwin rig identify` fits one per motor).
//   ./rig_emulator --pid-trace [published]      (reads "setpoint measurement dt" lines, prints u)
//   ./rig_emulator --core-trace TICKS START_US  (chip/core_trace.h: prints "TRACE ticks start crc")
//   ./rig_emulator --pid-trace fixed PERIOD_S   (the chip's fixed-point PID: "setpoint measurement" in
//                                                integer pulses at a fixed period, prints u in volts)
//   ./rig_emulator [--motor-params F] [--timed LEAD_S] --loop-trace DELAY_S POWER_LEAD_S
//                                               (the core and the motors on "t target1 target2 powered"
//                                                lines, no wire or clock: the fit's parity test; --timed:
//                                                timed targets, each for its time + LEAD_S)
//
// On start it prints one line on stdout (flushed): "DEVICE <pty path>", or "ERROR <why>" and
// exits with code 2. It runs until SIGINT/SIGTERM, then prints one line
// "STATS rx_frames=… rx_dropped=… rx_overruns=… stale_targets=… mode_changes=… tx_frames=… tx_lost=…
// late_targets=…" (late_targets: timed targets that arrived after their time).
// A POWER message cuts/restores the simulated motor supply.
//
// The receive side behaves like the board's UART: bytes cross the wire at 10 bits each and wait
// in a receive buffer of --rx-buffer bytes (the Arduino core's 64) until the firmware takes
// them. A host that writes faster than the wire carries fills it; every further byte is dropped
// (an overrun), counted, and the next state carries RX_ERROR. Memory stays bounded whatever the
// host writes, and a HELLO written after a flood is answered as soon as the wire is free again.
// Host only: the Arduino IDE compiles every .cpp in the sketch folder, so the whole file is
// left out of board builds.
#ifndef ARDUINO
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <vector>

#include "chip/core_trace.h"
#include "rig_core.h"

static volatile sig_atomic_t g_stop = 0;

// Received bytes with their arrival times, oldest first, in a fixed ring (no allocation). The
// emulator holds at most what the wire can deliver between two looks plus the receive buffer.
class RxQueue {
 public:
  static const size_t CAP = 1 << 16;
  RxQueue() : head_(0), n_(0) {}
  bool empty() const { return n_ == 0; }
  bool full() const { return n_ == CAP; }
  double front_time() const { return t_[head_]; }
  uint8_t front_byte() const { return b_[head_]; }
  void push(double t, uint8_t b) {
    size_t i = (head_ + n_) % CAP;
    t_[i] = t;
    b_[i] = b;
    ++n_;
  }
  void pop() { head_ = (head_ + 1) % CAP; --n_; }
  // arrival time of the first frame delimiter waiting (1e300 if none)
  double first_delimiter_time() const {
    for (size_t k = 0; k < n_; ++k) {
      size_t i = (head_ + k) % CAP;
      if (b_[i] == 0) return t_[i];
    }
    return 1e300;
  }
 private:
  double t_[CAP];
  uint8_t b_[CAP];
  size_t head_, n_;
};
static void on_signal(int) { g_stop = 1; }

static double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static rig::MotorParams g_motor[rig::N_MOTORS];  // --motor-params (--motor2-params), else the data sheet motor
static double g_dead_band[rig::N_MOTORS] = {0.0, 0.0};  // V

// The voltage motor i gets for a commanded one: none inside its H-bridge's dead band.
static double bridge(int i, double volts) { return fabs(volts) < g_dead_band[i] ? 0.0 : volts; }

// Reads a motor parameter file into motors first..N_MOTORS-1 (--motor-params: all, --motor2-params:
// the second); false (with a message naming `opt`) on any fault.
static bool load_motor_params(const char* opt, const char* path, int first) {
  FILE* f = fopen(path, "r");
  if (!f) { fprintf(stderr, "rig_emulator: %s %s: %s\n", opt, path, strerror(errno)); return false; }
  rig::MotorParams m;
  double dead_band = 0.0;
  char line[256];
  int n = 0;
  bool ok = true;
  while (ok && fgets(line, sizeof(line), f)) {
    ++n;
    char* hash = strchr(line, '#');
    if (hash) *hash = 0;
    char key[64];
    double v;
    char rest[2];
    int got = sscanf(line, " %63[A-Za-z_] = %lf %1s", key, &v, rest);
    if (got <= 0) continue;  // blank or comment
    if (got != 2 || !isfinite(v)) { ok = false; break; }
    if (!strcmp(key, "rotor_inertia")) m.rotor_inertia = v;
    else if (!strcmp(key, "load_inertia")) m.load_inertia = v;
    else if (!strcmp(key, "coulomb_friction")) m.coulomb_friction = v;
    else if (!strcmp(key, "viscous_friction")) m.viscous_friction = v;
    else if (!strcmp(key, "no_load_rpm")) m.no_load_rpm = v;
    else if (!strcmp(key, "resistance")) m.resistance = v;
    else if (!strcmp(key, "gear_ratio")) m.gear_ratio = v;
    else if (!strcmp(key, "encoder_cpr")) m.encoder_cpr = (int)v;
    else if (!strcmp(key, "nominal_voltage")) m.nominal_voltage = v;
    else if (!strcmp(key, "dead_band")) dead_band = v;
    else if (!strcmp(key, "delay_down") || !strcmp(key, "delay_up")) ok = v >= 0;  // the host link's: not emulated
    else ok = false;
  }
  fclose(f);
  if (!ok) { fprintf(stderr, "rig_emulator: %s %s: line %d is not a known 'name = number'\n", opt, path, n); return false; }
  if (!(m.rotor_inertia > 0 && m.load_inertia >= 0 && m.coulomb_friction >= 0 &&
        m.viscous_friction >= 0 && m.resistance > 0 && m.gear_ratio > 0 && m.encoder_cpr >= 1 &&
        m.no_load_rpm > 0 && m.nominal_voltage > 0 && dead_band >= 0 && m.motor_constant() > 0)) {
    fprintf(stderr, "rig_emulator: %s %s: values out of range (positive inertia, resistance, speed; "
            "friction and dead band >= 0; the no-load speed reachable)\n", opt, path);
    return false;
  }
  for (int i = first; i < rig::N_MOTORS; ++i) {
    g_motor[i] = m;
    g_dead_band[i] = dead_band;
  }
  return true;
}

static int motor_trace(double volts, double seconds) {
  rig::MotorModel m(g_motor[0]);
  for (int k = 0; k <= (int)(seconds * 100 + 0.5); ++k) {
    printf("%.3f %.6f %d\n", k * 0.01, m.output_rpm(), (int)m.pulses());
    m.step(bridge(0, volts), 0.01);
  }
  return 0;
}

// The chip's fixed-point PID on lines of stdin ("setpoint measurement", integer pulses) at a fixed
// period; prints its output in volts (duty·2^14 / 2^14 · 12 V / 255), for the Python comparison.
static int pid_trace_fixed(double period_s) {
  rig::PIDFixed pid;
  pid.configure(rig::rig_gains(), 255.0f / 12.0f, (float)period_s);
  long sp, m;
  while (scanf("%ld %ld", &sp, &m) == 2) printf("%.9g\n", pid.update((int32_t)(sp - m)) / 16384.0 * 12.0 / 255.0);
  return 0;
}

// The whole loop without a wire or a clock, for the fit's parity test (tests/test_ident.py):
// lines of stdin "t_s target1 target2 powered" (host times in s, whole-pulse targets, 1/0). Each
// target frame arrives delay_s after its time; the supply follows each line's flag from
// power_lead_s before its time (where a log shows a POWER fault; negative: after it). The core
// and the motors (--motor-params, each starting in the middle of its first count) run control
// ticks from t = 0 to the last line's time; printed per tick: "tick pos1 pos2 pwm1 pwm2".
// With --timed LEAD_S (before --loop-trace): the mode has the TIMED flag and each frame is stamped
// with its time + LEAD_S on the rig's clock (the same clock here): the rig applies it then.
static double g_timed_lead = -1.0;
static int loop_trace(double delay_s, double power_lead_s, int control_hz) {
  struct Line { double t; long tg[rig::N_MOTORS]; bool on; };
  std::vector<Line> in;
  Line l;
  long pw;
  while (scanf("%lf %ld %ld %ld", &l.t, &l.tg[0], &l.tg[1], &pw) == 4) { l.on = pw != 0; in.push_back(l); }
  if (in.empty()) return 0;
  rig::RigConfig cfg;
  cfg.control_hz = (uint16_t)control_hz;
  static rig::RigCore core(cfg);
  rig::MotorModel motor[rig::N_MOTORS] = {rig::MotorModel(g_motor[0]), rig::MotorModel(g_motor[1])};
  for (int i = 0; i < rig::N_MOTORS; ++i) motor[i].theta = M_PI / motor[i].encoder_cpr();  // mid-count, as the fit starts
  uint8_t buf[rig::MAX_ENCODED + 2], body[rig::HELLO_SIZE] = {0};
  uint16_t seq = 0;
  body[1] = rig::N_MOTORS;
  size_t n = rig::encode_frame(rig::MSG_HELLO, seq++, 0, body, rig::HELLO_SIZE, buf);
  for (size_t b = 0; b < n; ++b) core.on_rx_byte(buf[b], 0);
  body[0] = rig::MODE_VIRTUAL_TO_REAL; body[1] = 500 & 0xFF; body[2] = 500 >> 8;
  body[3] = g_timed_lead >= 0 ? rig::MODE_FLAG_TIMED : 0;
  n = rig::encode_frame(rig::MSG_MODE, seq++, 0, body, 4, buf);
  for (size_t b = 0; b < n; ++b) core.on_rx_byte(buf[b], 0);
  const double period = 1.0 / control_hz;
  int16_t pwm[rig::N_MOTORS] = {0, 0};
  size_t next = 0, ip = 0;
  for (long k = 0; k * period <= in.back().t + 1e-12; ++k) {
    const double now = k * period;
    const uint32_t now_us = (uint32_t)(uint64_t)(now * 1e6 + 0.5);
    while (ip + 1 < in.size() && in[ip + 1].t <= now + power_lead_s) ++ip;
    const bool on = in[ip].on;
    for (int i = 0; i < rig::N_MOTORS; ++i) {
      motor[i].powered = on;
      if (k > 0) motor[i].step(bridge(i, pwm[i] * 12.0 / 255.0), period);
    }
    for (; next < in.size() && in[next].t + delay_s <= now + 1e-12; ++next) {
      for (int i = 0; i < rig::N_MOTORS; ++i) {
        body[2 * i] = (uint8_t)(in[next].tg[i] & 0xFF);
        body[2 * i + 1] = (uint8_t)((uint16_t)in[next].tg[i] >> 8);
      }
      const double stamp = in[next].t + (g_timed_lead >= 0 ? g_timed_lead : 0.0);
      n = rig::encode_frame(rig::MSG_JOINT_TARGETS, seq++, (uint32_t)(uint64_t)(stamp * 1e6 + 0.5), body, 4, buf);
      const uint32_t rx_us = (uint32_t)(uint64_t)((in[next].t + delay_s) * 1e6 + 0.5);  // its arrival
      for (size_t b = 0; b < n; ++b) core.on_rx_byte(buf[b], rx_us);
    }
    int32_t pos[rig::N_MOTORS];
    for (int i = 0; i < rig::N_MOTORS; ++i) pos[i] = motor[i].pulses();
    core.control_tick(pos, on ? 12000 : 0, now_us, pwm);
    while (core.next_tx_frame(buf, now_us) > 0) {}
    printf("%ld %d %d %d %d\n", k, (int)pos[0], (int)pos[1], (int)pwm[0], (int)pwm[1]);
  }
  return 0;
}

// The firmware PID on lines of stdin (for the Python/C++ parity test).
static int pid_trace(bool published) {
  rig::PIDGains g = rig::rig_gains();
  g.published = published;
  rig::PID pid(g);
  double sp, m, dt;
  while (scanf("%lf %lf %lf", &sp, &m, &dt) == 3) printf("%.9g\n", pid.update((float)sp, (float)m, (float)dt));
  return 0;
}

// Startup failures: one line "ERROR <message>" on stdout (the host shows it as its own one-line
// error), and the same on stderr unless --quiet. Exit code 2.
static int fail(bool quiet, const char* msg) {
  printf("ERROR %s\n", msg);
  fflush(stdout);
  if (!quiet) fprintf(stderr, "rig_emulator: %s\n", msg);
  return 2;
}

// Expose the pty as `link` (a symbolic link). Never take over a name in use: anything but a
// symbolic link is refused, and so is a symbolic link whose target exists (another emulator's
// live pty, or some other device). Only a dangling link (an emulator that is gone) is replaced.
static bool make_link(const char* link, const char* pty, char* why, size_t n) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (symlink(pty, link) == 0) return true;
    if (errno != EEXIST) {
      snprintf(why, n, "cannot create the link %s: %s", link, strerror(errno));
      return false;
    }
    struct stat st;
    if (lstat(link, &st) != 0) continue;  // gone meanwhile: try again
    if (!S_ISLNK(st.st_mode)) {
      snprintf(why, n, "--link %s exists and is not a symbolic link; refusing to replace it", link);
      return false;
    }
    char target[256];
    ssize_t k = readlink(link, target, sizeof(target) - 1);
    target[k > 0 ? k : 0] = 0;
    if (!strcmp(target, pty)) return true;  // a dead emulator's link to the number our new pty got
    if (stat(link, &st) == 0) {
      snprintf(why, n, "--link %s is in use: it points at %s, which exists (another rig emulator?); stop that "
               "one or remove the link", link, target);
      return false;
    }
    unlink(link);  // dangling: the emulator that made it is gone
  }
  snprintf(why, n, "cannot create the link %s: it keeps changing", link);
  return false;
}

int main(int argc, char** argv) {
  long baud = 115200;
  int control_hz = 1000;
  const char* link = nullptr;
  bool quiet = false;
  long rx_buffer = 64;
  long boot_id = -1;
  const char* bad_arg = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--baud") && i + 1 < argc) baud = atol(argv[++i]);
    else if (!strcmp(argv[i], "--control-hz") && i + 1 < argc) control_hz = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--link") && i + 1 < argc) link = argv[++i];
    else if (!strcmp(argv[i], "--rx-buffer") && i + 1 < argc) rx_buffer = atol(argv[++i]);
    else if (!strcmp(argv[i], "--boot-id") && i + 1 < argc) boot_id = atol(argv[++i]);
    else if (!strcmp(argv[i], "--quiet")) quiet = true;
    else if (!strcmp(argv[i], "--motor-params") && i + 1 < argc) { if (!load_motor_params(argv[i], argv[i + 1], 0)) return 2; ++i; }
    else if (!strcmp(argv[i], "--motor2-params") && i + 1 < argc) { if (!load_motor_params(argv[i], argv[i + 1], 1)) return 2; ++i; }
    else if (!strcmp(argv[i], "--core-trace") && i + 2 < argc) {  // the chip/emulator agreement session
      unsigned long ticks = strtoul(argv[i + 1], nullptr, 0), start = strtoul(argv[i + 2], nullptr, 0);
      printf("TRACE %lu %lu %u\n", ticks, start, (unsigned)rig_trace::run((uint32_t)ticks, (uint32_t)start));
      return 0;
    }
    else if (!strcmp(argv[i], "--pid-trace") && i + 2 < argc && !strcmp(argv[i + 1], "fixed"))
      return pid_trace_fixed(atof(argv[i + 2]));
    else if (!strcmp(argv[i], "--pid-trace")) return pid_trace(i + 1 < argc && !strcmp(argv[i + 1], "published"));
    else if (!strcmp(argv[i], "--timed") && i + 1 < argc) g_timed_lead = atof(argv[++i]);
    else if (!strcmp(argv[i], "--loop-trace") && i + 2 < argc) return loop_trace(atof(argv[i + 1]), atof(argv[i + 2]), control_hz);
    else if (!strcmp(argv[i], "--motor-trace") && i + 2 < argc) return motor_trace(atof(argv[i + 1]), atof(argv[i + 2]));
    else if (!bad_arg) bad_arg = argv[i];
  }
  char why[512];
  if (bad_arg) {
    snprintf(why, sizeof(why), "unknown argument %s", bad_arg);
    return fail(quiet, why);
  }
  if (baud < 300 || baud > 10000000 || control_hz < 10 || control_hz > 20000 || rx_buffer < 1 || rx_buffer > 4096 ||
      boot_id < -1 || boot_id > 65535)
    return fail(quiet, "--baud must be 300..10000000, --control-hz 10..20000, --rx-buffer 1..4096, --boot-id 0..65535");
  int master = posix_openpt(O_RDWR | O_NOCTTY);
  const char* slave_name = (master >= 0 && grantpt(master) == 0 && unlockpt(master) == 0) ? ptsname(master) : nullptr;
  if (!slave_name) {
    snprintf(why, sizeof(why), "cannot create a pseudo-terminal: %s", strerror(errno));
    return fail(quiet, why);
  }
  char path[256];
  snprintf(path, sizeof(path), "%s", slave_name);
  // Hold the slave open ourselves (raw mode) so that the master never sees a hang-up
  // while no host is connected; the host may open and close the port at will.
  int keep = open(path, O_RDWR | O_NOCTTY);
  if (keep >= 0) {
    termios tio;
    if (tcgetattr(keep, &tio) == 0) { cfmakeraw(&tio); tcsetattr(keep, TCSANOW, &tio); }
  }
  fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK);
  if (link && !make_link(link, path, why, sizeof(why))) return fail(quiet, why);
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  signal(SIGPIPE, SIG_IGN);
  printf("DEVICE %s\n", link ? link : path);
  fflush(stdout);
  if (!quiet) fprintf(stderr, "rig_emulator: %s at %ld baud, PID at %d Hz\n", path, baud, control_hz);

  rig::RigConfig cfg;
  cfg.control_hz = (uint16_t)control_hz;
  if (boot_id < 0) {  // a new id per start, as a board's EEPROM boot counter gives one per boot
    uint16_t r = 0;
    int fd = open("/dev/urandom", O_RDONLY);
    if (fd < 0 || read(fd, &r, sizeof(r)) != (ssize_t)sizeof(r)) r = (uint16_t)(getpid() ^ (long)(now_s() * 1e6));
    if (fd >= 0) close(fd);
    boot_id = r;
  }
  cfg.boot_id = (uint16_t)boot_id;
  rig::RigCore core(cfg);
  static_assert(rig::N_MOTORS == 2, "one motor model per motor");
  rig::MotorModel motor[rig::N_MOTORS] = {rig::MotorModel(g_motor[0]), rig::MotorModel(g_motor[1])};
  const double byte_time = 10.0 / baud;
  const double period = 1.0 / control_hz;
  const double t0 = now_s();
  double next_tick = t0;
  static RxQueue rx;  // bytes read from the pty, each with the time its last bit arrives
  // what the host may have on its way to the firmware: bytes still crossing the wire or in the
  // receive buffer, at most rx_buffer bytes' wire time ahead of now
  const double rx_ahead_max = (double)rx_buffer * 10.0 / baud;
  double rx_wire_free = t0, tx_end = 0, last_read = t0;
  uint8_t tx_buf[rig::MAX_ENCODED + 2];
  size_t tx_len = 0;
  int16_t pwm[rig::N_MOTORS] = {0, 0};
  uint8_t rbuf[512];
  unsigned long long dropped_tx = 0, rx_overruns = 0, overruns_told = 0;

  while (!g_stop) {
    double t = now_s();
    // 1. bytes from the host, stamped with the time they finish arriving on the wire. We
    // normally look every control tick (<= 1 ms), so new bytes were written just now. After a
    // stall of this process they were written while we did not look; on a cable they would
    // have been arriving since then, at line rate — so they are stamped from the previous
    // look on (the catch-up ticks below consume them at those times), instead of piling up
    // as a backlog that a real wire cannot have.
    const double written_from = (t - last_read > 0.005) ? last_read : t;
    for (int pass = 0; pass < 8; ++pass) {  // at most 4 KiB a pass: the control ticks never wait on a flood
      ssize_t n = read(master, rbuf, sizeof(rbuf));
      if (n <= 0) break;
      for (ssize_t k = 0; k < n; ++k) {
        double arrive = (rx_wire_free > written_from ? rx_wire_free : written_from) + byte_time;
        if (arrive - t > rx_ahead_max || rx.full()) { ++rx_overruns; continue; }  // the buffer is full
        rx_wire_free = arrive;
        rx.push(arrive, rbuf[k]);
      }
    }
    if (rx_overruns != overruns_told) {  // the firmware learns of dropped bytes (RX_ERROR in its next state)
      core.note_rx_overrun((uint32_t)(rx_overruns - overruns_told));
      overruns_told = rx_overruns;
    }
    last_read = t;
    // 2. control ticks (motor model integrated up to each tick)
    int ticks = 0;
    while (next_tick <= t && ticks < 50) {
      while (!rx.empty() && rx.front_time() <= next_tick) {
        core.on_rx_byte(rx.front_byte(), (uint32_t)((uint64_t)((rx.front_time() - t0) * 1e6)));
        rx.pop();
      }
      for (int i = 0; i < rig::N_MOTORS; ++i) motor[i].step(bridge(i, pwm[i] * 12.0 / 255.0), period);
      int pc = core.take_power_command();
      if (pc >= 0) for (int i = 0; i < rig::N_MOTORS; ++i) motor[i].powered = (pc == 1);
      int32_t pos[rig::N_MOTORS];
      for (int i = 0; i < rig::N_MOTORS; ++i) pos[i] = motor[i].pulses();
      uint16_t supply_mv = motor[0].powered ? (uint16_t)(motor[0].supply * 1000.0 + 0.5) : 0;
      core.control_tick(pos, supply_mv, (uint32_t)((uint64_t)((next_tick - t0) * 1e6)), pwm);
      next_tick += period;
      ++ticks;
    }
    // A board's clock never stalls: after a stall of this process the control ticks catch up
    // (50 per pass), so the motor physics and the rig clock stay one time base. Only after a
    // stall of more than 2 s (a suspended process) are the missed ticks skipped.
    if (next_tick < t - 2.0) next_tick = t;
    // the rig clock: the time of the newest control tick (what the board's micros() reads)
    const uint32_t rig_us = (uint32_t)(uint64_t)((next_tick - period - t0 > 0 ? next_tick - period - t0 : 0) * 1e6);
    // frames whose last byte arrived after the last tick are handled now
    while (!rx.empty() && rx.front_time() <= t) {
      core.on_rx_byte(rx.front_byte(), (uint32_t)((uint64_t)((rx.front_time() - t0) * 1e6)));
      rx.pop();
    }
    // 3. transmit: a frame is written when its last byte would leave the UART
    if (tx_len && t >= tx_end) {
      ssize_t w = write(master, tx_buf, tx_len);
      if (w != (ssize_t)tx_len) ++dropped_tx;  // nobody reading: the bytes are lost, as on a wire
      tx_len = 0;
    }
    if (!tx_len) {
      size_t n = core.next_tx_frame(tx_buf, rig_us);
      if (n) {
        double start = tx_end > t ? tx_end : t;
        tx_end = start + n * byte_time;
        tx_len = n;
      }
    }
    // 4. sleep until the next event
    double wake = next_tick;
    if (tx_len && tx_end < wake) wake = tx_end;
    double delim = rx.first_delimiter_time();
    if (delim < wake) wake = delim;
    double dt = wake - now_s();
    if (dt < 0) dt = 0;
    timespec to;
    to.tv_sec = (time_t)dt;
    to.tv_nsec = (long)((dt - (double)to.tv_sec) * 1e9);
    pollfd pfd;
    pfd.fd = master;
    pfd.events = POLLIN;
    int r = ppoll(&pfd, 1, &to, nullptr);
    if (r > 0 && (pfd.revents & (POLLHUP | POLLERR)) && !(pfd.revents & POLLIN)) {
      timespec ms = {0, 1000000};
      nanosleep(&ms, nullptr);  // no reader on the other side: do not spin
    }
  }
  printf("STATS rx_frames=%lu rx_dropped=%lu rx_overruns=%llu stale_targets=%lu mode_changes=%lu tx_frames=%lu "
         "tx_lost=%llu late_targets=%lu\n", (unsigned long)core.decoder().frames, (unsigned long)core.decoder().dropped,
         rx_overruns, (unsigned long)core.stale_targets, (unsigned long)core.mode_changes,
         (unsigned long)core.frames_sent, dropped_tx, (unsigned long)core.late_targets);
  fflush(stdout);
  if (!quiet)
    fprintf(stderr, "rig_emulator: stopped (rx frames %lu, dropped %lu, overruns %llu, tx frames %lu, tx lost %llu)\n",
            (unsigned long)core.decoder().frames, (unsigned long)core.decoder().dropped, rx_overruns,
            (unsigned long)core.frames_sent, dropped_tx);
  if (link) {  // remove the link only if it still points at this emulator's pty
    char target[256];
    ssize_t n = readlink(link, target, sizeof(target) - 1);
    if (n > 0) { target[n] = 0; if (!strcmp(target, path)) unlink(link); }
  }
  close(master);
  if (keep >= 0) close(keep);
  return 0;
}
#endif  // ARDUINO
