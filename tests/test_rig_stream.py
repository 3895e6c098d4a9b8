"""The rig byte stream as the host sees it: lost, repeated, reordered and corrupt frames, reboots.

Issue 15.19: the host took a repeated or reordered rig frame for a reboot and sent MODE again
(resetting the rig's PIDs and targets), and counted +499 lost frames for one frame whose number
jumped by 500. Now a reboot is seen only from the rig's boot id (protocol 2: in HELLO, which the
rig also sends by itself when it boots), and :class:`~armtwin.controllers.rigstream.SeqTracker`
counts exactly the frames that never arrived.

The fuzz tests state the promise for any seeded mix of lost, corrupted, repeated and reordered
frames and line noise: the host never crashes, acts only on fresh states (the twin never moves
back to an old position), sends MODE once, and counts every frame: lost = frames that never
arrived intact, repeated = duplicates, late = reordered ones.
"""

from __future__ import annotations

import random
import threading
import time

import numpy as np
import pytest

from armtwin.controllers import rigproto as rp
from armtwin.controllers.rigstream import Arrival, RigClock, SeqTracker
from armtwin.envs.rig import LinkConfig, RigLink

from rig_fakes import FakeRig, Mangler, positions_of

HANG = 30.0  # s: bounds a hang only


# ----- the tracker alone --------------------------------------------------------------------

def test_one_frame_far_out_of_place_moves_no_counter_but_stray():
    t = SeqTracker()
    arrivals = [t.accept(s) for s in (100, 101, 102, 602, 103, 104, 105)]  # 602: a frame 500 ahead
    assert arrivals.count(Arrival.STRAY) == 1 and t.lost == 0 and t.stray == 1
    t = SeqTracker()
    arrivals = [t.accept(s) for s in (1000, 1001, 501, 1002)]  # a frame 500 behind (a replay)
    assert arrivals == [Arrival.NEW, Arrival.NEW, Arrival.STRAY, Arrival.NEW] and t.lost == 0


def test_a_long_loss_is_counted_once_the_next_frame_confirms_it():
    t = SeqTracker()
    for s in range(10):
        t.accept(s)
    assert t.accept(510) is Arrival.STRAY and t.lost == 0
    assert t.accept(511) is Arrival.NEW and t.lost == 500 and t.stray == 0  # 10..509 never came
    assert t.accept(509) is Arrival.LATE and t.lost == 499


def test_a_restarted_counter_is_a_new_stream_not_a_loss():
    t = SeqTracker()
    for s in range(30000, 30010):
        t.accept(s)
    assert [t.accept(s) for s in (0, 1, 2)] == [Arrival.STRAY, Arrival.NEW, Arrival.NEW]
    assert t.lost == 0 and t.restarts == 1


@pytest.mark.parametrize("seed", range(40))
def test_counts_are_exact_for_any_loss_repeat_and_reorder_across_the_wrap(seed):
    """Property: with losses, duplicates (up to 20 frames later) and reordering (up to 8) of a
    stream that wraps at 65536, lost = numbers that never arrived, repeated = extra copies, and
    every number is NEW or LATE exactly once."""
    rng = random.Random(seed)
    start = rng.randrange(65536)
    n = 3000
    order: list[tuple[int, int]] = []  # (position in the stream, seq)
    for k in range(n):
        if k > 0 and rng.random() < 0.05:
            continue  # lost
        pos = k + (rng.randint(1, 8) if rng.random() < 0.05 else 0)
        order.append((pos, k))
        if rng.random() < 0.05:
            order.append((k + rng.randint(1, 20), k))  # a repeat
    order.sort(key=lambda x: x[0])  # stable: a delayed frame lands after the ones it waited for
    order.append((n + 100, n))  # a last frame, so every loss is followed by a newer frame
    t = SeqTracker()
    seen: dict[int, list[Arrival]] = {}
    for _, k in order:
        seen.setdefault(k, []).append(t.accept((start + k) & 0xFFFF))
    arrived = set(seen)
    assert t.lost == (n + 1) - len(arrived)
    assert t.repeated == len(order) - len(arrived)
    assert t.stray == 0 and t.restarts == 0
    for k, arr in seen.items():
        assert arr[0] in (Arrival.NEW, Arrival.LATE) and all(a is Arrival.REPEATED for a in arr[1:])


