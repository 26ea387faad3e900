using System;
using System.IO;

namespace Sam2.Tests
{
    /// <summary>Every native status reaches the caller as the documented exception, with the native message.</summary>
    internal static class ErrorMappingTests
    {
        [Test]
        private static void SavingACudaEmbeddingIsRefusedWithItsAllocator()
        {
            RefusedSave("Cuda", 0);
        }

        [Test]
        private static void SavingADmlEmbeddingIsRefusedWithItsAllocator()
        {
            RefusedSave("DML", 1);
        }

        private static void RefusedSave(string allocator, int deviceId)
        {
            string directory = Path.Combine(Fixture.Scratch, "refused-" + allocator);
            Directory.CreateDirectory(directory);
            string file = Path.Combine(directory, "device.sam2emb");
            using (Sam2Embedding device = Sam2TestSupport.SimulateDeviceEmbedding(Fixture.Shapes, allocator, deviceId))
            {
                Assert.Equal(false, device.IsSerializable, "IsSerializable");
                Assert.Equal(allocator, device.AllocatorName, "AllocatorName");
                Assert.Equal(deviceId, device.DeviceId, "DeviceId");
                var e = Assert.Throws<EmbeddingNotSerializableException>(() => device.Save(file), "Save");
                Assert.True(e is InvalidOperationException, "it is an InvalidOperationException");
                Assert.Equal(allocator, e.AllocatorName, "exception's AllocatorName");
                Assert.Contains("`" + allocator + "`", e.Message, "the native message names the allocator");
                Assert.True(!File.Exists(file), "no file was written");
                Assert.Equal(0, Directory.GetFileSystemEntries(directory).Length, "nothing at all was written, not even a temporary file");
                // The embedding stays usable after the refusal.
                Assert.Equal(allocator, device.AllocatorName, "AllocatorName after the refusal");
                Assert.Equal(Fixture.Shapes.Fingerprint, device.Fingerprint, "fingerprint of the simulation");
            }
        }

        [Test]
        private static void ASimulatedDeviceEmbeddingIsNeverRun()
        {
            using (Sam2Embedding device = Sam2TestSupport.SimulateDeviceEmbedding(Fixture.Shapes, "Cuda"))
            {
                var e = Assert.Throws<ArgumentException>(() => Fixture.Predictor.Predict(device, Sam2Prompt.FromPoint(100, 112)), "Predict");
                Assert.Equal("embedding", e.ParamName, "ParamName");
                var copy = Assert.Throws<Sam2EnvironmentConfigurationException>(() => device.ToHost(), "ToHost");
                Assert.Equal(Sam2Status.EnvironmentConfiguration, copy.Status, "ToHost status");
                Assert.Throws<ArgumentException>(() => Sam2TestSupport.SimulateDeviceEmbedding(device, "DML"), "a simulation of a simulation");
            }
            var bad = Assert.Throws<ArgumentException>(() => Sam2TestSupport.SimulateDeviceEmbedding(Fixture.Shapes, "no such/allocator"), "a malformed allocator name");
            Assert.Equal("allocator_name", bad.ParamName, "ParamName");
        }

        [Test]
        private static void APointOutsideTheImageIsAnArgumentException()
        {
            var e = Assert.Throws<ArgumentException>(() => Fixture.Predictor.Predict(Fixture.Shapes, Sam2Prompt.FromPoint(600, 100)), "x beyond the width");
            Assert.Equal("points", e.ParamName, "ParamName");
            Assert.Contains("outside", e.Message, "the native message");
            e = Assert.Throws<ArgumentException>(() => Fixture.Predictor.Predict(Fixture.Shapes, Sam2Prompt.FromPoint(float.NaN, 1)), "NaN");
            Assert.Equal("points", e.ParamName, "ParamName for NaN");
        }

