#!/usr/bin/python3
"""Builds the content the egress tests serve, with the standard library only (no network, no
setuptools, no npm): a directory that tests/egress_fixtures/serve.py serves as one site.

usage: tests/egress_fixtures/make_fixtures.py DIR [--marker TEXT] [--git]

DIR afterwards holds:
  f                          a small text file: "cagent-egress-fixture MARKER\n"
  simple/index.html          a PEP 503 "simple" index listing one project, tinypkg
  simple/tinypkg/index.html  its page: one link to the wheel with #sha256=
  packages/tinypkg-1.0-py3-none-any.whl
                             a valid pure-Python wheel (dist-info METADATA, WHEEL, RECORD with
                             sha256 hashes) of module tinypkg, whose MARKER attribute is MARKER
  npm/tinypkg.json.in        npm registry metadata ("packument") for tinypkg 1.0.0; serve.py
                             answers GET /npm/tinypkg with it, @BASE@ replaced by
                             http://HOST-HEADER, so dist.tarball points back at the server under
                             the name the client used; dist.shasum and dist.integrity are the
                             tarball's sha1 and sha512
  npm/tinypkg/-/tinypkg-1.0.0.tgz
                             the tarball, in npm's package/ layout (package.json, index.js
                             exporting { marker: MARKER })
  repo.git/                  (with --git) a bare git repository with one commit on main (README
                             holding MARKER), ready for cloning over dumb HTTP (update-server-info
                             has run); needs git on PATH

Prints nothing on success. Exit status: 0 done; 1 a step failed (git); 2 usage error.
"""

import argparse
import base64
import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile

WHEEL_NAME = "tinypkg"
WHEEL_VERSION = "1.0"
NPM_VERSION = "1.0.0"


def _record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def build_wheel(path: str, marker: str) -> None:
    """Writes a wheel of one module, tinypkg/__init__.py, with a RECORD pip accepts."""
    dist_info = f"{WHEEL_NAME}-{WHEEL_VERSION}.dist-info"
    files = {
        f"{WHEEL_NAME}/__init__.py": f"MARKER = {marker!r}\n".encode(),
        f"{dist_info}/METADATA": (
            "Metadata-Version: 2.1\n"
            f"Name: {WHEEL_NAME}\n"
            f"Version: {WHEEL_VERSION}\n"
            "Summary: a wheel made by cagent's egress tests\n"
        ).encode(),
        f"{dist_info}/WHEEL": (
            "Wheel-Version: 1.0\n"
            "Generator: cagent-egress-fixtures\n"
            "Root-Is-Purelib: true\n"
            "Tag: py3-none-any\n"
        ).encode(),
        f"{dist_info}/top_level.txt": f"{WHEEL_NAME}\n".encode(),
    }
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in files.items())
    record += f"{dist_info}/RECORD,,\n"
    files[f"{dist_info}/RECORD"] = record.encode()
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)


