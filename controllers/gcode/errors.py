"""Numbered G-code faults: stable codes, a short message and a long description each.

Modelled on grbl's ``report.h``: hosts, logs and tests key on the number, people read the
message. Codes 1–19 are lexical/syntax faults found by the parser on one line alone,
20–49 are semantic faults found by the interpreter (they depend on the modal state), 50–59 are
program-flow faults of LinuxCNC's O-words (subroutines, conditions, loops: :mod:`.flow`), 60–79
are notes (something in the program is skipped or has no effect on an arm: reported, never a
fault), and 100–119 are preflight findings (reachability, joint limits, speeds, singularities)
found after planning. The numbers never change meaning; new codes get new numbers.

Line and column numbers are 1-based; column 0 means "the whole line".
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

__all__ = ["ErrorCode", "Severity", "Fault", "GcodeError", "MAX_FAULTS", "cap_faults", "fold_notes"]

#: Default cap on the number of findings reported for one file (when there are more, the last
#: one reported is a TOO_MANY_FAULTS notice: see :func:`cap_faults`).
MAX_FAULTS = 100


class Severity(enum.Enum):
    """How bad a fault is: an ERROR makes a program faulty; a WARNING is reported only (``--strict``
    makes it count); a NOTE says what was skipped or has no effect (never counts)."""

    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


class ErrorCode(enum.IntEnum):
    """Stable fault numbers (see docs/GCODE.md for the table)."""

    # --- lexical / syntax (parser, one line alone) -----------------------------------
    LINE_TOO_LONG = 1
    NON_ASCII = 2
    UNEXPECTED_CHARACTER = 3
    UNCLOSED_COMMENT = 4
    NESTED_COMMENT = 5
    UNMATCHED_PAREN = 6
    MISSING_VALUE = 7
    BAD_NUMBER = 8
    EXPONENT_NOT_ALLOWED = 9
    NUMBER_OUT_OF_RANGE = 10
    UNSUPPORTED_WORD = 11
    UNSUPPORTED_G_CODE = 12
    UNSUPPORTED_M_CODE = 13
    REPEATED_WORD = 14
    MODAL_GROUP_VIOLATION = 15
    BAD_LINE_NUMBER = 16
    BAD_EXPRESSION = 17
    BAD_PARAMETER = 18
    MATH_ERROR = 19
    # --- semantic (interpreter, depends on the modal state) ---------------------------
    UNDEFINED_FEED_RATE = 20
    BAD_FEED_RATE = 21
    AXIS_COMMAND_CONFLICT = 22
    AXIS_WORDS_MISSING = 23
    NO_MOTION_MODE = 24
    UNUSED_WORD = 25
    ARC_OFFSETS_MISSING = 26
    ARC_R_AND_OFFSETS = 27
    ARC_OFFSET_OUT_OF_PLANE = 28
    ARC_RADIUS_MISMATCH = 29
    ARC_RADIUS_TOO_SMALL = 30
    ARC_R_FULL_CIRCLE = 31
    DWELL_TIME_MISSING = 32
    BAD_DWELL_TIME = 33
    BAD_G10 = 34
    ORIENTATION_NOT_SUPPORTED = 35
    TARGET_OUT_OF_RANGE = 36
    DWELL_TOO_LONG = 37
    BAD_G53 = 38
    BAD_BLEND_TOLERANCE = 39
    BAD_CANNED_CYCLE = 40
    UNKNOWN_TOOL = 44
    BAD_SPINDLE_SPEED = 45
    BAD_OUTPUT_NUMBER = 46
    DIALECT_OPTION_OFF = 47
    # --- program flow (O-words: subroutines, conditions, loops; found when the program is expanded)
    BAD_O_WORD = 50
    BLOCK_NOT_CLOSED = 51
    BLOCK_MISMATCH = 52
    UNKNOWN_SUBROUTINE = 53
    BAD_SUBROUTINE = 54
    BREAK_OUTSIDE_LOOP = 55
    RETURN_OUTSIDE_SUB = 56
    TOO_MANY_ARGUMENTS = 57
    LOOP_LIMIT = 58
    CALL_TOO_DEEP = 59
    # --- notes (reported, never faults) -------------------------------------------------
    HOST_COMMAND_SKIPPED = 60
    NO_EFFECT = 61
    OPTIONAL_STOP_SKIPPED = 62
    BYTE_ORDER_MARK_SKIPPED = 63
    # --- preflight (after planning and IK) --------------------------------------------
    UNREACHABLE = 100
    JOINT_LIMIT = 101
    JOINT_SPEED = 102
    NEAR_SINGULARITY = 103
    CONFIGURATION_FLIP = 104
    PROGRAM_TOO_LONG = 105
    NO_MOTION = 106
    COLLISION = 110
    SELF_COLLISION = 111
    NEAR_MISS = 112
    TOO_MANY_FAULTS = 119
    # what the writer probably meant (preflight warnings of :mod:`.intent`)
    LONG_DWELL = 107
    WORK_ZERO_AT_START = 108
    UNITS_NOT_GIVEN = 109

    @property
    def message(self) -> str:
        """Short fixed message."""
        return _TEXT[self][0]

    @property
    def description(self) -> str:
        """Long description: what the rule is and how to fix the program."""
        return _TEXT[self][1]

    @property
    def slug(self) -> str:
        """Lower-case name, e.g. ``arc_radius_mismatch``."""
        return self.name.lower()


_TEXT: dict[ErrorCode, tuple[str, str]] = {
    ErrorCode.LINE_TOO_LONG: (
        "line too long",
        "The code of a line (what is left without its comments) may hold at most 256 characters "
        "(LinuxCNC's limit). Comments may be of any length. Split the block."),
    ErrorCode.NON_ASCII: (
        "non-ASCII character",
        "G-code is ASCII. Outside comments, characters outside ASCII (accents, typographic quotes, a "
        "byte-order mark, binary junk) are faults, because they usually mean the file is not what "
        "it claims to be; inside a closed ( ) or ; comment any character is accepted (CAM tools "
        "write names with accents there). The message names the character when the line is UTF-8 "
        "(U+00F6 (LATIN SMALL LETTER O WITH DIAERESIS)), else the byte (byte 0xF6); a byte-order "
        "mark at the start of the file (UTF-8 EF BB BF, UTF-16 FF FE / FE FF) is reported as one, "
        "not skipped: save the file as plain ASCII."),
    ErrorCode.UNEXPECTED_CHARACTER: (
        "unexpected character",
        "Only words (a letter followed by a number), white space and comments may appear on a "
        "line. Characters such as @, %, ! or control characters are not G-code here (# starts a "
        "parameter and [ an expression). A line holding only % is allowed; a "
        "line starting with $ or holding only ? (grbl host commands) is skipped with note 60."),
    ErrorCode.UNCLOSED_COMMENT: (
        "comment not closed",
        "A comment opened with ( must be closed with ) on the same line."),
    ErrorCode.NESTED_COMMENT: (
        "nested comment",
        "A ( inside a ( ) comment is not allowed (RS-274/NGC). Use ; comments for free text."),
    ErrorCode.UNMATCHED_PAREN: (
        "unmatched )",
        "A ) appeared without an opening (."),
    ErrorCode.MISSING_VALUE: (
        "word without a value",
        "Every word is a letter followed by a number, e.g. X10 or G1. A letter was found "
        "without a number after it."),
    ErrorCode.BAD_NUMBER: (
        "bad number format",
        "A number is an optional sign, digits and at most one decimal point (e.g. -1.5, .5, "
        "3.). Numbers without a letter, double signs, a second decimal point or spaces inside "
        "a number are faults."),
    ErrorCode.EXPONENT_NOT_ALLOWED: (
        "exponent notation not allowed",
        "G-code numbers have no exponent: X1e3 would otherwise be read as X1 followed by a "
        "word E3. Write the number out (X1000)."),
    ErrorCode.NUMBER_OUT_OF_RANGE: (
        "number out of range",
        "Numbers must be finite and at most 1,000,000 in magnitude; larger values cannot be "
        "meant for a robot arm and would overflow later arithmetic."),
    ErrorCode.UNSUPPORTED_WORD: (
        "unsupported word",
        "Supported letters: G M N F X Y Z A B C I J K R P L Q S T H, and O at the start of a line "
        "(O-words, see fault 50). Others (E, D, U, V, W, ...) are rejected instead of being ignored, so that nothing in a program is "
        "silently dropped."),
    ErrorCode.UNSUPPORTED_G_CODE: (
        "unsupported G-code",
        "Supported: G0 G1 G2 G3 G4 G10(L2/L20) G17 G18 G19 G20 G21 G28 G40 G43 G43.1 G49 G53 G54-G59 "
        "G61 G61.1 G64 G80 G81 G82 G83 G90 G91 G90.1 G91.1 G92 G92.1 G94 G98 G99. Anything else (G28.1, "
        "G38.2, G41, G93, ...) is a fault."),
    ErrorCode.UNSUPPORTED_M_CODE: (
        "unsupported M-code",
        "Supported: M0 (pause), M1 (optional pause), M2 and M30 (program end), M3 M4 M5 (the tool's "
        "output: spindle, laser, pen, vacuum, gripper), M6 (tool change), M7 M8 M9 (auxiliary "
        "outputs), M17 M18 M84 (motor power: no effect, note 61), M62 M63 M64 M65 (digital outputs) "
        "and M300 (servo pen, with the pen-servo dialect option). Other codes are faults."),
    ErrorCode.REPEATED_WORD: (
        "word repeated",
        "A letter other than G and M may appear only once per line (e.g. X1 X2)."),
    ErrorCode.MODAL_GROUP_VIOLATION: (
        "modal group violation",
        "Two codes of the same modal group on one line (e.g. G0 G1, G90 G91, M2 M30) "
        "contradict each other."),
    ErrorCode.BAD_LINE_NUMBER: (
        "bad line number",
        "An N word must come first on the line and be a whole number from 0 to 99999."),
    ErrorCode.BAD_EXPRESSION: (
        "bad expression",
        "Parameters and expressions follow LinuxCNC: a setting is '#1 = value' or '#<name> = value'; a "
        "word's value may be a number, a parameter (#1, #<name>, #[expr], ##1) or an expression in "
        "[ ]: numbers, parameters, [ ], unary - and +, the operators ** * / MOD + - EQ NE GT GE LT LE AND "
        "OR XOR and the functions ABS ACOS ASIN ATAN[y]/[x] COS EXISTS EXP FIX FUP LN ROUND SIN SQRT TAN "
        "(degrees). Brackets are closed on their line, nested at most 32 deep."),
    ErrorCode.BAD_PARAMETER: (
        "bad parameter",
        "Numbered parameters are #1 to #5000 (whole numbers; an unset one reads 0, as in LinuxCNC); "
        "named ones #<name> must be set before they are read. System parameters (#5001 and up: "
        "positions, offsets, tool data) are not supported."),
    ErrorCode.MATH_ERROR: (
        "expression cannot be computed",
        "A division by zero, the square root or logarithm of a number out of its range, ACOS/ASIN "
        "beyond -1..1, a negative number to a fractional power, or a result that is not a finite "
        "number."),
    ErrorCode.UNDEFINED_FEED_RATE: (
        "feed rate undefined",
        "G1, G2 and G3 need a feed rate: give F (mm/min, or inch/min under G20) on this or an "
        "earlier line. F0 on a line without a feed move (G0 F0) leaves the feed rate undefined, "
        "as in grbl and LinuxCNC."),
    ErrorCode.BAD_FEED_RATE: (
        "feed rate must be positive",
        "F is a speed in mm/min (inch/min under G20): never negative, and greater than zero on a "
        "line that moves at it (G1-G3, canned cycles). F0 elsewhere is accepted and leaves the "
        "feed rate undefined."),
    ErrorCode.AXIS_COMMAND_CONFLICT: (
        "axis command conflict",
        "Axis words belong to one command per line: G10, G28 or G92 cannot share a line with "
        "an explicit motion code (G0-G3)."),
    ErrorCode.AXIS_WORDS_MISSING: (
        "axis words missing",
        "G92 needs at least one axis word (X Y Z A B C)."),
    ErrorCode.NO_MOTION_MODE: (
        "axis words without a motion mode",
        "After G80 no motion mode is active: axis words need G0, G1, G2 or G3."),
    ErrorCode.UNUSED_WORD: (
        "word not used by any command",
        "Every word must be consumed (grbl's rule): I J K only with G2/G3, R with G2/G3 and G81-G83, "
        "P only with G4, G10, G64, G82 or M62-M65, Q only with G64 or G83, L only with G10, H only "
        "with G43, axis words only with motion, G10, G28, G53, G92 or G43.1. S (the tool output's set-point) and T (the next tool) "
        "are always taken."),
    ErrorCode.ARC_OFFSETS_MISSING: (
        "arc needs I/J/K or R",
        "G2/G3 need the centre as offsets in the active plane (I J for G17, I K for G18, J K "
        "for G19) or a radius R."),
    ErrorCode.ARC_R_AND_OFFSETS: (
        "arc with both R and I/J/K",
        "Give the arc either as centre offsets or as a radius, not both."),
    ErrorCode.ARC_OFFSET_OUT_OF_PLANE: (
        "arc offset not in the plane",
        "The centre offset words must lie in the selected plane: I J in G17, I K in G18, J K in "
        "G19. The third one is accepted only when it is zero (K0 on a G17 arc, as FreeCAD's grbl "
        "post writes it)."),
    ErrorCode.ARC_RADIUS_MISMATCH: (
        "arc end not on the circle",
        "The distance from the centre to the end point differs from the radius at the start by "
        "more than 0.5 mm (0.05 inch under G20), or by more than both 0.005 mm (0.0005 inch) and "
        "0.1 % of the radius (LinuxCNC's documented rule). An end within tolerance makes the arc a "
        "spiral from the start radius to the end radius, ending exactly at the programmed point."),
    ErrorCode.ARC_RADIUS_TOO_SMALL: (
        "arc radius too small",
        "The radius is zero, or R is less than half the distance from start to end, so no "
        "circle joins the two points."),
    ErrorCode.ARC_R_FULL_CIRCLE: (
        "full circle with R",
        "An R-format arc whose end equals its start is undefined (any circle through one point). "
        "Program full circles with I/J/K."),
    ErrorCode.DWELL_TIME_MISSING: (
        "dwell without P",
        "G4 needs P, the dwell time in seconds."),
    ErrorCode.BAD_DWELL_TIME: (
        "dwell time must be >= 0",
        "G4 P is a time in seconds and cannot be negative."),
    ErrorCode.BAD_G10: (
        "bad G10",
        "G10 sets a work offset: L2 (offset given) or L20 (current position becomes the "
        "given value) with P0 (active system) or P1-P6 (G54-G59)."),
    ErrorCode.ORIENTATION_NOT_SUPPORTED: (
        "orientation word not supported by this robot",
        "The SCARA has one tool rotation: C, the tool roll about the vertical. A and B (tilts) "
        "apply to the 6-axis arms only."),
    ErrorCode.TARGET_OUT_OF_RANGE: (
        "target absurdly far",
        "The target, or a point of an arc (its circle between start and end, helix included), "
        "lies more than 10 m from the robot base; it cannot be meant for an arm. For arcs this "
        "is usually a huge I/J/K or R (absolute coordinates given as offsets, or a unit mistake)."),
    ErrorCode.DWELL_TOO_LONG: (
        "dwell too long",
        "G4 P may be at most 3600 s (1 h; MachineConfig.max_dwell). Longer dwells are almost "
        "always a unit mistake (P in milliseconds, as some controllers read it, is seconds here)."),
    ErrorCode.BAD_G53: (
        "bad G53",
        "G53 (base-frame coordinates for this line) moves in a straight line: it needs G0 or G1 "
        "(on the line or active) and absolute distance mode (G90), as in LinuxCNC. Its target may "
        "not be where the robot itself stands: at or below its mounting plane (base z <= 0) or on "
        "its base's vertical axis (x = y = 0). CAM programs write G53 G0 Z0 and G53 G0 X0 Y0 to go "
        "to a CNC machine's home; on an arm that is G28 (G28 G91 Z0 lifts to the home height)."),
    ErrorCode.BAD_BLEND_TOLERANCE: (
        "bad G64 tolerance",
        "G64 P (blending tolerance) and Q (naive CAM tolerance) are lengths in program units and "
        "cannot be negative."),
    ErrorCode.BAD_CANNED_CYCLE: (
        "bad canned cycle",
        "G81, G82 and G83 drill along Z in the XY plane (G17) with absolute coordinates (G90): they "
        "need Z (the bottom) and R (the retract plane, at or above Z), given on the line or by an "
        "earlier cycle; G82 P (dwell, s) may not be negative; G83 needs Q > 0 (the peck depth), at "
        "most 1000 pecks a hole. L (repeats) is not supported."),
    ErrorCode.BAD_O_WORD: (
        "bad O-word",
        "An O-word line is 'o<label> <keyword> [arguments]' (LinuxCNC): the label a number (o100) or a "
        "name (o<name>), the keyword sub, endsub, return, call, if, elseif, else, endif, while, endwhile, "
        "do, repeat, endrepeat, break or continue. if, elseif and while take one [condition], repeat one "
        "[count] (a whole number >= 0), call up to 30 [arguments], return and endsub an optional [value]; "
        "the others nothing. Nothing else may share the line (comments may); an O-word must start its "
        "line (after an optional N word). An indirect label (o[#1] or o#<sub>) is accepted on call only."),
    ErrorCode.BLOCK_NOT_CLOSED: (
        "O-word block not closed",
        "Every block opened by an O-word is closed by the same label: o100 sub by o100 endsub, if by "
        "endif, while by endwhile, do by o100 while [condition], repeat by endrepeat. The fault is at the "
        "line that opens the block."),
    ErrorCode.BLOCK_MISMATCH: (
        "O-word does not match its block",
        "An endsub, endif, endwhile, endrepeat, else or elseif must close (or continue) the innermost open "
        "block of the same label and kind; else comes once, after the elseifs. A label opens one block per "
        "subroutine (or in the main program): LinuxCNC's numbers of control blocks are local to their "
        "subroutine, subroutine labels global."),
    ErrorCode.UNKNOWN_SUBROUTINE: (
        "unknown subroutine",
        "o<label> call needs a subroutine 'o<label> sub' ... 'o<label> endsub' defined in the same file "
        "BEFORE the call is executed (LinuxCNC's rule: a subroutine may only be called after it is "
        "defined). Subroutine files (LinuxCNC's SUBROUTINE_PATH) are not searched."),
    ErrorCode.BAD_SUBROUTINE: (
        "bad subroutine definition",
        "A subroutine is defined once, at the top level of the file: not inside another subroutine "
        "(LinuxCNC: subroutine bodies may not be nested) nor inside an if or a loop."),
    ErrorCode.BREAK_OUTSIDE_LOOP: (
        "break or continue outside its loop",
        "o<label> break and o<label> continue must be inside the while or do loop of the same label (in the "
        "same subroutine). As documented by LinuxCNC, they leave or restart while and do loops, not repeat "
        "loops."),
    ErrorCode.RETURN_OUTSIDE_SUB: (
        "return outside its subroutine",
        "o<label> return and o<label> endsub must be inside the definition of subroutine o<label>."),
    ErrorCode.TOO_MANY_ARGUMENTS: (
        "too many arguments",
        "A call passes at most 30 arguments (#1 to #30 of the subroutine, LinuxCNC's rule), each in "
        "[ ] (o100 call [1] [2.5] [#<depth>])."),
    ErrorCode.LOOP_LIMIT: (
        "loop limit reached",
        "A while or do loop ran more than 10,000 times in one go (MAX_LOOP_ITERATIONS in "
        "controllers/gcode/flow.py), or a repeat asked for more: almost always a condition that never "
        "becomes false. Nothing after that point is executed. Split very long loops, or unroll them."),
    ErrorCode.CALL_TOO_DEEP: (
        "subroutine calls nested too deep",
        "Subroutine calls may nest at most 10 deep (LinuxCNC's limit), recursion included: usually a "
        "recursion that never ends. Nothing after that point is executed."),
    ErrorCode.HOST_COMMAND_SKIPPED: (
        "host command skipped",
        "A note: a line starting with $ ($H homing, $X unlock, $$ settings, $J= jog) or holding only "
        "? is a command to grbl's firmware, not G-code; it is skipped. The program starts at the "
        "robot's home."),
    ErrorCode.NO_EFFECT: (
        "code without effect",
        "A note: M17, M18 and M84 switch 3-D printer stepper motors on and off; an arm's drives are "
        "always on, so they do nothing here."),
    ErrorCode.OPTIONAL_STOP_SKIPPED: (
        "optional stop skipped",
        "A note: M1 pauses only when the optional stop switch is on (`--optional-stop` on check "
        "and run, MachineConfig.optional_stop); without it M1 does nothing."),
    ErrorCode.BYTE_ORDER_MARK_SKIPPED: (
        "byte-order mark skipped",
        "A note: the file starts with a UTF-8 byte-order mark (bytes EF BB BF), which Windows "
        "editors write before UTF-8 text; it is not G-code and is skipped. A UTF-16 mark is fault 2 "
        "(the file is not ASCII text)."),
    ErrorCode.UNKNOWN_TOOL: (
        "unknown tool",
        "T (select), M6 (mount) and G43 H (apply its TCP) name a tool of the tool table by its whole "
        "number. The table is the built-in one (docs/GCODE.md) or the --tools file; add the tool "
        "there or fix the number (docs/GCODE.md, \"Tools\")."),
    ErrorCode.BAD_SPINDLE_SPEED: (
        "bad S value",
        "S is the tool output's set-point (spindle rpm, laser power) and cannot be negative, nor "
        "above the mounted tool's s_max when its table entry gives one. M300 (servo pen) needs S, "
        "the servo angle."),
    ErrorCode.BAD_OUTPUT_NUMBER: (
        "bad digital output",
        "M62-M65 need P, the number of a digital output: a whole number from 0 to 31."),
    ErrorCode.DIALECT_OPTION_OFF: (
        "dialect option not enabled",
        "M300 S (servo pen, Inkscape's pen-plotter writers) means a pen only with the pen-servo "
        "dialect option (`--pen-servo`; MachineConfig.pen_servo): elsewhere M300 means other things "
        "(Marlin: a beep)."),
    ErrorCode.UNREACHABLE: (
        "point unreachable",
        "Inverse kinematics found no joint solution for a point of this move (too far, too "
        "close, or the orientation cannot be reached)."),
    ErrorCode.JOINT_LIMIT: (
        "joint range exceeded",
        "A point of this move needs a joint outside its range on the configuration branch the "
        "robot is on."),
    ErrorCode.JOINT_SPEED: (
        "joint speed over its limit",
        "At the programmed feed rate a joint would have to move faster than its maximum speed. "
        "Lower F, or move the path away from singular configurations. Rapids (G0) are slowed "
        "down automatically and never give this fault."),
    ErrorCode.NEAR_SINGULARITY: (
        "close to a singularity",
        "The arm passes close to a singular configuration (stretched arm, wrist flip, wrist "
        "centre above the base): small tool motions need large joint motions there. A warning "
        "unless --strict."),
    ErrorCode.CONFIGURATION_FLIP: (
        "configuration flip",
        "Staying on one IK branch along the move is impossible: the arm would have to change "
        "its configuration (elbow, shoulder or wrist) in the middle of the move."),
    ErrorCode.PROGRAM_TOO_LONG: (
        "program too long",
        "The planned program time (moves and dwells) exceeds 86,400 s (24 h; "
        "MachineConfig.max_program_time), or its path needs more than 2,000,000 interpolation "
        "points (arc chords, IK samples 5 mm apart, one per line and one per block; "
        "MachineConfig.max_path_samples, which keeps the memory of a check under about 1 GB and its "
        "time to seconds). The fault is reported at the line where the program passes the limit; "
        "usually a feed rate or dwell in the wrong unit. Past the point limit nothing is read, "
        "planned or checked. A program with O-word loops and calls also executes at most 500,000 lines "
        "(MAX_EXECUTED_LINES in controllers/gcode/flow.py; O-word lines, comments and blank lines count)."),
    ErrorCode.NO_MOTION: (
        "program has no motion",
        "Nothing in the program moves the robot (empty, comments only, or only settings and "
        "dwells): there is nothing to run. An error, not tied to a line (line 0): `armtwin check` "
        "calls the program faulty and `armtwin run` refuses it, both with exit code 1."),
    ErrorCode.COLLISION: (
        "collision with the workcell",
        "With a workcell (armtwin check/run --cell FILE, docs/WORKCELL.md) the joint path is "
        "checked against the cell's bodies: a link of the robot touches an obstacle, a link that "
        "is not the end effector touches a work body, or the end effector presses into a work "
        "body deeper than the cell's touch depth. The message names the link and the body, when "
        "they first meet (program time) and how deep they overlap (mm). Raise the path, move "
        "the work origin (--origin) or the body, or change the arm's configuration."),
    ErrorCode.SELF_COLLISION: (
        "self-collision",
        "Two links of the robot that are not neighbours (and do not touch in every pose: the "
        "allowed-collision matrix generated for each robot) would touch each other along the "
        "path. The message names the links, when they first meet and how deep they overlap. "
        "Change the tool orientation or the path so that the arm does not fold onto itself."),
    ErrorCode.NEAR_MISS: (
        "closer than the clearance",
        "With --cell and --clearance MM, a link passes closer than MM to a body of the workcell "
        "(other than the end effector on work bodies) or to another link, without touching it. A "
        "warning unless --strict; the message names the pair and the smallest distance on the line."),
    ErrorCode.TOO_MANY_FAULTS: (
        "too many faults",
        "The program has more faults than the cap (100; max_faults): the report lists the first "
        "ones and ends with this notice, at the line of the first fault not shown. Fix the first "
        "faults and check again."),
    ErrorCode.LONG_DWELL: (
        "long dwell",
        "A G4 dwell longer than 10 s (MachineConfig.long_dwell) is a warning: P is in seconds here, "
        "as in LinuxCNC and grbl, but Inkscape-style writers and some firmware mean milliseconds "
        "(G4 P150 for 0.15 s would stand still for 150 s). If the program means milliseconds, use "
        "the --dwell-ms dialect option (MachineConfig.dwell_ms)."),
    ErrorCode.WORK_ZERO_AT_START: (
        "G92 before the first move",
        "A G92 before the program's first move makes the position where the robot stands (its home) "
        "the work zero: the program is then placed relative to the robot's home, and --origin (or "
        "--place) no longer moves it. A warning: CAM posts for hobby machines write G92 X0 Y0 Z0 to "
        "say \"start here\"; on an arm, remove the line and place the job with --origin or --place."),
    ErrorCode.UNITS_NOT_GIVEN: (
        "units not given",
        "A warning: the program moves before it says G20 (inches) or G21 (millimetres), so its "
        "numbers are read in millimetres (grbl's default). LinuxCNC reads such a program in its "
        "machine's configured units, often inches: write G21 or G20 before the first move."),
}


@dataclass(frozen=True)
class Fault:
    """One finding about one line of a program.

    Attributes:
        code: the stable fault number.
        line: 1-based line number in the file (0 when not tied to a line).
        column: 1-based column of the offending character, 0 for the whole line.
        message: specific message (names the word or value at fault).
        severity: ERROR (program is faulty) or WARNING.
    """

    code: ErrorCode
    line: int
    column: int
    message: str
    severity: Severity = Severity.ERROR

    @property
    def description(self) -> str:
        return self.code.description

    def __str__(self) -> str:
        what = f"{self.severity.value} {int(self.code)} ({self.code.slug}): {self.message}"
        if not self.line:  # not tied to a line: the whole program
            return what
        where = f"line {self.line}" + (f", column {self.column}" if self.column else "")
        return f"{where}: {what}"

    def to_dict(self) -> dict:
        """JSON-friendly form."""
        return {"code": int(self.code), "name": self.code.slug, "line": self.line, "column": self.column,
                "message": self.message, "severity": self.severity.value}


class GcodeError(ValueError):
    """A fault in a G-code line (the only exception the parser and interpreter raise on input).

    Attributes:
        fault: the :class:`Fault` (code, line, column, message).
    """

    def __init__(self, code: ErrorCode, message: str, line: int = 0, column: int = 0) -> None:
        self.fault = Fault(ErrorCode(code), int(line), int(column), message)
        super().__init__(str(self.fault))

    @property
    def code(self) -> ErrorCode:
        return self.fault.code

    @property
    def line(self) -> int:
        return self.fault.line

    @property
    def column(self) -> int:
        return self.fault.column

    @property
    def description(self) -> str:
        return self.fault.code.description

    def at_line(self, line: int) -> "GcodeError":
        """The same fault attached to ``line`` (used when a line is parsed out of its file)."""
        f = self.fault
        return GcodeError(f.code, f.message, line, f.column)


def cap_faults(faults, max_faults: int) -> tuple[list, bool]:
    """At most ``max_faults`` findings of ``faults`` (already in report order).

    When there are more, the report keeps the first ``max_faults - 1`` and ends with one
    TOO_MANY_FAULTS notice at the line of the first fault not shown (an error if any fault
    not shown is an error, else a warning). With ``max_faults`` < 2 there is no room for the
    notice: the first fault alone is kept.

    Returns:
        (the findings to report, whether some were cut).
    """
    faults = list(faults)
    max_faults = max(1, int(max_faults))
    if len(faults) <= max_faults:
        return faults, False
    if max_faults < 2:
        return faults[:max_faults], True
    keep, cut = faults[:max_faults - 1], faults[max_faults - 1:]
    first = cut[0]
    sevs = {f.severity for f in cut}
    sev = Severity.ERROR if Severity.ERROR in sevs else Severity.WARNING if Severity.WARNING in sevs else Severity.NOTE
    note = Fault(ErrorCode.TOO_MANY_FAULTS, first.line, 0,
                 f"more than {max_faults} findings: the report stops here; the first one not shown is "
                 f"{first.severity.value} {int(first.code)} ({first.code.slug})"
                 + (f" on line {first.line}" if first.line else ""), sev)
    return keep + [note], True


def fold_notes(faults) -> list:
    """``faults`` (in line order) with the notes of each code after the first folded into the first
    one ("... (and 4 more such lines, the last on line 90)"): a note says once what is skipped, and
    notes never crowd errors out of the report."""
    out: list = []
    first: dict[ErrorCode, int] = {}
    more: dict[ErrorCode, list[int]] = {}
    for f in faults:
        if f.severity is Severity.NOTE:
            if f.code in first:
                more.setdefault(f.code, []).append(f.line)
                continue
            first[f.code] = len(out)
        out.append(f)
    for code, lines in more.items():
        f = out[first[code]]
        n = len(lines)
        out[first[code]] = replace(f, message=f"{f.message} (and {n} more such line{'s' if n > 1 else ''}, "
                                             f"the last on line {lines[-1]})")
    return out