        [Test]
        private static void ABadPixelFormatIsAnArgumentException()
        {
            var pixels = new byte[16 * 16 * 3];
            var e = Assert.Throws<ArgumentException>(() => Fixture.Encoder.Encode(pixels, 16, 16, 0, (PixelFormat)9), "pixel format 9");
            Assert.Equal("pixel_format", e.ParamName, "ParamName");
            Assert.Contains("invalid argument `pixel_format`", e.Message, "the native message");
        }

        [Test]
        private static void BadSizesAreArgumentExceptions()
        {
            var pixels = new byte[16 * 16 * 3];
            Assert.Equal("pixels", Assert.Throws<ArgumentException>(() => Fixture.Encoder.Encode(pixels, 32, 16, PixelFormat.Rgb), "buffer too short").ParamName, "short buffer");
            Assert.Equal("stride", Assert.Throws<ArgumentException>(() => Fixture.Encoder.Encode(pixels, 16, 16, 10, PixelFormat.Rgb), "stride below a row").ParamName, "stride");
            Assert.Equal("width", Assert.Throws<ArgumentException>(() => Fixture.Encoder.Encode(pixels, 0, 16, PixelFormat.Rgb), "zero width").ParamName, "width");
            Assert.Equal("height", Assert.Throws<ArgumentOutOfRangeException>(() => Fixture.Encoder.Encode(pixels, 16, -1, PixelFormat.Rgb), "negative height").ParamName, "height");
        }

        [Test]
        private static void BadPromptsAreArgumentExceptions()
        {
            Sam2Predictor p = Fixture.Predictor;
            Sam2Embedding shapes = Fixture.Shapes;
            Assert.Equal("box", Assert.Throws<ArgumentException>(() => p.Predict(shapes, Sam2Prompt.FromBox(200, 50, 100, 150)), "x2 < x1").ParamName, "reversed box");
            Assert.Equal("prompt", Assert.Throws<ArgumentException>(() => p.Predict(shapes, new Sam2Prompt()), "empty prompt").ParamName, "empty prompt");
            Assert.Equal("prompt_count", Assert.Throws<ArgumentException>(() => p.Predict(shapes), "no prompt").ParamName, "no prompts");
            var wrongMask = Sam2Prompt.FromPoint(100, 112);
            wrongMask.MaskInput = new float[100];
            Assert.Equal("mask_input", Assert.Throws<ArgumentException>(() => p.Predict(shapes, wrongMask), "mask input of 100 floats").ParamName, "mask input");
            var badLabel = new Sam2Prompt(new Sam2Point(100, 112, (PointLabel)7));
            Assert.Equal("prompt.points.label", Assert.Throws<ArgumentException>(() => p.Predict(shapes, badLabel), "label 7").ParamName, "label");
        }

        [Test]
        private static void BadOptionsAreArgumentExceptions()
        {
            var options = new Sam2PredictorOptions { EncoderFingerprint = "not-a-fingerprint" };
            var e = Assert.Throws<ArgumentException>(() => new Sam2Predictor(null, Fixture.DecoderPath, options), "a malformed fingerprint");
            Assert.Equal("options.encoder_fingerprint", e.ParamName, "ParamName");
            var encoderOptions = new Sam2EncoderOptions { OnDeviceMismatch = (DeviceMismatchPolicy)5 };
            e = Assert.Throws<ArgumentException>(() => new Sam2Encoder(Fixture.EncoderPath, encoderOptions), "mismatch policy 5");
            Assert.Equal("options.on_device_mismatch", e.ParamName, "ParamName");
            encoderOptions = new Sam2EncoderOptions();
            encoderOptions.Providers.Add(new Sam2ProviderRequest((ExecutionProvider)42));
            e = Assert.Throws<ArgumentException>(() => new Sam2Encoder(Fixture.EncoderPath, encoderOptions), "provider 42");
            Assert.Equal("options.providers.provider", e.ParamName, "ParamName");
        }

