// rig_chip.cpp — the servo-rig firmware on a simulated ATmega328P (libsimavr), wired like the rig.
//
// The firmware ELF (envs/rig/chip.py build_firmware, board uno) runs on simavr's cycle-accurate
// core at 16 MHz. Around it this harness models the board's surroundings:
//   * UART0 <-> a pseudo-terminal: a host opens it like a USB serial port (armtwin's RigLink).
//     Bytes cross the "wire" at 10 bits each: host bytes enter the chip's UART no faster than the
//     host's baud rate, and the chip's bytes reach the pty when their last bit has left at the
//     chip's own baud rate (UBRR0 / U2X0), so rates and latencies are those of a cable;
//   * the motor supply on A0 through the 10 k / 3.3 k divider (12 V; a POWER message from the
//     host cuts / restores it, as in the host emulator);
//   * two DC gear motors (rig::MotorModel, the host emulator's model) driven from the H-bridge
//     pins (PWM D9/D10 = OC1A/OC1B, direction D7/D8, D11/D12), whose quadrature encoders drive
//     D2/D4 and D3/D5 edge by edge;
//   * an optional built-in host on the chip's clock (--drive-*), for measurements that must not
//     depend on how fast the PC running the simulation is.
//
// Everything is timed by the chip's cycle counter and written to --events FILE, one line each:
//   H freq=<Hz> cpb_host=<cycles per host byte>     header
//   TICK <c_start> <c_end>                  TIMING_PIN (D13) high..low: one control tick
//   PWM <c> <motor> <duty>                  the H-bridge input changed: signed duty -255..255
//   RX <c_end> <type> <seq>                 a host frame has fully arrived (its delimiter's stop bit)
//   RXBAD <c_end>                           a host frame that does not decode (sent on purpose by --drive-corrupt-at)
//   TX <c_end> <type> <seq> <echo> <faults> <t_us>  a chip frame has fully left the UART (t_us: its
//                                           header's time stamp, the firmware's micros())
//   POWER <c> <on>                          the harness cut (0) / restored (1) the motor supply
//   END <c> busy=<cycles> sp_min=<addr> overruns=<n>   at exit (busy: cycles with TIMING_PIN high
//                                           or interrupts disabled, i.e. control ticks + ISRs)
//
//   rig_chip --elf FILE [--events FILE] [--baud 115200] [--seconds S] [--fast] [--mcu atmega328p]
//            [--poke-pc ADDR --poke ADDR=U32 ...] [--drive-targets HZ] [--drive-stream HZ]
//            [--drive-silent-at S] [--drive-resume-at S] [--drive-remode-at S] [--drive-corrupt-at S]
//            [--drive-power-cut-at S] [--drive-power-restore-at S] [--drive-far] [--jam-at S] [--profile FILE] [--trace FROM:TO]
//
// --profile FILE: cycles spent at each program counter ("pc cycles" lines;
// `avr-addr2line -f` or the ELF's symbol table name them) — where a tick's time goes.
// It prints "DEVICE <pty>" (or "ERROR <why>", exit 2) on stdout, then runs in real time (the
// chip's clock paced to the wall clock; --fast: as fast as the PC can) until --seconds of chip
// time or SIGTERM. --poke writes a u32 into data memory when the program counter first reaches
// --poke-pc (e.g. `main`, after the C runtime cleared .bss): a test moves micros() to just before
// its 2^32 µs wrap by presetting timer0_overflow_count.
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <deque>
#include <vector>

#include "avr_adc.h"
#include "avr_ioport.h"
#include "avr_uart.h"
#include "sim_avr.h"
#include "sim_elf.h"
#include "sim_irq.h"

#include "../rig_core.h"

// ATmega328P data-space addresses (datasheet, register summary)
static const unsigned PORTB = 0x25, PORTD = 0x2B, TCCR1A = 0x80, OCR1AL = 0x88, OCR1BL = 0x8A;
static const unsigned UCSR0A = 0xC0, UBRR0L = 0xC4, UBRR0H = 0xC5, SPL = 0x5D, SPH = 0x5E;

static volatile sig_atomic_t g_stop = 0;
static void on_signal(int) { g_stop = 1; }

static double wall_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct Harness;
static Harness* H = nullptr;
static double h_jam_at = -1;  // --jam-at S: motor 1 (index 0) blocked from then on

