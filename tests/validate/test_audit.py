"""The residency policy on accounting reports (synthetic reports: the policy is pure data)."""

from __future__ import annotations

import pytest

from cuda2neuron.validate._audit import audit_from_report
from cuda2neuron.validate._model import Tolerances, Verdict

TREE = "/proj"
CLASSES = [("model.py", 10, 30, ((11, 14),))]  # one nn.Module class in the port tree, __init__ at 11-14


def report(cpu_ops=(), device_el=1000, cpu_el=0, f64=0, cplx=0):
    return {
        "device_ops": 100, "device_elements": device_el, "cpu_ops": sum(c for _, c, _, _ in cpu_ops),
        "cpu_elements": cpu_el, "float64_ops": f64, "complex_ops": cplx,
        "cpu_op_details": [{"op": op, "count": c, "elements": e, "locations": locs} for op, c, e, locs in cpu_ops],
    }


CASES = [
    ("all-on-device", report(), Verdict.PASS, ""),
    ("data-prep-on-cpu-is-listed-not-judged", report([("aten::randn", 2, 64, ["/proj/train.py:12"])], cpu_el=64),
     Verdict.PASS, ""),
    ("model-op-on-cpu-warns", report([("aten::mul", 3, 48, ["/proj/model.py:20"])], cpu_el=48), Verdict.WARN,
     "inside model code"),
    ("relative-location-resolved-against-tree", report([("aten::mul", 1, 8, ["model.py:21"])], cpu_el=8), Verdict.WARN,
     "model.py:21"),
    ("parameter-init-in-dunder-init-is-fine", report([("aten::uniform_", 4, 64, ["/proj/model.py:12"])], cpu_el=64),
     Verdict.PASS, ""),
    ("large-cpu-share-fails", report([("aten::mm", 5, 900, ["/proj/train.py:40"])], cpu_el=900), Verdict.FAIL,
     "processed on the CPU"),
    ("large-cpu-share-names-its-lines", report([("aten::mm", 5, 900, ["/proj/train.py:40"]),
                                                ("aten::view", 9, 5000, ["/proj/train.py:7"])], cpu_el=900),
     Verdict.FAIL, "most at /proj/train.py:40: mm)"),
    ("float64-warns", report(f64=4), Verdict.WARN, "float64"),
    ("complex-warns", report(cplx=1), Verdict.WARN, "complex"),
]


@pytest.mark.parametrize(("rep", "expected", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_policy(rep, expected, fragment):
    audit = audit_from_report(rep, TREE, CLASSES, Tolerances())
    assert audit.available and audit.verdict is expected
    assert fragment in " ".join(audit.reasons)
    assert len(audit.cpu_op_details) == len(rep["cpu_op_details"])


DTYPE_LINES = [
    ("float64-names-its-lines", "float64_op_details", "f64", "model.py:21: index, to"),
    ("complex-names-its-lines", "complex_op_details", "cplx", "model.py:21: index, to"),
]


@pytest.mark.parametrize(("key", "count", "fragment"), [c[1:] for c in DTYPE_LINES], ids=[c[0] for c in DTYPE_LINES])
def test_dtype_findings_name_the_user_lines(key, count, fragment):
    """Issue 40: "52 float64 op(s)" named no line; the finding now says where they ran."""
    rep = report(**{count: 3})
    rep[key] = [{"op": "aten::to", "count": 2, "elements": 20, "locations": ["model.py:21"]},
                {"op": "aten::index", "count": 1, "elements": 4, "locations": ["model.py:21"]}]
    audit = audit_from_report(rep, TREE, CLASSES, Tolerances())
    assert audit.verdict is Verdict.WARN and fragment in " ".join(audit.reasons), audit.reasons


def test_dtype_findings_without_a_user_line_say_so():
    rep = report(f64=1)
    rep["float64_op_details"] = [{"op": "aten::to", "count": 1, "elements": 1, "locations": []}]
    audit = audit_from_report(rep, TREE, CLASSES, Tolerances())
    assert "no line of your code" in " ".join(audit.reasons), audit.reasons


def test_shares():
    audit = audit_from_report(report([("aten::add", 1, 250, ["/proj/train.py:1"])], device_el=750, cpu_el=250),
                              TREE, CLASSES, Tolerances().with_overrides(residency_fail_share=0.5))
    assert audit.element_share_on_device == pytest.approx(0.75)
    assert audit.op_share_on_device == pytest.approx(100 / 101)
    assert audit.verdict is Verdict.PASS


def test_unavailable_without_accounting():
    audit = audit_from_report(None, TREE, CLASSES, Tolerances(), "no emulator")
    assert not audit.available and audit.note == "no emulator"


def test_host_pipeline_ops_do_not_count_towards_the_cpu_share():
    from cuda2neuron.validate._audit import audit_from_report
    from cuda2neuron.validate._model import Tolerances, Verdict

    def report(op):
        return {
            "device_ops": 100, "cpu_ops": 300, "device_elements": 1000, "cpu_elements": 5000,
            "float64_ops": 0, "complex_ops": 0,
            "cpu_op_details": [{"op": op, "count": 300, "elements": 5000, "locations": ["data.py:29"]}],
        }

    # Indexing a dataset on the host is what every data pipeline does.
    assert audit_from_report(report("aten::select"), "/proj", [], Tolerances()).verdict is Verdict.PASS
    # The same amount of real compute on the host is a port that left work behind.
    assert audit_from_report(report("aten::mm"), "/proj", [], Tolerances()).verdict is Verdict.FAIL


# The port called the packed-sequence API on model.py:20 (collected at run time by _host_api.py).
API_SITE = ["/proj/model.py:20"]
API_CASES = [
    # pack_padded_sequence sorts host lengths and the packed RNN reads batch sizes: on CUDA too.
    ("bookkeeping-at-api-site-is-expected", [("aten::sort", 3, 12, ["/proj/model.py:20"]),
                                             ("aten::item", 6, 6, ["/proj/model.py:20"])], API_SITE, Verdict.PASS),
    # The same ops on a model line that is not an API call: model work left on the host.
    ("bookkeeping-elsewhere-in-model-warns", [("aten::sort", 3, 12, ["/proj/model.py:22"])], API_SITE, Verdict.WARN),
    # Real compute on the API line (the RNN itself ran on the CPU) is never excused.
    ("compute-at-api-site-warns", [("aten::lstm", 1, 4096, ["/proj/model.py:20"])], API_SITE, Verdict.WARN),
    # Without the run-time sites (an older worker, another device) nothing is excused.
    ("no-sites-no-excuse", [("aten::sort", 3, 12, ["/proj/model.py:20"])], [], Verdict.WARN),
]


@pytest.mark.parametrize(("ops", "sites", "expected"), [c[1:] for c in API_CASES], ids=[c[0] for c in API_CASES])
def test_api_mandated_host_work(ops, sites, expected):
    rep = {**report(list(ops), cpu_el=sum(e for _, _, e, _ in ops)), "api_host_sites": sites}
    audit = audit_from_report(rep, TREE, CLASSES, Tolerances().with_overrides(residency_fail_share=1.0))
    assert audit.verdict is expected, audit.reasons
    # Excused or not, the host work is always reported.
    assert len(audit.cpu_op_details) == len(ops)
    if expected is Verdict.PASS:
        assert audit.expected_host_work and "model.py:20" in audit.expected_host_work[0]
        assert not audit.reasons