        [Test]
        private static void AGpuRequestInFailModeIsAnEnvironmentConfigurationError()
        {
            var options = new Sam2EncoderOptions { OnDeviceMismatch = DeviceMismatchPolicy.Fail };
            options.Providers.Add(new Sam2ProviderRequest(ExecutionProvider.Cuda));
            Sam2Encoder encoder = null;
            try
            {
                encoder = new Sam2Encoder(Fixture.EncoderPath, options);
            }
            catch (Sam2EnvironmentConfigurationException e)
            {
                Assert.Equal(Sam2Status.EnvironmentConfiguration, e.Status, "status");
                Assert.Contains("CUDA", e.Message.ToUpperInvariant(), "the message names what was requested");
                return;
            }
            using (encoder)
                Assert.Equal(ExecutionProvider.Cuda, encoder.Device.Provider, "only a machine with a working CUDA may succeed");
        }

        [Test]
        private static void NullArgumentsAreArgumentNullExceptions()
        {
            Sam2Predictor p = Fixture.Predictor;
            Assert.Equal("modelPath", Assert.Throws<ArgumentNullException>(() => new Sam2Encoder(null), "encoder path").ParamName, "encoder path");
            Assert.Equal("decoderPath", Assert.Throws<ArgumentNullException>(() => new Sam2Predictor(null, null), "decoder path").ParamName, "decoder path");
            Assert.Equal("pixels", Assert.Throws<ArgumentNullException>(() => Fixture.Encoder.Encode((byte[])null, 4, 4, PixelFormat.Rgb), "pixels").ParamName, "pixels");
            Assert.Equal("embedding", Assert.Throws<ArgumentNullException>(() => p.Predict(null, Sam2Prompt.FromPoint(1, 1)), "embedding").ParamName, "embedding");
            Assert.Equal("prompts", Assert.Throws<ArgumentNullException>(() => p.Predict(Fixture.Shapes, (Sam2Prompt[])null), "prompts").ParamName, "prompts");
            Assert.Equal("prompts", Assert.Throws<ArgumentNullException>(() => p.Predict(Fixture.Shapes, new Sam2Prompt[] { null }), "a null prompt").ParamName, "a null prompt");
            Assert.Equal("path", Assert.Throws<ArgumentNullException>(() => Fixture.Shapes.Save(null), "save path").ParamName, "save path");
            Assert.Equal("path", Assert.Throws<ArgumentNullException>(() => Sam2Embedding.Load(null), "load path").ParamName, "load path");
            Assert.Equal("hostEmbedding", Assert.Throws<ArgumentNullException>(() => Sam2TestSupport.SimulateDeviceEmbedding(null, "Cuda"), "simulation source").ParamName, "simulation source");
        }

        [Test]
        private static void NativeNullArgumentsMapToArgumentNullException()
        {
            // The managed side checks nulls before the library sees them, so reach the mapper
            // through the raw P/Invoke with a NULL the library itself reports.
            EmbeddingHandle handle = Fixture.Shapes.Handle;
            var e = Assert.Throws<ArgumentNullException>(() => Sam2Error.Check(NativeMethods.sam2_embedding_save(handle, null), handle), "sam2_embedding_save(e, NULL)");
            Assert.Equal("path", e.ParamName, "ParamName from the native message");
            Assert.Contains("must not be NULL", e.Message, "the native message");
            var level = Assert.Throws<ArgumentException>(() => Sam2Error.Check(NativeMethods.sam2_set_log_callback(null, IntPtr.Zero, 9)), "log level 9");
            Assert.Equal("min_level", level.ParamName, "ParamName of sam2_set_log_callback");
        }

        [Test]
        private static void ArgumentNamesAreParsedFromNativeMessages()
        {
            Assert.Equal("points", Sam2Error.ArgumentName("invalid argument `points`: (600, 100) lies outside"), "invalid argument");
            Assert.Equal("path", Sam2Error.ArgumentName("argument `path` must not be NULL"), "null argument");
            Assert.Equal(null, Sam2Error.ArgumentName("no name here"), "no backticks");
            Assert.Equal(null, Sam2Error.ArgumentName(null), "null message");
        }