def build_simple_index(root: str, marker: str) -> None:
    os.makedirs(os.path.join(root, "packages"), exist_ok=True)
    os.makedirs(os.path.join(root, "simple", WHEEL_NAME), exist_ok=True)
    wheel = f"{WHEEL_NAME}-{WHEEL_VERSION}-py3-none-any.whl"
    wheel_path = os.path.join(root, "packages", wheel)
    build_wheel(wheel_path, marker)
    with open(wheel_path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    with open(os.path.join(root, "simple", "index.html"), "w") as f:
        f.write(f'<!DOCTYPE html>\n<html><body><a href="{WHEEL_NAME}/">{WHEEL_NAME}</a>'
                "</body></html>\n")
    with open(os.path.join(root, "simple", WHEEL_NAME, "index.html"), "w") as f:
        # Relative link: pip resolves it against the page's URL, so any host name works.
        f.write(f'<!DOCTYPE html>\n<html><body><a href="../../packages/{wheel}#sha256={sha}">'
                f"{wheel}</a></body></html>\n")


def _tar_member(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    info.mtime = 1577836800
    tar.addfile(info, io.BytesIO(data))


def build_npm(root: str, marker: str) -> None:
    pkg_dir = os.path.join(root, "npm", WHEEL_NAME, "-")
    os.makedirs(pkg_dir, exist_ok=True)
    manifest = {
        "name": WHEEL_NAME,
        "version": NPM_VERSION,
        "description": "a package made by cagent's egress tests",
        "main": "index.js",
        "license": "MIT",
    }
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        _tar_member(tar, "package/package.json", json.dumps(manifest, indent=2).encode() + b"\n")
        _tar_member(tar, "package/index.js",
                    f"module.exports = {{ marker: {json.dumps(marker)} }};\n".encode())
    tgz = gzip.compress(raw.getvalue(), mtime=0)
    tarball_name = f"{WHEEL_NAME}-{NPM_VERSION}.tgz"
    with open(os.path.join(pkg_dir, tarball_name), "wb") as f:
        f.write(tgz)
    integrity = "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode()
    version = dict(manifest)
    version["_id"] = f"{WHEEL_NAME}@{NPM_VERSION}"
    version["dist"] = {
        "tarball": f"@BASE@/npm/{WHEEL_NAME}/-/{tarball_name}",
        "shasum": hashlib.sha1(tgz).hexdigest(),
        "integrity": integrity,
    }
    packument = {
        "_id": WHEEL_NAME,
        "name": WHEEL_NAME,
        "dist-tags": {"latest": NPM_VERSION},
        "versions": {NPM_VERSION: version},
        "time": {NPM_VERSION: "2020-01-01T00:00:00.000Z"},
    }
    with open(os.path.join(root, "npm", f"{WHEEL_NAME}.json.in"), "w") as f:
        json.dump(packument, f, indent=2)
        f.write("\n")


def build_git(root: str, marker: str) -> None:
    bare = os.path.join(root, "repo.git")
    env = dict(os.environ)
    env.update({"GIT_CONFIG_NOSYSTEM": "1", "HOME": root, "GIT_AUTHOR_NAME": "t",
                "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                "GIT_COMMITTER_EMAIL": "t@t"})
    with tempfile.TemporaryDirectory() as work:
        # The commit is made straight into the bare repository (its work tree a temporary
        # directory): no second repository, no push, no automatic gc.
        def git(*args: str) -> None:
            subprocess.run(["git", "-c", "gc.auto=0", "-c", "maintenance.auto=false",
                            f"--git-dir={bare}", f"--work-tree={work}", *args], cwd=work,
                           env=env, check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE)

        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", bare], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        with open(os.path.join(work, "README"), "w") as f:
            f.write(f"{marker}\n")
        git("add", "README")
        git("commit", "-q", "-m", "fixture")
    # The files a dumb-HTTP client reads (info/refs, objects/info/packs).
    subprocess.run(["git", "update-server-info"], cwd=bare, env=env, check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description="Build the egress tests' served content.")
    parser.add_argument("dir")
    parser.add_argument("--marker", default="tinypkg-marker")
    parser.add_argument("--git", action="store_true", help="also make repo.git (needs git)")
    args = parser.parse_args()
    root = args.dir
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "f"), "w") as f:
        f.write(f"cagent-egress-fixture {args.marker}\n")
    build_simple_index(root, args.marker)
    build_npm(root, args.marker)
    if args.git:
        try:
            build_git(root, args.marker)
        except (OSError, subprocess.CalledProcessError) as e:
            err = getattr(e, "stderr", b"") or b""
            print(f"make_fixtures.py: git: {e} {err.decode(errors='replace')}", file=sys.stderr)
            return 1
    # Everything world-readable: the servers and clients may run as another user.
    for dirpath, dirnames, filenames in os.walk(root):
        os.chmod(dirpath, 0o755)
        for name in filenames:
            os.chmod(os.path.join(dirpath, name), 0o644)
    return 0


if __name__ == "__main__":
    sys.exit(main())
