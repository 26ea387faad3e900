using System;
using System.Runtime.InteropServices;
using Microsoft.Win32.SafeHandles;

namespace Sam2
{
    /// <summary>Owns a <c>sam2_everything*</c>; released with <c>sam2_everything_free</c>.</summary>
    internal sealed class EverythingHandle : SafeHandleZeroOrMinusOneIsInvalid
    {
        /// <summary>Used by the marshaller for out-params.</summary>
        public EverythingHandle() : base(true) { }

        protected override bool ReleaseHandle()
        {
            NativeMethods.sam2_everything_free(handle);
            return true;
        }
    }

    /// <summary>
    /// Options of segment everything: the parameters of SAM2's <c>SAM2AutomaticMaskGenerator</c>,
    /// with its defaults (read from the native library).
    /// </summary>
    public sealed class Sam2EverythingOptions
    {
        private static readonly Lazy<NativeMethods.sam2_everything_options> NativeDefaults =
            new Lazy<NativeMethods.sam2_everything_options>(() =>
                NativeOptions.Defaults<NativeMethods.sam2_everything_options>(NativeMethods.sam2_everything_options_init));

        /// <summary>SAM2's defaults.</summary>
        public Sam2EverythingOptions()
        {
            NativeMethods.sam2_everything_options d = NativeDefaults.Value;
            PointsPerSide = (int)d.points_per_side;
            PointsPerBatch = (int)d.points_per_batch;
            PredIouThresh = d.pred_iou_thresh;
            StabilityScoreThresh = d.stability_score_thresh;
            StabilityScoreOffset = d.stability_score_offset;
            MaskThreshold = d.mask_threshold;
            BoxNmsThresh = d.box_nms_thresh;
            CropNLayers = (int)d.crop_n_layers;
            CropNmsThresh = d.crop_nms_thresh;
            CropOverlapRatio = d.crop_overlap_ratio;
            CropNPointsDownscaleFactor = (int)d.crop_n_points_downscale_factor;
            MinMaskRegionArea = (int)d.min_mask_region_area;
            Multimask = d.multimask != 0;
            MaxClicks = checked((long)d.max_clicks);
            MaxMemoryBytes = checked((long)d.max_memory_bytes);
        }

        /// <summary>Points along each side of the grid of clicks (32); 0 when <see cref="Points"/> gives them.</summary>
        public int PointsPerSide { get; set; }
        /// <summary>Null, or the caller's clicks as {x, y} pairs normalised to [0, 1] (used on every crop layer).</summary>
        public float[] Points { get; set; }
        /// <summary>Clicks per decoder call, 1 to 256 (64).</summary>
        public int PointsPerBatch { get; set; }
        /// <summary>Keep masks whose predicted IoU is above this (0.8).</summary>
        public float PredIouThresh { get; set; }
        /// <summary>Keep masks whose stability score is at least this (0.95).</summary>
        public float StabilityScoreThresh { get; set; }
        /// <summary>Threshold shift of the stability score (1.0).</summary>
        public float StabilityScoreOffset { get; set; }
        /// <summary>Logit above which a pixel belongs to a mask (0.0).</summary>
        public float MaskThreshold { get; set; }
        /// <summary>Box IoU above which duplicates are dropped within a crop (0.7).</summary>
        public float BoxNmsThresh { get; set; }
        /// <summary>Crop layers beyond the whole image, 0 to 4 (0).</summary>
        public int CropNLayers { get; set; }
        /// <summary>Box IoU above which duplicates are dropped across crops (0.7).</summary>
        public float CropNmsThresh { get; set; }
        /// <summary>Overlap of the first layer's crops, a fraction of the short side (512/1500).</summary>
        public float CropOverlapRatio { get; set; }
        /// <summary>Points per side of layer i are PointsPerSide / factor^i (1).</summary>
        public int CropNPointsDownscaleFactor { get; set; }
        /// <summary>Holes and specks of at most this many low-res pixels are removed (0: off).</summary>
        public int MinMaskRegionArea { get; set; }
        /// <summary>Every candidate of each click (true), or only its best.</summary>
        public bool Multimask { get; set; }
        /// <summary>The work budget: most clicks through the decoder, every crop together (1,048,576); over it the call throws ArgumentException naming max_clicks.</summary>
        public long MaxClicks { get; set; }
        /// <summary>The memory budget in bytes (4 GiB): one batch's needs and the candidates held; over it the call throws ArgumentException naming max_memory_bytes.</summary>
        public long MaxMemoryBytes { get; set; }
        /// <summary>
        /// Null, or called on the calling thread with the clicks done and the clicks in all, before each
        /// crop is encoded and after each batch; returning false cancels the call, which then throws
        /// OperationCanceledException (to cancel from another thread, return a flag that thread sets).
        /// An exception it throws cancels the call and is rethrown.
        /// </summary>
        public Func<long, long, bool> Progress { get; set; }