// A frame collector: bytes until a 0x00, decoded with the firmware's own decoder functions.
struct FrameSniffer {
  uint8_t buf[rig::MAX_ENCODED + 8];
  size_t n = 0;
  bool overflow = false;
  // returns true on a delimiter; ok tells whether the frame decoded (raw / raw_len hold it)
  bool push(uint8_t b, bool& ok, uint8_t* raw, int& raw_len) {
    if (b != 0) {
      if (n < sizeof(buf)) buf[n++] = b; else overflow = true;
      return false;
    }
    ok = false;
    raw_len = 0;
    if (n && !overflow) {
      raw_len = rig::cobs_decode(buf, n, raw, rig::MAX_FRAME);
      if (raw_len >= (int)(rig::HEADER_SIZE + rig::CRC_SIZE)) {
        uint16_t crc = (uint16_t)((raw[raw_len - 2] << 8) | raw[raw_len - 1]);
        ok = rig::crc16_ccitt_false(raw, raw_len - 2) == crc;
      }
    }
    bool had = n > 0 || overflow;
    n = 0;
    overflow = false;
    return had;
  }
};

struct Harness {
  avr_t* avr = nullptr;
  FILE* ev = nullptr;
  int master = -1, keep = -1;
  double cpb_host = 0;          // cycles per host byte (10 bits at --baud)
  // host -> chip
  std::deque<uint8_t> rx_q;     // bytes waiting to start on the wire
  double rx_next = 0;           // cycle at which the next byte may start
  FrameSniffer rx_sniff;
  // chip -> host
  std::deque<std::pair<uint64_t, uint8_t>> tx_q;  // (cycle its stop bit ends, byte)
  uint64_t tx_free = 0;
  FrameSniffer tx_sniff;
  // motors
  rig::MotorModel motor[2];
  double supply_v = 12.0;
  bool powered = true;
  int quarter[2] = {0, 0};      // quadrature state counter (4 per encoder count)
  int duty[2] = {0, 0};
  avr_irq_t* enc_a[2];
  avr_irq_t* enc_b[2];
  avr_irq_t* adc0 = nullptr;
  avr_irq_t* uart_in = nullptr;
  // timing pin
  bool timing_high = false;
  uint64_t tick_start = 0;
  uint64_t busy = 0, last_cycle = 0;
  unsigned sp_min = 0xFFFF;
  unsigned long long overruns = 0;

  void event(const char* fmt, ...) __attribute__((format(printf, 2, 3)));

  avr_uart_t* uart0 = nullptr;

  // simavr 1.6 times a byte as start + 8 data + parity + stop = 11 bits even with parity off (8N1
  // is 10): its UART would send and receive 10 % slower than the chip's. The harness sets the
  // UART's byte time to the chip's true one whenever the firmware has (re)configured the baud rate.
  void fix_uart_byte_time() {
    if (!uart0 || !(avr->data[UBRR0L] | avr->data[UBRR0H])) return;
    avr_cycle_count_t want = cpb_chip();
    if (uart0->cycles_per_byte != want) uart0->cycles_per_byte = want;
  }

  uint64_t cpb_chip() const {  // the chip's own byte time (UBRR0, U2X0)
    unsigned ubrr = avr->data[UBRR0L] | ((avr->data[UBRR0H] & 0x0F) << 8);
    unsigned per_bit = (ubrr + 1) * ((avr->data[UCSR0A] & 0x02) ? 8 : 16);
    return (uint64_t)per_bit * 10;
  }

  void set_supply(bool on, uint64_t c) {
    powered = on;
    for (auto& m : motor) m.powered = on;
    // A0 = supply * 3.3 / 13.3 (the divider), in mV
    uint32_t mv = on ? (uint32_t)(supply_v * 3.3 / 13.3 * 1000.0 + 0.5) : 0;
    avr_raise_irq(adc0, mv);
    event("POWER %llu %d\n", (unsigned long long)c, on ? 1 : 0);
  }

  // a host frame decoded: log it; POWER switches the modelled supply (as the host emulator does)
  void on_host_frame(bool ok, const uint8_t* raw, int len, uint64_t c_end) {
    if (!ok) { event("RXBAD %llu\n", (unsigned long long)c_end); return; }
    uint8_t type = raw[1];
    uint16_t seq = (uint16_t)(raw[2] | (raw[3] << 8));
    event("RX %llu %u %u\n", (unsigned long long)c_end, type, seq);
    if (type == rig::MSG_POWER && len == (int)(rig::HEADER_SIZE + 1 + rig::CRC_SIZE))
      set_supply(raw[rig::HEADER_SIZE] != 0, c_end);
  }

