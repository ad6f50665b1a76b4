"""ONNX's own conformance suite: the backend node test cases of ``onnx.backend.test`` (Debian's
libonnx-testdata), run through ``BackendTest`` with a Tripy backend. A case whose model Tripy
refuses at load (an op, attribute or dtype it does not support) is skipped with the reason
``tp.onnx.load`` gives; every other case must match ONNX's stored outputs. The refused cases are
listed by reason in ``REFUSED``, which a last test keeps exact. At the end the pass count per op
type is printed (and written to ``$TRIPY_ONNX_REPORT`` when that is set).

The cases run eagerly on each device Tripy has (``_cpu`` cases on the CPU, ``_cuda`` on a GPU).
``$TRIPY_ONNX_TESTDATA`` names another copy of the data directory (scripts/gpu_check.sh unpacks
Debian's there, so a machine whose onnx ships a newer set runs the same cases).
"""

import collections
import os
import re
import tempfile
import unittest

import numpy as np
import pytest

# onnx 1.12's runner still spells it np.object, which numpy removed (looked up in the module's own
# names: hasattr would reach numpy's __getattr__, which warns about the name's future meaning).
if "object" not in vars(np):
    np.object = object

onnx = pytest.importorskip("onnx")
backend_test_module = pytest.importorskip("onnx.backend.test")
from onnx.backend.base import Backend, BackendRep  # noqa: E402

import tripy as tp  # noqa: E402
from tripy import _C  # noqa: E402

# case name -> (op types of its graph, status: "skipped: reason" | "started" | "passed" | "failed")
RESULTS = {}
_current = []
_workdir = tempfile.mkdtemp(prefix="tripy-onnx-")
BFLOAT16 = 16  # onnx.TensorProto.BFLOAT16


def _device(device):
    return "gpu" if device == "CUDA" else "cpu"


def _load(model, device):
    """The model saved to a file and loaded by tp.onnx.load (which reads files only)."""
    path = os.path.join(_workdir, "model.onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return tp.onnx.load(path, device=_device(device))


class TripyRep(BackendRep):
    def __init__(self, model, device):
        self.model = model
        self.device = _device(device)

    def run(self, inputs, **kwargs):
        tensors = [self._tensor(a, elem) for a, (_, elem, _) in zip(inputs, self.model._graph.inputs)]
        outputs = self.model(*tensors)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        return [self._array(o, elem) for o, (_, elem, _) in zip(outputs, self.model._graph.outputs)]

    def _tensor(self, array, elem):
        if array is None or isinstance(array, list):  # an empty optional, a sequence
            return array if array is None else [self._tensor(a, elem) for a in array]
        if elem == BFLOAT16:  # ONNX's test data holds bfloat16 as its bits, in uint16
            bits = np.array(array, order="C").astype(np.uint32) << 16
            return tp.cast(tp.Tensor(bits.view(np.float32), device=self.device), tp.bfloat16)
        # np.array, not np.ascontiguousarray, which makes a 0-d array 1-d
        return tp.Tensor(np.array(array, order="C"), device=self.device)

    def _array(self, tensor, elem):
        if tensor is None or isinstance(tensor, list):
            return tensor if tensor is None else [self._array(t, elem) for t in tensor]
        if elem == BFLOAT16:
            wide = np.asarray(tp.copy(tp.cast(tensor, tp.float32), tp.device("cpu")))
            return (wide.view(np.uint32) >> 16).astype(np.uint16)
        return np.asarray(tensor if self.device == "cpu" else tp.copy(tensor, tp.device("cpu")))


class TripyBackend(Backend):
    @classmethod
    def is_compatible(cls, model, device="CPU", **kwargs):
        ops = sorted({n.op_type for n in model.graph.node})
        _current[:] = [model.graph.name, ops]
        try:
            _load(model, device)
        except tp.TripyException as e:
            text = str(e)
            reason = text[text.find("found before any work:") :].splitlines()[1:2] if "before any work" in text else [text]
            RESULTS[_case_key()] = (ops, "skipped: " + (reason[0].strip() if reason else text))
            return False
        RESULTS[_case_key()] = (ops, "started")
        return True

    @classmethod
    def prepare(cls, model, device="CPU", **kwargs):
        # Newer runners prepare node cases without asking is_compatible first: a refusal skips.
        if not cls.is_compatible(model, device):
            raise unittest.SkipTest("Not compatible with backend")
        return TripyRep(_load(model, device), device)

    @classmethod
    def supports_device(cls, device):
        return device == "CPU" or (device == "CUDA" and _C.gpu_available())


def _case_key():
    return os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]


class TripyBackendTest(backend_test_module.BackendTest):
    @classmethod
    def assert_similar_outputs(cls, ref_outputs, outputs, rtol, atol, **kwargs):  # newer onnx adds model_dir
        key = _case_key()
        ops, _ = RESULTS.get(key, ([], ""))
        RESULTS[key] = (ops, "failed")
        cls._assert_similar(ref_outputs, outputs, rtol, atol)
        RESULTS[key] = (ops, "passed")

    @classmethod
    def _assert_similar(cls, refs, outs, rtol, atol):
        """ONNX's comparison, with sequences (lists: of equal length, item by item, 0-d items too)
        and empty optionals (None) compared whole."""
        assert len(outs) == len(refs), f"{len(outs)} outputs, expected {len(refs)}"
        for ref, out in zip(refs, outs):
            if ref is None or out is None:
                assert ref is None and out is None, f"got {out!r}, expected {ref!r}"
            elif isinstance(ref, list) or isinstance(out, list):
                assert isinstance(ref, list) and isinstance(out, list), f"got {type(out)}, expected {type(ref)}"
                cls._assert_similar(ref, out, rtol, atol)
            else:
                super().assert_similar_outputs([ref], [out], rtol, atol)


