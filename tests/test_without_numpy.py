"""Tripy imports and runs without numpy: numpy is blocked in a child interpreter (``sys.modules``
maps it to None, so any ``import numpy`` fails) and the ops whose trace-time code once used numpy
(resize's indices and weights) still build, run and read back with ``tolist``."""

import subprocess
import sys

_SCRIPT = r"""
import sys
sys.modules["numpy"] = None  # `import numpy` now raises ImportError
import tripy as tp

assert tp.ones((2,)).tolist() == [1.0, 1.0]
assert tp.Tensor([1, 2]).tolist() == [1, 2]
x = tp.Tensor([[[[1.0, 2.0]]]])
assert tp.resize(x, scales=(1, 1, 1, 2), mode="linear").tolist() == [[[[1.0, 1.25, 1.75, 2.0]]]]
assert tp.resize(x, output_shape=(1, 1, 1, 4), mode="nearest").tolist() == [[[[1.0, 1.0, 2.0, 2.0]]]]
cubic = tp.resize(x, scales=(1, 1, 1, 2), mode="cubic").tolist()[0][0][0]
assert [round(v, 6) for v in cubic] == [0.894531, 1.226562, 1.773438, 2.105469], cubic
assert tp.maxpool(tp.Tensor([[[[1.0, 3.0], [2.0, 0.0]]]]), (2, 2)).tolist() == [[[[3.0]]]]
assert [t.tolist() for t in tp.split(tp.arange(4), 2)] == [[0.0, 1.0], [2.0, 3.0]]
assert tp.flip(tp.Tensor([1, 2, 3])).tolist() == [3, 2, 1]
assert sys.modules["numpy"] is None  # nothing imported numpy behind the block
print("ok")
"""


def test_tripy_works_without_numpy():
    out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