  void on_chip_frame(bool ok, const uint8_t* raw, int len, uint64_t c_end) {
    if (!ok) { event("TXBAD %llu\n", (unsigned long long)c_end); return; }
    uint8_t type = raw[1];
    uint16_t seq = (uint16_t)(raw[2] | (raw[3] << 8));
    int echo = -1, faults = -1;
    if (type == rig::MSG_JOINT_STATES && len >= (int)rig::HEADER_SIZE + 2) {
      echo = raw[rig::HEADER_SIZE];
      faults = raw[rig::HEADER_SIZE + 1];
    }
    uint32_t t_us = (uint32_t)raw[4] | ((uint32_t)raw[5] << 8) | ((uint32_t)raw[6] << 16) | ((uint32_t)raw[7] << 24);
    event("TX %llu %u %u %d %d %lu\n", (unsigned long long)c_end, type, seq, echo, faults, (unsigned long)t_us);
  }

  // the H-bridge inputs as the pins set them: signed duty -255..255
  int read_duty(int i) const {
    const uint8_t* d = avr->data;
    uint8_t portb = d[PORTB], portd = d[PORTD], tccr1a = d[TCCR1A];
    bool pwm_on = i == 0 ? (tccr1a & 0x80) : (tccr1a & 0x20);     // COM1A1 / COM1B1: timer drives the pin
    int mag = pwm_on ? d[i == 0 ? OCR1AL : OCR1BL] : ((portb >> (i == 0 ? 1 : 2)) & 1) * 255;
    bool in_a = i == 0 ? (portd >> 7) & 1 : (portb >> 3) & 1;   // D7 / D11
    bool in_b = i == 0 ? portb & 1 : (portb >> 4) & 1;          // D8 / D12
    if (in_a && !in_b) return mag;
    if (in_b && !in_a) return -mag;
    return 0;  // both low or both high: the bridge does not drive
  }

  // Motors one step on; the encoder edges their new angles imply, one state at a time.
  void step_motors(double dt, uint64_t c) {
    for (int i = 0; i < 2; ++i) {
      int du = read_duty(i);
      if (du != duty[i]) {
        duty[i] = du;
        event("PWM %llu %d %d\n", (unsigned long long)c, i, du);
      }
      if (i == 0 && h_jam_at >= 0 && c >= (uint64_t)(h_jam_at * avr->frequency)) {
        motor[i].omega = 0;  // blocked: the shaft does not turn, whatever the voltage
      } else {
        motor[i].step(du * supply_v / 255.0, dt);
      }
      int q = (int)floor(motor[i].theta / (2 * M_PI) * motor[i].encoder_cpr() * 4.0 + 1e-9);
      while (quarter[i] != q) {
        quarter[i] += q > quarter[i] ? 1 : -1;
        // B leads A going forward: state 0 (A0 B0), 1 (A0 B1), 2 (A1 B1), 3 (A1 B0); A rises with
        // B high going forward (the firmware counts +1), with B low going back (-1)
        int s = ((quarter[i] % 4) + 4) % 4;
        avr_raise_irq(enc_b[i], s == 1 || s == 2);
        avr_raise_irq(enc_a[i], s >= 2);
      }
    }
  }
};

void Harness::event(const char* fmt, ...) {
  if (!ev) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(ev, fmt, ap);
  va_end(ap);
}

static void on_uart_out(avr_irq_t*, uint32_t value, void*) {
  Harness& h = *H;
  uint64_t start = h.avr->cycle > h.tx_free ? h.avr->cycle : h.tx_free;
  h.tx_free = start + h.cpb_chip();
  h.tx_q.push_back(std::make_pair(h.tx_free, (uint8_t)value));
}

static void on_timing_pin(avr_irq_t*, uint32_t value, void*) {
  Harness& h = *H;
  if (value && !h.timing_high) h.tick_start = h.avr->cycle;
  if (!value && h.timing_high)
    h.event("TICK %llu %llu\n", (unsigned long long)h.tick_start, (unsigned long long)h.avr->cycle);
  h.timing_high = value != 0;
}

