"""attnkit as a package: pyproject.toml agrees with requirements.txt, every third-party import of the library is a
declared dependency, the wheel holds every file under attnkit/ (the shipped models, the message catalog, the
dashboard's settings) with the ``attnkit`` command, and — the named suite ``-m package`` — an install into a fresh
virtualenv works from a folder outside the checkout."""
import ast
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import attnkit
from attnkit.cli.app import missing_pages
from browser import free_port
from test_app_command import health
from helpers import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
#: Paths never packaged (build leftovers, caches).
SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", "build", "dist", "*.egg-info", ".git", ".pytest_cache",
                              "artifacts", "data", ".venv", ".whl", ".gl")


def _reqs(lines) -> dict[str, Requirement]:
    out = {}
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if line:
            r = Requirement(line)
            out[canonicalize_name(r.name)] = r
    return out


def _declared() -> dict[str, dict[str, Requirement]]:
    project = PYPROJECT["project"]
    return {"core": _reqs(project["dependencies"]),
            **{extra: _reqs(reqs) for extra, reqs in project["optional-dependencies"].items()}}


def test_requirements_txt_agrees_with_pyproject():
    req = _reqs((ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines())
    declared = _declared()
    anywhere = {name: r for group in declared.values() for name, r in group.items()}
    for name, r in req.items():
        assert name in anywhere, f"requirements.txt has {name}, pyproject.toml does not"
        assert str(r.specifier) == str(anywhere[name].specifier), f"{name}: {r.specifier} vs {anywhere[name].specifier}"
    missing = set(declared["core"]) - set(req)
    assert not missing, f"pyproject's dependencies {sorted(missing)} are not in requirements.txt"
    assert set(declared["app"]) <= set(req), "requirements.txt installs the dashboard too"


def _third_party(files) -> set[str]:
    """Top-level names of the non-stdlib, non-attnkit modules that ``files`` import."""
    std, out = set(sys.stdlib_module_names), set()
    for f in files:
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
            out |= {n.split(".")[0] for n in names} - std - {"attnkit"}
    return out


#: Folders of attnkit/ with their own extras; everything else is the library (core dependencies only).
FRONT_ENDS = {"app": ("core", "app", "corpus"), "corpus": ("core", "corpus"), "cli": ("core", "corpus"),
              "notebook": ("core",)}


@pytest.mark.parametrize("where", ["library", *FRONT_ENDS])
def test_every_third_party_import_is_a_declared_dependency(where):
    """The library (every module outside dev/ and the folders of FRONT_ENDS) needs only the core dependencies; each
    front end only its extras (an import name's distribution read from the installed packages)."""
    pkg = ROOT / "attnkit"
    if where == "library":
        files = [f for f in pkg.rglob("*.py") if f.relative_to(pkg).parts[0] not in ("dev", *FRONT_ENDS)]
        groups = ("core",)
    else:
        files, groups = list((pkg / where).rglob("*.py")), FRONT_ENDS[where]
    allowed = {n for g in groups for n in _declared()[g]}
    dists = packages_distributions()
    for name in sorted(_third_party(files)):
        assert {canonicalize_name(d) for d in dists.get(name, [name])} & allowed, f"{where} imports {name}"


def test_one_version():
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "attnkit.__version__"}
    assert "version" in PYPROJECT["project"]["dynamic"] and "version" not in PYPROJECT["project"]


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """A copy of the checkout to build from (a build writes build/ and *.egg-info beside its sources)."""
    src = tmp_path_factory.mktemp("src") / "attnkit-src"
    shutil.copytree(ROOT, src, ignore=SKIP)
    return src


@pytest.fixture(scope="module")
def wheel(source, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                    str(source)], check=True, timeout=600, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    return next(out.glob("attnkit-*.whl"))


