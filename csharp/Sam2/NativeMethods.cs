// P/Invoke declarations of the whole C ABI in include/sam2.h, in the header's order and with its
// names, so that a change of the header can be followed line by line.
//
// Conventions of this file:
// - Every export is declared with DllImport and CallingConvention.Cdecl (Mono and every .NET).
// - size_t is UIntPtr, uint32_t is uint, int32_t is int.
// - Native `const char*` results come back as IntPtr and are decoded by Utf8.FromNative (a
//   `string` return would make the marshaller free memory the library owns).
// - Strings in are NUL-terminated UTF-8 byte arrays made by Utf8.ToNative (Mono's default
//   string marshalling is not UTF-8 on every version).
// - A required handle is passed as its SafeHandle (the marshaller keeps it alive and refuses a
//   closed one); an optional handle (NULL allowed) is passed as IntPtr by a caller that holds a
//   HandleLease on it.
// - Out handles are `out XxxHandle`: the marshaller makes the SafeHandle, so a handle can never
//   leak between the native call and its wrapping.
using System;
using System.Runtime.InteropServices;

namespace Sam2
{
    internal static class NativeMethods
    {
        internal const string Library = "sam2";

        // ---- constants (#define) ------------------------------------------------------------

        internal const uint SAM2_PROVIDER_CPU = 0;
        internal const uint SAM2_PROVIDER_CUDA = 1;
        internal const uint SAM2_PROVIDER_TENSORRT = 2;
        internal const uint SAM2_PROVIDER_DIRECTML = 3;
        internal const uint SAM2_PROVIDER_COREML = 4;
        internal const uint SAM2_PROVIDER_WEBGPU = 5;
        internal const uint SAM2_ON_MISMATCH_FALLBACK = 0;
        internal const uint SAM2_ON_MISMATCH_FAIL = 1;
        internal const uint SAM2_WEIGHTS_SHARED = 0;
        internal const uint SAM2_WEIGHTS_COPY = 1;
        internal const uint SAM2_OPTIMIZATION_BASIC = 0;
        internal const uint SAM2_OPTIMIZATION_NONE = 1;
        internal const uint SAM2_OPTIMIZATION_ALL = 2;
        internal const ulong SAM2_REWRITE_ATTENTION = 1;
        internal const ulong SAM2_REWRITE_VALUES_AFTER_ATTENTION = 2;
        internal const ulong SAM2_REWRITE_INT8_SCORES = 4;
        internal const ulong SAM2_REWRITE_CHANNEL_MEANS = 8;
        internal const ulong SAM2_REWRITE_QKV_SPLIT = 16;
        internal const ulong SAM2_REWRITE_DEPTHWISE_BRANCHES = 32;
        internal const ulong SAM2_REWRITE_ALL = 63;
        internal const uint SAM2_ARENA_NEXT_POWER_OF_TWO = 0;
        internal const uint SAM2_ARENA_SAME_AS_REQUESTED = 1;
        internal const uint SAM2_PLACE_HOST = 0;
        internal const uint SAM2_PLACE_DEVICE = 1;
        internal const uint SAM2_PIXEL_RGB = 0;
        internal const uint SAM2_PIXEL_BGR = 1;
        internal const uint SAM2_PIXEL_RGBA = 2;
        internal const uint SAM2_PIXEL_BGRA = 3;
        internal const uint SAM2_PIXEL_GRAY = 4;
        internal const uint SAM2_OUTPUT_DEVICE = 0;
        internal const uint SAM2_OUTPUT_HOST = 1;
        internal const uint SAM2_PRECISION_FP32 = 0;
        internal const uint SAM2_PRECISION_INT8 = 1;
        internal const uint SAM2_PRECISION_FP16 = 2;
        internal const int SAM2_POINT_POSITIVE = 1;
        internal const int SAM2_POINT_NEGATIVE = 0;
        internal const int SAM2_VERSION_MAJOR = 0;
        internal const int SAM2_VERSION_MINOR = 1;
        internal const int SAM2_VERSION_PATCH = 0;
        internal const uint SAM2_LOG_DEBUG = 0;
        internal const uint SAM2_LOG_INFO = 1;
        internal const uint SAM2_LOG_WARNING = 2;
        internal const uint SAM2_LOG_ERROR = 3;
        internal const uint SAM2_CACHE_HIT = 0;
        internal const uint SAM2_CACHE_JOINED = 1;
        internal const uint SAM2_CACHE_MISS = 2;
        internal const uint SAM2_PRIORITY_BACKGROUND = 0;
        internal const uint SAM2_PRIORITY_FOREGROUND = 1;
        internal const uint SAM2_JOB_QUEUED = 0;
        internal const uint SAM2_JOB_RUNNING = 1;
        internal const uint SAM2_JOB_DONE = 2;
        internal const uint SAM2_JOB_FAILED = 3;
        internal const uint SAM2_JOB_CANCELLED = 4;
        internal const uint SAM2_WAIT_FOREVER = 0xFFFFFFFF;
        internal const uint SAM2_NMS_NONE = 0;
        internal const uint SAM2_NMS_BOXES = 1;
        internal const uint SAM2_NMS_MASKS = 2;
        internal const uint SAM2_TRACK_FORWARD = 0;
        internal const uint SAM2_TRACK_BACKWARD = 1;

