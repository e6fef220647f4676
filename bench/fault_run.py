"""The fault run of issue 33: bad input and faults against check, migrate, suppress and validate.

    sudo python bench/fault_run.py [--tool PYTHONPATH] [--only NAME ...] [--skip-validate]

Each scenario runs the real command line (``python -m cuda2neuron`` in a subprocess) and judges
four things, which the table at the end sums up:
  * data lost     — a user's file (source, a port's hand edit, a file next to it) changed or gone
                    where it should not have, or a file left torn;
  * code executed — a marker file that only a crafted cache entry could have created exists;
  * tracebacks    — a Python traceback on stderr (every failure must be one clean line);
  * stray         — processes of the command (pool workers, validate runs, a daemon they
                    started) still alive two seconds after it ended or was killed;
  * written outside — a file outside the tree, port or cache the command was given written or
                    deleted (a symlink planted in the cache, a forged --out marker);
  * hangs         — the command did not end within its deadline (a FIFO read, a quadratic rule).
The issue-44 scenarios (``--only issue44``) act as another user (uid 54321) where ownership
matters, so they need root for that part.
Disk full and read-only use a small tmpfs (needs root: ``mount -t tmpfs``); without root those
scenarios say so and are skipped. ``--tool`` runs another checkout's code (PYTHONPATH), e.g. main
for the before picture.
"""

from __future__ import annotations

import argparse
import base64
import errno
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_migrate import generate  # noqa: E402

CUDA = "import torch\nmodel = Net().cuda()\nx = torch.zeros(3, device='cuda')\n"


@dataclass
class Outcome:
    name: str
    expected: str
    got: str = ""
    data_lost: int = 0
    code_executed: int = 0
    tracebacks: int = 0
    stray: int = 0
    written_outside: int = 0  # a file outside the tree or cache the command was given, written or deleted
    hangs: int = 0  # the command did not end within its scenario's deadline
    notes: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.data_lost or self.code_executed or self.tracebacks or self.stray or self.written_outside
                    or self.hangs)


class Runner:
    def __init__(self, tool: str | None, cache: Path) -> None:
        self.tool = tool
        self.cache = cache

    def env(self, **extra: str) -> dict[str, str]:
        env = {**os.environ, "CUDA2NEURON_RESULTS_CACHE": str(self.cache), **extra}
        if self.tool:
            env["PYTHONPATH"] = self.tool
        return env

    def run_py(self, code: str) -> str:
        return subprocess.run([sys.executable, "-c", code], env=self.env(), capture_output=True, text=True).stdout

    def cmd(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "cuda2neuron", *args]

    def run(self, *args: str, cwd: Path | None = None, timeout: float = 600, **env: str) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(self.cmd(*args), cwd=cwd, env=self.env(**env), capture_output=True, text=True,
                                  timeout=timeout, errors="replace")
        except subprocess.TimeoutExpired as exc:
            return subprocess.CompletedProcess(exc.cmd, -999, exc.stdout or "", (exc.stderr or "") + "\n<timeout>")

    def popen(self, *args: str, cwd: Path | None = None, **env: str) -> subprocess.Popen:
        return subprocess.Popen(self.cmd(*args), cwd=cwd, env=self.env(**env), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, errors="replace")


def tracebacks(text: str) -> int:
    return text.count("Traceback (most recent call last)")


def snapshot(root: Path) -> dict[str, bytes]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink() and ".git" not in p.parts:
            out[p.relative_to(root).as_posix()] = p.read_bytes()
    return out


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def git_repo(root: Path) -> None:
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "-c", "user.email=f@f", "-c", "user.name=f", "commit", "-qm", "init")


# -- processes ---------------------------------------------------------------------------------


def proc_table() -> dict[int, tuple[int, str, bytes]]:
    """pid -> (ppid, state, environ) of every process."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_bytes()
            env = Path(f"/proc/{name}/environ").read_bytes()
        except OSError:
            continue
        rest = stat.rsplit(b")", 1)[1].split()
        out[int(name)] = (int(rest[1]), rest[0].decode(), env)
    return out


def descendants(pid: int) -> set[int]:
    table = proc_table()
    found, stack = set(), [pid]
    while stack:
        p = stack.pop()
        for child, (ppid, _, _) in table.items():
            if ppid == p and child not in found:
                found.add(child)
                stack.append(child)
    return found


def alive(pids: set[int]) -> set[int]:
    table = proc_table()
    return {p for p in pids if p in table and table[p][1] not in ("Z", "X")}


def _drain(p: subprocess.Popen) -> str:
    """The stderr of a killed command. Trap: workers that outlive it hold its pipes open, so
    reading to the end would wait for them for ever; give up after a few seconds."""
    try:
        return p.communicate(timeout=5)[1]
    except subprocess.TimeoutExpired:
        p.wait()
        return ""


def reap(pids: set[int]) -> None:
    """Counted, then ended: the run leaves nothing behind whatever the tool under test did."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def with_mark(mark: bytes) -> set[int]:
    return {p for p, (_, state, env) in proc_table().items() if state not in ("Z", "X") and mark in env}


# -- tmpfs -------------------------------------------------------------------------------------


class Tmpfs:
    def __init__(self, path: Path, size: str) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True, capture_output=True)

    def fill(self, leave: int = 0) -> None:
        """Fill it up, leaving about ``leave`` bytes free."""
        st = os.statvfs(self.path)
        free = st.f_bavail * st.f_frsize - leave
        with open(self.path / ".filler", "wb") as fh:
            try:
                while free > 0:
                    n = min(free, 1 << 20)
                    fh.write(b"\0" * n)
                    free -= n
                fh.flush()
            except OSError:
                pass

    def read_only(self) -> None:
        subprocess.run(["mount", "-o", "remount,ro", str(self.path)], check=True, capture_output=True)

    def close(self) -> None:
        subprocess.run(["umount", "-l", str(self.path)], capture_output=True)


