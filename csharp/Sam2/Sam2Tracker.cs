using System;
using System.Collections.Generic;
using System.Collections.ObjectModel;
using System.IO;
using System.Runtime.InteropServices;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.Win32.SafeHandles;

namespace Sam2
{
    /// <summary>Owns a <c>sam2_tracker*</c>; released with <c>sam2_tracker_free</c>.</summary>
    internal sealed class TrackerHandle : SafeHandleZeroOrMinusOneIsInvalid
    {
        /// <summary>Used by the marshaller for out-params.</summary>
        public TrackerHandle() : base(true) { }

        protected override bool ReleaseHandle()
        {
            NativeMethods.sam2_tracker_free(handle);
            return true;
        }
    }

    /// <summary>Owns a <c>sam2_track_result*</c>; released with <c>sam2_track_result_free</c>.</summary>
    internal sealed class TrackResultHandle : SafeHandleZeroOrMinusOneIsInvalid
    {
        /// <summary>Used by the marshaller for out-params.</summary>
        public TrackResultHandle() : base(true) { }

        protected override bool ReleaseHandle()
        {
            NativeMethods.sam2_track_result_free(handle);
            return true;
        }
    }

    /// <summary>Which way <see cref="Sam2Tracker.Track(int, Sam2Image, TrackDirection, bool)"/> travels (SAM2_TRACK_*).</summary>
    public enum TrackDirection : uint
    {
        /// <summary>Frames after the prompted ones (default).</summary>
        Forward = NativeMethods.SAM2_TRACK_FORWARD,
        /// <summary>Frames before the prompted ones.</summary>
        Backward = NativeMethods.SAM2_TRACK_BACKWARD,
    }

    /// <summary>
    /// One frame's pixels: <see cref="Height"/> rows of <see cref="Width"/> pixels in
    /// <see cref="Format"/>. The array is not copied; it is read during each call that uses it.
    /// </summary>
    public sealed class Sam2Image
    {
        /// <summary>An image; a <paramref name="stride"/> of 0 means tightly packed rows.</summary>
        /// <exception cref="ArgumentNullException"><paramref name="pixels"/> is null.</exception>
        /// <exception cref="ArgumentException">An empty buffer, or a negative size or stride.</exception>
        public Sam2Image(byte[] pixels, int width, int height, PixelFormat format, int stride = 0)
        {
            Sam2Encoder.CheckPixels(pixels, width, height, stride);
            Pixels = pixels;
            Width = width;
            Height = height;
            Stride = stride;
            Format = format;
        }

        /// <summary>The pixels.</summary>
        public byte[] Pixels { get; private set; }
        /// <summary>Width in pixels.</summary>
        public int Width { get; private set; }
        /// <summary>Height in pixels.</summary>
        public int Height { get; private set; }
        /// <summary>Bytes from one row to the next; 0 means tightly packed.</summary>
        public int Stride { get; private set; }
        /// <summary>Pixel layout.</summary>
        public PixelFormat Format { get; private set; }
    }

    /// <summary>A frame of a clip: its index and its image.</summary>
    public sealed class Sam2VideoFrame
    {
        /// <summary>Frame <paramref name="index"/> (0 or more) of a clip.</summary>
        public Sam2VideoFrame(int index, Sam2Image image)
        {
            if (index < 0)
                throw new ArgumentOutOfRangeException("index", index, "must not be negative");
            if (image == null)
                throw new ArgumentNullException("image");
            Index = index;
            Image = image;
        }

        /// <summary>The frame's index in the clip.</summary>
        public int Index { get; private set; }
        /// <summary>The frame's pixels.</summary>
        public Sam2Image Image { get; private set; }
    }

    /// <summary>Options of <see cref="Sam2Tracker"/>. A new instance holds the library's defaults.</summary>
    public sealed class Sam2TrackerOptions
    {
        private static readonly Lazy<NativeMethods.sam2_tracker_options> NativeDefaults =
            new Lazy<NativeMethods.sam2_tracker_options>(() =>
                NativeOptions.Defaults<NativeMethods.sam2_tracker_options>(NativeMethods.sam2_tracker_options_init));

