// emulator.cpp — the servo rig on the host: RigCore + two motor models behind a
// pseudo-terminal whose bytes are paced at the configured baud rate (10 bits per byte,
// both directions), so that rates and latencies hold for a real serial cable.
//
//   ./rig_emulator [--baud 115200] [--control-hz 1000] [--link PATH] [--quiet] [--motor-params FILE]
//   ./rig_emulator --motor-trace VOLTS SECONDS   (prints "t rpm pulses" every 10 ms, then exits)
//
// --motor-params FILE (before --motor-trace, if both): "name = value" lines ('#' starts a comment)
// setting the MotorParams fields rotor_inertia, load_inertia, coulomb_friction, viscous_friction,
// no_load_rpm, resistance, gear_ratio, encoder_cpr, nominal_voltage, and dead_band (V: the H-bridge
// passes no current below it) — the file `armtwin fit --save` writes (controllers/ident.py).
//   ./rig_emulator --pid-trace [published]      (reads "setpoint measurement dt" lines, prints u)
//
// On start it prints one line "DEVICE <pty path>" on stdout (flushed); it runs until
// SIGINT/SIGTERM. A POWER message cuts/restores the simulated motor supply.
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

#include <deque>
#include <utility>

#include "rig_core.h"

static volatile sig_atomic_t g_stop = 0;
static void on_signal(int) { g_stop = 1; }

static double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static rig::MotorParams g_motor;    // --motor-params, else the data sheet motor
static double g_dead_band = 0.0;    // V

// The voltage the motor gets for a commanded one: none inside the H-bridge's dead band.
static double bridge(double volts) { return fabs(volts) < g_dead_band ? 0.0 : volts; }

// Reads --motor-params FILE into g_motor / g_dead_band; false (with a message) on any fault.
static bool load_motor_params(const char* path) {
  FILE* f = fopen(path, "r");
  if (!f) { fprintf(stderr, "rig_emulator: --motor-params %s: %s\n", path, strerror(errno)); return false; }
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
    if (!strcmp(key, "rotor_inertia")) g_motor.rotor_inertia = v;
    else if (!strcmp(key, "load_inertia")) g_motor.load_inertia = v;
    else if (!strcmp(key, "coulomb_friction")) g_motor.coulomb_friction = v;
    else if (!strcmp(key, "viscous_friction")) g_motor.viscous_friction = v;
    else if (!strcmp(key, "no_load_rpm")) g_motor.no_load_rpm = v;
    else if (!strcmp(key, "resistance")) g_motor.resistance = v;
    else if (!strcmp(key, "gear_ratio")) g_motor.gear_ratio = v;
    else if (!strcmp(key, "encoder_cpr")) g_motor.encoder_cpr = (int)v;
    else if (!strcmp(key, "nominal_voltage")) g_motor.nominal_voltage = v;
    else if (!strcmp(key, "dead_band")) g_dead_band = v;
    else ok = false;
  }
  fclose(f);
  if (!ok) { fprintf(stderr, "rig_emulator: --motor-params %s: line %d is not a known 'name = number'\n", path, n); return false; }
  if (!(g_motor.rotor_inertia > 0 && g_motor.load_inertia >= 0 && g_motor.coulomb_friction >= 0 &&
        g_motor.viscous_friction >= 0 && g_motor.resistance > 0 && g_motor.gear_ratio > 0 && g_motor.encoder_cpr >= 1 &&
        g_motor.no_load_rpm > 0 && g_motor.nominal_voltage > 0 && g_dead_band >= 0 && g_motor.motor_constant() > 0)) {
    fprintf(stderr, "rig_emulator: --motor-params %s: values out of range (positive inertia, resistance, speed; "
            "friction and dead band >= 0; the no-load speed reachable)\n", path);
    return false;
  }
  return true;
}