def can_mount() -> bool:
    if os.geteuid() != 0:
        return False
    probe = Path(tempfile.mkdtemp(prefix="c2n-fault-probe-"))
    try:
        Tmpfs(probe, "1m").close()
        return True
    except (subprocess.CalledProcessError, OSError):
        return False
    finally:
        shutil.rmtree(probe, ignore_errors=True)


# -- scenarios ---------------------------------------------------------------------------------


def bad_files_tree(root: Path) -> list[str]:
    """One file of each bad kind; the names every command must report."""
    root.mkdir(parents=True)
    (root / "good.py").write_text(CUDA)
    bad = {
        "deep_parens.py": "x = " + "(" * 2000 + "1" + ")" * 2000 + "\n" + CUDA,
        "deep_unary.py": "x = " + "-" * 30000 + "1\n" + CUDA,
        "deep_attr.py": "import triton\nx = a" + ".b" * 30000 + "\n" + CUDA,
        "deep_bool.py": "x = " + " and ".join(["a"] * 30000) + "\n" + CUDA,
        "syntax.py": CUDA + "def (:\n",
    }
    for name, text in bad.items():
        (root / name).write_text(text)
    (root / "utf16.py").write_bytes(CUDA.encode("utf-16"))
    (root / "utf32.py").write_bytes(CUDA.encode("utf-32"))
    (root / "binary.py").write_bytes(b"\x7fELF\0\0\0" + CUDA.encode())
    (root / "cr_only.py").write_bytes(CUDA.replace("\n", "\r").encode())
    (root / os.fsdecode(b"caf\xe9.py")).write_text(CUDA)
    (root / "empty.py").write_text("")
    (root / "big.py").write_text(CUDA * 70000)  # ~5 MB of CUDA: over the size budget
    (root / "bad.ipynb").write_text("{not json cuda")
    (root / "utf16.ipynb").write_bytes(json.dumps({"cells": [], "metadata": {}, "nbformat": 4}).encode("utf-16"))
    (root / "requirements.txt").write_bytes("torch==2.5.0+cu121\n".encode("utf-16"))
    (root / "Dockerfile").write_bytes(b"FROM nvidia/cuda:12.1\0\xff\xfe\n")
    os.mkfifo(root / "fifo.py")
    (root / "loop.py").symlink_to(root / "loop.py")
    return ["deep_parens", "deep_unary", "deep_bool", "syntax", "utf16.py", "utf32", "binary", "big.py"]


def scenario_bad_files(r: Runner, work: Path) -> list[Outcome]:
    outs = []
    root = work / "bad"
    must_name = bad_files_tree(root)
    git_repo(root)
    before = snapshot(root)
    for args in (["check", "--jobs", "2", "."], ["check", "--jobs", "1", "--no-cache", "."],
                 ["migrate", "--diff", "--jobs", "2", "."], ["migrate", "--out", str(work / "bad-port"), "."],
                 ["migrate", "--jobs", "2", "."], ["suppress", "."]):
        o = Outcome(f"bad files: {' '.join(a for a in args if not a.startswith('/'))}",
                    "exit 1/2, each bad file named, nothing else lost")
        p = r.run(*args, cwd=root, timeout=900)
        o.tracebacks = tracebacks(p.stderr)
        o.got = f"exit {p.returncode}"
        if p.returncode < 0 or p.returncode not in (0, 1, 2):
            o.data_lost += 1
            o.notes.append(f"killed by {p.returncode}")
        missing = [n for n in must_name if n not in p.stderr + p.stdout]
        if args[0] in ("check", "migrate") and missing and "--out" not in args:
            o.notes.append(f"not named: {missing}")
        after = snapshot(root)
        if args[0] == "migrate" and "--diff" not in args and "--out" not in args:
            # In place: good.py, cr_only.py and café.py change; nothing else may.
            changed = {k for k in before if after.get(k) != before[k]}
            lost = changed - {"good.py", "cr_only.py", os.fsdecode(b"caf\xe9.py")}
            o.data_lost += len(lost)
            subprocess.run(["git", "-C", str(root), "checkout", "-q", "--", "."], capture_output=True)
        elif args[0] == "suppress":
            lost = {k for k in before if k not in after}
            o.data_lost += len(lost)
            subprocess.run(["git", "-C", str(root), "checkout", "-q", "--", "."], capture_output=True)
        else:
            o.data_lost += sum(1 for k in before if after.get(k) != before[k])
        o.got += f", {len(missing)} bad file(s) unnamed" if missing and "--out" not in args else ", all named"
        outs.append(o)
    return outs


