"""docs/tools/pendant_gif.py, the command that makes the README's GIF of the teach pendant.

Runs it as the README says, small and short: a 640×400 window, three frames (the start pose and
two presses of "J1 +"), ``--low-graphics``. Checks that it prints the path of a GIF whose
frames all differ (the arm moves, the readout changes), in the window's size, and that the
pendant it started no longer serves. Needs Chromium and playwright as tests/test_ui_browser.py
does: a missing piece fails the test (a broken install), it is not skipped. About 20-60 s (most
of it Chromium starting and the page connecting).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "docs" / "tools" / "pendant_gif.py"
CHROMIUM = os.environ.get("ARMTWIN_CHROMIUM", "/usr/bin/chromium")  # as tests/test_ui_browser.py


@pytest.mark.slow
def test_pendant_gif_writes_distinct_frames(tmp_path):
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"no Chromium at {CHROMIUM}: apt-get install chromium (the README's test command), "
                    "or point ARMTWIN_CHROMIUM at a Chromium binary", pytrace=False)
    for module in ("playwright", "viser"):
        try:
            __import__(module)
        except ImportError as exc:
            pytest.fail(f"{module} is not installed ({exc}): pip install -e '.[test]' (the README's test command)",
                        pytrace=False)
    out = tmp_path / "pendant.gif"
    r = subprocess.run([sys.executable, str(SCRIPT), "--robot", "irb120", "--out", str(out), "--size", "640x400",
                        "--fps", "5", "--frames", "3", "--low-graphics"],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert r.stdout.strip() == str(out)

    import imageio.v3 as iio
    frames = iio.imread(out, index=None)
    assert frames.shape[0] == 3 and frames.shape[1:3] == (400, 640), frames.shape
    flat = frames[..., :3].reshape(3, -1).astype(int)
    for a in range(3):
        for b in range(a + 1, 3):
            changed = np.any(flat[a].reshape(-1, 3) != flat[b].reshape(-1, 3), axis=1).mean()
            assert changed > 0.002, f"frames {a} and {b} differ in {changed:.2%} of the pixels only"
    # the 3D view changed, not only the readout: the left half (the view; the panel is on the right)
    left = frames[:, :, :320, :3].astype(int)
    assert np.abs(left[1] - left[0]).max() > 60 and np.abs(left[2] - left[1]).max() > 60

    # the pendant it started is stopped: its port no longer answers
    m = re.search(r"pendant at http://127\.0\.0\.1:(\d+)", r.stderr)
    assert m, r.stderr
    with socket.socket() as s:
        s.settimeout(2.0)
        assert s.connect_ex(("127.0.0.1", int(m.group(1)))) != 0, "the pendant still serves after the script ended"
