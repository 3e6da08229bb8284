"""The PEP 517 (and PEP 660) build backend of axsched, standard library only.

It builds a pure-Python wheel of src/<name> (every file in it, py.typed
included), an sdist of the project, and an editable wheel (a .pth naming
src), with the metadata of pyproject.toml's [project] table: name, version,
description, readme, requires-python, license.
"""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TAG = "py3-none-any"


def _project():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        raw = f.read()
    try:
        import tomllib
    except ImportError:  # before 3.11: the simple `key = "value"` lines of [project]
        out, section = {}, ""
        for line in raw.decode().splitlines():
            line = line.strip()
            if line.startswith("["):
                section = line.strip("[]").strip()
            elif section == "project":
                m = re.match(r'^([\w-]+)\s*=\s*"([^"]*)"\s*$', line)
                if m:
                    out[m.group(1)] = m.group(2)
        return out
    return tomllib.loads(raw.decode())["project"]


def _names():
    p = _project()
    return p, p["name"], p["version"], "%s-%s" % (re.sub(r"[-_.]+", "_", p["name"]), p["version"])


def _metadata():
    p, name, version, _ = _names()
    lines = ["Metadata-Version: 2.1", "Name: " + name, "Version: " + version]
    if p.get("description"):
        lines.append("Summary: " + p["description"])
    if p.get("requires-python"):
        lines.append("Requires-Python: " + p["requires-python"])
    if isinstance(p.get("license"), str):
        lines.append("License: " + p["license"])
    body = ""
    if isinstance(p.get("readme"), str):
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(ROOT, p["readme"]), encoding="utf-8") as f:
            body = f.read()
    return ("\n".join(lines) + "\n\n" + body).encode()


def _dist_info(dist):
    wheel = "Wheel-Version: 1.0\nGenerator: axbuild\nRoot-Is-Purelib: true\nTag: %s\n" % TAG
    return {dist + ".dist-info/METADATA": _metadata(), dist + ".dist-info/WHEEL": wheel.encode()}


def _package_files():
    _, name, _, _ = _names()
    src = os.path.join(ROOT, "src")
    out = {}
    for d, dirs, files in os.walk(os.path.join(src, name)):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for f in sorted(files):
            if f.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(d, f)
            with open(path, "rb") as fh:
                out[os.path.relpath(path, src).replace(os.sep, "/")] = fh.read()
    return out


def _write_wheel(directory, files):
    _, _, _, dist = _names()
    files = dict(files)
    files.update(_dist_info(dist))
    record = dist + ".dist-info/RECORD"
    rows = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append("%s,sha256=%s,%d" % (path, digest, len(data)))
    rows.append(record + ",,")
    files[record] = ("\n".join(rows) + "\n").encode()
    wheel = "%s-%s.whl" % (dist, TAG)
    with zipfile.ZipFile(os.path.join(directory, wheel), "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(files):
            info = zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            z.writestr(info, files[path], zipfile.ZIP_DEFLATED)
    return wheel


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    _, _, _, dist = _names()
    for path, data in _dist_info(dist).items():
        full = os.path.join(metadata_directory, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)
    return dist + ".dist-info"


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, _package_files())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    _, name, _, _ = _names()
    return _write_wheel(wheel_directory, {"_%s_editable.pth" % name: (os.path.join(ROOT, "src") + "\n").encode()})


def build_sdist(sdist_directory, config_settings=None):
    _, _, _, dist = _names()
    out = dist + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, out), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for top in ("pyproject.toml", "README.md", "backend", "src", "tests"):
            path = os.path.join(ROOT, top)
            if os.path.exists(path):
                tar.add(path, arcname=dist + "/" + top,
                        filter=lambda i: None if "__pycache__" in i.name or i.name.endswith(".pyc") else i)
        info = tarfile.TarInfo(dist + "/PKG-INFO")
        meta = _metadata()
        info.size = len(meta)
        tar.addfile(info, io.BytesIO(meta))
    return out