        private readonly List<Sam2ProviderRequest> _providers = new List<Sam2ProviderRequest>();
        private int _intraThreads;
        private int _numFrames;
        private int _memoryFrames;

        /// <summary>Creates options holding the native defaults (<c>sam2_tracker_options_init</c>).</summary>
        public Sam2TrackerOptions()
        {
            NativeMethods.sam2_tracker_options d = NativeDefaults.Value;
            _intraThreads = (int)d.intra_threads;
            OnDeviceMismatch = (DeviceMismatchPolicy)d.on_device_mismatch;
            WeightSharing = (WeightSharing)d.weight_sharing;
            GraphOptimization = (GraphOptimization)d.graph_optimization;
            DisabledRewrites = (Rewrites)d.disabled_rewrites;
            CorrectionsAsConditioning = d.corrections_as_conditioning != 0;
            _numFrames = (int)d.num_frames;
            _memoryFrames = (int)d.memory_frames;
        }

        /// <summary>Intra-op threads of each module's session; 0 lets ONNX Runtime choose.</summary>
        public int IntraThreads
        {
            get { return _intraThreads; }
            set
            {
                if (value < 0)
                    throw new ArgumentOutOfRangeException("value", value, "must be 0 (automatic) or more");
                _intraThreads = value;
            }
        }

        /// <summary>Execution providers wanted, in order of preference; empty means the CPU.</summary>
        public IList<Sam2ProviderRequest> Providers
        {
            get { return _providers; }
        }

        /// <summary>What to do when the first requested provider is a GPU one a module did not get.</summary>
        public DeviceMismatchPolicy OnDeviceMismatch { get; set; }

        /// <summary>Shared weights (default) or an explicit copy.</summary>
        public WeightSharing WeightSharing { get; set; }

        /// <summary>How far ONNX Runtime optimises the graphs (default All).</summary>
        public GraphOptimization GraphOptimization { get; set; }

        /// <summary>
        /// Load-time rewrites switched off (default <see cref="Rewrites.None"/>: every rewrite the
        /// model allows; <see cref="Rewrites.All"/>: the graph as exported). An unknown bit is an
        /// ArgumentException from the library.
        /// </summary>
        public Rewrites DisabledRewrites { get; set; }

        /// <summary>
        /// True (default): a prompt on a frame already tracked (a correction) becomes a
        /// conditioning frame, remembered by the frames after it; false: it changes that frame's
        /// result only.
        /// </summary>
        public bool CorrectionsAsConditioning { get; set; }

        /// <summary>Frames in the clip when known (frames past it are refused); 0 (default) for a stream of unknown length.</summary>
        public int NumFrames
        {
            get { return _numFrames; }
            set
            {
                if (value < 0)
                    throw new ArgumentOutOfRangeException("value", value, "must be 0 (unknown) or more");
                _numFrames = value;
            }
        }

        /// <summary>
        /// Tracked frames whose memory each object keeps besides its prompted frames, 6 to 1024
        /// (default 16); checked by the library when the tracker is made.
        /// </summary>
        public int MemoryFrames
        {
            get { return _memoryFrames; }
            set
            {
                if (value < 0)
                    throw new ArgumentOutOfRangeException("value", value, "must be 6 to 1024");
                _memoryFrames = value;
            }
        }

        internal NativeMethods.sam2_tracker_options ToNative(PinSet pins)
        {
            NativeMethods.sam2_tracker_options o = NativeDefaults.Value;
            o.intra_threads = (uint)_intraThreads;
            Sam2ProviderRequest.Pin(_providers, pins, out o.providers, out o.provider_count);
            o.on_device_mismatch = (uint)OnDeviceMismatch;
            o.weight_sharing = (uint)WeightSharing;
            o.graph_optimization = (uint)GraphOptimization;
            o.corrections_as_conditioning = CorrectionsAsConditioning ? 1u : 0u;
            o.num_frames = (uint)_numFrames;
            o.memory_frames = (uint)_memoryFrames;
            o.disabled_rewrites = (ulong)DisabledRewrites;
            return o;
        }
    }