def test_the_window_bounds_memory():
    t = SeqTracker(window=1024, jump=64)
    for s in range(0, 200000, 60):  # 59 of every 60 lost
        t.accept(s & 0xFFFF)
    assert len(t._missing) <= 1024 and len(t._order) <= 1024 + 64  # noqa: SLF001 - the bound is the point


# ----- the host link against a scripted rig ---------------------------------------------------

def _run_link(rig: FakeRig, config: LinkConfig | None = None, *, sample=None):
    """Open a link to ``rig``, select REAL_TO_VIRTUAL, let the rig stream everything; returns the link
    (closed) and what ``sample(link)`` collected meanwhile.

    Also checks that no MODE was sent after the host had the rig's echo: a MODE before it is the
    link's retry (the echo may be slow on a loaded machine), one after it would be a reset of
    the rig for nothing."""
    link = RigLink(rig.device, config or LinkConfig()).open()
    got = []
    t_ack = None
    try:
        link.set_mode(rp.Mode.REAL_TO_VIRTUAL)
        end = time.monotonic() + HANG
        while not rig.done.is_set() and time.monotonic() < end:
            if t_ack is None and link.mode_ack is not None:
                t_ack = time.monotonic()
            if sample is not None:
                sample(link, got)
            time.sleep(0.0005)
        assert rig.done.is_set(), "the rig did not finish its stream"
        n = -1
        while n != link.stats.frames_rx + link.stats.dropped and time.monotonic() < end:  # until the host read it all
            n = link.stats.frames_rx + link.stats.dropped
            time.sleep(0.05)
        assert link._thread is not None and link._thread.is_alive()  # noqa: SLF001 - the reader never died
    finally:
        link.close()
    assert t_ack is not None, "the rig's MODE echo never reached the host"
    late = [round(t - t_ack, 3) for t, m in rig.modes_rx if m is rp.Mode.REAL_TO_VIRTUAL and t > t_ack + 0.05]
    st = link.stats
    assert not late, (f"MODE sent again {late} s after the host had the rig's echo (reboots {st.reboots}, "
                      f"disconnects {st.disconnects}, reconnects {st.reconnects}, last error {link.last_error!r})")
    return link, got


def _fresh_only(link: RigLink, got: list) -> None:
    s = link.latest()
    if s is not None and (not got or got[-1].seq != s.seq or got[-1].t != s.t):
        got.append(s)


def _check_acted_on_fresh_states_only(got: list, boot: int = 0) -> None:
    """Every state the host exposed is a real one (positions of its seq) and the exposed seq only grows."""
    assert got, "no state was exposed"
    seqs = np.array([s.seq for s in got])
    steps = (np.diff(seqs) + 0x8000) % 0x10000 - 0x8000
    assert np.all(steps > 0), f"the host acted on an older state: seq steps {sorted(set(steps.tolist()))[:5]}"
    for s in got:
        assert tuple(s.positions) == positions_of(s.seq, boot)


def test_repeated_and_reordered_frames_neither_resend_mode_nor_count_as_lost():
    """Issue 15.19 (regression): 5 % repeats and 5 % reordering for 2 s made the host send MODE
    again several times and inflated the lost count."""
    rig = FakeRig(2000, Mangler(3, repeat=0.05, reorder=0.05))
    try:
        link, got = _run_link(rig, sample=_fresh_only)
    finally:
        rig.close()
    m, st = rig.mangler, link.stats
    assert st.lost == 0 == len(set(m.sent_states) - m.delivered)
    assert st.repeated == m.repeats > 50 and st.late == m.reordered > 50 and st.reboots == 0 and st.stray == 0
    _check_acted_on_fresh_states_only(got)


@pytest.mark.parametrize("distance, counter", [(500, "repeated"), (1300, "stray")])
def test_a_frame_far_out_of_place_inflates_nothing(distance, counter):
    """The +499 of the issue: one frame repeated 500 numbers later (a duplicate the host still
    remembers), or 1300 later (beyond its window: a stray frame)."""
    class Replay(Mangler):
        def push(self, key, frame):
            if key[1] == 100:
                self.kept = frame
            out = super().push(key, frame)
            return out + self.kept if key[1] == 100 + distance else out

    rig = FakeRig(distance + 300, Replay(0))
    try:
        link, got = _run_link(rig, sample=_fresh_only)
    finally:
        rig.close()
    st = link.stats
    assert st.lost == 0 and st.reboots == 0
    assert (st.repeated, st.stray) == ((1, 0) if counter == "repeated" else (0, 1))
    _check_acted_on_fresh_states_only(got)