        // ---- structs --------------------------------------------------------------------------

        [StructLayout(LayoutKind.Sequential)]
        internal struct sam2_provider
        {
            public uint provider;
            public int device_id;
            public ulong memory_limit;
            public uint arena_extend_strategy;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct sam2_encoder_options
        {
            public uint struct_size;
            public uint output_target;
            public uint intra_threads;
            /// <summary>const sam2_provider*: NULL or a pinned array, read during sam2_encoder_new only.</summary>
            public IntPtr providers;
            public UIntPtr provider_count;
            public uint on_device_mismatch;
            public uint weight_sharing;
            public uint graph_optimization;
            public ulong disabled_rewrites;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct sam2_predictor_options
        {
            public uint struct_size;
            public uint intra_threads;
            /// <summary>const char*: NULL or a pinned NUL-terminated UTF-8 fingerprint.</summary>
            public IntPtr encoder_fingerprint;
            /// <summary>const sam2_provider*: NULL or a pinned array, read during sam2_predictor_new only.</summary>
            public IntPtr providers;
            public UIntPtr provider_count;
            public uint on_device_mismatch;
            public uint allow_embedding_copy;
            public uint pool_size;
            public uint weight_sharing;
            public uint graph_optimization;
            public ulong disabled_rewrites;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct sam2_predict_options
        {
            public uint struct_size;
            public uint multimask;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct sam2_point
        {
            public float x;
            public float y;
            public int label;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal unsafe struct sam2_prompt
        {
            /// <summary>const sam2_point*: pinned by the caller for the duration of sam2_predict.</summary>
            public IntPtr points;
            public UIntPtr point_count;
            public int has_box;
            public fixed float box[4];
            /// <summary>const float*: pinned by the caller, or NULL.</summary>
            public IntPtr mask_input;
            public UIntPtr mask_input_len;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct sam2_cache_options
        {
            public uint struct_size;
            public uint queue_limit;
            public ulong host_budget_bytes;
            public ulong device_budget_bytes;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct sam2_cache_stats
        {
            public uint struct_size;
            public uint running;
            public ulong hits;
            public ulong joins;
            public ulong misses;
            public ulong evictions;
            public ulong rejected;
            public ulong cancelled;
            public ulong preempted;
            public ulong entries;
            public ulong host_bytes;
            public ulong device_bytes;
            public ulong queued;
        }

        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate void sam2_log_callback(uint level, IntPtr message, IntPtr user_data);

        // ---- cache and encode jobs ------------------------------------------------------------

        /// <summary>Writes the library's sizeof(sam2_cache_options) bytes: call through NativeOptions.</summary>
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_cache_options_init(IntPtr options, UIntPtr struct_size);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_cache_new(ref sam2_cache_options options, out CacheHandle @out);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void sam2_cache_free(IntPtr cache);

        /// <summary>Blocks until the embedding is there.</summary>
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_cache_encode(CacheHandle cache, EncoderHandle encoder, byte[] pixels, UIntPtr pixels_len, uint width, uint height, UIntPtr stride, uint pixel_format, out EmbeddingHandle @out, out uint out_source);

        /// <summary>The pixels are only read during the call.</summary>
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_cache_encode_async(CacheHandle cache, EncoderHandle encoder, byte[] pixels, UIntPtr pixels_len, uint width, uint height, UIntPtr stride, uint pixel_format, uint priority, out EncodeJobHandle @out);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_cache_put(CacheHandle cache, EncoderHandle encoder, byte[] pixels, UIntPtr pixels_len, uint width, uint height, UIntPtr stride, uint pixel_format, EmbeddingHandle embedding);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_cache_clear(CacheHandle cache);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_cache_cancel_all(CacheHandle cache, out UIntPtr out_cancelled);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_cache_get_stats(CacheHandle cache, ref sam2_cache_stats @out);

        /// <summary>Blocks up to timeout_ms (SAM2_WAIT_FOREVER: no limit).</summary>
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_encode_job_wait(EncodeJobHandle job, uint timeout_ms, out EmbeddingHandle @out);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_encode_job_state(EncodeJobHandle job, out uint out_state);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_encode_job_cancel(EncodeJobHandle job);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void sam2_encode_job_free(IntPtr job);

        // ---- embedding ------------------------------------------------------------------------

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void sam2_embedding_free(IntPtr embedding);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sam2_embedding_is_serializable(EmbeddingHandle embedding);

        /// <summary>Owned by the embedding: decode while holding a lease on it.</summary>
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr sam2_embedding_allocator_name(EmbeddingHandle embedding);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_embedding_device_id(EmbeddingHandle embedding, out int out_device_id);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_embedding_precision(EmbeddingHandle embedding, out uint out_precision);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_embedding_image_size(EmbeddingHandle embedding, out uint out_width, out uint out_height);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_embedding_fingerprint(EmbeddingHandle embedding, [Out] byte[] buf, UIntPtr buf_len, out UIntPtr needed);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_embedding_save(EmbeddingHandle embedding, byte[] path);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_embedding_load(byte[] path, IntPtr predictor, uint placement, out EmbeddingHandle @out);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_embedding_to_host(EmbeddingHandle embedding, out EmbeddingHandle @out);

        // ---- encoder --------------------------------------------------------------------------

        /// <summary>Writes the library's sizeof(sam2_encoder_options) bytes: call through NativeOptions.</summary>
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_encoder_options_init(IntPtr options, UIntPtr struct_size);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_encoder_new(byte[] model_path, ref sam2_encoder_options options, out EncoderHandle @out);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void sam2_encoder_free(IntPtr encoder);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_encode(EncoderHandle encoder, byte[] pixels, UIntPtr pixels_len, uint width, uint height, UIntPtr stride, uint pixel_format, out EmbeddingHandle @out);

        /// <summary>The same export, for pixels in unmanaged memory (a locked bitmap, say).</summary>
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl, EntryPoint = "sam2_encode")]
        internal static extern Sam2Status sam2_encode_ptr(EncoderHandle encoder, IntPtr pixels, UIntPtr pixels_len, uint width, uint height, UIntPtr stride, uint pixel_format, out EmbeddingHandle @out);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_encoder_fingerprint(EncoderHandle encoder, [Out] byte[] buf, UIntPtr buf_len, out UIntPtr needed);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_encoder_device(EncoderHandle encoder, out uint out_provider, out int out_device_id, out int out_fell_back);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_encoder_precision(EncoderHandle encoder, out uint out_precision);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_encoder_providers(EncoderHandle encoder, [Out] byte[] buf, UIntPtr buf_len, out UIntPtr needed);

        // ---- masks ----------------------------------------------------------------------------

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void sam2_masks_free(IntPtr masks);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_masks_count(MasksHandle masks, out UIntPtr out_objects, out UIntPtr out_candidates);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_masks_size(MasksHandle masks, out uint out_width, out uint out_height);

        /// <summary>*out_data is owned by the masks: copy it while holding a lease on them.</summary>
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_masks_mask(MasksHandle masks, UIntPtr index_, out IntPtr out_data, out UIntPtr out_len);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_masks_score(MasksHandle masks, UIntPtr index_, out float out_score);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_masks_box(MasksHandle masks, UIntPtr index_, [Out] uint[] out_box, out ulong out_area);

        /// <summary>*out_data is owned by the masks: copy it while holding a lease on them.</summary>
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_masks_low_res(MasksHandle masks, UIntPtr index_, out IntPtr out_data, out UIntPtr out_len, out uint out_side);

        // ---- mask formats and model pairs (capi/src/mask_formats.rs, capi/src/model_pair.rs) ----

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_masks_copy_mask(MasksHandle masks, UIntPtr index_, [Out] byte[] buffer, UIntPtr size);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_masks_crop(MasksHandle masks, UIntPtr index_, [Out] byte[] buffer, UIntPtr size, [Out] uint[] out_box, out UIntPtr out_needed);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_masks_rle(MasksHandle masks, UIntPtr index_, [Out] uint[] counts, UIntPtr capacity, out UIntPtr out_count);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_masks_rle_string(MasksHandle masks, UIntPtr index_, [Out] byte[] buf, UIntPtr len, out UIntPtr out_needed);

        /// <summary>rings: pairs of uint (point_count, is_hole), the layout of sam2_ring.</summary>
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_masks_polygons(MasksHandle masks, UIntPtr index_, float tolerance, [Out] float[] points, UIntPtr points_capacity, [Out] uint[] rings, UIntPtr rings_capacity, out UIntPtr out_points, out UIntPtr out_rings);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_find_model_pair(byte[] path, [Out] byte[] encoder_path, UIntPtr encoder_len, out UIntPtr out_encoder_needed, [Out] byte[] decoder_path, UIntPtr decoder_len, out UIntPtr out_decoder_needed);

        // ---- predictor ------------------------------------------------------------------------

        /// <summary>Writes the library's sizeof(sam2_predictor_options) bytes: call through NativeOptions.</summary>
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_predictor_options_init(IntPtr options, UIntPtr struct_size);

        /// <summary>Writes the library's sizeof(sam2_predict_options) bytes: call through NativeOptions.</summary>
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_predict_options_init(IntPtr options, UIntPtr struct_size);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_predictor_new(IntPtr encoder, byte[] decoder_path, ref sam2_predictor_options options, out PredictorHandle @out);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void sam2_predictor_free(IntPtr predictor);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_predict(PredictorHandle predictor, EmbeddingHandle embedding, [In] sam2_prompt[] prompts, UIntPtr prompt_count, ref sam2_predict_options options, out MasksHandle @out);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_predictor_device(PredictorHandle predictor, out uint out_provider, out int out_device_id, out int out_fell_back);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_predictor_providers(PredictorHandle predictor, [Out] byte[] buf, UIntPtr buf_len, out UIntPtr needed);

        // ---- runtime, versions, errors, log ---------------------------------------------------

        /// <summary>Static string.</summary>
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr sam2_version();

        /// <summary>Static string, never NULL.</summary>
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr sam2_status_str(uint status);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_last_error_message([Out] byte[] buf, UIntPtr buf_len, out UIntPtr needed);

        /// <summary>onnxruntime_path: NULL (a null array) to search.</summary>
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_runtime_init(byte[] onnxruntime_path);

        /// <summary>Process-lifetime string, or NULL before ONNX Runtime is loaded.</summary>
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr sam2_runtime_version();

        /// <summary>callback: null removes it. The delegate must outlive every call the library may still make.</summary>
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_set_log_callback(sam2_log_callback callback, IntPtr user_data, uint min_level);
    

        // ---- segment everything (capi/src/everything.rs) ----------------------------------------

        [StructLayout(LayoutKind.Sequential)]
        internal struct sam2_everything_options
        {
            public uint struct_size;
            public uint points_per_side;
            /// <summary>const float*: NULL or pinned normalised {x, y} pairs, read during the call only.</summary>
            public IntPtr points;
            public UIntPtr point_count;
            public uint points_per_batch;
            public float pred_iou_thresh;
            public float stability_score_thresh;
            public float stability_score_offset;
            public float mask_threshold;
            public float box_nms_thresh;
            public uint crop_n_layers;
            public float crop_nms_thresh;
            public float crop_overlap_ratio;
            public uint crop_n_points_downscale_factor;
            public uint min_mask_region_area;
            public uint multimask;
            public ulong max_clicks;
            public ulong max_memory_bytes;
            /// <summary>sam2_progress_fn: NULL, or a function pointer kept alive during the call.</summary>
            public IntPtr progress;
            public IntPtr progress_user;
        }

        /// <summary>sam2_progress_fn: non-zero cancels.</summary>
        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate int sam2_progress_fn(IntPtr user, ulong done, ulong total);

        [StructLayout(LayoutKind.Sequential)]
        internal struct sam2_everything_info
        {
            public uint box_x_min, box_y_min, box_x_max, box_y_max;
            public ulong area;
            public float predicted_iou;
            public float stability_score;
            public float point_x, point_y;
            public uint crop_x0, crop_y0, crop_x1, crop_y1;
        }

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_everything_options_init(IntPtr options, UIntPtr struct_size);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_segment_everything(EncoderHandle encoder, PredictorHandle predictor, byte[] pixels, UIntPtr pixels_len, uint width, uint height, UIntPtr stride, uint pixel_format, ref sam2_everything_options options, out EverythingHandle @out);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_segment_everything_embedding(PredictorHandle predictor, EmbeddingHandle embedding, ref sam2_everything_options options, out EverythingHandle @out);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void sam2_everything_free(IntPtr everything);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_everything_count(EverythingHandle everything, out UIntPtr out_count, out uint out_width, out uint out_height);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_everything_mask_info(EverythingHandle everything, UIntPtr index, out sam2_everything_info out_info);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_everything_mask(EverythingHandle everything, UIntPtr index, [Out] byte[] buf, UIntPtr buf_len);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_everything_rle(EverythingHandle everything, UIntPtr index, out IntPtr out_counts, out UIntPtr out_count);

        // ---- video tracking (capi/src/tracker.rs) ----------------------------------------------

        [StructLayout(LayoutKind.Sequential)]
        internal struct sam2_tracker_options
        {
            public uint struct_size;
            public uint intra_threads;
            /// <summary>const sam2_provider*: NULL or a pinned array, read during sam2_tracker_new only.</summary>
            public IntPtr providers;
            public UIntPtr provider_count;
            public uint on_device_mismatch;
            public uint weight_sharing;
            public uint graph_optimization;
            public uint corrections_as_conditioning;
            public uint num_frames;
            public uint memory_frames;
            public ulong disabled_rewrites;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct sam2_tracked_object
        {
            public uint object_id;
            public int present;
            public float score;
            public ulong area;
            public uint box_x_min, box_y_min, box_x_max, box_y_max;
        }

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_tracker_options_init(IntPtr options, UIntPtr struct_size);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_tracker_new(byte[] image_encoder_path, byte[] memory_attention_path, byte[] image_decoder_path, byte[] memory_encoder_path, ref sam2_tracker_options options, out TrackerHandle @out);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void sam2_tracker_free(IntPtr tracker);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_tracker_add_prompt(TrackerHandle tracker, uint frame_index, byte[] pixels, UIntPtr pixels_len, uint width, uint height, UIntPtr stride, uint pixel_format, uint object_id, ref sam2_prompt prompt, out TrackResultHandle @out);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_tracker_track(TrackerHandle tracker, uint frame_index, byte[] pixels, UIntPtr pixels_len, uint width, uint height, UIntPtr stride, uint pixel_format, uint direction, out TrackResultHandle @out);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_tracker_remove_object(TrackerHandle tracker, uint object_id, out int out_removed);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_tracker_reset(TrackerHandle tracker);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_tracker_memory_frames(TrackerHandle tracker, out UIntPtr out_frames);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_tracker_memory_bytes(TrackerHandle tracker, out ulong out_bytes);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_tracker_device(TrackerHandle tracker, out uint out_provider, out int out_device_id, out int out_fell_back);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_tracker_precision(TrackerHandle tracker, out uint out_precision);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void sam2_track_result_free(IntPtr result);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_track_result_count(TrackResultHandle result, out uint out_frame_index, out UIntPtr out_count, out uint out_width, out uint out_height);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_track_result_object(TrackResultHandle result, UIntPtr index, out sam2_tracked_object out_object);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_track_result_mask(TrackResultHandle result, UIntPtr index, out IntPtr out_mask, out UIntPtr out_len);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_track_result_low_res(TrackResultHandle result, UIntPtr index, out IntPtr out_logits, out UIntPtr out_len);

        // ---- SAM 3: concept model and result (capi/src/concept.rs) ------------------------------

        [StructLayout(LayoutKind.Sequential)]
        internal struct sam2_concept_model_options
        {
            public uint struct_size;
            public uint output_target;
            public uint intra_threads;
            /// <summary>const sam2_provider*: NULL or a pinned array, read during sam2_concept_model_new only.</summary>
            public IntPtr providers;
            public UIntPtr provider_count;
            public uint on_device_mismatch;
            public uint weight_sharing;
            public uint graph_optimization;
            public ulong disabled_rewrites;
            /// <summary>const char*: NULL or a pinned NUL-terminated UTF-8 path.</summary>
            public IntPtr vocabulary_path;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct sam2_concept_segment_options
        {
            public uint struct_size;
            public float score_threshold;
            public uint nms;
            public float nms_iou;
            public uint max_instances;
            public uint masks;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal unsafe struct sam2_exemplar
        {
            public fixed float box[4];
            public uint positive;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct sam2_concept
        {
            /// <summary>const char*: NULL or a pinned NUL-terminated UTF-8 phrase.</summary>
            public IntPtr phrase;
            /// <summary>const sam2_exemplar*: NULL or a pinned array.</summary>
            public IntPtr exemplars;
            public UIntPtr exemplar_count;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct sam2_concept_summary
        {
            public float presence;
            public uint truncated;
            public UIntPtr instances;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal unsafe struct sam2_instance_info
        {
            public UIntPtr concept;
            public float score;
            public fixed float box[4];
            public ulong area;
            public uint query;
        }

        /// <summary>Writes the library's sizeof(sam2_concept_model_options) bytes: call through NativeOptions.</summary>
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_concept_model_options_init(IntPtr options, UIntPtr struct_size);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_concept_model_new(byte[] path, ref sam2_concept_model_options options, out ConceptModelHandle @out);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void sam2_concept_model_free(IntPtr model);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_concept_encode(ConceptModelHandle model, byte[] pixels, UIntPtr pixels_len, uint width, uint height, UIntPtr stride, uint pixel_format, out EmbeddingHandle @out);

        /// <summary>The same export, for pixels in unmanaged memory.</summary>
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl, EntryPoint = "sam2_concept_encode")]
        internal static extern Sam2Status sam2_concept_encode_ptr(ConceptModelHandle model, IntPtr pixels, UIntPtr pixels_len, uint width, uint height, UIntPtr stride, uint pixel_format, out EmbeddingHandle @out);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_concept_model_max_exemplars(ConceptModelHandle model, out UIntPtr @out);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_concept_model_encoder(ConceptModelHandle model, out EncoderHandle @out);

        /// <summary>Writes the library's sizeof(sam2_concept_segment_options) bytes: call through NativeOptions.</summary>
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_concept_segment_options_init(IntPtr options, UIntPtr struct_size);

        /// <summary>concepts: a pinned array of concept_count (possibly 0) concepts whose pointers are pinned too.</summary>
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_concept_segment(ConceptModelHandle model, EmbeddingHandle embedding, IntPtr concepts, UIntPtr concept_count, ref sam2_concept_segment_options options, out ConceptResultHandle @out);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void sam2_concept_result_free(IntPtr result);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_concept_result_count(ConceptResultHandle result, out UIntPtr out_instances, out UIntPtr out_concepts, out uint out_width, out uint out_height);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_concept_result_summary(ConceptResultHandle result, UIntPtr index, out sam2_concept_summary out_summary);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_concept_result_instance(ConceptResultHandle result, UIntPtr index, out sam2_instance_info out_info);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Sam2Status sam2_concept_result_mask(ConceptResultHandle result, UIntPtr index, [Out] byte[] buf, UIntPtr buf_len);
    }
}