    /// <summary>What is known of one object on one frame.</summary>
    public sealed class Sam2TrackedObject
    {
        internal Sam2TrackedObject() { }

        /// <summary>The id given to <see cref="Sam2Tracker.AddPrompt"/>.</summary>
        public int ObjectId { get; internal set; }

        /// <summary>True when the object is on the frame; false when judged absent (occluded, out of view): its mask is then empty.</summary>
        public bool Present { get; internal set; }

        /// <summary>SAM2's object score logit (above 0: present).</summary>
        public float Score { get; internal set; }

        /// <summary>Inclusive bounding box of the mask ({0, 0, 0, 0} when empty).</summary>
        public MaskBox Box { get; internal set; }

        /// <summary>Pixels in the mask.</summary>
        public long Area { get; internal set; }

        /// <summary>The mask: Width × Height bytes of the frame, row-major, 1 = object, 0 = background.</summary>
        public byte[] Mask { get; internal set; }

        /// <summary>The 256 × 256 low-res logits (SAM2's pred_masks), or null unless asked for.</summary>
        public float[] LowRes { get; internal set; }
    }

    /// <summary>One frame's result: a mask and a presence per object, in increasing id order.</summary>
    public sealed class Sam2TrackedFrame
    {
        internal Sam2TrackedFrame() { }

        /// <summary>The frame's index.</summary>
        public int FrameIndex { get; internal set; }

        /// <summary>Width of every mask (the frame's).</summary>
        public int Width { get; internal set; }

        /// <summary>Height of every mask (the frame's).</summary>
        public int Height { get; internal set; }

        /// <summary>The objects, in increasing id order.</summary>
        public ReadOnlyCollection<Sam2TrackedObject> Objects { get; internal set; }

        /// <summary>The object with id <paramref name="objectId"/>, or null.</summary>
        public Sam2TrackedObject Find(int objectId)
        {
            foreach (Sam2TrackedObject o in Objects)
            {
                if (o.ObjectId == objectId)
                    return o;
            }
            return null;
        }
    }

    /// <summary>
    /// A video tracker (<c>sam2_tracker</c>): the four modules of a SAM2 video export and the
    /// objects it follows through a clip with their memory. Prompt objects on a frame
    /// (<see cref="AddPrompt"/>), then <see cref="Track(int, Sam2Image, TrackDirection, bool)"/>
    /// the frames one after the other. Thread-safe (calls are serialised by the library).
    /// Results are managed copies and do not depend on the tracker.
    /// </summary>
    public sealed class Sam2Tracker : Sam2NativeObject
    {
        /// <summary>The file names <see cref="FromDirectory"/> looks for, in <c>sam2_tracker_new</c>'s order.</summary>
        public static readonly ReadOnlyCollection<string> ModuleFileNames = new ReadOnlyCollection<string>(new[]
        {
            "image_encoder.onnx", "memory_attention.onnx", "image_decoder.onnx", "memory_encoder.onnx",
        });

        /// <summary>Loads the four modules of a SAM2 video export (<c>sam2_tracker_new</c>).</summary>
        /// <exception cref="ArgumentNullException">A path is null.</exception>
        /// <exception cref="ArgumentException">An option out of range; ParamName names it ("memory_frames", …).</exception>
        /// <exception cref="Sam2Exception">Status Model: a module is unreadable or lacks a tensor (the message names it).</exception>
        public Sam2Tracker(string imageEncoderPath, string memoryAttentionPath, string imageDecoderPath,
            string memoryEncoderPath, Sam2TrackerOptions options = null)
            : base(Load(imageEncoderPath, memoryAttentionPath, imageDecoderPath, memoryEncoderPath, options))
        {
        }