@pytest.mark.parametrize("announce", [True, False])
def test_a_reboot_is_seen_from_the_boot_id_and_the_mode_is_sent_again(announce):
    """A rebooted rig says so with a new boot id: in its own HELLO at boot, or (if that was lost)
    in the answer to the host's periodic HELLO. Either way the host sends MODE again, until the
    rebooted rig echoes it — and not after that."""
    rig = FakeRig(3000, rate_hz=1000.0)
    link = RigLink(rig.device, LinkConfig(hello_s=0.2)).open()
    end = time.monotonic() + HANG

    def wait(cond):
        while not cond():
            assert time.monotonic() < end
            time.sleep(0.0005)

    try:
        link.set_mode(rp.Mode.REAL_TO_VIRTUAL)
        wait(lambda: rig.states_written >= 500 and link.mode_ack is not None)
        boot0, n_modes = link.boot_id, rig.modes()
        assert boot0 == 1 and link.stats.reboots == 0
        rig.reboot(announce=announce)
        wait(lambda: link.stats.reboots == 1)
        assert link.boot_id != boot0
        wait(lambda: link.mode_ack is not None)
        t_ack = time.monotonic()
        assert rig.modes() > n_modes  # sent again to the rebooted rig
        rig.done.wait(HANG)
        time.sleep(0.1)
        assert not [t for t, m in rig.modes_rx if m is rp.Mode.REAL_TO_VIRTUAL and t > t_ack + 0.05]
        assert link.stats.lost == 0 and link.stats.reboots == 1  # the new boot's numbers start a new stream
        s = link.latest()
        assert tuple(s.positions) == positions_of(s.seq, 1)  # the host follows the rebooted rig
    finally:
        link.close()
        rig.close()


def _fuzz(seed: int, n_states: int, rate_hz: float = 2000.0) -> None:
    rng = random.Random(seed)
    p = {k: rng.choice([0.0, 0.01, 0.05, 0.2]) for k in ("drop", "corrupt", "repeat", "reorder", "garbage")}
    rig = FakeRig(n_states, Mangler(seed, **p), rate_hz=rate_hz, burst=rng.choice([1, 4, 16]))
    try:
        link, got = _run_link(rig, sample=_fresh_only)
    finally:
        rig.close()
    m, st = rig.mangler, link.stats
    never = set(m.sent_states) - m.delivered
    assert st.lost == len(never), (p, st.lost, len(never))
    assert st.repeated == m.repeats and st.stray == 0 and st.reboots == 0
    assert st.late <= m.reordered
    if p["corrupt"] or p["garbage"]:
        assert st.dropped > 0
    _check_acted_on_fresh_states_only(got)


@pytest.mark.parametrize("seed", range(4))
def test_fuzzed_rig_stream_is_survived_and_counted(seed):
    _fuzz(seed, 1500)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4, 24))
def test_fuzzed_rig_stream_is_survived_and_counted_long(seed):
    """4000 states at 8 kHz, eight times the real link's rate: many frames reach the host in one
    read (the pty never drops them, the rig's writes block), and the counts must stay exact."""
    _fuzz(seed, 4000, rate_hz=8000.0)


