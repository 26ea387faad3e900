#!/usr/bin/env python3
"""Builds and checks the NuGet package of the .NET wrapper, without the dotnet or nuget CLI.

A .nupkg is an OPC zip: the .nuspec at the root, `[Content_Types].xml`, `_rels/.rels` pointing at
the manifest and the core properties, then the payload. This one holds

    Sam2.nuspec
    lib/netstandard2.0/Sam2.dll, Sam2.xml     the wrapper and its documentation
    runtimes/linux-x64/native/libsam2.so     the native library, where .NET looks for it
    runtimes/win-x64/native/sam2.dll         the Windows x64 library, when packed with --native-win

    nupkg.py pack --dll Sam2.dll --xml Sam2.xml --native libsam2.so --cargo Cargo.toml --out DIR
    nupkg.py check PACKAGE --cargo Cargo.toml [--csproj csharp/Sam2/Sam2.csproj]

Metadata comes from Cargo.toml (version, description, license, authors), so the package, the
native library and the header always carry one version. `check` reads a package back and fails
(exit status 1, one line per problem) unless its layout and metadata are what NuGet expects.
ONNX Runtime is not a dependency: the host references the Microsoft.ML.OnnxRuntime package it
wants (CPU or GPU), whose native library lands beside libsam2.so, where libsam2 looks for it.
"""

import argparse
import hashlib
import re
import struct
import sys
import urllib.parse
import zipfile
import xml.etree.ElementTree as ET
from pathlib import Path

PACKAGE_ID = "Sam2"
TFM_FOLDER = "netstandard2.0"
TFM_NAME = ".NETStandard2.0"
RID = "linux-x64"
NATIVE = f"runtimes/{RID}/native/libsam2.so"
NATIVE_WIN = "runtimes/win-x64/native/sam2.dll"
TAGS = "segment-anything sam2 segmentation onnxruntime native"

NUSPEC_NS = "http://schemas.microsoft.com/packaging/2013/05/nuspec.xsd"
KNOWN_NUSPEC_NS = {
    "http://schemas.microsoft.com/packaging/2010/07/nuspec.xsd",
    "http://schemas.microsoft.com/packaging/2011/08/nuspec.xsd",
    "http://schemas.microsoft.com/packaging/2012/06/nuspec.xsd",
    "http://schemas.microsoft.com/packaging/2013/01/nuspec.xsd",
    NUSPEC_NS,
}
CT_NS = "http://schemas.openxmlformats.org/package/2006/content-types"
RELS_NS = "http://schemas.openxmlformats.org/package/2006/relationships"
MANIFEST_REL = "http://schemas.microsoft.com/packaging/2010/07/manifest"
CORE_REL = "http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties"
CORE_NS = "http://schemas.openxmlformats.org/package/2006/metadata/core-properties"
DC_NS = "http://purl.org/dc/elements/1.1/"
RELS_TYPE = "application/vnd.openxmlformats-package.relationships+xml"
CORE_TYPE = "application/vnd.openxmlformats-package.core-properties+xml"
# A fixed time for every entry, so the same inputs give the same package bytes.
ZIP_TIME = (2000, 1, 1, 0, 0, 0)


def crate_metadata(cargo_toml):
    try:
        import tomllib
    except ImportError:  # Python < 3.11: the [package] keys used here are plain strings.
        tomllib = None
    if tomllib is not None:
        with open(cargo_toml, "rb") as f:
            package = tomllib.load(f)["package"]
    else:
        section = Path(cargo_toml).read_text().split("[package]", 1)[1].split("\n[", 1)[0]
        package = dict(re.findall(r'^(\w+)\s*=\s*"([^"]*)"', section, re.M))
    return {
        "version": package["version"],
        "description": package["description"],
        "license": package["license"],
        "authors": ", ".join(package.get("authors") or ["The sam2 contributors"]),
    }


def xml_bytes(root):
    ET.indent(root)
    return b'<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="utf-8") + b"\n"