// ----- the built-in host (on the chip's clock) ---------------------------------------------
struct Driver {
  double targets_hz = 0, stream_hz = 0, silent_at = -1, corrupt_at = -1, resume_at = -1, remode_at = -1;
  double power_cut_at = -1, power_restore_at = -1;
  bool far = false;                // targets far from the motors (full PWM), for the watchdog
  bool remoded = false, cut_sent = false, restore_sent = false;
  uint16_t seq = 0;
  uint64_t next_target = 0, last_tx = 0;
  int phase = 0;                   // 0 HELLO, 1 MODE, 2 running
  bool corrupted = false;
  bool active() const { return targets_hz > 0 || stream_hz > 0; }

  void send(Harness& h, uint8_t type, const uint8_t* body, size_t n, uint64_t c, bool corrupt = false) {
    uint8_t out[rig::MAX_ENCODED + 2];
    size_t m = rig::encode_frame(type, seq++, (uint32_t)(c / 16), body, n, out);
    if (corrupt) out[m / 2] ^= 0x01;  // one flipped bit (never the delimiter): the CRC catches it
    for (size_t k = 0; k < m; ++k) h.rx_q.push_back(out[k]);
    last_tx = c;
  }

  void poll(Harness& h, uint64_t c, double freq) {
    if (!active()) return;
    double t = c / freq;
    if (silent_at >= 0 && t >= silent_at && !(resume_at >= 0 && t >= resume_at)) return;
    if (phase == 2 && remode_at >= 0 && t >= remode_at && !remoded) { remoded = true; phase = 1; }
    if (phase == 2 && power_cut_at >= 0 && t >= power_cut_at && !cut_sent) {
      uint8_t b = 0;
      send(h, rig::MSG_POWER, &b, 1, c);
      cut_sent = true;
      return;
    }
    if (phase == 2 && power_restore_at >= 0 && t >= power_restore_at && !restore_sent) {
      uint8_t b = 1;
      send(h, rig::MSG_POWER, &b, 1, c);
      restore_sent = true;
      return;
    }
    if (phase == 0 && t >= 0.05) {
      uint8_t b[rig::HELLO_SIZE] = {0};
      b[1] = rig::N_MOTORS;
      send(h, rig::MSG_HELLO, b, sizeof(b), c);
      phase = 1;
      return;
    }
    if (phase == 1 && (t >= 0.06 || remoded)) {
      uint16_t hz = (uint16_t)(stream_hz > 0 ? stream_hz : 500);
      uint8_t b[4] = {(uint8_t)(targets_hz > 0 ? rig::MODE_VIRTUAL_TO_REAL : rig::MODE_REAL_TO_VIRTUAL),
                      (uint8_t)(hz & 0xFF), (uint8_t)(hz >> 8), (uint8_t)(targets_hz > 0 ? 0 : rig::MODE_FLAG_LOCAL_DEMO)};
      send(h, rig::MSG_MODE, b, 4, c);
      phase = 2;
      next_target = c + (uint64_t)(0.01 * freq);
      return;
    }
    if (phase != 2) return;
    if (targets_hz > 0 && c >= next_target) {
      next_target += (uint64_t)(freq / targets_hz);
      // a 1 Hz sine of ±20° on motor 1, ±10° on motor 2 (pulses: 37.5 per degree); --drive-far: ±800°, a second of full PWM
      double ts = t - 0.07;
      int16_t p0 = far ? 30000 : (int16_t)lround(750.0 * sin(2 * M_PI * ts));
      int16_t p1 = far ? -30000 : (int16_t)lround(375.0 * sin(2 * M_PI * ts));
      uint8_t b[4] = {(uint8_t)(p0 & 0xFF), (uint8_t)((uint16_t)p0 >> 8), (uint8_t)(p1 & 0xFF), (uint8_t)((uint16_t)p1 >> 8)};
      bool corrupt = corrupt_at >= 0 && t >= corrupt_at && !corrupted;
      if (corrupt) corrupted = true;
      if (h.rx_q.size() < 16) send(h, rig::MSG_JOINT_TARGETS, b, 4, c, corrupt);  // a host never queues targets
    } else if (c - last_tx >= (uint64_t)(0.02 * freq)) {
      send(h, rig::MSG_HEARTBEAT, nullptr, 0, c);
    }
  }
};