def test_the_twin_follows_only_fresh_states_real_to_virtual():
    """Real → virtual through a mangled stream: the simulated joints only ever take a state
    newer than the one before (never an old position again), each exactly as the rig sent it."""
    from armtwin.envs.rig import Direction, SyncConfig, TwinSync
    from armtwin.envs.sim import PhysicsConfig, World
    from armtwin.robots import get
    spec = get("irb120")
    rig = FakeRig(3000, Mangler(11, repeat=0.1, reorder=0.1, corrupt=0.05, garbage=0.05), rate_hz=1000.0)
    samples = []
    stop = threading.Event()

    def on_sample(s):
        samples.append((s, None if s.rig_state is None else s.rig_state.seq))
        if rig.done.is_set():
            stop.set()

    try:
        with World(PhysicsConfig(dt=1 / 500)) as world, RigLink(rig.device) as link:
            robot = world.add_robot(spec)
            TwinSync(robot, link, SyncConfig((0, 1), Direction.REAL_TO_VIRTUAL)).run(HANG, stop=stop, on_sample=on_sample)
    finally:
        rig.close()
    seqs = [q for _, q in samples if q is not None]
    steps = (np.diff(seqs) + 0x8000) % 0x10000 - 0x8000
    assert len(seqs) > 100 and np.all(steps >= 0)  # the same state again (no new one yet) or a newer one
    lo, hi = np.degrees(spec.lower[:2]), np.degrees(spec.upper[:2])
    for s, q in samples:
        if q is not None:
            want = np.clip(np.array(positions_of(q, 0)) / 37.5, lo, hi)
            np.testing.assert_allclose(s.virtual_deg, want, atol=1e-9)


def _clock_states(seed: int, n: int = 5000, ppm: float = 80.0):
    """States every 2 ms of a rig whose crystal runs ``ppm`` fast and whose µs counter wraps during
    the run, arriving after a 1.9 ms frame, 50 µs and an exponential 0.5 ms, with 15 ms stalls: (host
    times the states were taken, their t_us, their arrivals)."""
    rng = np.random.default_rng(seed)
    taken = 100.0 + np.arange(n) * 0.002
    rig_us = np.mod(np.floor(((taken - 100.0) * (1 + ppm * 1e-6) + 4289.967) * 1e6), 2.0 ** 32)  # wraps after 5 s
    late = 0.0019 + 0.00005 + rng.exponential(0.0005, n)
    late[rng.choice(n, 10, replace=False)] += 0.015
    return taken, rig_us, taken + late


def test_rig_clock_maps_host_times_onto_a_drifting_wrapping_rig_clock():
    """After a few states the map is usable; after 10 s of them a host time maps onto the rig's
    clock within 0.15 ms (the host's least read latency and the envelope's error), through the
    counter's wrap and a crystal 80 ppm fast (8 ms over the run if the drift were ignored)."""
    taken, rig_us, arrival = _clock_states(1)
    assert np.any(np.diff(rig_us) < 0)                       # the counter wrapped
    clock = RigClock(0.0019)
    with pytest.raises(RuntimeError):
        clock.rig_us(arrival[0])
    errs = []
    for k, (a, r) in enumerate(zip(arrival, rig_us)):
        clock.observe(float(a), int(r))
        if k >= 5000 - 500:                                   # the last second: 9 s of states seen
            q = taken[k] + 0.0007                              # a host time between two states
            truth = np.mod(((q - 100.0) * (1 + 80e-6) + 4289.967) * 1e6, 2.0 ** 32)
            d = (clock.rig_us(q) - truth + 2 ** 31) % 2 ** 32 - 2 ** 31
            errs.append(d)
    assert clock.ready
    errs = np.abs(errs)
    assert errs.max() < 150, errs.max()                       # µs


def test_rig_clock_answers_never_jump_and_a_rig_clock_that_goes_back_starts_afresh():
    """Successive answers move by the elapsed time and at most ``slew_s`` more — also when the
    estimate jumps (a first arrival 3 ms late, then a fast one) — so a target's time never jumps; a
    rig clock that goes back (a reboot) makes the map unknown until enough states came again."""
    clock = RigClock(0.0019, min_states=2, slew_s=20e-6)
    clock.observe(10.003, 1_000_000)                          # late: offset 3 ms too high
    clock.observe(10.005, 1_002_000)
    first = clock.rig_us(10.006)
    clock.observe(10.0059, 1_004_000)                         # a fast one: the estimate moves 1.1 ms
    answers = [first] + [clock.rig_us(10.006 + 0.002 * k) for k in range(1, 200)]
    steps = np.diff(answers)
    assert first == 1_004_900
    assert np.all(np.abs(steps - 2000) <= 20 + 1)             # never more than the slew off the clock's pace
    assert np.all(steps[:50] >= 2019)                         # catching up 20 µs a time …
    assert answers[-1] == round((10.006 + 0.002 * 199 - (10.0059 - 0.0019 - 1.004)) * 1e6)  # … all the way
    clock.observe(10.5, 5_000)                               # the rig's clock went back: it rebooted
    assert not clock.ready