_backend_test = TripyBackendTest(TripyBackend, __name__)


def _node_cases_under(root):
    """The node cases of a data directory, as the runner's TestCase (a newer onnx makes its own node
    cases in memory and no longer reads a directory for them)."""
    import dataclasses

    from onnx.backend.test.case.test_case import TestCase

    fields = getattr(TestCase, "_fields", None) or [f.name for f in dataclasses.fields(TestCase)]
    for name in sorted(os.listdir(os.path.join(root, "node"))):
        case_dir = os.path.join(root, "node", name)
        if os.path.isfile(os.path.join(case_dir, "model.onnx")):
            values = dict(name=name, url=None, model_name=name[len("test_"):], model_dir=case_dir, model=None,
                          data_sets=None, kind="node", rtol=1e-3, atol=1e-7)
            yield TestCase(**{k: v for k, v in values.items() if k in fields})


if os.environ.get("TRIPY_ONNX_TESTDATA"):
    # Another copy of the cases (Debian's, on a machine whose onnx ships its own newer set) in place
    # of the runner's.
    _backend_test._test_items["NodeModel"].clear()
    for _case in _node_cases_under(os.environ["TRIPY_ONNX_TESTDATA"]):
        _backend_test._add_model_test(_case, "Node")
    assert _backend_test._test_items["NodeModel"], f"no node case under {os.environ['TRIPY_ONNX_TESTDATA']}"
# Only the node cases: the "real" models are downloaded, the others are older PyTorch exports.
OnnxBackendNodeModelTest = _backend_test.test_cases["OnnxBackendNodeModelTest"]


# The node cases Tripy refuses at load, by reason (regular expressions over the case names, without
# the device suffix). test_refused_cases_are_the_listed_ones keeps this list exact: a listed case
# that runs, or a refused one that is not listed, fails it.
REFUSED = {
    "dtypes Tripy does not have (float64, unsigned and 16-bit integers, strings)": [
        r"test_.*_(uint8|uint16|uint32|uint64|int16|float64)", r"test_(cast|castlike)_.*(DOUBLE|STRING).*",
        r"test_cumsum_.*", r"test_einsum_.*", r"test_reduce_log_sum_exp_.*", r"test_bitshift_.*",
        r"test_(basic_)?convinteger.*", r"test_(dynamic)?(de)?quantizelinear.*", r"test_qlinear.*",
        r"test_matmulinteger", r"test_strnormalizer_.*", r"test_eyelike_with_dtype", r"test_bernoulli(_double)?(_expanded)?",
        r"test_tfidfvectorizer_.*", r"test_pow_types_float32_uint(32|64)", r"test_mod_mixed_sign_int16"],
    "random numbers": [r"test_bernoulli_seed(_expanded)?"],
    "training ops of the preview domain (no standard opset imported)": [
        r"test_(adagrad|adam|momentum|nesterov_momentum)(_multiple)?"],
    "training-mode Dropout and BatchNormalization (Tripy runs inference)": [
        r"test_training_dropout.*", r"test_batchnorm_.*_training_mode"],
}


def _refusal_of(case):
    base = case.rsplit("_", 1)[0]  # without _cpu / _cuda
    return next((reason for reason, patterns in REFUSED.items() if any(re.fullmatch(p, base) for p in patterns)), None)


def _tally():
    per_op = collections.defaultdict(collections.Counter)
    for key, (ops, status) in RESULTS.items():
        state = status.split(":")[0]
        state = "failed" if state == "started" else state
        for op in ops:
            per_op[op][state] += 1
    return per_op


@pytest.fixture(scope="module", autouse=True)
def _report(request):
    yield
    per_op = _tally()
    if not per_op:
        return
    lines = [f"{'op type':<28}{'passed':>8}{'failed':>8}{'skipped':>9}"]
    for op in sorted(per_op):
        c = per_op[op]
        lines.append(f"{op:<28}{c['passed']:>8}{c['failed']:>8}{c['skipped']:>9}")
    total = collections.Counter(status.split(":")[0] for _, status in RESULTS.values())
    lines.append(f"cases: {total['passed']} passed, {total['failed'] + total['started']} failed, "
                 f"{total['skipped']} skipped (unsupported op, attribute or dtype)")
    supported = sorted(op for op, c in per_op.items() if c["passed"] and not c["failed"])
    lines.append(f"op types with every run case passing: {len(supported)}")
    text = "\n".join(lines)
    out = os.environ.get("TRIPY_ONNX_REPORT")
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")
            for key, (ops, status) in sorted(RESULTS.items()):
                f.write(f"{key.split('::')[-1]}\t{'+'.join(ops)}\t{status}\n")
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line("\nONNX backend node cases per op type (Tripy):\n" + text)


def test_refused_cases_are_the_listed_ones():
    """Every node case that ran before this test was refused exactly when REFUSED lists it."""
    ran = {key.split("::")[-1]: status for key, (_, status) in RESULTS.items() if "OnnxBackendNodeModelTest" in key}
    if not ran:
        pytest.skip("no node case ran")
    unlisted = sorted(f"{case}: {status}" for case, status in ran.items()
                      if status.startswith("skipped") and _refusal_of(case) is None)
    wrongly = sorted(f"{case} ({_refusal_of(case)}): {status}" for case, status in ran.items()
                     if not status.startswith("skipped") and _refusal_of(case) is not None)
    assert not unlisted, "refused but not listed in REFUSED:\n" + "\n".join(unlisted)
    assert not wrongly, "listed in REFUSED but not refused:\n" + "\n".join(wrongly)
