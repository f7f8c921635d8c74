"""Install messages name the source the user installed from: the checkout, a URL, or the index's free name.

The direct_url.json texts are the shapes pip writes (PEP 610): an editable checkout, a plain `pip install .`,
a git reference, an archive URL; an index install writes none.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from diagnose.core import install_hint
from diagnose.core.install_hint import (
    DIST,
    Origin,
    current_origin,
    install_command,
    origin_from,
    same_interpreter,
    torch_hint,
)

CHECKOUT = Path("/srv/src/diagnose")
PY = "/home/ops/venvs/diagnose/bin/python"

EDITABLE = json.dumps({"url": "file:///home/ops/src/diag%20nose", "dir_info": {"editable": True}})
FOLDER = json.dumps({"url": "file:///home/ops/src/diagnose", "dir_info": {}})
GIT = json.dumps(
    {
        "url": "https://git.example.org/ops/diagnose.git",
        "vcs_info": {"vcs": "git", "commit_id": "4cf817c0", "requested_revision": "main"},
    }
)
ARCHIVE = json.dumps({"url": "https://files.example.org/diagnose-0.1.0.tar.gz", "archive_info": {}})


@pytest.mark.parametrize(
    ("direct_url", "installed", "origin"),
    [
        (EDITABLE, True, Origin("editable", "/home/ops/src/diag nose")),
        (FOLDER, True, Origin("folder", "/home/ops/src/diagnose")),
        (GIT, True, Origin("url", "git+https://git.example.org/ops/diagnose.git")),
        (ARCHIVE, True, Origin("url", "https://files.example.org/diagnose-0.1.0.tar.gz")),
        (None, True, Origin("index")),
        ("not json", True, Origin("index")),
        (None, False, Origin("checkout", str(CHECKOUT))),
    ],
)
def test_where_the_installation_came_from(direct_url: str | None, installed: bool, origin: Origin) -> None:
    assert origin_from(direct_url, installed, CHECKOUT) == origin


def test_each_origin_installs_the_extra_from_its_own_source_into_the_running_python() -> None:
    def command(origin: Origin) -> list[str]:
        return shlex.split(install_command("bench", origin, PY))

    assert command(Origin("editable", "/home/ops/src/diag nose")) == [
        *(PY, "-m", "pip", "install"),
        *("-e", "/home/ops/src/diag nose[bench]"),
    ]
    assert command(Origin("checkout", "/srv/src/diagnose"))[-2:] == ["-e", "/srv/src/diagnose[bench]"]
    assert command(Origin("folder", "/home/ops/src/diagnose"))[-1] == "/home/ops/src/diagnose[bench]"
    assert command(Origin("url", "git+https://h/d.git"))[-1] == f"{DIST}[bench] @ git+https://h/d.git"
    assert command(Origin("index")) == [PY, "-m", "pip", "install", "diagnose-cluster[bench]"]
    assert install_command("test", Origin("index"), PY).endswith("'diagnose-cluster[test]'")


def test_the_distribution_name_is_the_one_in_pyproject() -> None:
    pyproject = Path(__file__).resolve().parents[3] / "pyproject.toml"
    assert f'name = "{DIST}"' in pyproject.read_text()
    assert DIST != "diagnose", "diagnose on the package index is an unrelated project"


def test_a_remote_host_is_told_about_its_own_python_not_this_package() -> None:
    hint = torch_hint("/usr/bin/python3", local=False, origin=Origin("index"), python=PY)
    assert "on the host" in hint and "bench_python" in hint and "pip" not in hint


def test_this_machine_gets_the_extra_or_bench_python_by_which_interpreter_lacks_torch() -> None:
    editable = Origin("editable", "/home/ops/src/diagnose")
    own = torch_hint(PY, local=True, origin=editable, python=PY, nvidia_gpu=True)
    assert own.replace(" (torch's default build, with CUDA for this machine's NVIDIA GPU)", "") == (
        f"Install diagnose's bench extra into the environment running it: {PY} -m pip install -e "
        + ("'/home/ops/src/diagnose[bench]'")
    )
    other = torch_hint("/usr/bin/python3", local=True, origin=editable, python=PY, nvidia_gpu=True)
    assert other.startswith("Install torch for that interpreter, or install diagnose's bench extra (")
    assert other.endswith(f"-e bench_python={PY}")


def test_a_venv_python_is_not_its_base_interpreter(tmp_path: Path) -> None:
    link = tmp_path / "venv" / "bin" / "python"
    link.parent.mkdir(parents=True)
    link.symlink_to(sys.executable)
    assert not same_interpreter(str(link), sys.executable), "a venv's python links to the base interpreter"
    assert same_interpreter(str(link), str(link.parent / ".." / "bin" / "python"))


def test_the_running_installation_is_read_from_its_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    """current_origin asks importlib.metadata for this distribution only: the index's `diagnose` (another
    project) installed beside it must not be taken for it."""
    asked: list[str] = []

    class Dist:
        def read_text(self, name: str) -> str | None:
            return EDITABLE if name == "direct_url.json" else None

    def distribution(name: str) -> Dist:
        asked.append(name)
        if name != DIST:
            raise install_hint.metadata.PackageNotFoundError(name)
        return Dist()

    monkeypatch.setattr(install_hint.metadata, "distribution", distribution)
    assert current_origin() == Origin("editable", "/home/ops/src/diag nose")
    assert asked == [DIST]

    def missing(name: str) -> Dist:
        raise install_hint.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(install_hint.metadata, "distribution", missing)
    checkout = Path(install_hint.__file__).resolve().parents[2]
    assert current_origin() == Origin("checkout", str(checkout))
    assert (checkout / "pyproject.toml").is_file()


def test_the_printed_command_is_one_a_shell_runs_as_given(tmp_path: Path) -> None:
    """Quoting: the brackets of an extra and a space in a path survive the shell (echoed, not installed)."""
    command = install_command("bench", Origin("editable", str(tmp_path / "my src")), "echo")
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[0] == f"-m pip install -e {tmp_path}/my src[bench]"


def test_a_missing_dependency_is_installed_with_the_running_interpreter() -> None:
    assert install_hint.package_command("weasyprint", PY) == f"{PY} -m pip install weasyprint"
    assert install_hint.package_command("weasyprint").startswith(shlex.quote(sys.executable))


def test_the_torch_build_follows_whether_the_host_has_an_nvidia_gpu() -> None:
    """The index's default Linux wheel is the CUDA build: 5.6 GB and 51 s on the CPU-only machine of issue 36.
    Without an NVIDIA GPU the remedy names the CPU wheel; with one, the default build; unknown: both."""
    editable = Origin("editable", "/home/ops/src/diagnose")
    cpu = f"{PY} -m pip install torch --index-url https://download.pytorch.org/whl/cpu"
    without = torch_hint(PY, local=True, origin=editable, python=PY, nvidia_gpu=False)
    assert without.startswith("This machine has no NVIDIA GPU") and without.endswith(cpu)
    assert "[bench]" not in without
    other = torch_hint("/usr/bin/python3", local=True, origin=editable, python=PY, nvidia_gpu=False)
    assert "/usr/bin/python3 -m pip install torch --index-url https://download.pytorch.org/whl/cpu" in other
    assert other.endswith(f"-e bench_python={PY}")
    with_gpu = torch_hint(PY, local=True, origin=editable, python=PY, nvidia_gpu=True)
    assert (
        with_gpu.endswith("-m pip install -e '/home/ops/src/diagnose[bench]'") and "whl/cpu" not in with_gpu
    )
    assert "with CUDA" in with_gpu
    unknown = torch_hint(PY, local=True, origin=editable, python=PY)
    assert "[bench]" in unknown and cpu in unknown
    remote = torch_hint("/usr/bin/python3", local=False, python=PY, nvidia_gpu=False)
    assert "/usr/bin/python3 -m pip install torch --index-url https://download.pytorch.org/whl/cpu" in remote
    assert "pip" not in torch_hint("/usr/bin/python3", local=False, python=PY, nvidia_gpu=True)


def test_the_cpu_command_installs_torch_from_pytorchs_cpu_index(tmp_path: Path) -> None:
    """Echoed through a shell, the command keeps its words: the package, the index, its URL."""
    command = install_hint.cpu_torch_command("echo")
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["-m", "pip", "install", "torch", "--index-url", install_hint.CPU_INDEX]


def test_an_aarch64_host_with_a_gpu_is_sent_to_pytorchs_cuda_index() -> None:
    """On aarch64 the index's torch is the CPU build (pytorch/pytorch issues 160162, 168065): a Grace tray
    told to `pip install` the bench extra would get a torch without CUDA or NCCL."""
    cuda = "--index-url https://download.pytorch.org/whl/cu130"
    remote = torch_hint("/usr/bin/python3", local=False, python=PY, nvidia_gpu=True, machine="aarch64")
    assert remote.startswith(
        "Install torch's CUDA build for that interpreter on the host (/usr/bin/python3 -m"
    )
    assert cuda in remote and "CPU build" in remote and "bench_python" in remote
    own = torch_hint(PY, local=True, origin=Origin("index"), python=PY, nvidia_gpu=None, machine="arm64")
    assert own.startswith(f"Install torch's CUDA build into the environment running diagnose: {PY} -m pip")
    assert "diagnose-cluster[bench]" not in own and cuda in own
    # Without a GPU the CPU index serves aarch64 as well; on x86_64 the default wheel stays the CUDA one.
    cpu = torch_hint(PY, local=True, python=PY, nvidia_gpu=False, machine="aarch64")
    assert "download.pytorch.org/whl/cpu" in cpu and "the default build is the CUDA one" not in cpu
    x86 = torch_hint(PY, local=True, origin=Origin("index"), python=PY, nvidia_gpu=True, machine="x86_64")
    assert cuda not in x86 and "diagnose-cluster[bench]" in x86
