using System;
using System.Collections.Generic;
using System.Linq;

namespace Sam2.Tests
{
    internal static class LogTests
    {
        // Runs before every other test: the only info message the library logs today is the one
        // that says which ONNX Runtime it loaded, and that happens once per process.
        [Test(Order = -100)]
        private static void LogEventReceivesTheRuntimeLoadMessage()
        {
            Assert.True(Sam2Runtime.RuntimeVersion == null,
                "ONNX Runtime was loaded before this test; it must run first in its process");
            var messages = new List<Sam2LogEventArgs>();
            EventHandler<Sam2LogEventArgs> failing = (s, e) => { throw new InvalidOperationException("must not unwind into native code"); };
            EventHandler<Sam2LogEventArgs> recording = (s, e) => { lock (messages) messages.Add(e); };
            Sam2Runtime.LogLevel = Sam2LogLevel.Info;
            Sam2Runtime.Log += failing;
            Sam2Runtime.Log += recording;
            try
            {
                Assert.True(Sam2Runtime.IsLogCallbackInstalled, "the callback is installed with the first handler");
                Sam2Runtime.Initialize(Environment.GetEnvironmentVariable("SAM2_ONNXRUNTIME_PATH"));
            }
            finally
            {
                Sam2Runtime.Log -= failing;
                Sam2Runtime.Log -= recording;
                Sam2Runtime.LogLevel = Sam2LogLevel.Warning;
            }
            Assert.True(!Sam2Runtime.IsLogCallbackInstalled, "the callback is removed with the last handler");
            Sam2LogEventArgs loaded;
            lock (messages)
                loaded = messages.FirstOrDefault(m => m.Message.Contains("loaded ONNX Runtime"));
            Assert.True(loaded != null, "a message says which ONNX Runtime was loaded (got " + messages.Count + " messages)");
            Assert.Equal(Sam2LogLevel.Info, loaded.Level, "its level");
            Assert.Contains(Sam2Runtime.RuntimeVersion, loaded.Message, "it names the version");
        }

        [Test]
        private static void LogWarnsAboutADeviceFallback()
        {
            // A CUDA request on this CPU-only ONNX Runtime falls back to the CPU with a warning.
            var warnings = new List<string>();
            EventHandler<Sam2LogEventArgs> recording = (s, e) => { if (e.Level == Sam2LogLevel.Warning) lock (warnings) warnings.Add(e.Message); };
            Sam2Runtime.Log += recording;
            try
            {
                var options = new Sam2EncoderOptions();
                options.Providers.Add(new Sam2ProviderRequest(ExecutionProvider.Cuda));
                using (var encoder = new Sam2Encoder(Fixture.EncoderPath, options))
                {
                    Sam2DeviceInfo device = encoder.Device;
                    if (device.Provider != ExecutionProvider.Cpu)
                        return; // a machine with a working CUDA: no fallback to observe
                    Assert.True(device.FellBack, "the encoder reports the fallback");
                }
            }
            finally
            {
                Sam2Runtime.Log -= recording;
            }
            lock (warnings)
                Assert.True(warnings.Count > 0, "a warning was logged for the fallback");
        }

        [Test]
        private static void LogHandlersInstallAndRemoveTheNativeCallback()
        {
            EventHandler<Sam2LogEventArgs> first = (s, e) => { };
            EventHandler<Sam2LogEventArgs> second = (s, e) => { };
            Assert.True(!Sam2Runtime.IsLogCallbackInstalled, "no callback before any handler");
            Sam2Runtime.Log += first;
            Sam2Runtime.Log += second;
            Sam2Runtime.LogLevel = Sam2LogLevel.Debug; // re-registers with the new level
            Sam2Runtime.Log -= first;
            Assert.True(Sam2Runtime.IsLogCallbackInstalled, "still installed while a handler remains");
            Sam2Runtime.Log -= second;
            Assert.True(!Sam2Runtime.IsLogCallbackInstalled, "removed with the last handler");
            Sam2Runtime.Log -= second; // removing again is harmless
            Sam2Runtime.LogLevel = Sam2LogLevel.Warning;
            Assert.Throws<ArgumentOutOfRangeException>(() => Sam2Runtime.LogLevel = (Sam2LogLevel)4, "a level above Error");
        }
    }

    internal static class RuntimeTests
    {
        [Test]
        private static void VersionsAreReported()
        {
            Assert.Equal(Sam2Runtime.BindingVersion, Sam2Runtime.Version, "library version vs the header's SAM2_VERSION_*");
            string ort = Sam2Runtime.RuntimeVersion;
            Assert.True(ort != null && ort.StartsWith("1.", StringComparison.Ordinal), "ONNX Runtime version, got " + ort);
        }