def _kill_points(r: Runner, args: list[str], label: str, points: list, check_tree, written) -> list[Outcome]:  # noqa: ANN001
    """kill -9 the command at each point: a number of seconds, or "write" — the moment the first
    output appears (``written(tree)`` turns true), to land inside the writing phase."""
    outs = []
    for point in points:
        where = f"{point:.1f} s" if isinstance(point, float) else "its first write"
        o = Outcome(f"kill -9 {label} at {where}", "no worker left, no torn file, rerun = uninterrupted run")
        tree = check_tree("setup", None)
        p = r.popen(*args, cwd=tree)
        kids: set[int] = set()
        if isinstance(point, float):
            deadline = time.monotonic() + point
            while time.monotonic() < deadline:
                kids |= descendants(p.pid)
                time.sleep(0.05)
        else:
            deadline = time.monotonic() + 600
            while not written(tree) and time.monotonic() < deadline and p.poll() is None:
                kids |= descendants(p.pid)
                time.sleep(0.005)
        kids |= descendants(p.pid)
        try:
            os.kill(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        err = _drain(p)
        time.sleep(2)
        o.stray = len(alive(kids))
        reap(alive(kids))
        o.tracebacks = tracebacks(err)
        lost, note = check_tree("after", tree)
        o.data_lost = lost
        ended = "it had already ended; " if p.returncode != -signal.SIGKILL else ""
        o.got = f"{ended}{len(kids)} child process(es) seen, {o.stray} alive 2 s after; {note}"
        outs.append(o)
    return outs


def scenario_kill(r: Runner, work: Path) -> list[Outcome]:
    src = work / "kill-src"
    all_files, _ = generate(src, 300)
    git_repo(src)
    original = snapshot(src)
    reference = work / "kill-ref"
    shutil.copytree(src, reference)
    r.run("migrate", "--no-cache", "--jobs", "2", ".", cwd=reference)
    expected = snapshot(reference)
    counter = [0]

    def in_place(stage: str, tree: Path | None):
        if stage == "setup":
            counter[0] += 1
            tree = work / f"kill-{counter[0]}"
            shutil.copytree(src, tree)
            return tree
        now = snapshot(tree)
        torn = [k for k in original if now.get(k) not in (original[k], expected.get(k))]
        again = r.run("migrate", "--no-cache", "--jobs", "2", "--allow-dirty", ".", cwd=tree)
        final = snapshot(tree)
        differ = [k for k in expected if final.get(k) != expected[k]]
        temps = [p.name for p in tree.rglob("*.c2n-tmp")]
        note = f"{len(torn)} torn, rerun exit {again.returncode}, {len(differ)} differ from an uninterrupted run, {len(temps)} temp file(s) left"
        return len(torn) + len(differ), note

    # The kill points: fractions of an uninterrupted run, and the moment the first file is rewritten.
    timing = work / "kill-timing"
    shutil.copytree(src, timing)
    t0 = time.monotonic()
    r.run("migrate", "--no-cache", "--jobs", "2", ".", cwd=timing)
    duration = time.monotonic() - t0
    points = [round(duration * f, 1) for f in (0.15, 0.4, 0.7, 0.9)] + ["write"]
    def first_write(tree: Path) -> bool:
        return any(p.stat().st_mtime > t_start[0] for p in tree.rglob("*.py"))

    t_start = [0.0]

    def in_place_setup(stage, tree):  # noqa: ANN001
        out = in_place(stage, tree)
        if stage == "setup":
            t_start[0] = time.time()
        return out

    outs = _kill_points(r, ["migrate", "--no-cache", "--jobs", "2", "."], "migrate in place --jobs 2",
                        points, in_place_setup, first_write)

    port = work / "kill-port"

    def out_copy(stage: str, tree: Path | None):
        if stage == "setup":
            return src
        state = "absent"
        lost = 0
        if port.exists():
            marker = port / ".cuda2neuron-port.json"
            state = json.loads(marker.read_text()).get("state", "?") if marker.exists() else "no marker"
            if state == "no marker":
                lost += 1  # a half copy nobody can finish
        again = r.run("migrate", "--no-cache", "--jobs", "2", ".", "--out", str(port), cwd=src)
        final = snapshot(port)
        final.pop(".cuda2neuron-port.json", None)
        differ = [k for k in expected if final.get(k) != expected[k]]
        siblings = [p.name for p in work.iterdir() if p.name.startswith(".kill-port.")]
        shutil.rmtree(port, ignore_errors=True)
        return lost + len(differ) + (snapshot(src) != original), (
            f"port {state} after the kill; rerun exit {again.returncode}, {len(differ)} differ; "
            f"{len(siblings)} hidden sibling(s) (removed once a minute old)")

    def building(tree: Path) -> bool:
        return port.exists() or any(p.name.startswith(".kill-port.") for p in work.iterdir())

    outs += _kill_points(r, ["migrate", "--no-cache", "--jobs", "2", ".", "--out", str(port)],
                         "migrate --out --jobs 2", [round(duration * f, 1) for f in (0.4, 0.8)] + ["write"],
                         out_copy, building)
    # An update of an existing port, killed while it writes.
    r.run("migrate", "--no-cache", ".", "--out", str(port), cwd=src)
    for f in sorted(src.rglob("*.py"))[:50]:
        f.write_text(f.read_text() + "z = torch.zeros(1).cuda()\n")
    git(src, "-c", "user.email=f@f", "-c", "user.name=f", "commit", "-qam", "more")
    expected_after = work / "kill-ref2"
    shutil.copytree(src, expected_after)
    r.run("migrate", "--no-cache", ".", cwd=expected_after)
    expected2 = snapshot(expected_after)
    o = Outcome("kill -9 migrate --out (an update) at its first write", "the port marked incomplete, rerun completes it")
    marker = port / ".cuda2neuron-port.json"
    def stamp_of() -> float | None:
        try:
            return marker.stat().st_mtime
        except OSError:
            return None

    stamp = stamp_of()
    p = r.popen("migrate", "--no-cache", ".", "--out", str(port), cwd=src)
    while p.poll() is None and stamp_of() == stamp:
        time.sleep(0.002)
    os.kill(p.pid, signal.SIGKILL)
    _drain(p)
    state = json.loads(marker.read_text()).get("state") if marker.exists() else "no marker"
    again = r.run("migrate", "--no-cache", ".", "--out", str(port), cwd=src)
    final = snapshot(port)
    final.pop(".cuda2neuron-port.json", None)
    differ = [k for k in expected2 if final.get(k) != expected2[k]]
    o.data_lost = len(differ)
    o.got = f"marker '{state}' after the kill; rerun exit {again.returncode}, {len(differ)} file(s) differ"
    outs.append(o)
    return outs


def scenario_disks(r: Runner, work: Path) -> list[Outcome]:
    if not can_mount():
        return [Outcome("disk full / read-only", "needs root for a tmpfs", got="skipped: not root or no mount")]
    outs = []
    # Full disk, in place: the rewrites do not fit.
    mnt = work / "full"
    fs = Tmpfs(mnt, "4m")
    try:
        proj = mnt / "proj"
        proj.mkdir()
        for i in range(20):
            (proj / f"m{i}.py").write_text(CUDA * 40)
        git_repo(proj)
        before = snapshot(proj)
        fs.fill(leave=0)
        for args, label, ok in (
            (["migrate", "--jobs", "2", "."], "migrate in place on a full disk", (1,)),
            (["migrate", "--diff", ".", "--report", "r.json"], "--report on a full disk", (2,)),
            (["suppress", "."], "suppress on a full disk", (2,)),
            (["migrate", ".", "--out", str(mnt / "port")], "--out on a full disk", (2,)),
        ):
            o = Outcome(label, f"exit {ok}, one line per failure, sources intact")
            p = r.run(*args, cwd=proj, **{"CUDA2NEURON_RESULTS_CACHE": str(mnt / "cache")})
            o.tracebacks = tracebacks(p.stderr)
            after = snapshot(proj)
            torn = [k for k in before if after.get(k) != before[k] and not after.get(k, b"").startswith(b"import torch")]
            changed = [k for k in before if after.get(k) != before[k]]
            o.data_lost = len(torn) + (len(changed) if label != "migrate in place on a full disk" else 0)
            if "--out" in args and (mnt / "port").exists():
                o.data_lost += 1
                o.notes.append("a partial port was left")
            lines = [line for line in p.stderr.splitlines() if "space" in line or line.startswith("error")]
            o.got = f"exit {p.returncode}; {len(lines)} error line(s), e.g. {lines[0][:90] if lines else '-'}"
            if p.returncode not in ok:
                o.notes.append(f"unexpected exit {p.returncode}")
            subprocess.run(["git", "-C", str(proj), "checkout", "-q", "--", "."], capture_output=True)
            outs.append(o)
        # Read-only: the same tree, remounted.
        (mnt / ".filler").unlink()
        fs.read_only()
        for args, label, ok in (
            (["migrate", "--jobs", "2", "."], "migrate in place on a read-only disk", (1, 2)),
            (["migrate", ".", "--out", str(mnt / "port")], "--out on a read-only disk", (2,)),
            (["check", "."], "check with a read-only cache", (1,)),
        ):
            o = Outcome(label, f"exit {ok}, one line, nothing lost")
            p = r.run(*args, cwd=proj, **{"CUDA2NEURON_RESULTS_CACHE": str(mnt / "cache")})
            o.tracebacks = tracebacks(p.stderr)
            lines = [line for line in p.stderr.splitlines() if "Read-only" in line or line.startswith("error")]
            o.got = f"exit {p.returncode}; {len(lines)} error line(s), e.g. {lines[0][:90] if lines else '-'}"
            o.data_lost = sum(1 for k in before if snapshot(proj).get(k) != before[k])
            outs.append(o)
    finally:
        fs.close()
    # --out into a full disk that holds a port: the old port must stay whole.
    mnt2 = work / "full2"
    fs = Tmpfs(mnt2, "8m")
    try:
        proj = work / "proj-small"
        proj.mkdir()
        for i in range(10):
            (proj / f"m{i}.py").write_text(CUDA * 40)
        port = mnt2 / "port"
        r.run("migrate", ".", "--out", str(port), cwd=proj)
        old = snapshot(port)
        for i in range(10):
            (proj / f"m{i}.py").write_text(CUDA * 400)
        fs.fill(leave=32 << 10)
        o = Outcome("--out update on a full disk", "exit 2, the old port exactly as it was")
        p = r.run("migrate", ".", "--out", str(port), cwd=proj)
        o.tracebacks = tracebacks(p.stderr)
        o.data_lost = int(snapshot(port) != old)
        o.got = f"exit {p.returncode}; port {'unchanged' if not o.data_lost else 'CHANGED'}"
        outs.append(o)
    finally:
        fs.close()
    return outs


def scenario_git(r: Runner, work: Path) -> list[Outcome]:
    outs = []

    def corrupt_index(root):
        (root / ".git" / "index").write_bytes(b"DIRC broken")

    def skip_worktree(root):
        git(root, "update-index", "--skip-worktree", "m0.py")
        (root / "m0.py").write_text(CUDA + "y = 1  # my edit\n")

    def assume_unchanged(root):
        git(root, "update-index", "--assume-unchanged", "m0.py")
        (root / "m0.py").write_text(CUDA + "y = 1  # my edit\n")

    def missing_objects(root):
        shutil.rmtree(root / ".git" / "objects")
        (root / ".git" / "objects").mkdir()

    def dubious_owner(root):
        os.chown(root, 4321, 4321)

    cases = [("corrupt .git/index", corrupt_index), ("skip-worktree with an edit", skip_worktree),
             ("assume-unchanged with an edit", assume_unchanged), ("objects missing", missing_objects)]
    if os.geteuid() == 0:
        cases.append(("repository of another owner (dubious ownership)", dubious_owner))
    for label, setup in cases:
        root = work / f"git-{label.split()[0]}-{len(outs)}"
        root.mkdir()
        (root / "m0.py").write_text(CUDA)
        git_repo(root)
        setup(root)
        before = snapshot(root)
        p = r.run("migrate", "m0.py", cwd=root)
        o = Outcome(f"git: {label}", "exit 2, refused with git's reason, file unchanged")
        o.tracebacks = tracebacks(p.stderr)
        o.data_lost = int(snapshot(root) != before)
        o.got = f"exit {p.returncode}: {p.stderr.strip().splitlines()[-1][:100] if p.stderr.strip() else '-'}"
        outs.append(o)
    return outs


def _entries(cache: Path) -> list[Path]:
    return [p for p in cache.rglob("*") if p.is_file() and p.suffix in (".json", ".pickle")]


def scenario_cache(r: Runner, work: Path, n_fuzz: int = 3000) -> list[Outcome]:
    outs = []
    proj = work / "cache-proj"
    generate(proj, 120)
    git_repo(proj)
    clean = r.run("migrate", "--diff", "--no-cache", ".", cwd=proj)
    cache = work / "cache-dir"
    rc = Runner(r.tool, cache)
    rc.run("check", "--jobs", "2", ".", cwd=proj)
    entries = _entries(cache)
    rng = random.Random(33)
    o = Outcome(f"fuzzed cache ({n_fuzz} mutations of {len(entries)} entries)",
                "same output as without a cache, no traceback, rewrites compile")
    marker = work / "PWNED"
    kinds = {"flip": 0, "cut": 0, "garbage": 0, "pickle": 0}
    for i in range(n_fuzz):
        entry = entries[i % len(entries)]
        raw = entry.read_bytes() or b"\0"
        choice = rng.random()
        if choice < 0.6:
            data = bytearray(raw)
            for _ in range(rng.randint(1, 3)):
                j = rng.randrange(len(data))
                data[j] = rng.randrange(256)
            new, kind = bytes(data), "flip"
        elif choice < 0.8:
            new, kind = raw[: rng.randrange(len(raw))], "cut"
        elif choice < 0.95:
            new, kind = os.urandom(rng.randint(0, 512)), "garbage"
        else:
            # A pickle that would create the marker file, under the entry's own name.
            new = b"cos\nsystem\n(S'touch " + str(marker).encode() + b"'\ntR."
            kind = "pickle"
        kinds[kind] += 1
        entry.write_bytes(new)
        if i % len(entries) == len(entries) - 1 or i == n_fuzz - 1:
            for args in (["check", "--jobs", "2", "."], ["migrate", "--diff", "--jobs", "2", "."]):
                p = rc.run(*args, cwd=proj)
                o.tracebacks += tracebacks(p.stderr)
                if args[0] == "migrate" and p.stdout != clean.stdout:
                    o.data_lost += 1
            rc.run("check", "--jobs", "2", ".", cwd=proj)  # refill
            entries = _entries(cache)
    # In place, with every entry re-signed around a rewrite that does not compile (a writer of
    # the cache who knows the format): migrate must not write it.
    p = rc.run("migrate", "--jobs", "2", ".", cwd=proj)
    bad = [f for f in proj.rglob("*.py") if _compiles(f) is False]
    o.data_lost += len(bad)
    o.code_executed = int(marker.exists())
    o.got = f"mutations {kinds}; in-place migrate exit {p.returncode}, {len(bad)} file(s) that do not compile"
    outs.append(o)
    return outs


def _compiles(path: Path) -> bool:
    try:
        compile(path.read_bytes(), str(path), "exec")
        return True
    except SyntaxError:
        return False


VALIDATE_CASES = {
    "tokenless": ("child leaves the session, drops its token, the run exits first", '''def build():
    import os, subprocess, time
    # An empty environment (no run token), a session of its own; the command line names the
    # tree so that the bench can find it.
    subprocess.Popen(["/bin/sh", "-c", "sleep 3600; : " + os.getcwd()], env={}, start_new_session=True)
    time.sleep(0.5)
    os._exit(3)
''', "ERROR (the run exited 3), nothing left running"),
    "daemon": ("double-forked daemon + reads stdin", '''def build():
    import os, sys, time
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(3600)
        os._exit(0)
    os.waitpid(pid, 0)
    sys.stdin.read()
''', "PASS, quickly, nothing left running"),
    "flood": ("350 MB of output", '''def build():
    import sys
    chunk = "x" * (1 << 20) + "\\n"
    for _ in range(350):
        sys.stdout.write(chunk)
''', "ERROR naming the output cap"),
    "hog": ("6 GB of memory", '''def build():
    import time
    hog = b"a" * (6 << 30)
    time.sleep(120)
''', "ERROR naming the memory cap"),
}


def scenario_validate(r: Runner, work: Path, cases: tuple[str, ...] | None = None, kill: bool = True) -> list[Outcome]:
    outs = []
    mlp = HERE.parent / "tests" / "fixtures" / "projects" / "mlp"
    for key, (label, body, expected) in VALIDATE_CASES.items():
        if cases is not None and key not in cases:
            continue
        root = work / f"validate-{key}"
        for side in ("original", "port"):
            shutil.copytree(mlp / side, root / side)
            entry = root / side / "entry.py"
            if side == "port" or key in ("daemon",):
                entry.write_text(entry.read_text().replace("def build():\n", body + "    return _build()\n\n\ndef _build():\n", 1))
        o = Outcome(f"validate: {label}", expected)
        t0 = time.monotonic()
        p = r.run("validate", str(root / "original"), str(root / "port"), "--entry", "entry:build", "--no-golden",
                  "--port-device", "cpu", "--timeout", "240", timeout=400)
        seconds = time.monotonic() - t0
        time.sleep(2)
        leftovers = ours(root)
        o.stray = len(leftovers)
        reap(leftovers)
        # validate shows the user's own traceback inside an ERROR report: only one outside it counts.
        o.tracebacks = 0 if p.returncode in (0, 1, 2) else tracebacks(p.stderr)
        verdict = next((w for w in ("PASS", "WARN", "FAIL", "ERROR") if w in p.stdout + p.stderr), "?")
        reason = next((line.strip(" │|") for line in (p.stdout + p.stderr).splitlines() if "more than" in line), "")
        o.got = f"exit {p.returncode}, {verdict} in {seconds:.0f} s; {len(leftovers)} process(es) left {reason[:100]}"
        outs.append(o)
    if not kill:
        return outs
    # validate itself killed: its runs (and their daemon) must go with it.
    root = work / "validate-kill"
    for side in ("original", "port"):
        shutil.copytree(mlp / side, root / side)
        entry = root / side / "entry.py"
        entry.write_text(entry.read_text().replace(
            "def build():\n", VALIDATE_CASES["daemon"][1].replace("sys.stdin.read()", "time.sleep(3600)")
            + "    return _build()\n\n\ndef _build():\n", 1))
    p = r.popen("validate", str(root / "original"), str(root / "port"), "--entry", "entry:build", "--no-golden",
                "--port-device", "cpu")
    deadline = time.monotonic() + 120
    started: set[int] = set()
    while time.monotonic() < deadline and len(started) < 5:  # validate, 2 workers, 2 daemons
        time.sleep(0.5)
        started = ours(root)
    os.kill(p.pid, signal.SIGKILL)
    _drain(p)
    time.sleep(3)
    # What was seen at the kill and lives on counts too (the zygote, re-parented to init, no longer
    # descends from validate).
    left = ours(root) | alive(started)
    reap(left)
    o = Outcome("kill -9 of validate mid-run (runs with daemons)", "its runs and their daemons end with it")
    o.stray = len(left)
    o.got = f"{len(started)} process(es) at the kill, {len(left)} alive 3 s after it"
    outs.append(o)
    return outs


OTHER_UID = 54321


def _as_other_user(action) -> bool:  # noqa: ANN001
    """Run ``action`` in a forked child that became another user; False without root."""
    if os.geteuid() != 0:
        return False
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(OTHER_UID)
            os.setuid(OTHER_UID)
            action()
            os._exit(0)
        except BaseException:  # noqa: BLE001
            os._exit(1)
    return os.waitpid(pid, 0)[1] == 0


def _timed(r: Runner, o: Outcome, *args: str, cwd: Path | None = None, timeout: float = 120, **env: str):
    p = r.run(*args, cwd=cwd, timeout=timeout, **env)
    o.tracebacks += tracebacks(p.stderr)
    if p.returncode == -999:
        o.hangs += 1
    return p


def scenario_issue44(r: Runner, work: Path) -> list[Outcome]:
    outs = []
    work.chmod(0o755)  # the other user must reach the shared cache folder below it
    base = work / "i44"
    base.mkdir(mode=0o755)
    proj = base / "proj"
    proj.mkdir()
    (proj / "run.sh").write_text("#!/bin/bash\nexport CUDA_VISIBLE_DEVICES=0,1\npython train.py --device cuda\n")
    (proj / "train.py").write_text(CUDA)
    fresh = r.run("check", "--no-cache", "--output-format", "json", ".", cwd=proj)

    # 1. Another user plants symlinks in a world-writable cache folder, at every temp name.
    o = Outcome("cache: another user's symlinks in a shared cache folder", "refused, said once; root's file intact")
    victim = base / "root-only"
    victim.write_text("root only\n")
    victim.chmod(0o600)
    shared = base / "shared-cache"
    shared.mkdir()
    shared.chmod(0o777)

    # The entries' names do not depend on the cache folder: learn them from a private cache,
    # then plant a link at each temporary name the old code would use (its pid came next).
    learn = base / "learn-cache"
    r.run("check", ".", cwd=proj, CUDA2NEURON_RESULTS_CACHE=str(learn))
    names = [(e.parent.name, e.name) for e in learn.rglob("*.json")]
    next_pid = int(Path("/proc/sys/kernel/ns_last_pid").read_text()) if Path("/proc/sys/kernel/ns_last_pid").exists() else 0

    def plant():
        for sub_name, name in names:
            sub = shared / sub_name
            sub.mkdir(mode=0o777, exist_ok=True)
            for pid in range(next_pid, next_pid + 400):
                (sub / f".{name}.{pid}.tmp").symlink_to(victim)

    planted = _as_other_user(plant)
    p = _timed(r, o, "check", ".", cwd=proj, CUDA2NEURON_RESULTS_CACHE=str(shared))
    o.written_outside = int(victim.read_text() != "root only\n")
    said = p.stderr.count("results cache not used")
    o.got = (f"{len(names)} entries' temp names planted; exit {p.returncode}; refusal said {said} time(s)" if planted
             else f"could not act as another user (root needed); exit {p.returncode}")
    outs.append(o)

    # 2. A symlinked fan-out folder in the user's own cache.
    o = Outcome("cache: a fan-out folder symlinked elsewhere", "nothing written through it")
    cache = base / "own-cache"
    elsewhere = base / "elsewhere"
    elsewhere.mkdir()
    cache.mkdir(mode=0o700)
    for a in "0123456789abcdef":
        for b in "0123456789abcdef":
            (cache / (a + b)).symlink_to(elsewhere)
    p = _timed(r, o, "check", ".", cwd=proj, CUDA2NEURON_RESULTS_CACHE=str(cache))
    o.written_outside = len(list(elsewhere.iterdir()))
    o.got = f"exit {p.returncode}; {o.written_outside} file(s) in the link's target"
    outs.append(o)

    # 3. A forged entry for a shell script (the old, public checksum): hides every finding.
    o = Outcome("cache: forged entries for every file (public checksum)", "same findings as without a cache")
    cache = base / "forged-cache"
    _timed(r, o, "check", ".", cwd=proj, CUDA2NEURON_RESULTS_CACHE=str(cache))
    forged = 0
    for entry in cache.rglob("*.json"):
        raw = entry.read_bytes()
        magic = raw[: raw.index(b" ", raw.index(b" ") + 1) + 1]
        payload = json.loads(raw.split(b"\n", 1)[1])
        payload.update(f=[], s="unchanged", n=None)
        body = json.dumps(payload).encode()
        key = entry.parent.name + entry.stem
        fingerprint = r.run_py("from cuda2neuron.workspace._cache import engine_fingerprint as f; print(f())").strip()
        h = hashlib.sha256(b"c2n-result\0" + fingerprint.encode() + b"\0" + key.encode() + b"\0")
        h.update(body)
        entry.write_bytes(magic + h.hexdigest().encode() + b"\n" + body)
        forged += 1
    p = _timed(r, o, "check", "--output-format", "json", ".", cwd=proj, CUDA2NEURON_RESULTS_CACHE=str(cache))
    o.data_lost = int(p.stdout != fresh.stdout)
    o.got = f"{forged} entries forged; findings {'as without a cache' if not o.data_lost else 'HIDDEN'}"
    outs.append(o)

    # 4. A FIFO as a cache entry, as --baseline and as .gitignore; a FIFO and a symlink named.
    fifo_proj = base / "fifo-proj"
    fifo_proj.mkdir()
    (fifo_proj / "a.py").write_text(CUDA)
    os.mkfifo(fifo_proj / ".gitignore")
    os.mkfifo(fifo_proj / "base.json")
    os.mkfifo(fifo_proj / "pipe.py")
    (fifo_proj / "link.py").symlink_to(fifo_proj / "a.py")
    cache = base / "fifo-cache"
    r.run("check", str(fifo_proj / "a.py"), CUDA2NEURON_RESULTS_CACHE=str(cache), timeout=60)
    for entry in cache.rglob("*.json"):
        entry.unlink()
        os.mkfifo(entry)
    for label, args, want in (
        ("a FIFO as a cache entry", ["check", "a.py"], 1),
        ("a FIFO as .gitignore", ["check", "--no-cache", "."], 1),
        ("a FIFO as --baseline", ["check", "a.py", "--baseline", "base.json"], 2),
        ("a FIFO named on the command line", ["check", "pipe.py"], 2),
        ("a symlink named on the command line", ["check", "link.py"], 2),
    ):
        o = Outcome(f"FIFO/symlink: {label}", f"exit {want}, no hang")
        p = _timed(r, o, *args, cwd=fifo_proj, timeout=60, CUDA2NEURON_RESULTS_CACHE=str(cache))
        o.got = f"exit {p.returncode}"
        if p.returncode != want and not o.hangs:
            o.notes.append("unexpected exit")
        outs.append(o)

    # 5. A forged --out marker deleting through a symlinked folder of the port.
    o = Outcome("--out: forged 'writing' marker, pending 'absent' under a symlink", "refused naming the marker")
    src = base / "src"
    src.mkdir()
    (src / "train.py").write_text(CUDA)
    port = base / "port"
    made = r.run("migrate", str(src), "--out", str(port), "--no-cache")
    if not port.is_dir():
        o.got = f"the first migrate --out failed: exit {made.returncode}: {made.stderr.strip()[-300:]}"
        outs.append(o)
        return outs
    outside = base / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("keep\n")
    (port / "link").symlink_to(outside)
    marker = json.loads((port / ".cuda2neuron-port.json").read_text())
    marker.update(state="writing", pending={"link/victim.txt": ["absent"]})
    marker["files"]["link"] = "link:" + str(outside)
    (port / ".cuda2neuron-port.json").write_text(json.dumps(marker))
    p = _timed(r, o, "migrate", str(src), "--out", str(port), "--no-cache")
    o.written_outside = int(not (outside / "victim.txt").exists())
    o.got = f"exit {p.returncode}; {'victim deleted' if o.written_outside else 'victim kept'}"
    outs.append(o)
    o = Outcome("--out: an empty marker in a tree that check walks", "an error naming it, folder not hidden")
    hidden = base / "hidden"
    (hidden / "sub").mkdir(parents=True)
    (hidden / "sub" / "train.py").write_text(CUDA)
    (hidden / "sub" / ".cuda2neuron-port.json").write_text("")
    p = _timed(r, o, "check", "--no-cache", str(hidden))
    o.got = f"exit {p.returncode}"
    if p.returncode == 0:
        o.data_lost = 1  # a CUDA file reported clean
    outs.append(o)

    # 6. suppress on continued lines: the commands must stay whole.
    o = Outcome("suppress: continued shell and Makefile commands", "comment on the last line, commands whole")
    sup = base / "suppress"
    sup.mkdir()
    (sup / "run.sh").write_text("torchrun train.py \\\n  --backend nccl \\\n  --epochs 3\necho done\n")
    (sup / "Makefile").write_text("all:\n\tpython train.py \\\n\t  --device cuda \\\n\t  --epochs 3\n")
    p = _timed(r, o, "suppress", ".", cwd=sup)
    broken = [f.name for f in (sup / "run.sh", sup / "Makefile")
              if any(line.rstrip().endswith("]") and "\\  #" in line for line in f.read_text().splitlines())]
    o.data_lost = len(broken)
    o.got = f"exit {p.returncode}; {len(broken)} command(s) cut"
    outs.append(o)

    # 7. One process: a deep chain across short lines, a 269 KB YAML flow line, a 320 KB TOML array.
    one = base / "one"
    one.mkdir()
    (one / "chain.py").write_text("import torch\nx = (a" + "\n.b" * 8000 + ")\ntorch.cuda.synchronize()\n")
    (one / "big.yaml").write_text("devices: [" + ", ".join(f"cuda:{i}" for i in range(24000)) + "]\n")
    (one / "big.toml").write_text("devices = [" + ", ".join(f'"cuda:{i}"' for i in range(26000)) + "]\n")
    for name in ("chain.py", "big.yaml", "big.toml"):
        o = Outcome(f"one process: check {name} ({(one / name).stat().st_size >> 10} KB)", "ends well within 120 s")
        t0 = time.monotonic()
        p = _timed(r, o, "check", "--no-cache", name, cwd=one, timeout=120)
        o.got = f"exit {p.returncode} in {time.monotonic() - t0:.0f} s"
        outs.append(o)

    # 8. The repository's fsmonitor hook must not run under migrate's git guard.
    o = Outcome("in-place migrate in a repo with core.fsmonitor set", "the hook never runs")
    repo = base / "fsmon"
    repo.mkdir()
    (repo / "train.py").write_text(CUDA)
    git_repo(repo)
    ran = base / "FSMONITOR-RAN"
    hook = base / "hook.sh"
    hook.write_text(f"#!/bin/sh\ntouch {ran}\n")
    hook.chmod(0o755)
    git(repo, "config", "core.fsmonitor", str(hook))
    p = _timed(r, o, "migrate", "--no-cache", "train.py", cwd=repo)
    o.code_executed = int(ran.exists())
    o.got = f"exit {p.returncode}; hook {'RAN' if ran.exists() else 'not run'}"
    outs.append(o)
    return outs



def ours(root: Path) -> set[int]:
    """Live processes of a validate scenario under ``root``: the command itself (its paths in
    its arguments), its runs and whatever they started (a run token in the environment, the
    tree as working folder) — never another user's processes."""
    found = set()
    mark = str(root).encode()
    for pid, (_, state, env) in proc_table().items():
        if state in ("Z", "X"):
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            cwd = os.readlink(f"/proc/{pid}/cwd").encode()
        except OSError:
            continue
        if mark in cmdline or (b"CUDA2NEURON_VALIDATE_RUN=" in env and cwd.startswith(mark)):
            found.add(pid)
    # And their descendants: the zygote validate forks its runs from is validate's child, working
    # in validate's own temporary folder (neither its command line nor its cwd names the trees).
    for pid in list(found):
        found |= alive(descendants(pid))
    return found


SCENARIOS = {"bad-files": scenario_bad_files, "kill": scenario_kill, "disks": scenario_disks, "git": scenario_git,
             "cache": scenario_cache, "issue44": scenario_issue44, "validate": scenario_validate,
             # issue 44's validate case alone (the full validate set starts a 6 GB hog)
             "validate-tokenless": lambda r, w: scenario_validate(r, w, cases=("tokenless",), kill=False)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", help="PYTHONPATH of the cuda2neuron to test (default: the installed one)")
    ap.add_argument("--only", nargs="*", choices=sorted(SCENARIOS))
    ap.add_argument("--skip-validate", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="c2n-fault-run-"))
    runner = Runner(args.tool, work / "results-cache")
    outcomes: list[Outcome] = []
    names = args.only or [n for n in SCENARIOS if n != "validate-tokenless"
                          and not (args.skip_validate and n.startswith("validate"))]
    try:
        for name in names:
            t0 = time.monotonic()
            try:
                got = SCENARIOS[name](runner, work)
            except Exception as exc:  # noqa: BLE001 - a broken scenario must not hide the others
                got = [Outcome(name, "the scenario runs", got=f"driver error: {type(exc).__name__}: {exc}")]
            outcomes += got
            print(f"[{name}: {len(got)} scenario(s), {time.monotonic() - t0:.0f} s]", file=sys.stderr, flush=True)
            for o in got:
                print(f"  {o.name}: {o.got} {'; '.join(o.notes)} | lost {o.data_lost} outside {o.written_outside} "
                      f"run {o.code_executed} tb {o.tracebacks} hangs {o.hangs} stray {o.stray}", file=sys.stderr, flush=True)
    finally:
        if not args.keep:
            subprocess.run(["chmod", "-R", "u+w", str(work)], capture_output=True)
            shutil.rmtree(work, ignore_errors=True)
    keys = ("data_lost", "written_outside", "code_executed", "tracebacks", "hangs", "stray")
    print("| scenario | expected | outcome | data lost | written outside | code run | tracebacks | hangs | stray |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for o in outcomes:
        extra = f" ({'; '.join(o.notes)})" if o.notes else ""
        print(f"| {o.name} | {o.expected} | {o.got}{extra} | " + " | ".join(str(getattr(o, k)) for k in keys) + " |")
    totals = [sum(getattr(o, k) for o in outcomes) for k in keys]
    print(f"| **total ({len(outcomes)} scenarios)** | | | " + " | ".join(map(str, totals)) + " |")
    return 0 if not any(totals) else 1


if __name__ == "__main__":
    sys.exit(main())