@pytest.mark.package
def test_the_wheel_holds_every_file_under_attnkit_and_the_command(wheel, source):
    names = set(zipfile.ZipFile(wheel).namelist())
    files = {p.relative_to(source).as_posix() for p in (source / "attnkit").rglob("*")
             if p.is_file() and "__pycache__" not in p.parts}
    assert files - names == set(), f"missing from the wheel: {sorted(files - names)[:10]}"
    assert {f for f in files if f.startswith("attnkit/models/") and f.endswith("model.safetensors")}
    info = f"attnkit-{attnkit.__version__}.dist-info"
    assert wheel.name.startswith(f"attnkit-{attnkit.__version__}-")
    entry = zipfile.ZipFile(wheel).read(f"{info}/entry_points.txt").decode()
    assert "attnkit = attnkit.cli:main" in entry


def test_a_closed_pipe_ends_the_command_without_a_traceback():
    """``attnkit heads | head``: the reader leaves early; the command ends quietly (exit 1), not with a traceback."""
    read, write = os.pipe()
    os.close(read)
    try:
        got = subprocess.run([sys.executable, "-m", "attnkit", "--help"], stdout=write, stderr=subprocess.PIPE,
                             timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    finally:
        os.close(write)
    assert got.returncode == 1 and got.stderr == b""


# ----------------------------------------------------------------------------- the named suite: -m package

def _run(argv, cwd, timeout=600, **kw):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**env, "HF_HUB_OFFLINE": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}, **kw)


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A fresh virtualenv (reusing this Python's packages: torch and the rest) with attnkit installed from the
    checkout's wheel, not editable: what ``pip install .`` gives (a fresh venv's own setuptools may be too old to
    build it, so the wheel is built by this Python)."""
    v = tmp_path_factory.mktemp("venv") / "v"
    assert _run([sys.executable, "-m", "venv", "--system-site-packages", str(v)], cwd=v.parent).returncode == 0
    got = _run([str(v / "bin" / "pip"), "install", "--no-deps", "-q", str(wheel)], cwd=v.parent)
    assert got.returncode == 0, got.stderr[-2000:]
    return v


@pytest.mark.package
def test_installed_attnkit_works_outside_the_checkout(venv, tmp_path):
    py = str(venv / "bin" / "python")
    code = ("import attnkit, sys; m = attnkit.load('attnkit-tiny'); assert 'site-packages' in attnkit.__file__; "
            "r = m.run('When Mary and John went to the store, John gave a drink to'); "
            "h = m.heads(); print(attnkit.__file__); print(h.best('previous-token'), len(r.tokens)); "
            "[attnkit.load(n) for n in ('attnkit-tiny-zh', 'planted-induction')]; "
            "from attnkit.series import resolve; print(len(resolve('attnkit-tiny-steps').members))")
    got = _run([py, "-c", code], cwd=tmp_path)
    assert got.returncode == 0, got.stderr[-3000:]
    where, best, steps = got.stdout.split("\n")[:3]
    assert where.startswith(str(venv)) and best.split()[0].startswith("L") and int(steps) == 14
    helped = _run([str(venv / "bin" / "attnkit"), "--help"], cwd=tmp_path)
    assert helped.returncode == 0 and "app " in helped.stdout and "heads" in helped.stdout
    heads = _run([str(venv / "bin" / "attnkit"), "heads", "--model", "attnkit-tiny"], cwd=tmp_path)
    assert heads.returncode == 0 and "best heads by previous-token" in heads.stdout, heads.stderr[-2000:]


@pytest.mark.package
def test_installed_attnkit_app_answers_the_health_check(venv, tmp_path):
    if missing_pages():
        pytest.skip("the pages are not inside the package yet (top-level pages/): `attnkit app` refuses, in one line")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.Popen([str(venv / "bin" / "attnkit"), "app", "--port", str(port), "--address", "127.0.0.1"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        assert health(port, proc) == 200
    finally:
        os.killpg(proc.pid, 15)
        out = proc.communicate(timeout=30)[0].decode()
    assert f"http://127.0.0.1:{port}" in out                        # Streamlit's own line: this server
