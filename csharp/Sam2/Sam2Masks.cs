using System;
using System.Runtime.InteropServices;

namespace Sam2
{
    /// <summary>The inclusive bounding box of a mask, in image pixels.</summary>
    public struct MaskBox
    {
        /// <summary>Creates a box.</summary>
        public MaskBox(int xMin, int yMin, int xMax, int yMax)
        {
            XMin = xMin;
            YMin = yMin;
            XMax = xMax;
            YMax = yMax;
        }

        /// <summary>First column.</summary>
        public int XMin;
        /// <summary>First row.</summary>
        public int YMin;
        /// <summary>Last column (inclusive).</summary>
        public int XMax;
        /// <summary>Last row (inclusive).</summary>
        public int YMax;

        /// <inheritdoc />
        public override string ToString()
        {
            return "[" + XMin + ", " + YMin + ", " + XMax + ", " + YMax + "]";
        }
    }

    /// <summary>
    /// The result of one prediction: <see cref="Objects"/> × <see cref="Candidates"/> masks at the
    /// original image size, object-major (mask <c>i</c> belongs to object <c>i / Candidates</c>).
    /// Immutable; it does not depend on the predictor and may outlive it. Every accessor copies.
    /// </summary>
    public sealed partial class Sam2Masks : Sam2NativeObject
    {
        internal Sam2Masks(MasksHandle handle) : base(handle)
        {
            try
            {
                UIntPtr objects, candidates;
                Sam2Error.Check(NativeMethods.sam2_masks_count(handle, out objects, out candidates));
                uint width, height;
                Sam2Error.Check(NativeMethods.sam2_masks_size(handle, out width, out height));
                Objects = checked((int)objects.ToUInt64());
                Candidates = checked((int)candidates.ToUInt64());
                Count = checked(Objects * Candidates);
                Width = checked((int)width);
                Height = checked((int)height);
            }
            catch
            {
                handle.Dispose();
                throw;
            }
        }

        /// <summary>Width of every mask (the original image's).</summary>
        public int Width { get; private set; }

        /// <summary>Height of every mask (the original image's).</summary>
        public int Height { get; private set; }

        /// <summary>Number of objects (prompts).</summary>
        public int Objects { get; private set; }

        /// <summary>Candidate masks per object (1 unless multimask was asked for).</summary>
        public int Candidates { get; private set; }

        /// <summary>Objects × Candidates.</summary>
        public int Count { get; private set; }

        /// <summary>Index of candidate <paramref name="candidate"/> of object <paramref name="obj"/>.</summary>
        public int IndexOf(int obj, int candidate)
        {
            if (obj < 0 || obj >= Objects)
                throw new ArgumentOutOfRangeException("obj", obj, "must be below Objects (" + Objects + ")");
            if (candidate < 0 || candidate >= Candidates)
                throw new ArgumentOutOfRangeException("candidate", candidate, "must be below Candidates (" + Candidates + ")");
            return obj * Candidates + candidate;
        }

        /// <summary>A copy of mask <paramref name="index"/>: Width × Height bytes, row-major, 1 = foreground, 0 = background.</summary>
        public byte[] GetMask(int index)
        {
            CheckIndex(index);
            MasksHandle handle = Handle;
            using (new HandleLease(handle, GetType().Name))
            {
                IntPtr data;
                UIntPtr length;
                Sam2Error.Check(NativeMethods.sam2_masks_mask(handle, (UIntPtr)index, out data, out length));
                var copy = new byte[checked((int)length.ToUInt64())];
                Marshal.Copy(data, copy, 0, copy.Length);
                return copy;
            }
        }

        /// <summary>The predicted IoU (the model's confidence) of mask <paramref name="index"/>.</summary>
        public float Score(int index)
        {
            CheckIndex(index);
            float score;
            Sam2Error.Check(NativeMethods.sam2_masks_score(Handle, (UIntPtr)index, out score));
            return score;
        }

        /// <summary>The inclusive bounding box of mask <paramref name="index"/>; {0, 0, 0, 0} for an empty mask.</summary>
        public MaskBox Box(int index)
        {
            long area;
            return BoxAndArea(index, out area);
        }

        /// <summary>The area of mask <paramref name="index"/> in pixels.</summary>
        public long Area(int index)
        {
            long area;
            BoxAndArea(index, out area);
            return area;
        }

        /// <summary>A copy of the low-res logits of mask <paramref name="index"/> (side × side floats), to pass back as <see cref="Sam2Prompt.MaskInput"/>.</summary>
        public float[] GetLowRes(int index)
        {
            int side;
            return GetLowRes(index, out side);
        }

        /// <summary>A copy of the low-res logits of mask <paramref name="index"/>, and their side (256 for SAM2).</summary>
        public float[] GetLowRes(int index, out int side)
        {
            CheckIndex(index);
            MasksHandle handle = Handle;
            using (new HandleLease(handle, GetType().Name))
            {
                IntPtr data;
                UIntPtr length;
                uint nativeSide;
                Sam2Error.Check(NativeMethods.sam2_masks_low_res(handle, (UIntPtr)index, out data, out length, out nativeSide));
                var copy = new float[checked((int)length.ToUInt64())];
                Marshal.Copy(data, copy, 0, copy.Length);
                side = (int)nativeSide;
                return copy;
            }
        }

        private MasksHandle Handle
        {
            get { return (MasksHandle)OpenHandle; }
        }

        private MaskBox BoxAndArea(int index, out long area)
        {
            CheckIndex(index);
            var box = new uint[4];
            ulong nativeArea;
            Sam2Error.Check(NativeMethods.sam2_masks_box(Handle, (UIntPtr)index, box, out nativeArea));
            area = checked((long)nativeArea);
            return new MaskBox((int)box[0], (int)box[1], (int)box[2], (int)box[3]);
        }

        private void CheckIndex(int index)
        {
            ThrowIfDisposed();
            if (index < 0 || index >= Count)
                throw new ArgumentOutOfRangeException("index", index, "must be below Count (" + Count + ")");
        }
    }
}