        [Test]
        private static void AMissingModelIsAModelError()
        {
            string missing = Path.Combine(Fixture.Scratch, "no-such-encoder.onnx");
            var e = Assert.Throws<Sam2Exception>(() => new Sam2Encoder(missing), "missing encoder");
            Assert.Equal(Sam2Status.Model, e.Status, "status");
            Assert.Contains(missing, e.Message, "the message names the file");
            e = Assert.Throws<Sam2Exception>(() => new Sam2Predictor(null, Path.Combine(Fixture.Scratch, "no-such-decoder.onnx")), "missing decoder");
            Assert.Equal(Sam2Status.Model, e.Status, "decoder status");
            // A decoder given as encoder is not a recognised encoder.
            e = Assert.Throws<Sam2Exception>(() => new Sam2Encoder(Fixture.DecoderPath), "a decoder as encoder");
            Assert.Equal(Sam2Status.Model, e.Status, "wrong model status");
        }

        [Test]
        private static void AnInt8VariantSaysSoAndIsAnotherModel()
        {
            Assert.Equal(Precision.Fp32, Fixture.Encoder.Precision, "the generated encoder");
            Assert.Equal(Precision.Fp32, Fixture.Shapes.Precision, "its embedding");
            WithVariantEmbedding("int8", Precision.Int8, embedding =>
            {
                string file = Path.Combine(Fixture.Scratch, "int8.sam2emb");
                embedding.Save(file);
                using (Sam2Embedding loaded = Sam2Embedding.Load(file))
                    Assert.Equal(Precision.Int8, loaded.Precision, "its file");
                var e = Assert.Throws<Sam2Exception>(() => Sam2Embedding.Load(file, Fixture.Predictor), "the original's predictor");
                Assert.Equal(Sam2Status.ModelMismatch, e.Status, "status");
                Assert.Contains("(int8)", e.Message, "the message names the precision");
                File.Delete(file);
            });
        }

        [Test]
        private static void AnFp16VariantSaysSoAndIsAnotherModel()
        {
            WithVariantEmbedding("fp16", Precision.Fp16, embedding =>
            {
                var e = Assert.Throws<Sam2Exception>(() => Fixture.Predictor.Predict(embedding, Sam2Prompt.FromPoint(100, 112)), "the original's predictor");
                Assert.Equal(Sam2Status.ModelMismatch, e.Status, "status");
                Assert.Contains("(fp16)", e.Message, "the message names the precision");
            });
        }

        /// <summary>Opens the generated tiny_a variant of this precision (made by the set-up), checks that it and its embedding of the shapes say so, and hands the embedding to <paramref name="check"/>.</summary>
        private static void WithVariantEmbedding(string name, Precision want, Action<Sam2Embedding> check)
        {
            string variant = Path.Combine(Fixture.Models, "variants", "tiny_a_" + name, "tiny_a_encoder.onnx");
            using (var encoder = new Sam2Encoder(variant))
            {
                Assert.Equal(want, encoder.Precision, "the " + name + " variant");
                PnmImage image = Fixture.ShapesImage;
                using (Sam2Embedding embedding = encoder.Encode(image.Pixels, image.Width, image.Height, PixelFormat.Rgb))
                {
                    Assert.Equal(want, embedding.Precision, "the " + name + " variant's embedding");
                    check(embedding);
                }
            }
        }