        internal NativeMethods.sam2_everything_options ToNative(PinSet pins)
        {
            NativeMethods.sam2_everything_options o = NativeDefaults.Value;
            o.points_per_side = unchecked((uint)PointsPerSide);
            if (Points != null)
            {
                if (Points.Length % 2 != 0)
                    throw new ArgumentException("Points holds {x, y} pairs: its length must be even", "Points");
                o.points = Points.Length == 0 ? IntPtr.Zero : pins.Pin(Points);
                o.point_count = (UIntPtr)(Points.Length / 2);
            }
            o.points_per_batch = unchecked((uint)PointsPerBatch);
            o.pred_iou_thresh = PredIouThresh;
            o.stability_score_thresh = StabilityScoreThresh;
            o.stability_score_offset = StabilityScoreOffset;
            o.mask_threshold = MaskThreshold;
            o.box_nms_thresh = BoxNmsThresh;
            o.crop_n_layers = unchecked((uint)CropNLayers);
            o.crop_nms_thresh = CropNmsThresh;
            o.crop_overlap_ratio = CropOverlapRatio;
            o.crop_n_points_downscale_factor = unchecked((uint)CropNPointsDownscaleFactor);
            o.min_mask_region_area = unchecked((uint)MinMaskRegionArea);
            o.multimask = Multimask ? 1u : 0u;
            o.max_clicks = unchecked((ulong)MaxClicks);
            o.max_memory_bytes = unchecked((ulong)MaxMemoryBytes);
            return o;
        }

        /// <summary>The native callback for <see cref="Progress"/> (null without one); keep it alive during the call.</summary>
        internal ProgressBridge Bridge(ref NativeMethods.sam2_everything_options o)
        {
            if (Progress == null)
                return null;
            var bridge = new ProgressBridge(Progress);
            o.progress = Marshal.GetFunctionPointerForDelegate(bridge.Native);
            return bridge;
        }
    }

    /// <summary>Calls a managed progress callback from native code; an exception stops the call and is kept.</summary>
    internal sealed class ProgressBridge
    {
        private readonly Func<long, long, bool> progress;
        internal readonly NativeMethods.sam2_progress_fn Native;
        internal Exception Thrown;

        internal ProgressBridge(Func<long, long, bool> progress)
        {
            this.progress = progress;
            Native = Call;
        }

        private int Call(IntPtr user, ulong done, ulong total)
        {
            try
            {
                return progress((long)done, (long)total) ? 0 : 1;
            }
            catch (Exception e)
            {
                Thrown = e;
                return 1;
            }
        }

        /// <summary>Rethrows what the callback threw, after the call.</summary>
        internal void Rethrow()
        {
            if (Thrown != null)
                System.Runtime.ExceptionServices.ExceptionDispatchInfo.Capture(Thrown).Throw();
        }
    }

