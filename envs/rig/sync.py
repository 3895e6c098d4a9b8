"""The twin session: one sample at a time between a simulated robot and the rig.

* :class:`TwinSync` runs one direction of the twin per sample: VIRTUAL_TO_REAL (the simulated
  joints command the rig through JOINT_TARGETS) or REAL_TO_VIRTUAL (the rig's measured joints
  drive the simulated joints through :meth:`SimRobot.command`). Each sample has ΔE =
  E_virtual − E_servo (deg, per mapped joint), the latency (ms, command out → state echoing it
  back) and the fault flags of every state since the previous sample; a :class:`TwinLog`
  writes them. :meth:`TwinSync.run` keeps a fixed tick schedule: every tick is either sampled
  or, after a host stall longer than ``max_late_s``, skipped — counted in the report and
  flagged ``LATE`` in the log, never silently.
* :func:`smooth_motion` — the built-in joint motion of ``armtwin sync``.

No PyBullet here: the robot is a :class:`armtwin.envs.sim.SimRobot` from the World facade.
Units: deg and ms at the sample/log level, rad inside the robot, encoder pulses on the wire.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ...controllers import rigproto as rp
from ...controllers.choices import Choice
from ...controllers.ramp import Ramp, SlewLimiter, plan_ramp
from ...controllers.servo import PULSES_PER_DEG
from .link import RigLink, RigLinkError
from .log import SampleLog, SyncSample

__all__ = ["Direction", "SyncConfig", "FaultEvent", "PowerCommand", "RampInfo", "SyncReport", "TwinSync",
           "smooth_motion", "connect", "RigNoAnswer", "RigProtocolMismatch", "RigLoop"]


class Direction(Choice):
    """Which side leads."""

    __label__ = "direction"

    VIRTUAL_TO_REAL = "virtual-to-real"
    REAL_TO_VIRTUAL = "real-to-virtual"


@dataclass(frozen=True)
class SyncConfig:
    """Settings of a :class:`TwinSync`.

    Attributes:
        joints: 0-based indices of the robot joints mapped to rig motors 1, 2 (revolute only).
        direction: which side leads.
        rate_hz: loop rate of :meth:`TwinSync.run`, Hz.
        stream_hz: REAL_TO_VIRTUAL: the rig's state stream rate, Hz.
        local_demo: REAL_TO_VIRTUAL: let the rig move its motors along its built-in sine
            (for a rig without a person turning the shafts; the emulator).
        max_late_s: :meth:`TwinSync.run` takes samples that are late by up to this much back to
            back (catching up with its tick schedule); when the host stalled for longer, the
            missed ticks are skipped instead — counted in ``SyncReport.ticks_skipped`` and
            flagged ``Fault.LATE`` on the first sample after the gap, s.
        ramp: VIRTUAL_TO_REAL with a ``source``: :meth:`TwinSync.run` first moves the rig (and
            the simulated joints with it) from the rig's *measured* joints to the source's first
            target along a :func:`~armtwin.controllers.ramp.plan_ramp` move, then starts the
            source — never a step.
        ramp_speed: the ramp's speed limit, as a share of each joint's speed limit (0, 1].
        ramp_accel_s: the ramp reaches its speed limit in this long at the most: acceleration
            limit = speed limit / ``ramp_accel_s``, s.
        limit_speed: VIRTUAL_TO_REAL: pass every target through a
            :class:`~armtwin.controllers.ramp.SlewLimiter` that starts from the rig's measured
            joints (and again after the rig stopped: power cut, watchdog, link lost), at this
            share of each joint's speed limit and speed / ``ramp_accel_s`` — for leaders that
            jump (sliders, jogs, policies). None: targets as the virtual joints are.
        timed: VIRTUAL_TO_REAL: timed targets when the rig's firmware has them (2.1 on): each
            target applies ``LinkConfig.target_lead_s`` after its sample on the rig's clock, so
            the link's jitter reaches neither the rig's motion nor (``armtwin rig identify``) the
            fit (docs/PROTOCOL.md, MODE flag TIMED). False: at their arrival.
    """

    joints: tuple[int, ...] = (0, 1)
    direction: Direction = Direction.VIRTUAL_TO_REAL
    rate_hz: float = 500.0
    stream_hz: int = 500
    local_demo: bool = False
    max_late_s: float = 0.05
    ramp: bool = True
    ramp_speed: float = 0.25
    ramp_accel_s: float = 0.25
    limit_speed: float | None = None
    timed: bool = True

    def __post_init__(self) -> None:
        if not (1 <= len(self.joints) <= rp.N_MOTORS) or len(set(self.joints)) != len(self.joints):
            raise ValueError(f"joints must name 1..{rp.N_MOTORS} different robot joints, got {self.joints}")
        if not isinstance(self.direction, Direction):
            raise ValueError(f"direction must be a Direction, got {self.direction!r}")
        if not (0 < self.rate_hz <= 5000):
            raise ValueError(f"rate_hz must be in (0, 5000], got {self.rate_hz}")
        if not (self.max_late_s >= 0):
            raise ValueError(f"max_late_s must be >= 0, got {self.max_late_s}")
        for name in ("ramp_speed",) + (("limit_speed",) if self.limit_speed is not None else ()):
            v = getattr(self, name)
            if not (0 < v <= 1):
                raise ValueError(f"{name} must be a share of the joints' speed limits in (0, 1], got {v!r}")
        if not (0 < self.ramp_accel_s <= 10):
            raise ValueError(f"ramp_accel_s must be in (0, 10] s, got {self.ramp_accel_s!r}")


@dataclass(frozen=True)
class FaultEvent:
    """A fault that appeared (``on``) or cleared (``off``) at sample ``stt``."""

    stt: int
    time: float
    fault: str
    on: bool


@dataclass(frozen=True)
class PowerCommand:
    """A POWER message sent by :meth:`TwinSync.run` (its power schedule)."""

    stt: int  # sent just before this sample
    time: float  # s on the sync's clock (the sample's time)
    seq: int | None  # the frame's seq (None: the port was gone)
    on: bool
    t_sent: float = math.nan  # host monotonic time just after the frame was written, s (no state
    # received before it can have seen the command)


@dataclass(frozen=True)
class RampInfo:
    """The ramp :meth:`TwinSync.run` planned from the rig's measured joints to the first target.

    Attributes:
        joints: 1-based robot joints of the rig's motors.
        from_deg: the rig's measured joints, deg.
        to_deg: the source's first target, deg.
        duration_s: the ramp's duration, s.
        peak_speed_deg_s: each joint's largest speed on the ramp, deg/s.
        speed_limit_deg_s: each joint's ramp speed limit (``ramp_speed`` × its speed limit), deg/s.
        accel_limit_deg_s2: each joint's ramp acceleration limit, deg/s².
        stt: the sample at which it started.
    """

    joints: tuple[int, ...]
    from_deg: np.ndarray
    to_deg: np.ndarray
    duration_s: float
    peak_speed_deg_s: np.ndarray
    speed_limit_deg_s: np.ndarray
    accel_limit_deg_s2: np.ndarray
    stt: int

    def describe(self) -> str:
        """One line for people: what moves where, how long, within which limits."""
        if self.duration_s < 1e-3:
            at = ", ".join(f"J{j} {a:+.1f}°" for j, a in zip(self.joints, self.from_deg))
            return f"the rig is at the first target already (measured {at}): no ramp needed"
        moves = ", ".join(f"J{j} {a:+.1f}° → {b:+.1f}°" for j, a, b in zip(self.joints, self.from_deg, self.to_deg))
        lim = ", ".join(f"J{j} {v:.0f}°/s, {a:.0f}°/s²" for j, v, a in
                        zip(self.joints, self.speed_limit_deg_s, self.accel_limit_deg_s2))
        return (f"ramping the rig from its measured joints to the first target: {moves} in {self.duration_s:.2f} s "
                f"(limits {lim})")


@dataclass
class SyncReport:
    """Summary of a :meth:`TwinSync.run`."""

    samples: int = 0  # samples taken (rows logged) by this run
    seconds: float = 0.0
    rate_hz: float = 0.0  # (samples − 1) / (time of the last sample − time of the first), Hz
    events: list = field(default_factory=list)
    stale_samples: int = 0  # samples for which no new state had arrived since the previous sample
    ticks: int = 0  # control ticks of the schedule that passed: samples + ticks_skipped
    ticks_skipped: int = 0  # ticks without a sample because the host stalled for > max_late_s
    stalls: int = 0  # gaps of skipped ticks (= samples flagged Fault.LATE)
    power_commands: list = field(default_factory=list)  # PowerCommand per scheduled POWER sent
    power_restored: bool = False  # the run ended with the power cut by its schedule: restored at the end
    ramp: RampInfo | None = None  # the ramp from the measured joints (VIRTUAL_TO_REAL with a source)
    waited_samples: int = 0  # samples logged while no rig state was known yet (no target sent)
    interrupted: bool = False

    def link_failure(self, states_rx: int) -> str | None:
        """Why the run failed as a twin, or None: the rig never sent a state (``states_rx``, the
        link's count, is 0), or the link was lost and not restored by the end."""
        if states_rx == 0:
            return "no state ever came back from the rig"
        down = False
        for e in self.events:
            if e.fault == "LINK":
                down = e.on
        return "the link to the rig was lost and not restored" if down else None


class RigNoAnswer(RigLinkError):
    """The rig did not answer HELLO within the give-up time (:func:`connect`)."""


class RigProtocolMismatch(RigLinkError):
    """The rig speaks another protocol version (:func:`connect`)."""


def connect(link: RigLink, give_up_s: float, *, bounded: bool) -> rp.Hello | None:
    """The HELLO policy of a sync session: wait for the rig's answer after opening its port.

    An Arduino reboots when its port is opened (about 2 s), so the host asks repeatedly.

    Args:
        link: an open :class:`RigLink`.
        give_up_s: > 0: raise :class:`RigNoAnswer` when no state and no HELLO came within this
            long; 0: wait 3 s, then go on without an answer (every sample is logged with LINK
            until the rig appears). A session without an end (``bounded`` False) should not wait
            forever for a rig that is not there: give it > 0.
        bounded: the session ends by itself (a duration, a sample count, a program): used only
            to word the messages.

    Returns:
        The rig's HELLO, or None when it did not answer and ``give_up_s`` is 0.

    Raises:
        RigProtocolMismatch: the rig's frames carry another protocol version.
        RigNoAnswer: ``give_up_s`` > 0 and the rig did not answer within it.
    """
    wait = give_up_s if give_up_s > 0 else 3.0
    hello = link.request_hello(timeout=wait)
    if hello is not None:
        return hello
    if link.stats.dropped_by_kind.get("version"):
        raise RigProtocolMismatch(f"{link.url}: the rig speaks another protocol version (this host speaks version "
                                  f"{rp.PROTOCOL_VERSION}; see docs/PROTOCOL.md)")
    if give_up_s > 0 and link.stats.states_rx == 0:
        raise RigNoAnswer(f"{link.url}: no answer from the rig within {wait:g} s (is it powered, on this port, at "
                          f"{link.config.baudrate} baud?)")
    return None


def smooth_motion(spec, joints: Sequence[int], amplitude_deg: float = 30.0, move_s: float = 1.5,
                  hold_s: float = 1.0) -> Callable[[float], np.ndarray]:
    """A built-in joint motion: cosine-smoothed moves between +A, 0 and −A with holds.

    Returns ``q(t)`` (rad, all robot joints; the unmapped ones stay at home). The second mapped
    joint moves with −0.6 × the amplitude (so the two are told apart in plots). Amplitudes are
    reduced to fit each joint's limits.
    """
    home = np.array(spec.home, dtype=float)
    amps = []
    for k, j in enumerate(joints):
        room = min(spec.upper[j] - home[j], home[j] - spec.lower[j])
        f = (1.0, -0.6)[k % 2]
        amps.append(math.copysign(min(math.radians(amplitude_deg) * abs(f), 0.9 * room), f))
    amps = np.array(amps)
    levels = [0.0, 1.0, 0.0, -1.0]
    seg = move_s + hold_s

    def q(t: float) -> np.ndarray:
        k = int(t // seg)
        a, b = levels[k % 4], levels[(k + 1) % 4]
        tau = min(1.0, (t - k * seg) / move_s)
        s = a + (b - a) * (0.5 - 0.5 * math.cos(math.pi * tau))
        out = home.copy()
        out[list(joints)] = home[list(joints)] + s * amps
        return out

    return q


class TwinSync:
    """The twin between a simulated robot and the rig, one :meth:`step` per sample.

    Args:
        robot: an :class:`armtwin.envs.sim.SimRobot` (any joint model). With ``virtual`` given
            to :meth:`run` only its ``spec`` is used (another thread may own the robot).
        link: an open :class:`RigLink`.
        config: joints, direction, rate, ramp and target limits.
        log: optional log receiving every sample: the CSV :class:`TwinLog` or the MCAP
            :class:`~armtwin.envs.telemetry.twinlog.TwinMcapLog`.
        virtual_rig: VIRTUAL_TO_REAL: a :class:`~armtwin.controllers.virtual_rig.VirtualRig` (the
            rig's identified motors on the host) that is sent what the rig is sent, from the rig's
            first measured state on; each sample then carries its prediction
            (``SyncSample.predicted_deg``) and it keeps the prediction error.

    Raises:
        ValueError: a mapped joint that does not exist or is prismatic.
    """

    def __init__(self, robot, link: RigLink, config: SyncConfig, log: SampleLog | None = None, *,
                 virtual_rig=None) -> None:
        spec = robot.spec
        for j in config.joints:
            if not (0 <= j < spec.dof):
                raise ValueError(f"{spec.name} has joints 1..{spec.dof}; joint {j + 1} does not exist")
            if spec.prismatic[j]:
                raise ValueError(f"{spec.name} joint {j + 1} is prismatic; the rig's motors stand for revolute joints")
        self.robot, self.link, self.config, self.log = robot, link, config, log
        self.virtual_rig = virtual_rig
        self.spec = spec
        self.idx = list(config.joints)
        self.stt = 0
        self.events: list[FaultEvent] = []
        self._faults = rp.Fault.NONE
        self._t0: float | None = None
        self._last_state_t = -1.0
        self._last_latency = math.nan
        self.stale = 0
        vmax = np.asarray(spec.max_velocity[self.idx], dtype=float)
        self._ramp_v = config.ramp_speed * vmax  # rad/s
        self._ramp_a = self._ramp_v / config.ramp_accel_s  # rad/s²
        self.limiter: SlewLimiter | None = None
        if config.limit_speed is not None:
            v = config.limit_speed * vmax
            self.limiter = SlewLimiter(v, v / config.ramp_accel_s, len(self.idx))
        self._limit_t = 0.0
        #: the newest sample (any thread may read it)
        self.latest_sample: SyncSample | None = None

    def send_mode(self) -> None:
        """Send the MODE for the configured direction (the link re-sends it until the rig echoes it)."""
        mode = rp.Mode.VIRTUAL_TO_REAL if self.config.direction is Direction.VIRTUAL_TO_REAL else rp.Mode.REAL_TO_VIRTUAL
        flags = rp.ModeMsg.LOCAL_DEMO if self.config.local_demo else 0
        timed = self.config.timed and mode == rp.Mode.VIRTUAL_TO_REAL
        if timed and not self.link.clock.ready:
            self.link.wait_clock(1.0)  # a few states (the rig sends one every 20 ms at least): then its clock is known
        self.link.set_mode(mode, self.config.stream_hz, flags, timed=timed)

    def start(self) -> None:
        """Send the MODE and, the first time only, start the clock of the samples' ``time``.

        Calling it again (a new episode, a second :meth:`run`) re-sends the mode but keeps the
        clock, so ``time`` never jumps back while ``stt`` goes on.
        """
        self.send_mode()
        if self._t0 is None:
            self.link.take_faults()  # flags from before the sync (a rig idle since power-up) are not its samples'
            self._t0 = time.monotonic()

    @property
    def started(self) -> bool:
        """True once :meth:`start` ran (the clock is running)."""
        return self._t0 is not None

    @property
    def clock_origin(self) -> float | None:
        """The host monotonic time of the samples' ``time`` 0, s (None before :meth:`start`): a rig
        state's reception time ``RigState.t`` is at ``t − clock_origin`` on the samples' clock."""
        return self._t0

    def _targets(self, want: np.ndarray, state, seen: rp.Fault, now: float) -> np.ndarray | None:
        """The targets to send (rad, mapped joints) for the wanted ``want``: through the limiter
        when there is one — started (again) from the measured joints whenever the rig was not
        driving — and nothing at all while no rig state is known."""
        lim = self.limiter
        if lim is None:
            return want
        stopped = rp.Fault.POWER | rp.Fault.WATCHDOG | rp.Fault.LINK
        if state is None or (state.faults | seen | self.link.link_faults(now)) & stopped:
            if state is not None:
                lim.reset(np.radians(state.degrees[:len(self.idx)]))  # resume from where the rig is
                self._limit_t = now
            return None if state is None or not lim.started else lim.x
        if not lim.started:
            lim.reset(np.radians(state.degrees[:len(self.idx)]))
            self._limit_t = now
        out = lim.update(want, now - self._limit_t)
        self._limit_t = now
        return out

    def step(self, *, step_world: bool = True, late_ticks: int = 0, now: float | None = None,
             virtual_q: np.ndarray | None = None, target_q: np.ndarray | None = None,
             send: bool = True) -> SyncSample:
        """One sample: exchange with the rig, compute ΔE and latency, log it.

        VIRTUAL_TO_REAL: sends the mapped joints as targets (whoever drives the robot — a
        program, a policy, the UI — has already commanded and stepped it), through the target
        limiter when the config has one. REAL_TO_VIRTUAL: commands the robot's mapped joints to
        the rig's newest measurement through ``SimRobot.command`` and, if ``step_world``,
        advances the world one step so that E_virtual is the simulated joint after the command.

        Args:
            step_world: REAL_TO_VIRTUAL: advance the world one step after the command.
            late_ticks: control ticks skipped just before this sample (> 0 flags Fault.LATE).
            now: the sample's monotonic time, s (default: now) — :meth:`run` passes the time
                its tick schedule was checked at, so ``time`` and the schedule agree exactly.
            virtual_q: VIRTUAL_TO_REAL: the robot's joints (n,), rad, as another thread read them
                (default: ``robot.q`` now).
            target_q: VIRTUAL_TO_REAL: send these (mapped joints (k,), rad) instead of the
                virtual ones (the ramp: a rig outside a joint's range is brought into it).
            send: VIRTUAL_TO_REAL: send targets at all (False: only sample the rig).
        """
        if self._t0 is None:
            self.start()
        now = time.monotonic() if now is None else now
        spec = self.spec
        k = len(self.idx)
        seen = self.link.take_faults()  # every state since the previous sample, before latest():
        state = self.link.latest()  # a state arriving in between is counted next time, not lost
        if self.config.direction is Direction.VIRTUAL_TO_REAL:
            q = self.robot.q if virtual_q is None else np.asarray(virtual_q, dtype=float)
            virt = np.degrees(q[self.idx])
            want = np.radians(virt) if target_q is None else np.asarray(target_q, dtype=float)
            out = self._targets(want, state, seen, now) if send else None
            vr = self.virtual_rig
            if vr is not None and not vr.started and state is not None:
                vr.start(state.degrees[:k], now - self._t0)     # the virtual rig starts where the rig is
            if out is not None:
                pulses = np.rint(np.degrees(out) * PULSES_PER_DEG).astype(int).tolist()
                self.link.send_targets(pulses + [0] * (rp.N_MOTORS - k), stamp=now)
                if vr is not None and vr.started:
                    vr.targets(pulses, now - self._t0, self.link.config.target_lead_s if self.link.timed else None)
        else:
            if state is not None:
                q_cmd, _ = self.robot.commanded
                q_cmd[self.idx] = np.clip(np.radians(state.degrees[:k]), spec.lower[self.idx], spec.upper[self.idx])
                self.robot.command(q_cmd)
            if step_world:
                self.robot.world.step()
            virt = np.degrees(self.robot.q[self.idx])
        if state is not None:
            servo = state.degrees[:k]
            if state.t > self._last_state_t:
                if not math.isnan(state.latency_ms):
                    self._last_latency = state.latency_ms
            else:
                self.stale += 1
            self._last_state_t = state.t
            faults = state.faults | seen | self.link.link_faults(now)
            pwm = tuple(state.pwm[:k])
        else:
            servo = np.full(k, np.nan)
            faults = rp.Fault.LINK | seen
            pwm = ()
        if late_ticks > 0:
            faults |= rp.Fault.LATE
        latency = self._last_latency
        if faults & rp.Fault.LINK:  # no fresh state: no latency to show; no servo values without a port
            latency = math.nan
            if not self.link.connected:
                servo = np.full(k, np.nan)
        predicted = None
        if self.virtual_rig is not None and self.config.direction is Direction.VIRTUAL_TO_REAL:
            # what the rig should report in the state this sample shows: when that state arrived
            predicted = self.virtual_rig.angles_at((state.t if state is not None else now) - self._t0)
            if not faults & rp.Fault.LINK:
                self.virtual_rig.observe(predicted, servo)
        sample = SyncSample(self.stt, now - self._t0, virt, servo, virt - servo, latency, faults, pwm, state,
                            predicted)
        self._track_faults(sample)
        if self.log is not None:
            self.log.write(sample)
        self.stt += 1
        self.latest_sample = sample
        return sample

    def _track_faults(self, s: SyncSample) -> None:
        changed = int(s.faults ^ self._faults) & ~int(rp.Fault.RX_ERROR | rp.Fault.LATE)
        for b in range(changed.bit_length()):  # every bit, named or not (a newer firmware's fault)
            if changed >> b & 1:
                f = rp.Fault(1 << b)
                self.events.append(FaultEvent(s.stt, s.time, f.names(), bool(f & s.faults)))
        self._faults = s.faults

    def plan_ramp(self, q_first: np.ndarray, state) -> Ramp:
        """The ramp from ``state``'s measured joints to ``q_first`` (n,), rad, within the ramp limits."""
        return plan_ramp(np.radians(state.degrees[:len(self.idx)]), np.asarray(q_first, float)[self.idx],
                         self._ramp_v, self._ramp_a)

    def run(self, seconds: float | None = None, *, source: Callable[[float], np.ndarray] | None = None,
            virtual: Callable[[], np.ndarray] | None = None, stop: threading.Event | None = None,
            power_schedule: dict[int, bool] | None = None, max_samples: int | None = None,
            on_sample: Callable[[SyncSample], None] | None = None,
            on_ramp: Callable[[RampInfo], None] | None = None,
            source_power: dict[float, bool] | None = None) -> SyncReport:
        """Run the loop at ``config.rate_hz`` until ``seconds``, ``max_samples`` or ``stop``.

        Samples follow a fixed tick schedule (tick k at k / rate_hz after the start). A sample
        is never taken before its tick; a late one is taken at once (back to back) while it is
        at most ``config.max_late_s`` late. After a longer stall of the host the missed ticks
        are skipped — counted in ``SyncReport.ticks_skipped``, and the next sample carries
        Fault.LATE — so no tick is lost silently: ticks = samples + ticks_skipped.

        VIRTUAL_TO_REAL with a ``source`` and ``config.ramp``: hardware starts from its measured
        state. Until the rig's first state arrives no target is sent (the samples are logged,
        with LINK); then the rig and the simulated joints ramp from the rig's measured joints to
        ``source(0)`` (a :class:`RampInfo`, passed to ``on_ramp``), and only then does the source
        start (its clock starts at 0 there, and ``seconds`` is extended by the wait and the ramp).

        Args:
            seconds: duration, s (None: until ``stop`` or ``max_samples``).
            source: VIRTUAL_TO_REAL: ``q(t)`` (rad, all joints; t in s since the source started)
                commanded to the robot each sample (a program, a planner, a policy…); the world
                steps once per sample.
            virtual: VIRTUAL_TO_REAL without a source: the simulated joints (n,), rad, as their
                owner publishes them (another thread steps that world; this loop never touches
                the robot). Without either, the robot's joints are read and its world stepped.
            stop: set it (e.g. from a signal handler or another thread) to end the loop cleanly.
            power_schedule: {sample number: power on?} — POWER messages sent at those samples
                (the fault test: {3000: False, 3150: True, 3600: False}); each is recorded in
                ``SyncReport.power_commands``. A run that ends while its schedule has the power
                cut restores it (``SyncReport.power_restored``).
            max_samples: stop once ``stt`` reaches this (the total sample count of this sync).
            on_sample: called with every sample (progress display); it may set ``stop``.
            on_ramp: called once with the planned ramp (to say so).
            source_power: with a ``source``: {time on the source's clock, s: power on?} — each
                POWER goes out at the first sample at or after its time once the source runs
                (an excitation's coast-downs, which must fall where the source is fastest,
                whatever the wait and the ramp took); recorded like ``power_schedule``'s.
        """
        v2r = self.config.direction is Direction.VIRTUAL_TO_REAL
        drive = v2r and source is not None  # this loop commands the robot and steps its world
        world = None if (v2r and virtual is not None and source is None) else self.robot.world
        period = 1.0 / self.config.rate_hz
        max_late_ticks = int(self.config.max_late_s / period)
        sched = dict(power_schedule or {})
        timed = sorted((source_power or {}).items())  # (source time, on), sent in order
        report = SyncReport()
        self.start()
        t_start = time.monotonic()  # tick 0 of this run
        end = None if seconds is None else t_start + seconds
        tick = 0  # the next tick to take
        n0 = self.stt
        times: list[float] = []  # the first and the newest sample's time
        phase = "wait" if drive and self.config.ramp else "go"
        q_first = np.asarray(source(0.0), dtype=float) if source is not None else None
        ramp: Ramp | None = None
        t_ramp = t_src = t_start  # when the ramp and the source started
        try:
            while True:
                if stop is not None and stop.is_set():
                    report.interrupted = True
                    break
                if max_samples is not None and self.stt >= max_samples:
                    break
                now = time.monotonic()
                if end is not None and now >= end:
                    break
                due = int((now - t_start) / period)  # the newest tick that has come
                late = 0
                if due - tick > max_late_ticks:  # stalled: skip the missed ticks, visibly
                    late = due - tick
                    report.ticks_skipped += late
                    report.stalls += 1
                    tick = due
                if self.stt in sched:
                    on = sched.pop(self.stt)
                    seq = self._power(on, now)
                    report.power_commands.append(PowerCommand(self.stt, now - self._t0, seq, on, time.monotonic()))
                if phase == "wait" and (state := self.link.latest()) is not None:
                    ramp, t_ramp, phase = self.plan_ramp(q_first, state), now, "ramp"
                    q0 = q_first.copy()
                    q0[self.idx] = np.clip(ramp.q0, self.spec.lower[self.idx], self.spec.upper[self.idx])
                    self.robot.reset(q0)  # the simulated joints start where the rig is (within the ranges)
                    if end is not None:
                        end += (now - t_start) + ramp.duration  # the source still gets its `seconds`
                    report.ramp = self._ramp_info(ramp)
                    if on_ramp is not None:
                        on_ramp(report.ramp)
                if phase == "ramp" and now - t_ramp >= ramp.duration:
                    phase, t_src = "go", t_ramp + ramp.duration
                while phase == "go" and drive and timed and now - t_src >= timed[0][0]:
                    on = timed.pop(0)[1]
                    seq = self._power(on, now)
                    report.power_commands.append(PowerCommand(self.stt, now - self._t0, seq, on, time.monotonic()))
                if phase == "wait":  # no rig state yet: log the sample, send nothing
                    report.waited_samples += 1
                    world.step()
                    s = self.step(late_ticks=late, now=now, send=False)
                elif phase == "ramp":
                    qr = ramp.q_at(now - t_ramp)
                    q = q_first.copy()
                    q[self.idx] = np.clip(qr, self.spec.lower[self.idx], self.spec.upper[self.idx])
                    self.robot.command(q)
                    world.step()
                    s = self.step(late_ticks=late, now=now, target_q=qr)
                elif v2r and world is None:
                    s = self.step(late_ticks=late, now=now, virtual_q=virtual())
                else:
                    if drive:
                        self.robot.command(source(now - t_src))
                    if v2r:
                        world.step()
                    s = self.step(late_ticks=late, now=now)
                times[1:] = [s.time]
                if len(times) == 1:
                    times.insert(0, s.time)
                if on_sample is not None:
                    on_sample(s)
                tick += 1
                delay = t_start + tick * period - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                # (catching up never queues commands: RigLink.send_targets skips targets while
                # the wire is still busy with earlier bytes)
        except KeyboardInterrupt:
            report.interrupted = True
        finally:
            if report.power_commands and not report.power_commands[-1].on:  # never leave the motors unpowered
                self._power(True, time.monotonic())
                report.power_restored = True
        report.samples = self.stt - n0
        report.ticks = report.samples + report.ticks_skipped
        report.seconds = time.monotonic() - t_start
        if len(times) == 2 and times[1] > times[0]:  # samples per second of the loop itself
            report.rate_hz = (report.samples - 1) / (times[1] - times[0])
        report.events = list(self.events)
        report.stale_samples = self.stale
        return report

    def _power(self, on: bool, now: float) -> int | None:
        """Switch the rig's supply (and the virtual rig's, if any); the POWER frame's seq."""
        if self.virtual_rig is not None and self._t0 is not None:
            self.virtual_rig.power(on, now - self._t0)
        return self.link.power(on)

    def _ramp_info(self, ramp: Ramp) -> RampInfo:
        return RampInfo(tuple(j + 1 for j in self.idx), np.degrees(ramp.q0), np.degrees(ramp.q1), ramp.duration,
                        np.degrees(ramp.peak_speed()), np.degrees(self._ramp_v), np.degrees(self._ramp_a),
                        self.stt)


class RigLoop:
    """The twin on its own thread at the sync rate: VIRTUAL_TO_REAL from joints another thread publishes.

    The teach pendant steps its world on its GUI thread at ~30 Hz, and a browser loading the
    page can stall that thread; the rig must not notice. This loop runs :meth:`TwinSync.run`
    with ``virtual`` (a callable returning the newest published joints, read without a lock)
    at ``config.rate_hz``, whatever the publisher does: targets keep going out (the limiter
    of ``config.limit_speed`` ramps them from the rig's measured joints), heartbeats keep the
    watchdog fed, and every sample is logged. An exception in a sample (the log's disk full)
    is kept in :attr:`error`; the log is closed and the twin goes on without it.

    Args:
        sync: the twin (VIRTUAL_TO_REAL); its robot is only read for its spec.
        virtual: () -> (n,) joints, rad — the newest the owner published.
    """

    def __init__(self, sync: TwinSync, virtual: Callable[[], np.ndarray]) -> None:
        if sync.config.direction is not Direction.VIRTUAL_TO_REAL:
            raise ValueError("RigLoop drives the rig from published joints: it needs Direction.VIRTUAL_TO_REAL")
        self.sync, self.virtual = sync, virtual
        self.error = ""  # why the newest failed sample failed ("" when none did)
        self.reports: list[SyncReport] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> "RigLoop":
        """Start the thread (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="RigLoop", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.reports.append(self.sync.run(None, virtual=self.virtual, stop=self._stop))
            except Exception as exc:  # noqa: BLE001 - shown by the owner; the twin goes on
                self.error = f"{type(exc).__name__}: {exc}"
                log, self.sync.log = self.sync.log, None
                if log is not None:
                    log.close()
                self._stop.wait(0.05)

    def stop(self, timeout: float = 2.0) -> None:
        """End the loop and wait for the thread (idempotent); the link and the log stay open."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