        /// <summary>Loads the four modules from one directory, under <see cref="ModuleFileNames"/>.</summary>
        public static Sam2Tracker FromDirectory(string directory, Sam2TrackerOptions options = null)
        {
            if (directory == null)
                throw new ArgumentNullException("directory");
            return new Sam2Tracker(Path.Combine(directory, ModuleFileNames[0]), Path.Combine(directory, ModuleFileNames[1]),
                Path.Combine(directory, ModuleFileNames[2]), Path.Combine(directory, ModuleFileNames[3]), options);
        }

        private static TrackerHandle Load(string imageEncoder, string memoryAttention, string imageDecoder, string memoryEncoder,
            Sam2TrackerOptions options)
        {
            byte[] a = Utf8.ToNative(Required(imageEncoder, "imageEncoderPath"), "imageEncoderPath");
            byte[] b = Utf8.ToNative(Required(memoryAttention, "memoryAttentionPath"), "memoryAttentionPath");
            byte[] c = Utf8.ToNative(Required(imageDecoder, "imageDecoderPath"), "imageDecoderPath");
            byte[] d = Utf8.ToNative(Required(memoryEncoder, "memoryEncoderPath"), "memoryEncoderPath");
            using (var pins = new PinSet())
            {
                NativeMethods.sam2_tracker_options native = (options ?? new Sam2TrackerOptions()).ToNative(pins);
                TrackerHandle handle;
                Sam2Status status = NativeMethods.sam2_tracker_new(a, b, c, d, ref native, out handle);
                return Sam2Error.CheckNew(status, handle);
            }
        }

        private static string Required(string value, string name)
        {
            if (value == null)
                throw new ArgumentNullException(name);
            return value;
        }

        internal TrackerHandle Handle
        {
            get { return (TrackerHandle)OpenHandle; }
        }

        /// <summary>The precision the tracker runs in (<c>sam2_tracker_precision</c>): as exported, or a variant's (sam2-variant on a video export converts its image encoder where it has MatMul weights and, for int8, marks memory attention for int8 attention scores).</summary>
        public Precision Precision
        {
            get
            {
                uint value;
                Sam2Error.Check(NativeMethods.sam2_tracker_precision(Handle, out value));
                return (Precision)value;
            }
        }

        /// <summary>What the modules effectively run on (<c>sam2_tracker_device</c>).</summary>
        public Sam2DeviceInfo Device
        {
            get { return SessionDevice.Device(Handle, NativeMethods.sam2_tracker_device); }
        }

        /// <summary>Frame memories held, summed over objects (prompted frames from the prompt on, and at most MemoryFrames tracked frames per object).</summary>
        public long MemoryFrames
        {
            get
            {
                UIntPtr frames;
                Sam2Error.Check(NativeMethods.sam2_tracker_memory_frames(Handle, out frames));
                return checked((long)frames.ToUInt64());
            }
        }

        /// <summary>Bytes of the tensors the tracker holds (memories, pointers, logits, the last frame's features), on the device and the host; not the modules' own memory.</summary>
        public long MemoryBytes
        {
            get
            {
                ulong bytes;
                Sam2Error.Check(NativeMethods.sam2_tracker_memory_bytes(Handle, out bytes));
                return checked((long)bytes);
            }
        }

