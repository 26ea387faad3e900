"""The commands (pyproject.toml's [project.scripts]). Each checks that the packages its module
imports are installed before importing it, so that a venv without torch says what to install
instead of failing in an import: sam2-variant needs ONNX Runtime alone, the exporters torch and a
`sam2` package too."""

import importlib
import importlib.util
import os
import sys

# The pins the project exports with (docs/models.md).
SAM2_PINS = "tools/setup/real-requirements.txt"
EDGETAM_PINS = f"{SAM2_PINS} with tools/setup/edgetam-requirements.txt's sam2 instead of Meta's"
SAM3_PINS = f"{SAM2_PINS} with tools/setup/sam3-requirements.txt"


def run(module, needs=(), pins=None):
    missing = [name for name in needs if importlib.util.find_spec(name) is None]
    if missing:
        command = os.path.basename(sys.argv[0])
        sys.exit(f"{command}: {', '.join(missing)} not installed in {sys.prefix}; install the pins "
                 f"of {pins} (docs/models.md, \"The model tools\")")
    importlib.import_module(f"sam2_tools.{module}").main()


def export_image():
    run("export_real", ("torch", "sam2", "samexporter"), SAM2_PINS)


def export_video():
    run("export_video", ("torch", "sam2"), SAM2_PINS)


def export_edgetam():
    run("export_edgetam", ("torch", "sam2", "timm"), EDGETAM_PINS)


def export_sam3():
    run("export_sam3", ("torch", "sam3", "torchvision", "onnxscript"), SAM3_PINS)


def variant():
    run("make_variant")
