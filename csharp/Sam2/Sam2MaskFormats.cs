using System;
using System.Collections.Generic;

namespace Sam2
{
    /// <summary>
    /// One connected component of a mask as polygons: its outer ring and the rings of its holes.
    /// Each ring is a flat array <c>x0, y0, x1, y1, …</c> of pixel-corner coordinates ((x, y) is the
    /// top-left corner of pixel (x, y)), not closed (the first point is not repeated). A pixel is
    /// inside when its centre is inside an odd number of the rings.
    /// </summary>
    public sealed class MaskPolygon
    {
        internal MaskPolygon(float[] outer, float[][] holes)
        {
            Outer = outer;
            Holes = holes;
        }

        /// <summary>The outer ring (clockwise on screen, y down).</summary>
        public float[] Outer { get; private set; }

        /// <summary>The holes (counter-clockwise on screen).</summary>
        public float[][] Holes { get; private set; }
    }

    public sealed partial class Sam2Masks
    {
        /// <summary>
        /// Copies mask <paramref name="index"/> into <paramref name="buffer"/> (at least Width × Height
        /// bytes, row-major, 1 = foreground), so a host that clicks often reuses one array.
        /// </summary>
        public void GetMask(int index, byte[] buffer)
        {
            CheckIndex(index);
            if (buffer == null)
                throw new ArgumentNullException("buffer");
            if (buffer.Length < Width * Height)
                throw new ArgumentException("must hold at least Width × Height = " + (Width * Height) + " bytes, not " + buffer.Length, "buffer");
            Sam2Error.Check(NativeMethods.sam2_masks_copy_mask(Handle, (UIntPtr)index, buffer, (UIntPtr)buffer.Length));
        }

        /// <summary>
        /// Copies mask <paramref name="index"/> cropped to its box into <paramref name="buffer"/>
        /// (row-major, box width × box height bytes) and returns the number of bytes written; the
        /// box is written to <paramref name="box"/>. An empty mask writes nothing and gives 0.
        /// A buffer that is too small throws <see cref="ArgumentException"/> naming the size needed.
        /// </summary>
        public int GetCroppedMask(int index, byte[] buffer, out MaskBox box)
        {
            CheckIndex(index);
            if (buffer == null)
                throw new ArgumentNullException("buffer");
            var nativeBox = new uint[4];
            UIntPtr needed;
            Sam2Status status = NativeMethods.sam2_masks_crop(Handle, (UIntPtr)index, buffer, (UIntPtr)buffer.Length, nativeBox, out needed);
            if (status == Sam2Status.BufferTooSmall)
                throw new ArgumentException("must hold the cropped mask: " + needed.ToUInt64() + " bytes, not " + buffer.Length, "buffer");
            Sam2Error.Check(status);
            box = new MaskBox((int)nativeBox[0], (int)nativeBox[1], (int)nativeBox[2], (int)nativeBox[3]);
            return checked((int)needed.ToUInt64());
        }

        /// <summary>Mask <paramref name="index"/> cropped to its box, in a new array of just that size.</summary>
        public byte[] GetCroppedMask(int index, out MaskBox box)
        {
            CheckIndex(index);
            var nativeBox = new uint[4];
            UIntPtr needed;
            Sam2Status status = NativeMethods.sam2_masks_crop(Handle, (UIntPtr)index, null, UIntPtr.Zero, nativeBox, out needed);
            if (status != Sam2Status.BufferTooSmall)
                Sam2Error.Check(status);
            var buffer = new byte[checked((int)needed.ToUInt64())];
            GetCroppedMask(index, buffer, out box);
            return buffer;
        }

        /// <summary>
        /// Mask <paramref name="index"/> as COCO run lengths: alternating counts of 0s and 1s in
        /// column-major order, starting with 0s (COCO's uncompressed <c>counts</c>, size [Height, Width]).
        /// </summary>
        public uint[] GetRleCounts(int index)
        {
            CheckIndex(index);
            UIntPtr count;
            Sam2Status status = NativeMethods.sam2_masks_rle(Handle, (UIntPtr)index, null, UIntPtr.Zero, out count);
            if (status != Sam2Status.BufferTooSmall)
                Sam2Error.Check(status);
            var counts = new uint[checked((int)count.ToUInt64())];
            Sam2Error.Check(NativeMethods.sam2_masks_rle(Handle, (UIntPtr)index, counts, (UIntPtr)counts.Length, out count));
            return counts;
        }