        [Test]
        private static void AnEmbeddingOfAnotherModelIsAModelMismatch()
        {
            using (var otherEncoder = new Sam2Encoder(Fixture.Model("tiny_c_encoder")))
            using (var otherPredictor = new Sam2Predictor(otherEncoder, Fixture.Model("tiny_c_decoder")))
            {
                var e = Assert.Throws<Sam2Exception>(() => otherPredictor.Predict(Fixture.Shapes, Sam2Prompt.FromPoint(100, 112)), "predict");
                Assert.Equal(Sam2Status.ModelMismatch, e.Status, "predict status");
                string file = Path.Combine(Fixture.Scratch, "mismatch.sam2emb");
                Fixture.Shapes.Save(file);
                e = Assert.Throws<Sam2Exception>(() => Sam2Embedding.Load(file, otherPredictor), "load for another model");
                Assert.Equal(Sam2Status.ModelMismatch, e.Status, "load status");
            }
            // A predictor bound to another encoder by fingerprint refuses it too.
            using (var otherEncoder = new Sam2Encoder(Fixture.Model("tiny_c_encoder")))
            {
                var options = new Sam2PredictorOptions { EncoderFingerprint = otherEncoder.Fingerprint };
                using (var predictor = new Sam2Predictor(null, Fixture.DecoderPath, options))
                {
                    var e = Assert.Throws<Sam2Exception>(() => predictor.Predict(Fixture.Shapes, Sam2Prompt.FromPoint(100, 112)), "fingerprint");
                    Assert.Equal(Sam2Status.ModelMismatch, e.Status, "fingerprint status");
                }
            }
        }

        [Test]
        private static void ACorruptedEmbeddingFileIsAnEmbeddingFormatError()
        {
            string good = Path.Combine(Fixture.Scratch, "good.sam2emb");
            Fixture.Shapes.Save(good);
            byte[] bytes = File.ReadAllBytes(good);

            string truncated = Path.Combine(Fixture.Scratch, "truncated.sam2emb");
            File.WriteAllBytes(truncated, Slice(bytes, bytes.Length / 2));
            Assert.Equal(Sam2Status.EmbeddingFormat, Assert.Throws<Sam2Exception>(() => Sam2Embedding.Load(truncated), "truncated").Status, "truncated");

            string garbledHeader = Path.Combine(Fixture.Scratch, "garbled.sam2emb");
            byte[] garbled = (byte[])bytes.Clone();
            for (int i = 8; i < 64; i++)
                garbled[i] ^= 0x5A;
            File.WriteAllBytes(garbledHeader, garbled);
            Assert.Equal(Sam2Status.EmbeddingFormat, Assert.Throws<Sam2Exception>(() => Sam2Embedding.Load(garbledHeader), "garbled header").Status, "garbled header");

            string foreign = Path.Combine(Fixture.Scratch, "foreign.sam2emb");
            File.WriteAllBytes(foreign, System.Text.Encoding.ASCII.GetBytes("P6\n512 384\n255\nthis is not an embedding"));
            Assert.Equal(Sam2Status.EmbeddingFormat, Assert.Throws<Sam2Exception>(() => Sam2Embedding.Load(foreign), "foreign").Status, "foreign file");

            string missing = Path.Combine(Fixture.Scratch, "missing.sam2emb");
            Assert.Equal(Sam2Status.Io, Assert.Throws<Sam2Exception>(() => Sam2Embedding.Load(missing), "missing file").Status, "missing file");
        }

        [Test]
        private static void PlacementOnADeviceNeedsAPredictor()
        {
            string file = Path.Combine(Fixture.Scratch, "placement.sam2emb");
            Fixture.Shapes.Save(file);
            var e = Assert.Throws<ArgumentException>(() => Sam2Embedding.Load(file, null, Placement.Device), "device placement without predictor");
            Assert.Equal("placement", e.ParamName, "ParamName");
        }

        [Test]
        private static void AMaskIndexOutOfRangeIsAnArgumentOutOfRangeException()
        {
            using (Sam2Masks masks = Fixture.Predictor.Predict(Fixture.Shapes, Sam2Prompt.FromPoint(100, 112)))
            {
                Assert.Equal("index", Assert.Throws<ArgumentOutOfRangeException>(() => masks.GetMask(1), "GetMask(1)").ParamName, "GetMask");
                Assert.Equal("index", Assert.Throws<ArgumentOutOfRangeException>(() => masks.Score(-1), "Score(-1)").ParamName, "Score");
            }
        }

        private static byte[] Slice(byte[] bytes, int length)
        {
            var part = new byte[length];
            Buffer.BlockCopy(bytes, 0, part, 0, length);
            return part;
        }
    }
}
