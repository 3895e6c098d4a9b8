"""``armtwin bench gcode``: parser speed against gcodeparser, a 100,000-line preflight, and the
worst-case check (``--worst-mb`` MB of full circles, stopped by the path-point cap).

Generates a 100,000-line program (feed moves, arcs with I/J — incremental and G90.1 absolute
centres, K0 — and R, rapids, comments with non-ASCII text and a long one, the path control modes
G61 / G61.1 / G64 P Q, G53 moves, M1) that fits the IRB120's workspace, then in one process times: armtwin's parser (full
validation), the gcodeparser package parsing the same text (both with the garbage collector as
the process has it, started from the same heap), and the full preflight (parse +
interpret + plan + IK along the path + limit checks) on the IRB120. Times are process CPU
times, best of ``--repeat`` interleaved rounds, so that other load on the machine distorts
the ratio as little as possible.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from .cli import add_json_flag, print_json

LINES = 100_000
#: the worst-case check of issue 15.16: this many MB of full circles (the path-point cap stops them)
WORST_MB = 50.0
#: one full circle of 1 mm radius: ~37 path points (chords 5 µm from the arc, IK samples, the line)
WORST_LINE = b"G2 I1 J0\n"


def worst_case_program(mb: float) -> bytes:
    """``mb`` MB of full circles after a start move: reading them all would take minutes."""
    head = b"G21 G90 G0 X0 Y0 Z0\nG1 F600\n"
    return head + WORST_LINE * max(1, int(mb * 1e6 / len(WORST_LINE)))


def register(sub) -> None:
    p = sub.add_parser("gcode", help="G-code parser vs gcodeparser; 100,000-line preflight time")
    p.add_argument("--lines", type=int, default=LINES, help=f"program length (default {LINES})")
    p.add_argument("--repeat", type=int, default=5, help="parse rounds, best one counts (default 5)")
    p.add_argument("--worst-mb", type=float, default=WORST_MB,
                   help=f"size of the worst-case program, MB of full circles (default {WORST_MB:g}; 0: skip)")
    add_json_flag(p)
    p.set_defaults(func=run)


def generate_program(lines: int = LINES, seed: int = 0) -> str:
    """A program of ``lines`` lines: square-ish strokes, arcs (I/J, absolute centres, K0, R), rapids,
    comments, tool outputs, the words of issue 17 (G61, G61.1, G64 P Q, G90.1/G91.1, G53, M1, G81, a
    parameter counting the drilled holes, an O-word subroutine called with an argument and counted
    ``repeat`` loops).

    Everything stays within ±40 mm of the work origin and 0..10 mm above it.
    """
    rng = np.random.default_rng(seed)
    out = ["%", "(armtwin bench program: Fr\u00e4ser \u00d8 3 mm, caf\u00e9)", "(" + "a long CAM comment " * 20 + ")",
           "G21 G90 G17 G54 G91.1 G64 P0.02 Q0.01", "#<holes> = 0",
           # a subroutine: a small square from where it is called (its side a parameter), back to the start
           "o100 sub", "G91 G1 X#1 F1200", "G1 Y#1", "G1 X[-#1]", "G1 Y[-#1]", "G90", "o100 endsub",
           "G0 Z10", "G0 X0 Y0", "G1 Z0 F1500"]
    # issue 17's words, one in place of every fifth comment (the base frame's z of work z 10: the IRB120's origin)
    extra = ["G61", "G64 P0.05", "G61.1", "G64", "M1", "G53 G0 Z210", "G98 G81 Z0 R2 F600", "#<holes> = [#<holes> + 1]",
             "o100 call [1.5]", "LOOP"]
    x = y = 0.0
    while len(out) < lines - 2:
        r = int(rng.integers(0, 10))
        if r == 0:   # a comment, the outputs a CAM program switches, or issue 17's words
            k = len(out) % 5
            word = (f"(stroke {len(out)})" if k == 0 else "M3 S12000 M8" if k == 1 else "M62 P1" if k == 2
                    else "M5 M9" if k == 3 else extra[len(out) // 5 % len(extra)])
            if word == "LOOP":      # a counted loop: two small lifts and back (its own o-number)
                o = 1000 + len(out)
                out += [f"o{o} repeat [2]", "G91 G1 Z0.5 F800", "G1 Z-0.5", "G90", f"o{o} endrepeat"]
            else:
                out.append(word)
        elif r <= 5:
            x = float(np.clip(x + rng.uniform(-8, 8), -38, 38))       # room for o100's 1.5 mm square
            y = float(np.clip(y + rng.uniform(-8, 8), -38, 38))
            out.append(f"N{len(out) % 99999} G1 X{x:.3f} Y{y:.3f} F{int(rng.integers(600, 3000))}")
        elif r <= 7:
            rad = float(rng.uniform(2, 6))
            cx = float(np.clip(x + rad, -40, 40))
            ex, ey = cx + rad, y  # half circle to the far side (ccw/cw alternate)
            if abs(ex) > 40:
                ex, cx = x, x  # degenerate: use a full circle instead
                out.append(f"G{2 + (len(out) % 2)} I{rad:.3f} J0 ; full circle")
                continue
            if len(out) % 6 == 1:      # the centre as absolute coordinates (G90.1), then offsets again
                out.append(f"G90.1 G2 X{ex:.3f} Y{ey:.3f} I{cx:.3f} J{y:.3f}")
                out.append("G91.1")
            elif len(out) % 2:
                out.append(f"G2 X{ex:.3f} Y{ey:.3f} I{cx - x:.3f} J0" + (" K0" if len(out) % 3 else ""))
            else:
                out.append(f"G3 X{ex:.3f} Y{ey:.3f} R{rad:.3f} (half circle)")
            x, y = ex, ey
        elif r == 8:
            out.append(f"G0 Z{rng.uniform(2, 10):.2f} ; lift")
            out.append("G1 Z0 F800")
        else:
            x = float(rng.uniform(-40, 40))
            y = float(rng.uniform(-40, 40))
            out.append(f"G0 X{x:.3f} Y{y:.3f}")
    out += ["G0 Z10", "M30"]
    return "\n".join(out[:lines]) + "\n"


def run(args: argparse.Namespace) -> int:
    import gcodeparser

    from ..controllers.gcode import parse_program
    from ..controllers.gcode.preflight import preflight
    from ..robots import get

    if args.lines < 10 or args.repeat < 1 or not 0 <= args.worst_mb <= 200:
        from .cli import CliError
        raise CliError("--lines must be >= 10, --repeat >= 1 and --worst-mb 0 to 200")
    text = generate_program(args.lines)
    n = text.count("\n")
    ours, theirs = [], []
    res = None
    for k in range(args.repeat):
        print(f"parse round {k + 1}/{args.repeat} …", file=sys.stderr)
        # free the previous round's parse first: each parser starts from the same heap (the
        # garbage collector's full passes scan every live object, so a kept result costs time)
        res = None
        t0 = time.process_time()
        res = parse_program(text)
        ours.append(time.process_time() - t0)
        t0 = time.process_time()
        count = sum(1 for _ in gcodeparser.parse_gcode_lines(text))
        theirs.append(time.process_time() - t0)
    print("preflight on the IRB120 …", file=sys.stderr)
    spec = get("irb120")
    t0 = time.process_time()
    rep = preflight(text, spec)
    pre = time.process_time() - t0
    worst = None
    if args.worst_mb > 0:
        data = worst_case_program(args.worst_mb)
        print(f"worst-case check: {len(data) / 1e6:.0f} MB of full circles …", file=sys.stderr)
        t0 = time.process_time()
        wrep = preflight(data, spec)
        worst = {"mb": len(data) / 1e6, "check_s": time.process_time() - t0,
                 "stopped_at_line": next((f.line for f in wrep.faults if int(f.code) == 105), 0)}
        del data, wrep
    out = {
        "lines": n,
        "armtwin_parse_s": min(ours),
        "armtwin_parse_lines_per_s": n / min(ours),
        "gcodeparser_parse_s": min(theirs),
        "gcodeparser_lines_per_s": n / min(theirs),
        "parse_speed_ratio": min(theirs) / min(ours),
        "preflight_s": pre,
        "preflight_clean": rep.clean(),
        "preflight_faults": len(rep.faults),
        "program_time_s": rep.duration,
        "ik_samples": 0 if rep.samples is None else len(rep.samples),
        "parse_faults": len(res.faults),
        "gcodeparser_commands": count,
        "worst_case": worst,
        "targets": {"parse_speed_ratio": ">= 2", "preflight_s": "<= 10", "worst_case_check_s": "<= 10"},
    }
    if args.json:
        print_json(out)
        return 0
    print(f"program: {n} lines ({out['ik_samples']} IK samples, {rep.duration:.0f} s of motion)")
    print(f"  armtwin parser      {out['armtwin_parse_lines_per_s']:>12,.0f} lines/s  (full validation)")
    print(f"  gcodeparser         {out['gcodeparser_lines_per_s']:>12,.0f} lines/s")
    print(f"  ratio               {out['parse_speed_ratio']:>12.2f} x   (target >= 2)")
    print(f"  preflight IRB120    {pre:>12.2f} s     (parse+plan+IK+checks; target <= 10 s; "
          f"{'clean' if rep.clean() else f'{len(rep.faults)} findings'})")
    if worst is not None:
        print(f"  worst-case check    {worst['check_s']:>12.2f} s     ({worst['mb']:.0f} MB of full circles, "
              f"stopped by the path-point cap at line {worst['stopped_at_line']:,}; target <= 10 s)")
    return 0