static int motor_trace(double volts, double seconds) {
  rig::MotorModel m(g_motor);
  for (int k = 0; k <= (int)(seconds * 100 + 0.5); ++k) {
    printf("%.3f %.6f %d\n", k * 0.01, m.output_rpm(), (int)m.pulses());
    m.step(bridge(volts), 0.01);
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

int main(int argc, char** argv) {
  long baud = 115200;
  int control_hz = 1000;
  const char* link = nullptr;
  bool quiet = false;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--baud") && i + 1 < argc) baud = atol(argv[++i]);
    else if (!strcmp(argv[i], "--control-hz") && i + 1 < argc) control_hz = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--link") && i + 1 < argc) link = argv[++i];
    else if (!strcmp(argv[i], "--quiet")) quiet = true;
    else if (!strcmp(argv[i], "--motor-params") && i + 1 < argc) { if (!load_motor_params(argv[++i])) return 2; }
    else if (!strcmp(argv[i], "--pid-trace")) return pid_trace(i + 1 < argc && !strcmp(argv[i + 1], "published"));
    else if (!strcmp(argv[i], "--motor-trace") && i + 2 < argc) return motor_trace(atof(argv[i + 1]), atof(argv[i + 2]));
    else { fprintf(stderr, "rig_emulator: unknown argument %s\n", argv[i]); return 2; }
  }
  if (baud < 300 || baud > 10000000 || control_hz < 10 || control_hz > 20000) {
    fprintf(stderr, "rig_emulator: --baud must be 300..10000000 and --control-hz 10..20000\n");
    return 2;
  }
  int master = posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) { perror("rig_emulator: posix_openpt"); return 1; }
  const char* slave_name = ptsname(master);
  if (!slave_name) { perror("rig_emulator: ptsname"); return 1; }
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
  if (link) {
    // Replace only a symlink (an earlier emulator's); never delete a regular file or folder.
    struct stat st;
    if (lstat(link, &st) == 0) {
      if (!S_ISLNK(st.st_mode)) {
        fprintf(stderr, "rig_emulator: --link %s exists and is not a symbolic link; refusing to replace it\n", link);
        return 2;
      }
      unlink(link);
    }
    if (symlink(path, link) != 0) {
      fprintf(stderr, "rig_emulator: cannot create the link %s: %s\n", link, strerror(errno));
      return 2;
    }
  }
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  signal(SIGPIPE, SIG_IGN);
  printf("DEVICE %s\n", link ? link : path);
  fflush(stdout);
  if (!quiet) fprintf(stderr, "rig_emulator: %s at %ld baud, PID at %d Hz\n", path, baud, control_hz);

  rig::RigConfig cfg;
  cfg.control_hz = (uint16_t)control_hz;
  rig::RigCore core(cfg);
  static_assert(rig::N_MOTORS == 2, "one motor model per motor");
  rig::MotorModel motor[rig::N_MOTORS] = {rig::MotorModel(g_motor), rig::MotorModel(g_motor)};
  const double byte_time = 10.0 / baud;
  const double period = 1.0 / control_hz;
  const double t0 = now_s();
  double next_tick = t0;
  std::deque<std::pair<double, uint8_t>> rx;  // (arrival time, byte)
  double rx_wire_free = t0, tx_end = 0, last_read = t0;
  uint8_t tx_buf[rig::MAX_ENCODED + 2];
  size_t tx_len = 0;
  int16_t pwm[rig::N_MOTORS] = {0, 0};
  uint8_t rbuf[512];
  unsigned long long dropped_tx = 0;

  while (!g_stop) {
    double t = now_s();
    // 1. bytes from the host, stamped with the time they finish arriving on the wire. We
    // normally look every control tick (<= 1 ms), so new bytes were written just now. After a
    // stall of this process they were written while we did not look; on a cable they would
    // have been arriving since then, at line rate — so they are stamped from the previous
    // look on (the catch-up ticks below consume them at those times), instead of piling up
    // as a backlog that a real wire cannot have.
    const double written_from = (t - last_read > 0.005) ? last_read : t;
    for (;;) {
      ssize_t n = read(master, rbuf, sizeof(rbuf));
      if (n <= 0) break;
      for (ssize_t k = 0; k < n; ++k) {
        rx_wire_free = (rx_wire_free > written_from ? rx_wire_free : written_from) + byte_time;
        rx.push_back(std::make_pair(rx_wire_free, rbuf[k]));
      }
    }
    last_read = t;
    // 2. control ticks (motor model integrated up to each tick)
    int ticks = 0;
    while (next_tick <= t && ticks < 50) {
      while (!rx.empty() && rx.front().first <= next_tick) {
        core.on_rx_byte(rx.front().second, (uint32_t)((uint64_t)((rx.front().first - t0) * 1e6)));
        rx.pop_front();
      }
      for (int i = 0; i < rig::N_MOTORS; ++i) motor[i].step(bridge(pwm[i] * 12.0 / 255.0), period);
      int pc = core.take_power_command();
      if (pc >= 0) for (int i = 0; i < rig::N_MOTORS; ++i) motor[i].powered = (pc == 1);
      int32_t pos[rig::N_MOTORS];
      for (int i = 0; i < rig::N_MOTORS; ++i) pos[i] = motor[i].pulses();
      float supply = motor[0].powered ? (float)motor[0].supply : 0.0f;
      core.control_tick(pos, supply, (uint32_t)((uint64_t)((next_tick - t0) * 1e6)), pwm);
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
    while (!rx.empty() && rx.front().first <= t) {
      core.on_rx_byte(rx.front().second, (uint32_t)((uint64_t)((rx.front().first - t0) * 1e6)));
      rx.pop_front();
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
    for (size_t k = 0; k < rx.size(); ++k) {
      if (rx[k].second == 0) { if (rx[k].first < wake) wake = rx[k].first; break; }
    }
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
  if (!quiet)
    fprintf(stderr, "rig_emulator: stopped (rx frames %lu, dropped %lu, tx frames %lu, tx lost %llu)\n",
            (unsigned long)core.decoder().frames, (unsigned long)core.decoder().dropped,
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