def nuspec(meta):
    ET.register_namespace("", NUSPEC_NS)
    q = lambda tag: f"{{{NUSPEC_NS}}}{tag}"
    package = ET.Element(q("package"))
    metadata = ET.SubElement(package, q("metadata"), {"minClientVersion": "4.9"})
    for tag, text in [
        ("id", PACKAGE_ID),
        ("version", meta["version"]),
        ("title", "sam2 for .NET"),
        ("authors", meta["authors"]),
        ("description", meta["description"] + ". Reference an ONNX Runtime 1.31+ package "
         "(Microsoft.ML.OnnxRuntime or Microsoft.ML.OnnxRuntime.Gpu) as well: libsam2 loads it at "
         "run time from beside itself."),
        ("tags", TAGS),
    ]:
        ET.SubElement(metadata, q(tag)).text = text
    ET.SubElement(metadata, q("license"), {"type": "expression"}).text = meta["license"]
    # What `nuget pack` adds for clients older than license expressions.
    ET.SubElement(metadata, q("licenseUrl")).text = (
        "https://licenses.nuget.org/" + urllib.parse.quote(meta["license"]))
    ET.SubElement(metadata, q("requireLicenseAcceptance")).text = "false"
    dependencies = ET.SubElement(metadata, q("dependencies"))
    ET.SubElement(dependencies, q("group"), {"targetFramework": TFM_NAME})
    return xml_bytes(package)


def content_types(extensions):
    ET.register_namespace("", CT_NS)
    types = ET.Element(f"{{{CT_NS}}}Types")
    for ext in sorted(extensions):
        content_type = {"rels": RELS_TYPE, "psmdcp": CORE_TYPE}.get(ext, "application/octet")
        ET.SubElement(types, f"{{{CT_NS}}}Default", {"Extension": ext, "ContentType": content_type})
    return xml_bytes(types)


def relationships(core_path):
    ET.register_namespace("", RELS_NS)
    rels = ET.Element(f"{{{RELS_NS}}}Relationships")
    for rel_type, target in [(MANIFEST_REL, f"/{PACKAGE_ID}.nuspec"), (CORE_REL, "/" + core_path)]:
        rel_id = "R" + hashlib.sha256(target.encode()).hexdigest()[:16].upper()
        ET.SubElement(rels, f"{{{RELS_NS}}}Relationship",
                      {"Type": rel_type, "Target": target, "Id": rel_id})
    return xml_bytes(rels)


def core_properties(meta):
    ET.register_namespace("", CORE_NS)
    ET.register_namespace("dc", DC_NS)
    props = ET.Element(f"{{{CORE_NS}}}coreProperties")
    for tag, text in [(f"{{{DC_NS}}}creator", meta["authors"]),
                      (f"{{{DC_NS}}}description", meta["description"]),
                      (f"{{{DC_NS}}}identifier", PACKAGE_ID),
                      (f"{{{CORE_NS}}}version", meta["version"]),
                      (f"{{{CORE_NS}}}keywords", TAGS),
                      (f"{{{CORE_NS}}}lastModifiedBy", "sam2 tools/ci/nupkg.py")]:
        ET.SubElement(props, tag).text = text
    return xml_bytes(props)


def pack(args):
    meta = crate_metadata(args.cargo)
    payload = {
        f"lib/{TFM_FOLDER}/Sam2.dll": Path(args.dll).read_bytes(),
        NATIVE: Path(args.native).read_bytes(),
    }
    if args.native_win:
        payload[NATIVE_WIN] = Path(args.native_win).read_bytes()
    if args.xml:
        payload[f"lib/{TFM_FOLDER}/Sam2.xml"] = Path(args.xml).read_bytes()
    core_path = f"package/services/metadata/core-properties/{hashlib.sha256(meta['version'].encode()).hexdigest()[:32]}.psmdcp"
    parts = {f"{PACKAGE_ID}.nuspec": nuspec(meta), **payload, core_path: core_properties(meta),
             "_rels/.rels": relationships(core_path)}
    extensions = {name.rsplit(".", 1)[1] for name in parts}
    parts["[Content_Types].xml"] = content_types(extensions)

    out = Path(args.out) / f"{PACKAGE_ID}.{meta['version']}.nupkg"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in parts.items():
            info = zipfile.ZipInfo(name, ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o100755 if name.endswith(".so") else 0o100644) << 16
            z.writestr(info, data)
    tmp.replace(out)
    print(out)


# ---- check -----------------------------------------------------------------------------------

def is_clr_assembly(data):
    """A PE image whose optional header has a CLI (COM descriptor) data directory."""
    if data[:2] != b"MZ" or len(data) < 0x40:
        return False
    pe = struct.unpack_from("<I", data, 0x3C)[0]
    if data[pe:pe + 4] != b"PE\0\0":
        return False
    optional = pe + 24
    magic = struct.unpack_from("<H", data, optional)[0]
    directories = optional + (96 if magic == 0x10B else 112)
    rva, size = struct.unpack_from("<II", data, directories + 14 * 8)
    return rva != 0 and size != 0