        /// <summary>Mask <paramref name="index"/> as the compressed COCO RLE string pycocotools writes.</summary>
        public string GetRleString(int index)
        {
            CheckIndex(index);
            MasksHandle handle = Handle;
            return Sam2Error.ReadString((byte[] buf, UIntPtr len, out UIntPtr needed) =>
                NativeMethods.sam2_masks_rle_string(handle, (UIntPtr)index, buf, len, out needed));
        }

        /// <summary>
        /// Mask <paramref name="index"/> as polygons with holes, one per connected component,
        /// simplified by <paramref name="tolerance"/> pixels (Douglas–Peucker; 0 keeps every
        /// corner and gives the mask back exactly).
        /// </summary>
        public MaskPolygon[] GetPolygons(int index, float tolerance = 0f)
        {
            CheckIndex(index);
            UIntPtr pointCount, ringCount;
            Sam2Status status = NativeMethods.sam2_masks_polygons(Handle, (UIntPtr)index, tolerance, null, UIntPtr.Zero, null, UIntPtr.Zero, out pointCount, out ringCount);
            if (status != Sam2Status.BufferTooSmall)
                Sam2Error.Check(status);
            var points = new float[checked(2 * (int)pointCount.ToUInt64())];
            var rings = new uint[checked(2 * (int)ringCount.ToUInt64())];
            Sam2Error.Check(NativeMethods.sam2_masks_polygons(Handle, (UIntPtr)index, tolerance, points, pointCount, rings, ringCount, out pointCount, out ringCount));
            var result = new List<MaskPolygon>();
            float[] outer = null;
            var holes = new List<float[]>();
            int at = 0;
            for (int r = 0; r < rings.Length / 2; r++)
            {
                var ring = new float[2 * rings[2 * r]];
                Array.Copy(points, at, ring, 0, ring.Length);
                at += ring.Length;
                if (rings[2 * r + 1] == 0)
                {
                    if (outer != null)
                        result.Add(new MaskPolygon(outer, holes.ToArray()));
                    outer = ring;
                    holes.Clear();
                }
                else
                {
                    holes.Add(ring);
                }
            }
            if (outer != null)
                result.Add(new MaskPolygon(outer, holes.ToArray()));
            return result.ToArray();
        }
    }

    /// <summary>An encoder and the decoder that goes with it, found by file name.</summary>
    public sealed class Sam2ModelPair
    {
        private Sam2ModelPair(string encoderPath, string decoderPath)
        {
            EncoderPath = encoderPath;
            DecoderPath = decoderPath;
        }

        /// <summary>The encoder file.</summary>
        public string EncoderPath { get; private set; }

        /// <summary>The decoder file.</summary>
        public string DecoderPath { get; private set; }

        /// <summary>
        /// Finds one pair from <paramref name="path"/>: a directory holding exactly one pair,
        /// DIR/NAME for the pair called NAME, or an encoder or decoder file. Recognises
        /// samexporter's NAME.encoder.onnx, ONNX Runtime's tools' NAME_image_encoder.onnx (and
        /// NAME_image_decoder_multi.onnx before NAME_image_decoder.onnx) and the generator's
        /// NAME_encoder.onnx. No pair or several throw <see cref="Sam2Exception"/> (SAM2_ERR_MODEL)
        /// whose message lists the candidates.
        /// </summary>
        public static Sam2ModelPair Find(string path)
        {
            if (path == null)
                throw new ArgumentNullException("path");
            byte[] native = Utf8.ToNative(path, "path");
            var encoder = new byte[512];
            var decoder = new byte[512];
            for (int attempt = 0; ; attempt++)
            {
                UIntPtr encoderNeeded, decoderNeeded;
                Sam2Status status = NativeMethods.sam2_find_model_pair(native, encoder, (UIntPtr)encoder.Length, out encoderNeeded, decoder, (UIntPtr)decoder.Length, out decoderNeeded);
                if (status == Sam2Status.BufferTooSmall && attempt < 2)
                {
                    encoder = new byte[Math.Max(encoder.Length, checked((int)encoderNeeded.ToUInt64()))];
                    decoder = new byte[Math.Max(decoder.Length, checked((int)decoderNeeded.ToUInt64()))];
                    continue;
                }
                Sam2Error.Check(status);
                return new Sam2ModelPair(Utf8.FromBuffer(encoder, (int)encoderNeeded.ToUInt64() - 1), Utf8.FromBuffer(decoder, (int)decoderNeeded.ToUInt64() - 1));
            }
        }
    }
}
