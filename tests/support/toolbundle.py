"""A folder of the programs the sshd test bed runs, for a machine that ships without them.

The lent GPU machines run a bare Ubuntu without ``sshd``, ``ssh``, ``ssh-keygen``, ``ip`` or ``tc``, and nothing
may be installed into their ``/``. This copies those programs from a machine that has them (Debian's
openssh-server, openssh-client and iproute2 packages; ``tc`` shapes a host's network) with the shared libraries they load, except the C
library's own (the target's newer glibc runs binaries built against an older one). Each program gets a
wrapper in ``bin/`` that sets ``LD_LIBRARY_PATH`` for it alone, so the bundled libraries never reach
anything else: not the bed's shell tools, not a host's SSH sessions (sshd builds a session's environment
afresh). Set ``DIAGNOSE_TESTBED_BIN=<bundle>/bin`` and the bed (tests/support/testbed.py) runs them::

    python -m tests.support.toolbundle .dev/bundle        # on the build machine
    DIAGNOSE_TESTBED_BIN=$PWD/.dev/bundle/bin python -m tests.support.gpuhosts ...   # on the GPU machine
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
from pathlib import Path

PROGRAMS = ("sshd", "ssh", "ssh-keygen", "ip", "tc")
#: The C library's parts: always the target machine's own.
GLIBC = re.compile(r"^(libc|libm|libdl|librt|libpthread|libresolv|libutil|ld-linux[\w-]*)\.so")


def libraries(binary: Path) -> list[Path]:
    """The shared libraries ``binary`` loads (ldd), less the C library's."""
    listing = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=True).stdout
    found = []
    for line in listing.splitlines():
        parts = line.split("=>")
        if len(parts) != 2:
            continue
        path = parts[1].split("(")[0].strip()
        if path and not GLIBC.match(os.path.basename(path)):
            found.append(Path(path))
    return found


def make_bundle(dest: Path, programs: tuple[str, ...] = PROGRAMS) -> Path:
    """Fill ``dest`` with bin/ (wrappers), libexec/ (the programs) and lib/; returns ``dest/bin``."""
    bin_dir, libexec, lib = dest / "bin", dest / "libexec", dest / "lib"
    for folder in (bin_dir, libexec, lib):
        folder.mkdir(parents=True, exist_ok=True)
    search = "/usr/sbin:/usr/bin:/sbin:/bin"
    for name in programs:
        found = shutil.which(name, path=search)
        if found is None:
            raise SystemExit(f"toolbundle: {name} is not on {search} here; install it on this machine first")
        real = Path(found).resolve()
        shutil.copy2(real, libexec / name)
        for library in libraries(real):
            shutil.copy2(library.resolve(), lib / library.name)
        wrapper = bin_dir / name
        wrapper.write_text(  # shell builtins only: it must run whatever PATH its caller has, even none
            "#!/bin/sh\n"
            '_here=$(cd "${0%/*}/.." && pwd)\n'
            f'LD_LIBRARY_PATH="$_here/lib" exec "$_here/libexec/{name}" "$@"\n'
        )
        wrapper.chmod(0o755)
    return bin_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", type=Path, help="the folder to fill (made when missing)")
    args = parser.parse_args()
    print(make_bundle(args.dest.resolve()))


if __name__ == "__main__":
    main()