def elf_kind(data):
    """(class, endianness, type, machine) of an ELF file, or None."""
    if data[:4] != b"\x7fELF":
        return None
    ei_class, ei_data = data[4], data[5]
    e_type, e_machine = struct.unpack_from("<HH" if ei_data == 1 else ">HH", data, 16)
    return ei_class, ei_data, e_type, e_machine


def pe_machine(data):
    """The machine of a PE image (0x8664 for x86-64), or None when it is not one."""
    if len(data) < 64 or data[:2] != b"MZ":
        return None
    pe = int.from_bytes(data[60:64], "little")
    if data[pe:pe + 4] != b"PE\0\0":
        return None
    return int.from_bytes(data[pe + 4:pe + 6], "little")


def check(args):
    meta = crate_metadata(args.cargo)
    problems = []
    fail = problems.append
    path = Path(args.package)
    want_name = f"{PACKAGE_ID}.{meta['version']}.nupkg"
    if path.name != want_name:
        fail(f"file name is {path.name}, NuGet names it {want_name}")
    z = zipfile.ZipFile(path)
    names = z.namelist()
    if len(names) != len(set(n.lower() for n in names)):
        fail("duplicate entries (NuGet compares part names without case)")
    for name in names:
        if "\\" in name or name.startswith("/") or ".." in name.split("/") or name.endswith("/"):
            fail(f"entry {name!r} is not a plain relative file path")

    # The manifest.
    manifest = f"{PACKAGE_ID}.nuspec"
    nuspecs = [n for n in names if n.endswith(".nuspec")]
    if nuspecs != [manifest]:
        fail(f"want exactly one manifest, {manifest} at the root; found {nuspecs}")
        if manifest not in names:
            return problems
    root = ET.fromstring(z.read(manifest))
    ns = root.tag[1:].split("}")[0] if root.tag.startswith("{") else ""
    if ns not in KNOWN_NUSPEC_NS or root.tag != f"{{{ns}}}package":
        fail(f"root element {root.tag} is not a nuspec <package>")
        return problems
    q = lambda tag: f"{{{ns}}}{tag}"
    metadata = root.find(q("metadata"))
    if metadata is None:
        fail("no <metadata>")
        return problems
    text = lambda tag: (metadata.findtext(q(tag)) or "").strip()
    for tag in ["id", "version", "authors", "description"]:
        if not text(tag):
            fail(f"required <{tag}> is missing or empty")
    if text("id") != PACKAGE_ID or not re.fullmatch(r"\w+(?:[_.-]\w+)*", text("id")) or len(text("id")) > 100:
        fail(f"<id> is {text('id')!r}, want {PACKAGE_ID!r}")
    semver = r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?"
    if not re.fullmatch(semver, text("version")):
        fail(f"<version> {text('version')!r} is not SemVer 2.0")
    if text("version") != meta["version"]:
        fail(f"<version> is {text('version')}, Cargo.toml says {meta['version']}")
    license = metadata.find(q("license"))
    if license is None or license.get("type") != "expression":
        fail('want <license type="expression">')
    else:
        expression = (license.text or "").strip()
        if expression != meta["license"]:
            fail(f"license {expression!r}, Cargo.toml says {meta['license']!r}")
        tokens = re.findall(r"\(|\)|[^\s()]+", expression)
        for token in tokens:
            if token not in {"(", ")", "OR", "AND", "WITH"} and not re.fullmatch(r"[A-Za-z0-9.+-]+", token):
                fail(f"license expression token {token!r} is not SPDX")
        license_url = text("licenseUrl")
        if license_url and license_url != "https://licenses.nuget.org/" + urllib.parse.quote(expression):
            fail(f"<licenseUrl> {license_url} does not match the license expression")
    if text("requireLicenseAcceptance") not in ("", "false"):
        fail("<requireLicenseAcceptance> should be false")

    # Payload: lib/<tfm>/ and runtimes/<rid>/native/, and a dependency group per lib/ framework.
    payload = [n for n in names if n.startswith(("lib/", "runtimes/"))]
    lib_tfms = {n.split("/")[1] for n in names if n.startswith("lib/") and n.count("/") >= 2}
    for name in payload:
        parts = name.split("/")
        if parts[0] == "lib" and (len(parts) != 3 or parts[1] != TFM_FOLDER):
            fail(f"{name}: want lib/{TFM_FOLDER}/<file>")
        if parts[0] == "runtimes" and (len(parts) != 4 or parts[2] != "native"):
            fail(f"{name}: want runtimes/<rid>/native/<file>")
    groups = metadata.findall(f"{q('dependencies')}/{q('group')}")
    group_tfms = {g.get("targetFramework") for g in groups}
    if None in group_tfms or "" in group_tfms:
        fail("a dependency <group> without targetFramework")
    if lib_tfms == {TFM_FOLDER} and TFM_NAME not in group_tfms:
        fail(f"lib/{TFM_FOLDER} has no dependency group for {TFM_NAME} (NuGet warning NU5128)")
    for group in groups:
        for dep in group.findall(q("dependency")):
            fail(f"unexpected dependency {dep.get('id')} (ONNX Runtime is the host's choice)")
    dll = f"lib/{TFM_FOLDER}/Sam2.dll"
    if dll not in names:
        fail(f"{dll} is missing")
    elif not is_clr_assembly(z.read(dll)):
        fail(f"{dll} is not a .NET assembly")
    if NATIVE not in names:
        fail(f"{NATIVE} is missing")
    else:
        kind = elf_kind(z.read(NATIVE))
        if kind != (2, 1, 3, 62):
            fail(f"{NATIVE} is not a 64-bit little-endian x86-64 shared object (ELF {kind})")
    if NATIVE_WIN in names and pe_machine(z.read(NATIVE_WIN)) != 0x8664:
        fail(f"{NATIVE_WIN} is not an x86-64 Windows DLL")
    if args.require_win and NATIVE_WIN not in names:
        fail(f"{NATIVE_WIN} is missing")

    # OPC parts.
    if "[Content_Types].xml" not in names:
        fail("[Content_Types].xml is missing")
    else:
        types = ET.fromstring(z.read("[Content_Types].xml"))
        defaults = {d.get("Extension").lower(): d.get("ContentType")
                    for d in types.findall(f"{{{CT_NS}}}Default")}
        overrides = {o.get("PartName") for o in types.findall(f"{{{CT_NS}}}Override")}
        for name in names:
            if name == "[Content_Types].xml":
                continue
            ext = name.rsplit("/", 1)[-1].rsplit(".", 1)[-1].lower() if "." in name.rsplit("/", 1)[-1] else ""
            if ext not in defaults and "/" + name not in overrides:
                fail(f"[Content_Types].xml gives no content type for {name}")
        if defaults.get("rels") != RELS_TYPE:
            fail("[Content_Types].xml: .rels is not the relationships type")
    if "_rels/.rels" not in names:
        fail("_rels/.rels is missing")
    else:
        rels = ET.fromstring(z.read("_rels/.rels"))
        targets = {r.get("Type"): r.get("Target", "").lstrip("/") for r in rels.findall(f"{{{RELS_NS}}}Relationship")}
        if targets.get(MANIFEST_REL) != manifest:
            fail(f"_rels/.rels does not point its manifest relationship at /{manifest}")
        core = targets.get(CORE_REL)
        if core is not None:
            if core not in names:
                fail(f"_rels/.rels names {core}, which is not in the package")
            else:
                props = ET.fromstring(z.read(core))
                if props.findtext(f"{{{DC_NS}}}identifier") != PACKAGE_ID or \
                        props.findtext(f"{{{CORE_NS}}}version") != meta["version"]:
                    fail(f"{core} disagrees with the manifest's id or version")

    if args.csproj:
        project = ET.parse(args.csproj).getroot()
        versions = [e.text for e in project.iter("Version")]
        if versions != [meta["version"]]:
            fail(f"{args.csproj} <Version> is {versions}, Cargo.toml says {meta['version']}")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack")
    p.add_argument("--dll", required=True)
    p.add_argument("--xml")
    p.add_argument("--native", required=True)
    p.add_argument("--native-win", help="sam2.dll for runtimes/win-x64/native/")
    p.add_argument("--cargo", required=True)
    p.add_argument("--out", required=True)
    c = sub.add_parser("check")
    c.add_argument("package")
    c.add_argument("--cargo", required=True)
    c.add_argument("--csproj")
    c.add_argument("--require-win", action="store_true", help="fail when sam2.dll is missing")
    args = parser.parse_args()
    if args.command == "pack":
        pack(args)
        return 0
    problems = check(args)
    for problem in problems:
        print(f"nupkg check: {args.package}: {problem}", file=sys.stderr)
    if not problems:
        print(f"nupkg check: {args.package}: layout and metadata ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
