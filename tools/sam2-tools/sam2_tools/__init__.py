"""The sam2 library's model tools (docs/models.md): a command per module.

* `sam2-export-image` (export_real): SAM2's image encoder/decoder pairs by samexporter and by
  ONNX Runtime's SAM2 tools;
* `sam2-export-video` (export_video): SAM2.1's four video modules;
* `sam2-export-edgetam` (export_edgetam, with edgetam_model): EdgeTAM's image pair and four video
  modules;
* `sam2-variant` (make_variant): an int8 or fp16 variant of an export.

Importing the package imports nothing heavy: each exporter imports torch when it runs.
"""