        [Test]
        private static void InitializingTheSameRuntimeAgainIsFine()
        {
            Sam2Runtime.Initialize(Environment.GetEnvironmentVariable("SAM2_ONNXRUNTIME_PATH"));
            Sam2Runtime.Initialize(null);
        }

        [Test]
        private static void ASecondRuntimeIsAnEnvironmentConfigurationError()
        {
            string other = System.IO.Path.Combine(Fixture.Scratch, "libonnxruntime.so.1.99.0");
            var e = Assert.Throws<Sam2EnvironmentConfigurationException>(() => Sam2Runtime.Initialize(other), "a different ONNX Runtime");
            Assert.Equal(Sam2Status.EnvironmentConfiguration, e.Status, "status");
            Assert.Contains(other, e.Message, "the message names the file asked for");
        }

        [Test]
        private static void StatusDescriptionsComeFromTheLibrary()
        {
            Assert.Contains("SAM2_ERR_MODEL", Sam2Runtime.DescribeStatus(Sam2Status.Model), "description of Model");
            Assert.Contains("SAM2_ERR_EMBEDDING_NOT_SERIALIZABLE", Sam2Runtime.DescribeStatus(Sam2Status.EmbeddingNotSerializable), "description");
            Assert.Contains("unknown", Sam2Runtime.DescribeStatus((Sam2Status)99), "an unknown code");
        }

        [Test]
        private static void NativeStructLayoutsMatchTheHeader()
        {
            // Sizes and offsets of include/sam2.h on a 64-bit target (checked with a C compiler).
            if (IntPtr.Size != 8)
                return;
            Assert.Equal(12, Size<NativeMethods.sam2_point>(), "sizeof(sam2_point)");
            Assert.Equal(56, Size<NativeMethods.sam2_prompt>(), "sizeof(sam2_prompt)");
            Assert.Equal(20, Offset<NativeMethods.sam2_prompt>("box"), "offsetof(sam2_prompt, box)");
            Assert.Equal(40, Offset<NativeMethods.sam2_prompt>("mask_input"), "offsetof(sam2_prompt, mask_input)");
            Assert.Equal(24, Size<NativeMethods.sam2_provider>(), "sizeof(sam2_provider)");
            Assert.Equal(56, Size<NativeMethods.sam2_encoder_options>(), "sizeof(sam2_encoder_options)");
            Assert.Equal(48, Offset<NativeMethods.sam2_encoder_options>("disabled_rewrites"), "offsetof(sam2_encoder_options, disabled_rewrites)");
            Assert.Equal(32, Offset<NativeMethods.sam2_encoder_options>("on_device_mismatch"), "offsetof(sam2_encoder_options, on_device_mismatch)");
            Assert.Equal(40, Offset<NativeMethods.sam2_encoder_options>("graph_optimization"), "offsetof(sam2_encoder_options, graph_optimization)");
            Assert.Equal(64, Size<NativeMethods.sam2_predictor_options>(), "sizeof(sam2_predictor_options)");
            Assert.Equal(56, Offset<NativeMethods.sam2_predictor_options>("disabled_rewrites"), "offsetof(sam2_predictor_options, disabled_rewrites)");
            Assert.Equal(36, Offset<NativeMethods.sam2_predictor_options>("allow_embedding_copy"), "offsetof(sam2_predictor_options, allow_embedding_copy)");
            Assert.Equal(40, Offset<NativeMethods.sam2_predictor_options>("pool_size"), "offsetof(sam2_predictor_options, pool_size)");
            Assert.Equal(48, Offset<NativeMethods.sam2_predictor_options>("graph_optimization"), "offsetof(sam2_predictor_options, graph_optimization)");
            Assert.Equal(8, Size<NativeMethods.sam2_predict_options>(), "sizeof(sam2_predict_options)");
            Assert.Equal(56, Size<NativeMethods.sam2_tracker_options>(), "sizeof(sam2_tracker_options)");
            Assert.Equal(48, Offset<NativeMethods.sam2_tracker_options>("disabled_rewrites"), "offsetof(sam2_tracker_options, disabled_rewrites)");
            Assert.Equal(64, Size<NativeMethods.sam2_concept_model_options>(), "sizeof(sam2_concept_model_options)");
            Assert.Equal(48, Offset<NativeMethods.sam2_concept_model_options>("disabled_rewrites"), "offsetof(sam2_concept_model_options, disabled_rewrites)");
            Assert.Equal(56, Offset<NativeMethods.sam2_concept_model_options>("vocabulary_path"), "offsetof(sam2_concept_model_options, vocabulary_path)");
            Assert.Equal(24, Size<NativeMethods.sam2_concept_segment_options>(), "sizeof(sam2_concept_segment_options)");
            Assert.Equal(20, Size<NativeMethods.sam2_exemplar>(), "sizeof(sam2_exemplar)");
            Assert.Equal(16, Offset<NativeMethods.sam2_exemplar>("positive"), "offsetof(sam2_exemplar, positive)");
            Assert.Equal(24, Size<NativeMethods.sam2_concept>(), "sizeof(sam2_concept)");
            Assert.Equal(16, Size<NativeMethods.sam2_concept_summary>(), "sizeof(sam2_concept_summary)");
            Assert.Equal(48, Size<NativeMethods.sam2_instance_info>(), "sizeof(sam2_instance_info)");
            Assert.Equal(12, Offset<NativeMethods.sam2_instance_info>("box"), "offsetof(sam2_instance_info, box)");
            Assert.Equal(32, Offset<NativeMethods.sam2_instance_info>("area"), "offsetof(sam2_instance_info, area)");
            Assert.Equal(40, Offset<NativeMethods.sam2_instance_info>("query"), "offsetof(sam2_instance_info, query)");
            // The library's own struct_size agrees (read through the _init functions).
            Assert.Equal(56u, NativeOptions.Defaults<NativeMethods.sam2_encoder_options>(NativeMethods.sam2_encoder_options_init).struct_size, "encoder struct_size");
            Assert.Equal(64u, NativeOptions.Defaults<NativeMethods.sam2_predictor_options>(NativeMethods.sam2_predictor_options_init).struct_size, "predictor struct_size");
            Assert.Equal(8u, NativeOptions.Defaults<NativeMethods.sam2_predict_options>(NativeMethods.sam2_predict_options_init).struct_size, "predict struct_size");
            Assert.Equal(64u, NativeOptions.Defaults<NativeMethods.sam2_concept_model_options>(NativeMethods.sam2_concept_model_options_init).struct_size, "concept model struct_size");
            Assert.Equal(24u, NativeOptions.Defaults<NativeMethods.sam2_concept_segment_options>(NativeMethods.sam2_concept_segment_options_init).struct_size, "concept segment struct_size");
        }