    internal static class ProgressBridgeExtensions
    {
        internal static void KeepAliveAndRethrow(this ProgressBridge bridge)
        {
            if (bridge == null)
                return;
            GC.KeepAlive(bridge.Native);
            bridge.Rethrow();
        }
    }

    /// <summary>What is known of one mask found by segment everything, beside its pixels.</summary>
    public struct Sam2EverythingMask
    {
        /// <summary>Inclusive bounding box in image pixels ({0, 0, 0, 0} for an empty mask).</summary>
        public MaskBox Box;
        /// <summary>Pixels in the mask.</summary>
        public long Area;
        /// <summary>The decoder's prediction of the mask's IoU.</summary>
        public float PredictedIou;
        /// <summary>IoU of the mask thresholded at MaskThreshold ± StabilityScoreOffset.</summary>
        public float StabilityScore;
        /// <summary>The click that made it: column, in image pixels.</summary>
        public float PointX;
        /// <summary>The click that made it: row, in image pixels.</summary>
        public float PointY;
        /// <summary>The crop it was found in: first column.</summary>
        public int CropX0;
        /// <summary>The crop it was found in: first row.</summary>
        public int CropY0;
        /// <summary>The crop it was found in: column after the last (exclusive).</summary>
        public int CropX1;
        /// <summary>The crop it was found in: row after the last (exclusive).</summary>
        public int CropY1;
    }

    /// <summary>
    /// The masks SAM2's automatic mask generator finds in one image (<c>sam2_segment_everything</c>),
    /// held run-length encoded by the native library and decoded on request. Immutable; it does not
    /// depend on the encoder or predictor and may outlive them.
    /// </summary>
    public sealed class Sam2Everything : Sam2NativeObject
    {
        private Sam2Everything(EverythingHandle handle) : base(handle)
        {
            try
            {
                UIntPtr count;
                uint width, height;
                Sam2Error.Check(NativeMethods.sam2_everything_count(handle, out count, out width, out height));
                Count = checked((int)count.ToUInt64());
                Width = checked((int)width);
                Height = checked((int)height);
            }
            catch
            {
                handle.Dispose();
                throw;
            }
        }

        /// <summary>
        /// Segments everything in an image: encodes it (and its crops) with <paramref name="encoder"/>
        /// and clicks a grid of points through <paramref name="predictor"/>.
        /// </summary>
        /// <param name="encoder">The encoder.</param>
        /// <param name="predictor">A predictor for that encoder's embeddings.</param>
        /// <param name="pixels">Height rows of width pixels in <paramref name="format"/>.</param>
        /// <param name="width">Width in pixels.</param>
        /// <param name="height">Height in pixels.</param>
        /// <param name="stride">Bytes from one row to the next; 0 means tightly packed.</param>
        /// <param name="format">Pixel layout.</param>
        /// <param name="options">Null for SAM2's defaults.</param>
        /// <exception cref="ArgumentException">An option out of range; ParamName names the native field ("options.points_per_batch", …).</exception>
        public static Sam2Everything Segment(Sam2Encoder encoder, Sam2Predictor predictor, byte[] pixels, int width, int height,
            int stride, PixelFormat format, Sam2EverythingOptions options = null)
        {
            if (encoder == null)
                throw new ArgumentNullException("encoder");
            if (predictor == null)
                throw new ArgumentNullException("predictor");
            Sam2Encoder.CheckPixels(pixels, width, height, stride);
            using (var pins = new PinSet())
            {
                Sam2EverythingOptions managed = options ?? new Sam2EverythingOptions();
                NativeMethods.sam2_everything_options native = managed.ToNative(pins);
                ProgressBridge bridge = managed.Bridge(ref native);
                EverythingHandle result;
                Sam2Status status = NativeMethods.sam2_segment_everything(encoder.Handle, predictor.Handle, pixels,
                    (UIntPtr)pixels.Length, (uint)width, (uint)height, (UIntPtr)stride, (uint)format, ref native, out result);
                bridge.KeepAliveAndRethrow();
                return new Sam2Everything(Sam2Error.CheckNew(status, result));
            }
        }

