"""The shape of the G-code core (issue 16.5): typed modal state, one enum per modal group, one rule
per code, each rule declaring its faults."""

from __future__ import annotations

import dataclasses
import re

import pytest

from armtwin import robots
from armtwin.controllers.gcode import ErrorCode, GcodeError, parse_line, parse_program
from armtwin.controllers.gcode import modal as M
from armtwin.controllers.gcode import rules as R
from armtwin.controllers.gcode.interpreter import Interpreter

IRB = robots.get("irb120")


def test_the_parsers_code_tables_are_the_enums():
    assert M.G_CODES == {m.value: grp.value for grp, codes in M.G_GROUPS.items() for m in codes}
    assert set(M.G_CODES) == {0, 1, 2, 3, 4, 10, 17, 18, 19, 20, 21, 28, 40, 43, 43.1, 49, 53, 54, 55, 56, 57, 58,
                              59, 61, 61.1, 64, 80, 81, 82, 83, 90, 91, 90.1, 91.1, 92, 92.1, 94, 98, 99}
    assert M.M_CODES == {0.0: "stop", 1.0: "stop", 2.0: "stop", 30.0: "stop", 6.0: "toolchange", 3.0: "spindle",
                         4.0: "spindle", 5.0: "spindle", 7.0: "coolant", 8.0: "coolant", 9.0: "coolant",
                         62.0: "digital", 63.0: "digital", 64.0: "digital", 65.0: "digital", 300.0: "servo",
                         17.0: "steppers", 18.0: "steppers", 84.0: "steppers"}


def test_the_unsupported_code_messages_list_exactly_the_supported_codes():
    """Fault 12's and 13's descriptions name the supported codes: they must follow the enums."""
    listed = set()
    text = ErrorCode.UNSUPPORTED_G_CODE.description.split("Anything else")[0]
    for a, b in re.findall(r"G(\d+(?:\.\d)?)(?:-G(\d+))?", text):
        listed |= {float(a)} if not b else {float(v) for v in range(int(a), int(b) + 1)}
    assert listed == set(M.G_CODES)
    m_listed = {float(v) for v in re.findall(r"M(\d+)", ErrorCode.UNSUPPORTED_M_CODE.description.split("codes")[0])}
    assert m_listed == set(M.M_CODES)


def test_every_code_has_its_rule_and_every_interpreter_fault_a_rule_that_raises_it():
    assert set(R.NONMODAL_RULES) == set(M.NonModal)
    assert set(R.MOTION_RULES) == set(M.MotionMode)
    assert set(R.STOP_RULES) == set(M.ProgramStop)
    assert set(R.STEPPER_RULES) == set(M.StepperPower)
    interpreter_band = {c for c in ErrorCode if 20 <= c < 50}     # 50-59: O-word flow (flow.py); 60-79: notes
    assert R.declared_faults() == interpreter_band


def test_a_rule_that_raises_an_undeclared_fault_is_a_programming_error():
    fail = R.Fail(parse_line("G1 X1"))
    fail.allowed = (ErrorCode.BAD_FEED_RATE,)
    with pytest.raises(RuntimeError, match="does not declare"):
        fail(ErrorCode.UNUSED_WORD, "X1 is not used", "X")
    with pytest.raises(GcodeError):
        fail(ErrorCode.BAD_FEED_RATE, "F0", "X")


def test_the_modal_state_is_frozen_and_typed():
    it = Interpreter(IRB)
    s0 = it.state
    assert s0.modal == M.ModalState() and s0.modal.motion is M.MotionMode.RAPID and s0.modal.feed is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        s0.modal.units = M.Units.INCH           # type: ignore[misc]
    it.execute(parse_program("G20 G91 G18 G55 G1 X1 F10\n").lines[0])
    m = it.state.modal
    assert (m.units, m.distance, m.plane, m.coord, m.motion) == (M.Units.INCH, M.DistanceMode.INCREMENTAL,
                                                                M.Plane.ZX, M.CoordSystem.G55, M.MotionMode.LINEAR)
    assert m.feed == pytest.approx(254.0)       # mm/min
    assert s0.modal.units is M.Units.MM         # the old state is untouched
    before = it.state
    with pytest.raises(GcodeError):
        it.execute(parse_program("G21 G90 G1 X1 I5\n").lines[0])   # faulty: nothing changes
    assert it.state is before


def test_check_does_not_change_the_state_and_apply_makes_the_next_one():
    it = Interpreter(IRB)
    line = parse_program("G1 X10 F600\n").lines[0]
    state = it.state
    eff = R.check(line, state, it.context)
    assert it.state is state and eff.motion is M.MotionMode.LINEAR and eff.target[0] == 10.0
    new, blocks, points = R.apply(eff, state, it.context)
    assert new.position[0] == 10.0 and state.position[0] != 10.0 and len(blocks) == 1 and points > 1
    assert blocks[0].line == 1 and blocks[0].feed == pytest.approx(0.01)


def test_the_preflight_passes_declare_the_preflight_faults():
    from armtwin.controllers.gcode.intent import INTENT_FAULTS
    from armtwin.controllers.gcode.preflight import PASSES
    from armtwin.envs.collision import CLEARANCE_FAULTS, COLLISION_FAULTS
    declared = {c for p in PASSES for c in p.faults} | set(INTENT_FAULTS)   # the .intent warnings too
    declared |= set(COLLISION_FAULTS) | set(CLEARANCE_FAULTS)   # the workcell's passes (check --cell)
    # 105 also comes from the interpreter (the point cap), 106 (no motion) and 119 (the cap notice) from the report
    assert declared | {ErrorCode.NO_MOTION, ErrorCode.TOO_MANY_FAULTS} == {c for c in ErrorCode if c >= 100}