        [Test]
        private static void OptionsStartFromTheNativeDefaults()
        {
            var encoder = new Sam2EncoderOptions();
            Assert.Equal(OutputTarget.Device, encoder.OutputTarget, "encoder output target");
            Assert.Equal(0, encoder.IntraThreads, "encoder threads");
            Assert.Equal(0, encoder.Providers.Count, "encoder providers (the CPU)");
            Assert.Equal(DeviceMismatchPolicy.Fallback, encoder.OnDeviceMismatch, "encoder mismatch policy");
            var predictor = new Sam2PredictorOptions();
            Assert.Equal(null, predictor.EncoderFingerprint, "predictor fingerprint");
            Assert.Equal(false, predictor.AllowEmbeddingCopy, "predictor embedding copy");
            Assert.Equal(DeviceMismatchPolicy.Fallback, predictor.OnDeviceMismatch, "predictor mismatch policy");
            var concept = new Sam2ConceptModelOptions();
            Assert.Equal(OutputTarget.Device, concept.OutputTarget, "concept model output target");
            Assert.Equal(null, concept.VocabularyPath, "concept model vocabulary (beside the graphs)");
            Assert.Equal(WeightSharing.Shared, concept.WeightSharing, "concept model weights");
        }

        [Test]
        private static void SessionsReportTheirDevice()
        {
            Sam2DeviceInfo encoder = Fixture.Encoder.Device;
            Assert.Equal(ExecutionProvider.Cpu, encoder.Provider, "encoder provider");
            Assert.Equal(false, encoder.FellBack, "nothing was requested, so nothing fell back");
            Assert.Equal("CPUExecutionProvider", string.Join(",", Fixture.Encoder.ExecutionProviders), "encoder session providers");
            Assert.Equal(ExecutionProvider.Cpu, Fixture.Predictor.Device.Provider, "predictor provider");
            Assert.Contains("CPUExecutionProvider", string.Join(",", Fixture.Predictor.ExecutionProviders), "predictor session providers");
        }

        private static int Size<T>()
        {
            return System.Runtime.InteropServices.Marshal.SizeOf(typeof(T));
        }

        private static int Offset<T>(string field)
        {
            return System.Runtime.InteropServices.Marshal.OffsetOf(typeof(T), field).ToInt32();
        }
    }
}