        /// <summary>
        /// Prompts object <paramref name="objectId"/> on frame <paramref name="frameIndex"/> with
        /// clicks and/or a box (no mask input) and returns its mask there. A new id starts a new
        /// object; a prompt on a frame already tracked is a correction.
        /// </summary>
        /// <exception cref="ArgumentException">A point outside the frame, NaN, a mask prompt, a frame past NumFrames; ParamName is the native argument's name.</exception>
        public Sam2TrackedObject AddPrompt(int frameIndex, Sam2Image image, int objectId, Sam2Prompt prompt, bool lowRes = false)
        {
            CheckFrameIndex(frameIndex);
            if (image == null)
                throw new ArgumentNullException("image");
            if (objectId < 0)
                throw new ArgumentOutOfRangeException("objectId", objectId, "must not be negative");
            if (prompt == null)
                throw new ArgumentNullException("prompt");
            TrackerHandle tracker = Handle;
            using (var pins = new PinSet())
            {
                NativeMethods.sam2_prompt native = Sam2Predictor.ToNative(prompt, pins);
                TrackResultHandle result;
                Sam2Status status = NativeMethods.sam2_tracker_add_prompt(tracker, (uint)frameIndex, image.Pixels,
                    (UIntPtr)image.Pixels.Length, (uint)image.Width, (uint)image.Height, (UIntPtr)image.Stride,
                    (uint)image.Format, (uint)objectId, ref native, out result);
                using (TrackResultHandle owned = Sam2Error.CheckNew(status, result))
                    return Read(owned, lowRes).Objects[0];
            }
        }

        /// <summary>
        /// Tracks every object onto frame <paramref name="frameIndex"/> and returns their masks
        /// (<c>sam2_tracker_track</c>). Frames are usually tracked one after the other from a
        /// prompted frame, in <paramref name="direction"/>.
        /// </summary>
        /// <param name="frameIndex">The frame's index in the clip.</param>
        /// <param name="image">The frame.</param>
        /// <param name="direction">Forward (frames after the prompts) or Backward.</param>
        /// <param name="lowRes">Also copy each object's 256 × 256 low-res logits.</param>
        /// <exception cref="ArgumentException">No object yet, a frame past NumFrames, a bad direction or image.</exception>
        public Sam2TrackedFrame Track(int frameIndex, Sam2Image image, TrackDirection direction = TrackDirection.Forward,
            bool lowRes = false)
        {
            CheckFrameIndex(frameIndex);
            if (image == null)
                throw new ArgumentNullException("image");
            TrackResultHandle result;
            Sam2Status status = NativeMethods.sam2_tracker_track(Handle, (uint)frameIndex, image.Pixels,
                (UIntPtr)image.Pixels.Length, (uint)image.Width, (uint)image.Height, (UIntPtr)image.Stride,
                (uint)image.Format, (uint)direction, out result);
            using (TrackResultHandle owned = Sam2Error.CheckNew(status, result))
                return Read(owned, lowRes);
        }

        /// <summary>
        /// Tracks a whole clip: each frame of <paramref name="frames"/> in turn, lazily (a frame is
        /// read from the sequence and tracked when the enumeration asks for its result, so a long
        /// clip is never held in memory). Disposing the tracker ends the enumeration with
        /// ObjectDisposedException.
        /// </summary>
        public IEnumerable<Sam2TrackedFrame> Track(IEnumerable<Sam2VideoFrame> frames, TrackDirection direction = TrackDirection.Forward,
            bool lowRes = false)
        {
            if (frames == null)
                throw new ArgumentNullException("frames");
            ThrowIfDisposed();
            return TrackAll(frames, direction, lowRes);
        }

        /// <summary>
        /// Tracks a clip given as images numbered from <paramref name="firstIndex"/>: up by one a
        /// frame forward, down by one backward. Lazy, as <see cref="Track(IEnumerable{Sam2VideoFrame}, TrackDirection, bool)"/>.
        /// </summary>
        public IEnumerable<Sam2TrackedFrame> Track(IEnumerable<Sam2Image> images, int firstIndex, TrackDirection direction = TrackDirection.Forward,
            bool lowRes = false)
        {
            if (images == null)
                throw new ArgumentNullException("images");
            CheckFrameIndex(firstIndex);
            ThrowIfDisposed();
            return TrackAll(Number(images, firstIndex, direction == TrackDirection.Backward ? -1 : 1), direction, lowRes);
        }

