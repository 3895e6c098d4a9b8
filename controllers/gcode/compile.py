"""One service from G-code text to the joints a robot is commanded: :func:`compile_program`.

Every consumer of a program's motion — ``armtwin run`` (:func:`armtwin.envs.runner.run_program`),
``armtwin sync --program``, the teach pendant's "run program" and the Gym Track env
(:func:`armtwin.envs.tasks.gcode_path`) — compiles it here, so they all command the same
joints at the same times: parse, interpret, plan, preflight (IK along the path, limits), then
the control trajectory (IK at every control sample on the preflight's branch).

Pure numpy (no PyBullet). Units: s, m, rad inside.

>>> from armtwin import robots
>>> from armtwin.controllers.gcode import compile_program
>>> c = compile_program("G21 G90\\nG0 X0 Y0 Z10\\nG1 Z0 F600\\n", robots.get("irb120"), period=0.01)
>>> c.ok, c.trajectory.count > 100, c.trajectory.period
(True, True, 0.01)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from .config import MachineConfig, machine_for
from .errors import MAX_FAULTS, Fault
from .outputs import OutputTimeline, program_outputs
from .preflight import PreflightReport, Progress, preflight
from .trajectory import ControlTrajectory

__all__ = ["CompiledProgram", "compile_program", "compile_report"]


@dataclass(frozen=True, eq=False)
class CompiledProgram:
    """A program compiled for one robot: the preflight's findings and, when it can run, its joints.

    Attributes:
        report: the preflight report (faults, plan, IK samples).
        trajectory: the commanded joints at every control period (checked: every sample solves
            on the preflight's branch), or None when the program cannot run (an error, or no
            motion; see :attr:`refusal`).
        strict: it was compiled with warnings counting as faults.
    """

    report: PreflightReport
    trajectory: ControlTrajectory | None
    strict: bool = False

    @property
    def ok(self) -> bool:
        """The program can run (it has a trajectory)."""
        return self.trajectory is not None

    @cached_property
    def outputs(self) -> OutputTimeline:
        """The tool and I/O outputs along the timed path (:class:`~.outputs.OutputTimeline`): what a
        run logs, the video shows, and workcell code asks ("is the vacuum on at t?")."""
        return program_outputs(self.report.program, self.report.plan, self.report.machine)

    @property
    def body_tool(self):
        """The tool the simulated arm carries (:class:`~armtwin.controllers.tools.Tool`): the first
        one the program mounts besides the bare flange (a tool changer is not simulated: the TCP
        of each later tool is still followed), or None for the bare flange."""
        machine = self.report.machine
        if machine is None:
            return None
        n = next((t for t in self.outputs.tools_mounted if t != 0), 0)
        return machine.tools[n] if n else None

    @property
    def errors(self) -> list[Fault]:
        """The findings that keep the program from running (errors; with ``strict`` warnings too)."""
        return self.report.errors(self.strict)

    @property
    def refusal(self) -> str:
        """Why the program cannot run, in one line naming the first fault ("" when it can run)."""
        if self.trajectory is not None:
            return ""
        errs = self.errors
        if errs:
            more = f" (and {len(errs) - 1} more: see `armtwin check`)" if len(errs) > 1 else ""
            return f"{errs[0]}{more}"
        return "the program does not move the robot"


def compile_program(text: str | bytes | Iterable[str], spec, machine: MachineConfig | None = None,
                    period: float | None = None, *, strict: bool = False, max_faults: int = MAX_FAULTS,
                    singularity: bool = True, progress: Progress | None = None) -> CompiledProgram:
    """Compile a G-code program for ``spec``: preflight, then the control trajectory.

    Args:
        text: the program (str, bytes as read from a file — non-ASCII bytes are named as such —
            or lines).
        spec: the robot.
        machine: work origin, speeds and tolerances; default :func:`~.config.machine_for` ``(spec)``.
        period: control period of the trajectory, s; default ``machine.control_period``.
        strict: warnings (near a singularity) also keep the program from running.
        max_faults: cap on the findings reported.
        singularity: look for closeness to singularities (warnings).
        progress: called with (stage, fraction): the preflight's stages, then "control".

    Returns:
        The :class:`CompiledProgram`; a faulty program is a result (``ok`` False, ``refusal``
        names the first fault), never an exception.

    Raises:
        ValueError: a bad ``period``.
        ~.trajectory.ControlTrajectoryError: a control sample of a clean program has no joint
            solution on the followed branch (the preflight should make that impossible; the
            message names the line).
    """
    machine = machine or machine_for(spec)
    report = preflight(text, spec, machine, max_faults=max_faults, singularity=singularity, progress=progress)
    return compile_report(report, spec, period, strict=strict, progress=progress)


def compile_report(report: PreflightReport, spec, period: float | None = None, *, strict: bool = False,
                   progress: Progress | None = None) -> CompiledProgram:
    """The second half of :func:`compile_program`, for a caller that has shown the preflight's
    report already (``armtwin run`` prints it as ``armtwin check`` does): the control trajectory
    of a report that can run.

    Args:
        report: a preflight report made for ``spec``.
        spec: the robot.
        period: control period, s; default the report's ``machine.control_period``.
        strict: warnings also keep the program from running.
        progress: called with ("control", fraction).

    Raises:
        ValueError: a bad ``period``, or a report made for another robot.
        ~.trajectory.ControlTrajectoryError: as :func:`compile_program`.
    """
    if report.robot != spec.name:
        raise ValueError(f"the preflight report was made for {report.robot}, not {spec.name}")
    trajectory = None
    if report.clean(strict) and report.plan is not None and report.samples is not None:
        trajectory = ControlTrajectory(report, spec, period)
        trajectory.check(progress=progress)
    return CompiledProgram(report, trajectory, strict)
