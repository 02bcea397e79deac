#!/usr/bin/env python3
"""Builds the sdist and the wheel of a generated Pulumi Python SDK with the
standard library alone (scripts/dist.sh runs it).

    python3 scripts/lib/pydist.py SDK_DIR OUT_DIR EPOCH

SDK_DIR is what Pulumi's Python code generator wrote: pyproject.toml and the
package folder it names. PyPI is not reachable here, so neither `build` nor
`wheel` can be installed; both archives are plain formats (PEP 517/643 sdist,
PEP 427 wheel), so they are written directly from pyproject.toml:

  - <name>-<version>.tar.gz: <name>-<version>/ holding PKG-INFO, pyproject.toml,
    README.md, LICENSE (when SDK_DIR has one) and the package; `pip install` builds it with setuptools, as the
    generated pyproject.toml's build-system says.
  - <name>-<version>-py3-none-any.whl: the package and <name>-<version>.dist-info/
    (METADATA, WHEEL, top_level.txt, LICENSE, RECORD with every file's sha256
    and size).

Reproducible: entries sorted, every time EPOCH (the commit's; the zip format
cannot go before 1980), owner 0/0 with no names, modes 0644 (0755 for
folders), gzip without a name or time. Prints the two paths.
"""

import base64
import gzip
import hashlib
import io
import os
import sys
import tarfile
import time
import tomllib
import zipfile


def package_files(sdk, package):
    """The package's files, relative to sdk, sorted; no byte-code."""
    out = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(sdk, package)):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for f in filenames:
            if not f.endswith((".pyc", ".pyo")):
                out.append(os.path.relpath(os.path.join(dirpath, f), sdk).replace(os.sep, "/"))
    return sorted(out)


def metadata(project, readme):
    """The core metadata (version 2.1) of [project], README as its long description."""
    lines = [
        "Metadata-Version: 2.1",
        "Name: " + project["name"],
        "Version: " + project["version"],
    ]
    if project.get("description"):
        lines.append("Summary: " + project["description"])
    if project.get("keywords"):
        lines.append("Keywords: " + ",".join(project["keywords"]))
    for label, url in sorted(project.get("urls", {}).items()):
        lines.append("Project-URL: %s, %s" % (label, url))
    lic = project.get("license")
    if isinstance(lic, dict) and lic.get("text"):
        lines.append("License: " + lic["text"])
    if project.get("requires-python"):
        lines.append("Requires-Python: " + project["requires-python"])
    for dep in project.get("dependencies", []):
        lines.append("Requires-Dist: " + dep)
    lines.append("Description-Content-Type: text/markdown")
    return ("\n".join(lines) + "\n\n" + readme).encode("utf-8")


def record_hash(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
    return "sha256=" + digest


def write_wheel(path, files, dist_info, epoch):
    """files: (archive name, bytes) in order; dist_info: the .dist-info folder name."""
    date_time = time.gmtime(max(epoch, 315532800))[:6]  # 1980-01-01: the zip format's first day
    record = []
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        def add(name, data):
            info = zipfile.ZipInfo(name, date_time=date_time)
            info.external_attr = 0o100644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3  # unix, so the modes above are read
            z.writestr(info, data)
        for name, data in files:
            add(name, data)
            record.append("%s,%s,%d" % (name, record_hash(data), len(data)))
        record.append(dist_info + "/RECORD,,")
        add(dist_info + "/RECORD", ("\n".join(record) + "\n").encode("utf-8"))


def write_sdist(path, files, epoch):
    """files: (archive name, bytes) in order, under one top folder."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs = set()
        for name, _ in files:
            parts = name.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                dirs.add("/".join(parts[:i]))
        entries = [(d, None) for d in dirs] + list(files)
        for name, data in sorted(entries, key=lambda e: e[0]):
            info = tarfile.TarInfo(name)
            info.mtime = epoch
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if data is None:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                tar.addfile(info)
            else:
                info.mode = 0o644
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    with open(path, "wb") as f:
        with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0, compresslevel=9) as gz:
            gz.write(buf.getvalue())


def main(argv):
    if len(argv) != 4:
        print("usage: pydist.py SDK_DIR OUT_DIR EPOCH", file=sys.stderr)
        return 2
    sdk, out, epoch = argv[1], argv[2], int(argv[3])
    with open(os.path.join(sdk, "pyproject.toml"), "rb") as f:
        pyproject = tomllib.load(f)
    project = pyproject["project"]
    name, version = project["name"], project["version"]
    package = name  # the generator names the import package after the project
    if not os.path.isfile(os.path.join(sdk, package, "__init__.py")):
        print("pydist.py: %s has no package %s" % (sdk, package), file=sys.stderr)
        return 1
    readme_name = project.get("readme", "README.md")
    readme_path = os.path.join(sdk, readme_name)
    if not os.path.isfile(readme_path):
        # The generator writes the README into the package folder only.
        readme_path = os.path.join(sdk, package, "README.md")
    with open(readme_path, encoding="utf-8") as f:
        readme = f.read()
    meta = metadata(project, readme)

    def read(rel):
        with open(os.path.join(sdk, rel), "rb") as f:
            return f.read()

    pkg = [(rel, read(rel)) for rel in package_files(sdk, package)]
    # Wheel and sdist file names: '-' is the field separator, so the name's
    # and version's are '_' (PEP 427, PEP 625).
    fname = name.replace("-", "_")
    fversion = version.replace("-", "_")

    dist_info = "%s-%s.dist-info" % (fname, fversion)
    wheel_meta = [
        (dist_info + "/METADATA", meta),
        (dist_info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: worldbackup pydist.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
        (dist_info + "/top_level.txt", (package + "\n").encode("utf-8")),
    ]
    has_license = os.path.isfile(os.path.join(sdk, "LICENSE"))
    if has_license:
        wheel_meta.append((dist_info + "/LICENSE", read("LICENSE")))
    wheel = os.path.join(out, "%s-%s-py3-none-any.whl" % (fname, fversion))
    write_wheel(wheel, pkg + wheel_meta, dist_info, epoch)

    top = "%s-%s" % (fname, fversion)
    sdist_files = [(top + "/" + rel, data) for rel, data in pkg]
    sdist_files += [
        (top + "/PKG-INFO", meta),
        (top + "/pyproject.toml", read("pyproject.toml")),
        (top + "/" + readme_name, readme.encode("utf-8")),
    ]
    if has_license:
        sdist_files.append((top + "/LICENSE", read("LICENSE")))
    sdist = os.path.join(out, top + ".tar.gz")
    write_sdist(sdist, sorted(sdist_files), epoch)
    print(sdist)
    print(wheel)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