        /// <summary>
        /// <see cref="Track(int, Sam2Image, TrackDirection, bool)"/> on the thread pool, for a UI
        /// thread that must not wait. Calls on one tracker still run one at a time.
        /// </summary>
        public Task<Sam2TrackedFrame> TrackAsync(int frameIndex, Sam2Image image, TrackDirection direction = TrackDirection.Forward,
            bool lowRes = false, CancellationToken cancellationToken = default(CancellationToken))
        {
            CheckFrameIndex(frameIndex);
            if (image == null)
                throw new ArgumentNullException("image");
            ThrowIfDisposed();
            return Task.Run(() => Track(frameIndex, image, direction, lowRes), cancellationToken);
        }

        private static IEnumerable<Sam2VideoFrame> Number(IEnumerable<Sam2Image> images, int index, int step)
        {
            foreach (Sam2Image image in images)
            {
                yield return new Sam2VideoFrame(index, image);
                index += step;
            }
        }

        private IEnumerable<Sam2TrackedFrame> TrackAll(IEnumerable<Sam2VideoFrame> frames, TrackDirection direction, bool lowRes)
        {
            foreach (Sam2VideoFrame frame in frames)
            {
                if (frame == null)
                    throw new ArgumentNullException("frames", "a frame of the sequence is null");
                yield return Track(frame.Index, frame.Image, direction, lowRes);
            }
        }

        /// <summary>Stops tracking object <paramref name="objectId"/> and frees its memory; false when there was none.</summary>
        public bool RemoveObject(int objectId)
        {
            if (objectId < 0)
                return false;
            int removed;
            Sam2Error.Check(NativeMethods.sam2_tracker_remove_object(Handle, (uint)objectId, out removed));
            return removed != 0;
        }

        /// <summary>Forgets every object, prompt and memory; the models stay loaded.</summary>
        public void Reset()
        {
            Sam2Error.Check(NativeMethods.sam2_tracker_reset(Handle));
        }

        private static void CheckFrameIndex(int frameIndex)
        {
            if (frameIndex < 0)
                throw new ArgumentOutOfRangeException("frameIndex", frameIndex, "must not be negative");
        }

        /// <summary>Copies a native result into managed objects.</summary>
        private static Sam2TrackedFrame Read(TrackResultHandle result, bool lowRes)
        {
            uint frame, width, height;
            UIntPtr count;
            Sam2Error.Check(NativeMethods.sam2_track_result_count(result, out frame, out count, out width, out height));
            var objects = new Sam2TrackedObject[checked((int)count.ToUInt64())];
            for (int i = 0; i < objects.Length; i++)
            {
                NativeMethods.sam2_tracked_object o;
                Sam2Error.Check(NativeMethods.sam2_track_result_object(result, (UIntPtr)i, out o));
                IntPtr data;
                UIntPtr len;
                Sam2Error.Check(NativeMethods.sam2_track_result_mask(result, (UIntPtr)i, out data, out len));
                var mask = new byte[checked((int)len.ToUInt64())];
                Marshal.Copy(data, mask, 0, mask.Length);
                float[] logits = null;
                if (lowRes)
                {
                    Sam2Error.Check(NativeMethods.sam2_track_result_low_res(result, (UIntPtr)i, out data, out len));
                    logits = new float[checked((int)len.ToUInt64())];
                    Marshal.Copy(data, logits, 0, logits.Length);
                }
                objects[i] = new Sam2TrackedObject
                {
                    ObjectId = unchecked((int)o.object_id),
                    Present = o.present != 0,
                    Score = o.score,
                    Box = new MaskBox((int)o.box_x_min, (int)o.box_y_min, (int)o.box_x_max, (int)o.box_y_max),
                    Area = checked((long)o.area),
                    Mask = mask,
                    LowRes = logits,
                };
            }
            return new Sam2TrackedFrame
            {
                FrameIndex = checked((int)frame),
                Width = checked((int)width),
                Height = checked((int)height),
                Objects = new ReadOnlyCollection<Sam2TrackedObject>(objects),
            };
        }
    }
}
