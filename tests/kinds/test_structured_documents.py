"""The structured-config parsers: every scalar with its key path and its place in the text, in
YAML (block, flow, several documents, anchors), JSON / JSONC, TOML and INI; files that do not
parse are read as text; the YAML shell view keeps offsets. And a fix changes the value's
characters and no other byte, whatever the format."""

from __future__ import annotations

import pytest

from cuda2neuron.core import Config
from cuda2neuron.documents.buildfile import parse_build
from cuda2neuron.documents.structured import parse_ini, parse_json, parse_toml, parse_yaml
from cuda2neuron.workspace import fix_source, lint_source


def _values(doc) -> dict[tuple, tuple[str, str]]:
    """path -> (value, the value as written)."""
    return {s.path: (s.value, doc.raw[s.start:s.end]) for s in doc.scalars}


def test_yaml_block_and_flow_styles_read_the_same_paths():
    block = parse_yaml("dist:\n  backend: nccl  # fast\n  sizes: [1, 2]\n")
    flow = parse_yaml('{"dist": {"backend": "nccl", "sizes": [1, 2]}}\n')
    assert _values(block)[("dist", "backend")] == ("nccl", "nccl")
    assert _values(flow)[("dist", "backend")] == ("nccl", '"nccl"')
    assert set(_values(block)) == set(_values(flow)) == {("dist", "backend"), ("dist", "sizes", 0), ("dist", "sizes", 1)}


def test_yaml_documents_are_numbered_and_anchors_read_once():
    doc = parse_yaml("base: &b\n  device: cuda\nrun:\n  <<: *b\n  other: *b\n---\nkind: Job\n")
    devices = [s for s in doc.scalars if s.key == "device"]
    assert [(s.path, s.document) for s in devices] == [(("base", "device"), 0)]
    assert doc.documents == 2 and doc.top_keys(1) == {"kind"}


@pytest.mark.parametrize(
    ("text", "path", "literal"),
    [
        pytest.param("a: cuda\n", ("a",), True, id="plain"),
        pytest.param("a: 'cuda'\n", ("a",), True, id="single-quoted"),
        pytest.param('a: "cu\\x64a"\n', ("a",), False, id="escaped"),
        pytest.param("a: !!str cuda\n", ("a",), False, id="tagged"),
        pytest.param("a: |\n  cuda\n", ("a",), False, id="block-scalar"),
    ],
)
def test_yaml_values_written_literally_can_be_spliced(text, path, literal):
    [scalar] = [s for s in parse_yaml(text).scalars if s.path == path]
    assert scalar.value.strip() == "cuda" and scalar.literal is literal


def test_a_template_is_read_line_by_line():
    doc = parse_yaml("spec:\n  {{- if .Values.gpu }}\n  limits:\n    nvidia.com/gpu: {{ .Values.n }}\n  device: cuda\n")
    assert not doc.parsed and doc.error
    assert [(s.key, s.value) for s in doc.scalars] == [("device", "cuda")]
    assert "nvidia.com/gpu" in {p[-1] for (_d, p) in doc.keys}


def test_yaml_shell_view_keeps_commands_and_offsets():
    text = (
        "env:\n  A: b\n"
        "steps:\n  - run: |\n      CUDA_VISIBLE_DEVICES=0 pytest\n  - run: 'nvidia-smi'\n"
        "services:\n  t:\n    environment:\n      - NCCL_DEBUG=INFO\n    image: x\n"
    )
    doc = parse_yaml(text)
    view = doc.text
    assert len(view) == len(text) and [i for i, c in enumerate(view) if c == "\n"] == [i for i, c in enumerate(text) if c == "\n"]
    kept = "".join(c for c in view if not c.isspace())
    assert kept == "CUDA_VISIBLE_DEVICES=0pytest" + "nvidia-smi" + "NCCL_DEBUG=INFO"


# A quote left open in one shell value stays in it: each value is lexed on its own, so a later
# value's command is code, not the rest of a quoted string (and its CUDA setting is reported).
_OPEN_QUOTE = {
    "workflow-apostrophe-in-run": (
        ".github/workflows/ci.yml",
        "jobs:\n  a:\n    steps:\n      - run: echo Don't panic\n"
        "      - run: CUDA_VISIBLE_DEVICES=0 python train.py\n",
    ),
    "kubernetes-argv-item": (
        "k8s/pod.yaml",
        "spec:\n  containers:\n    - args: [\"--prompt\", \"What's this?\"]\n"
        "    - command: [\"sh\", \"-c\", \"CUDA_VISIBLE_DEVICES=0 python train.py\"]\n",
    ),
    "gitlab-script-items": (
        ".gitlab-ci.yml",
        "test:\n  script:\n    - python -c \"print('a)\"\n    - echo \"done\n"
        "    - CUDA_VISIBLE_DEVICES=0 python train.py\n",
    ),
}


@pytest.mark.parametrize(("path", "text"), _OPEN_QUOTE.values(), ids=_OPEN_QUOTE.keys())
def test_a_quote_open_in_one_shell_value_stays_in_it(path, text):
    doc = parse_yaml(text, path)
    assert doc.is_code(text.index("CUDA_VISIBLE_DEVICES"))
    codes = [f.code for f in lint_source(text, path, Config())]
    assert codes.count("CN701") == 1