        /// <summary>Segments everything in an image already encoded (no crop layers: crops need encodes of their own).</summary>
        public static Sam2Everything Segment(Sam2Predictor predictor, Sam2Embedding embedding, Sam2EverythingOptions options = null)
        {
            if (predictor == null)
                throw new ArgumentNullException("predictor");
            if (embedding == null)
                throw new ArgumentNullException("embedding");
            using (var pins = new PinSet())
            {
                Sam2EverythingOptions managed = options ?? new Sam2EverythingOptions();
                NativeMethods.sam2_everything_options native = managed.ToNative(pins);
                ProgressBridge bridge = managed.Bridge(ref native);
                EverythingHandle result;
                EmbeddingHandle embeddingHandle = embedding.Handle;
                Sam2Status status = NativeMethods.sam2_segment_everything_embedding(predictor.Handle, embeddingHandle, ref native, out result);
                bridge.KeepAliveAndRethrow();
                return new Sam2Everything(Sam2Error.CheckNew(status, result, embeddingHandle));
            }
        }

        internal EverythingHandle Handle
        {
            get { return (EverythingHandle)OpenHandle; }
        }

        /// <summary>Number of masks, best predicted IoU first (within a crop).</summary>
        public int Count { get; private set; }

        /// <summary>Width of every mask (the image's).</summary>
        public int Width { get; private set; }

        /// <summary>Height of every mask (the image's).</summary>
        public int Height { get; private set; }

        /// <summary>Mask <paramref name="index"/>, decoded: Width × Height bytes, row-major, 1 = foreground.</summary>
        public byte[] GetMask(int index)
        {
            CheckIndex(index);
            var mask = new byte[checked(Width * Height)];
            Sam2Error.Check(NativeMethods.sam2_everything_mask(Handle, (UIntPtr)index, mask, (UIntPtr)mask.Length));
            return mask;
        }

        /// <summary>Box, area, scores, click and crop of mask <paramref name="index"/>.</summary>
        public Sam2EverythingMask Info(int index)
        {
            CheckIndex(index);
            NativeMethods.sam2_everything_info info;
            Sam2Error.Check(NativeMethods.sam2_everything_mask_info(Handle, (UIntPtr)index, out info));
            return new Sam2EverythingMask
            {
                Box = new MaskBox((int)info.box_x_min, (int)info.box_y_min, (int)info.box_x_max, (int)info.box_y_max),
                Area = checked((long)info.area),
                PredictedIou = info.predicted_iou,
                StabilityScore = info.stability_score,
                PointX = info.point_x,
                PointY = info.point_y,
                CropX0 = (int)info.crop_x0,
                CropY0 = (int)info.crop_y0,
                CropX1 = (int)info.crop_x1,
                CropY1 = (int)info.crop_y1,
            };
        }

        /// <summary>
        /// Mask <paramref name="index"/> as COCO run lengths: alternately 0s and 1s (the first of
        /// 0s), column-major, as COCO's uncompressed RLE.
        /// </summary>
        public uint[] GetRunLengths(int index)
        {
            CheckIndex(index);
            EverythingHandle handle = Handle;
            using (new HandleLease(handle, GetType().Name))
            {
                IntPtr counts;
                UIntPtr n;
                Sam2Error.Check(NativeMethods.sam2_everything_rle(handle, (UIntPtr)index, out counts, out n));
                var copy = new int[checked((int)n.ToUInt64())];
                Marshal.Copy(counts, copy, 0, copy.Length);
                var result = new uint[copy.Length];
                Buffer.BlockCopy(copy, 0, result, 0, copy.Length * 4);
                return result;
            }
        }

        private void CheckIndex(int index)
        {
            if (index < 0 || index >= Count)
                throw new ArgumentOutOfRangeException("index", index, "must be below Count (" + Count + ")");
        }
    }
}