static int fail(const char* msg) {
  printf("ERROR %s\n", msg);
  fflush(stdout);
  return 2;
}

int main(int argc, char** argv) {
  const char* elf_path = nullptr;
  const char* events = nullptr;
  const char* mcu = "atmega328p";
  long baud = 115200;
  double seconds = 0;
  bool fast = false;
  unsigned long poke_pc = 0;
  bool have_poke_pc = false;
  std::vector<std::pair<unsigned long, unsigned long>> pokes;
  Driver drv;
  const char* profile = nullptr;
  unsigned long long trace_from = 0, trace_to = 0;
  char why[512];
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    bool more = i + 1 < argc;
    if (!strcmp(a, "--elf") && more) elf_path = argv[++i];
    else if (!strcmp(a, "--events") && more) events = argv[++i];
    else if (!strcmp(a, "--mcu") && more) mcu = argv[++i];
    else if (!strcmp(a, "--baud") && more) baud = atol(argv[++i]);
    else if (!strcmp(a, "--seconds") && more) seconds = atof(argv[++i]);
    else if (!strcmp(a, "--fast")) fast = true;
    else if (!strcmp(a, "--poke-pc") && more) { poke_pc = strtoul(argv[++i], nullptr, 0); have_poke_pc = true; }
    else if (!strcmp(a, "--poke") && more) {
      char* eq = nullptr;
      unsigned long addr = strtoul(argv[++i], &eq, 0);
      if (!eq || *eq != '=') return fail("--poke wants ADDR=VALUE");
      pokes.push_back(std::make_pair(addr, strtoul(eq + 1, nullptr, 0)));
    }
    else if (!strcmp(a, "--drive-targets") && more) drv.targets_hz = atof(argv[++i]);
    else if (!strcmp(a, "--drive-stream") && more) drv.stream_hz = atof(argv[++i]);
    else if (!strcmp(a, "--drive-silent-at") && more) drv.silent_at = atof(argv[++i]);
    else if (!strcmp(a, "--drive-corrupt-at") && more) drv.corrupt_at = atof(argv[++i]);
    else if (!strcmp(a, "--drive-far")) drv.far = true;
    else if (!strcmp(a, "--drive-resume-at") && more) drv.resume_at = atof(argv[++i]);
    else if (!strcmp(a, "--drive-remode-at") && more) drv.remode_at = atof(argv[++i]);
    else if (!strcmp(a, "--drive-power-cut-at") && more) drv.power_cut_at = atof(argv[++i]);
    else if (!strcmp(a, "--drive-power-restore-at") && more) drv.power_restore_at = atof(argv[++i]);
    else if (!strcmp(a, "--jam-at") && more) h_jam_at = atof(argv[++i]);
    else if (!strcmp(a, "--profile") && more) profile = argv[++i];
    else if (!strcmp(a, "--trace") && more) {  // --trace FROM:TO cycles: "pc cycle" of every instruction to stderr
      char* colon = nullptr;
      trace_from = strtoull(argv[++i], &colon, 0);
      trace_to = (colon && *colon == ':') ? strtoull(colon + 1, nullptr, 0) : trace_from;
    }
    else { snprintf(why, sizeof(why), "unknown argument %s", a); return fail(why); }
  }
  if (!elf_path) return fail("--elf FILE is required");
  if (baud < 300 || baud > 2000000 || seconds < 0 || (!pokes.empty() && !have_poke_pc))
    return fail("--baud must be 300..2000000, --seconds >= 0, --poke needs --poke-pc");

  elf_firmware_t fw;
  memset(&fw, 0, sizeof(fw));
  fflush(stdout);
  int saved_stdout = dup(1), devnull = open("/dev/null", O_WRONLY);
  if (devnull >= 0) dup2(devnull, 1);  // simavr's loader prints "Loaded …": our first line must be DEVICE
  int elf_rc = elf_read_firmware(elf_path, &fw);
  fflush(stdout);
  if (saved_stdout >= 0) { dup2(saved_stdout, 1); close(saved_stdout); }
  if (devnull >= 0) close(devnull);
  if (elf_rc != 0) {
    snprintf(why, sizeof(why), "cannot read the firmware %s", elf_path);
    return fail(why);
  }
  avr_t* avr = avr_make_mcu_by_name(mcu);
  if (!avr) { snprintf(why, sizeof(why), "simavr does not know the MCU %s", mcu); return fail(why); }
  avr_init(avr);
  avr->log = 0;  // no simavr chatter on stdout: the first line there is ours
  avr_load_firmware(avr, &fw);
  avr->frequency = 16000000;
  avr->vcc = avr->avcc = avr->aref = 5000;

  static Harness h;
  H = &h;
  h.avr = avr;
  h.cpb_host = 10.0 * avr->frequency / baud;
  if (events) {
    h.ev = fopen(events, "w");
    if (!h.ev) { snprintf(why, sizeof(why), "cannot write %s: %s", events, strerror(errno)); return fail(why); }
  }
  h.event("H freq=%u cpb_host=%.3f\n", avr->frequency, h.cpb_host);

  // UART0: no console echo, no polling sleep (it would slow the chip's polling loop)
  uint32_t flags = 0;
  avr_ioctl(avr, AVR_IOCTL_UART_GET_FLAGS('0'), &flags);
  flags &= ~(AVR_UART_FLAG_STDIO | AVR_UART_FLAG_POLL_SLEEP);
  avr_ioctl(avr, AVR_IOCTL_UART_SET_FLAGS('0'), &flags);
  avr_irq_register_notify(avr_io_getirq(avr, AVR_IOCTL_UART_GETIRQ('0'), UART_IRQ_OUTPUT), on_uart_out, nullptr);
  h.uart_in = avr_io_getirq(avr, AVR_IOCTL_UART_GETIRQ('0'), UART_IRQ_INPUT);
  for (avr_io_t* io = avr->io_port; io; io = io->next)
    if (io->kind && !strcmp(io->kind, "uart") && ((avr_uart_t*)io)->name == '0') h.uart0 = (avr_uart_t*)io;
  // D13 = PB5: the firmware's timing pin
  avr_irq_register_notify(avr_io_getirq(avr, AVR_IOCTL_IOPORT_GETIRQ('B'), 5), on_timing_pin, nullptr);
  // encoders: A on D2/D3 (INT0/INT1), B on D4/D5
  for (int i = 0; i < 2; ++i) {
    h.enc_a[i] = avr_io_getirq(avr, AVR_IOCTL_IOPORT_GETIRQ('D'), 2 + i);
    h.enc_b[i] = avr_io_getirq(avr, AVR_IOCTL_IOPORT_GETIRQ('D'), 4 + i);
    avr_raise_irq(h.enc_a[i], 0);
    avr_raise_irq(h.enc_b[i], 0);
  }
  h.adc0 = avr_io_getirq(avr, AVR_IOCTL_ADC_GETIRQ, ADC_IRQ_ADC0);
  h.set_supply(true, 0);

  // the pseudo-terminal (as the host emulator makes it)
  h.master = posix_openpt(O_RDWR | O_NOCTTY);
  const char* slave = (h.master >= 0 && grantpt(h.master) == 0 && unlockpt(h.master) == 0) ? ptsname(h.master) : nullptr;
  if (!slave) { snprintf(why, sizeof(why), "cannot create a pseudo-terminal: %s", strerror(errno)); return fail(why); }
  char path[256];
  snprintf(path, sizeof(path), "%s", slave);
  h.keep = open(path, O_RDWR | O_NOCTTY);
  if (h.keep >= 0) {
    termios tio;
    if (tcgetattr(h.keep, &tio) == 0) { cfmakeraw(&tio); tcsetattr(h.keep, TCSANOW, &tio); }
  }
  fcntl(h.master, F_SETFL, fcntl(h.master, F_GETFL) | O_NONBLOCK);
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  signal(SIGPIPE, SIG_IGN);
  printf("DEVICE %s\n", path);
  fflush(stdout);

  const double freq = avr->frequency;
  const uint64_t motor_step = 64;                 // 4 µs: every encoder state change is its own edge
  const uint64_t io_step = (uint64_t)(freq / 10000);  // 100 µs: look at the pty, pace to the wall clock
  const uint64_t end_cycle = seconds > 0 ? (uint64_t)(seconds * freq) : UINT64_MAX;
  uint64_t next_motor = motor_step, next_io = io_step;
  const double t0 = wall_s();
  bool poked = pokes.empty();
  uint8_t raw[rig::MAX_FRAME];
  uint8_t rbuf[512];
  int state = cpu_Running;
  std::vector<uint64_t> prof(profile ? 0x40000 : 0);  // cycles per program counter (byte address)
  while (!g_stop && avr->cycle < end_cycle) {
    if (!poked && avr->pc == poke_pc) {
      for (auto& p : pokes)
        for (int k = 0; k < 4; ++k) avr->data[p.first + k] = (uint8_t)(p.second >> (8 * k));
      poked = true;
    }
    avr_flashaddr_t pc = avr->pc;
    state = avr_run(avr);
    if (state == cpu_Done || state == cpu_Crashed) break;
    uint64_t c = avr->cycle;
    if (profile && h.timing_high && pc < prof.size()) prof[pc] += c - h.last_cycle;
    if (c >= trace_from && c < trace_to) fprintf(stderr, "%u %llu\n", (unsigned)pc, (unsigned long long)c);
    if (h.timing_high || !avr->sreg[S_I]) h.busy += c - h.last_cycle;
    h.last_cycle = c;
    unsigned sp = avr->data[SPL] | (avr->data[SPH] << 8);
    if (sp < h.sp_min && c > 1000) h.sp_min = sp;
    if (c >= next_motor) {
      h.step_motors((c - next_motor + motor_step) / freq, c);
      next_motor += motor_step;
      if (next_motor <= c) next_motor = c + motor_step;
    }
    // host bytes onto the wire, one per host byte time
    if (!h.rx_q.empty() && c >= (uint64_t)h.rx_next) {
      uint8_t b = h.rx_q.front();
      h.rx_q.pop_front();
      avr_raise_irq(h.uart_in, b);
      double start = h.rx_next > (double)c ? h.rx_next : (double)c;
      h.rx_next = start + h.cpb_host;
      bool ok;
      int len;
      if (h.rx_sniff.push(b, ok, raw, len)) h.on_host_frame(ok, raw, len, (uint64_t)h.rx_next);
    }
    // chip bytes whose stop bit has ended reach the host
    while (!h.tx_q.empty() && h.tx_q.front().first <= c) {
      uint8_t b = h.tx_q.front().second;
      h.tx_q.pop_front();
      bool ok;
      int len;
      if (h.tx_sniff.push(b, ok, raw, len)) h.on_chip_frame(ok, raw, len, c);
      if (write(h.master, &b, 1) != 1) { /* nobody reading: lost, as on a wire */ }
    }
    if (c >= next_io) {
      next_io += io_step;
      h.fix_uart_byte_time();
      drv.poll(h, c, freq);
      for (;;) {  // the host's bytes (real-time mode; a flood beyond a second of wire time is dropped)
        ssize_t n = read(h.master, rbuf, sizeof(rbuf));
        if (n <= 0) break;
        for (ssize_t k = 0; k < n; ++k) {
          if (h.rx_q.size() < (size_t)(baud / 10)) h.rx_q.push_back(rbuf[k]);
          else ++h.overruns;
        }
      }
      if (h.rx_q.empty() && h.rx_next < (double)c) h.rx_next = (double)c;  // an idle wire starts now
      if (!fast) {  // the chip's clock follows the wall clock
        double ahead = c / freq - (wall_s() - t0);
        if (ahead > 0.0005) {
          pollfd pfd = {h.master, POLLIN, 0};
          timespec to = {0, (long)(ahead * 1e9)};
          ppoll(&pfd, 1, &to, nullptr);
        }
      }
      if (h.ev && (c / io_step) % 100 == 0) fflush(h.ev);
    }
  }
  h.event("END %llu busy=%llu sp_min=%u overruns=%llu state=%d\n", (unsigned long long)avr->cycle,
          (unsigned long long)h.busy, h.sp_min, h.overruns, state);
  if (h.ev) fclose(h.ev);
  if (profile) {  // "pc cycles" for the program counters seen inside control ticks
    FILE* pf = fopen(profile, "w");
    if (pf) {
      for (size_t k = 0; k < prof.size(); ++k)
        if (prof[k]) fprintf(pf, "%zu %llu\n", k, (unsigned long long)prof[k]);
      fclose(pf);
    }
  }
  close(h.master);
  if (h.keep >= 0) close(h.keep);
  return state == cpu_Crashed ? 3 : 0;
}