def test_json_and_jsonc():
    doc = parse_json('{\n  // comment\n  "a": {"backend": "nccl", "x": [1, "cu\\u0064a"]}, /* c */\n  "b": true,\n}\n')
    assert doc.parsed
    values = _values(doc)
    assert values[("a", "backend")] == ("nccl", '"nccl"')
    assert values[("a", "x", 1)][0] == "cuda"
    assert [s.literal for s in doc.scalars if s.path == ("a", "x", 1)] == [False]
    assert values[("b",)] == ("true", "true")


@pytest.mark.parametrize("text", ['{"a": }', '{"a": 1', "[1, 2] x", "{'a': 1}"], ids=["no-value", "unclosed", "extra", "single-quotes"])
def test_invalid_json_is_read_as_text(text):
    doc = parse_json(text)
    assert not doc.parsed and doc.error and doc.scalars == ()


def test_toml_tables_arrays_and_inline_tables():
    doc = parse_toml(
        '[tool.poetry.dependencies]\ncupy-cuda111 = ">=8.6.0"\nte = {git = "https://x", rev = "stable"}\n'
        "[dist]\nbackend = 'nccl' # c\nlst = [\n \"a\",\n \"b\",\n]\n[[runs]]\ndevice = \"cuda\"\n[[runs]]\ndevice = \"cpu\"\n"
    )
    values = _values(doc)
    assert values[("dist", "backend")] == ("nccl", "'nccl'")
    assert values[("dist", "lst", 1)] == ("b", '"b"')
    assert values[("tool", "poetry", "dependencies", "te", "rev")] == ("stable", '"stable"')
    assert values[("runs", 0, "device")][0] == "cuda" and values[("runs", 1, "device")][0] == "cpu"
    assert not parse_toml("a = [\n").parsed


def test_ini_sections_and_continuation_lines():
    doc = parse_ini("[options]\ninstall_requires =\n    cupy-cuda11x\n    numpy\n[dist]\nbackend = nccl\n; c\n")
    values = _values(doc)
    assert values[("options", "install_requires", 0)] == ("cupy-cuda11x", "cupy-cuda11x")
    assert values[("dist", "backend")] == ("nccl", "nccl")
    assert [d.name for d in doc.dependencies] == ["cupy-cuda11x", "numpy"]
    assert not parse_ini("no section = 1\n").parsed


@pytest.mark.parametrize(
    ("line", "value"),
    [
        pytest.param("backend = nccl  ; multi-node", "nccl", id="semicolon"),
        pytest.param("backend = nccl # multi-node", "nccl", id="hash"),
        pytest.param("backend = nccl;gloo", "nccl;gloo", id="no-space-no-comment"),
        pytest.param("url = http://h/#frag", "http://h/#frag", id="hash-inside-a-value"),
    ],
)
def test_ini_inline_comments_end_the_value(line, value):
    doc = parse_ini(f"[dist]\n{line}\n[options]\ninstall_requires =\n    cupy-cuda11x  # gpu\n")
    values = _values(doc)
    assert values[("dist", "backend" if "backend" in line else "url")] == (value, value)
    assert values[("options", "install_requires", 0)] == ("cupy-cuda11x", "cupy-cuda11x")


def test_build_files_blank_comments_and_keep_recipes_as_shell():
    make = parse_build("NVCC = nvcc  # the compiler\nall:\n\t@CUDA_VISIBLE_DEVICES=0 python x.py\n# nvcc\n", "Makefile")
    assert "the compiler" not in make.code and "# nvcc" not in make.code and "NVCC = nvcc" in make.code
    assert make.text.strip() == "CUDA_VISIBLE_DEVICES=0 python x.py"
    cmake = parse_build('enable_language(CUDA) # c\nmessage("a # b")\n#[[ cuda\n]]\n', "CMakeLists.txt")
    assert cmake.code.split("\n")[:2] == ["enable_language(CUDA)    ", 'message("a # b")'] and "cuda" not in cmake.code


# A fix touches the value's characters only: comments, quoting, layout, line endings and bytes
# that are not UTF-8 stay as they were.
_UNTOUCHED = [
    pytest.param(
        "# c\n{\n  'x': 1, # one\n  \"distributed_backend\": \"nccl\",   # per cluster\n}\n", "configs/neox.yml", id="yaml-flow",
    ),
    pytest.param("a: 1\r\nbackend: nccl\r\n# café\r\n", "config/train.yaml", id="yaml-crlf"),
    pytest.param(b"a: 1\nbackend: nccl\n# caf\xe9 (latin-1)\n", "config/train.yaml", id="yaml-latin1-comment"),
    pytest.param('{\n\t"backend":\t"nccl" ,\n\t"k": [1,2]\n}', "tune.json", id="json-tabs-no-newline"),
    pytest.param('[dist]   # the group\nbackend = "nccl"  # fast\n', "run.toml", id="toml"),
    pytest.param("[dist]\nbackend=nccl\n; c\n", "setup.cfg", id="ini"),
]


@pytest.mark.parametrize(("source", "path"), _UNTOUCHED)
def test_a_fix_changes_only_the_value(source, path):
    fixed, findings = fix_source(source, path, Config(select=("CN732",)))
    raw = source.encode("utf-8", "surrogateescape") if isinstance(source, str) else source
    out = fixed.encode("utf-8", "surrogateescape") if isinstance(fixed, str) else fixed
    assert [f.code for f in findings if f.applied] == ["CN732"]
    assert out == raw.replace(b"nccl", b"neuron", 1)
