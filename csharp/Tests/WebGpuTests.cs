// The WebGPU provider from .NET. In the ordinary run (a CPU-only ONNX Runtime) asking for WebGPU
// under Fail is an environment-configuration error naming the provider. tools/ci/test-csharp.sh
// runs these tests a second time against the WebGPU build of ONNX Runtime on llvmpipe
// (SAM2_CSHARP_WEBGPU=1, tools/setup/setup-webgpu.sh): there the embedding stays in device memory,
// saving it throws EmbeddingNotSerializableException with ONNX Runtime's allocator name and
// writes nothing, clicks on it segment the shapes, and ToHost() gives a copy that saves.
using System;
using System.IO;
using System.Linq;

namespace Sam2.Tests
{
    internal static class WebGpuTests
    {
        private static bool OnDevice
        {
            get { return Environment.GetEnvironmentVariable("SAM2_CSHARP_WEBGPU") == "1"; }
        }

        private static Sam2EncoderOptions WebGpuEncoder()
        {
            var options = new Sam2EncoderOptions { OnDeviceMismatch = DeviceMismatchPolicy.Fail };
            options.Providers.Add(new Sam2ProviderRequest(ExecutionProvider.WebGpu));
            return options;
        }

        [Test]
        private static void WebGpuIsAProviderAHostCanAskFor()
        {
            Sam2Runtime.Initialize(Environment.GetEnvironmentVariable("SAM2_ONNXRUNTIME_PATH"));
            if (!OnDevice)
            {
                var e = Assert.Throws<Sam2EnvironmentConfigurationException>(
                    () => new Sam2Encoder(Fixture.EncoderPath, WebGpuEncoder()), "WebGPU on a CPU-only build");
                Assert.Contains("WebGpuExecutionProvider", e.Message, "the message names the provider");
                return;
            }
            var popts = new Sam2PredictorOptions { OnDeviceMismatch = DeviceMismatchPolicy.Fail };
            popts.Providers.Add(new Sam2ProviderRequest(ExecutionProvider.WebGpu));
            using (var encoder = new Sam2Encoder(Fixture.EncoderPath, WebGpuEncoder()))
            using (var predictor = new Sam2Predictor(encoder, Fixture.DecoderPath, popts))
            {
                Assert.Equal(ExecutionProvider.WebGpu, encoder.Device.Provider, "encoder device");
                PnmImage image = Fixture.ShapesImage;
                using (Sam2Embedding embedding = encoder.Encode(image.Pixels, image.Width, image.Height, PixelFormat.Rgb))
                {
                    Assert.True(!embedding.IsSerializable, "a device embedding is not serializable");
                    Assert.True(embedding.AllocatorName.StartsWith("WebGPU", StringComparison.Ordinal),
                                "allocator " + embedding.AllocatorName);
                    string path = Path.Combine(Fixture.Scratch, "webgpu.sam2");
                    var refused = Assert.Throws<EmbeddingNotSerializableException>(() => embedding.Save(path), "save");
                    Assert.Equal(embedding.AllocatorName, refused.AllocatorName, "AllocatorName");
                    Assert.True(!File.Exists(path), "a refused save writes nothing");

                    var shapes = Fixture.ShapeList();
                    foreach (Shape shape in shapes)
                    {
                        byte[] truth = Fixture.GroundTruth(shape);
                        if (shape.TwinOf != null)
                            truth = Fixture.Union(truth, Fixture.GroundTruth(shapes.First(s => s.Name == shape.TwinOf)));
                        using (Sam2Masks masks = predictor.Predict(embedding, Sam2Prompt.FromPoint(shape.ClickX, shape.ClickY)))
                        {
                            double iou = Fixture.IoU(masks.GetMask(0), truth);
                            Assert.True(iou >= 0.9, shape.Name + ": IoU " + iou);
                        }
                    }
                    using (Sam2Embedding host = embedding.ToHost())
                    {
                        Assert.True(host.IsSerializable, "the host copy is serializable");
                        host.Save(path);
                        Assert.True(File.Exists(path), "the host copy saved");
                    }
                }
            }
        }

        // A predictor made for a WebGPU encoder with the default options runs on WebGPU and
        // segments the encoder's device embedding in place, as the README's example does.
        [Test]
        private static void APredictorFollowsItsEncodersDeviceByDefault()
        {
            Sam2Runtime.Initialize(Environment.GetEnvironmentVariable("SAM2_ONNXRUNTIME_PATH"));
            if (!OnDevice)
                return;
            using (var encoder = new Sam2Encoder(Fixture.EncoderPath, WebGpuEncoder()))
            using (var predictor = new Sam2Predictor(encoder, Fixture.DecoderPath))
            {
                Assert.Equal(ExecutionProvider.WebGpu, predictor.Device.Provider, "predictor device");
                PnmImage image = Fixture.ShapesImage;
                using (Sam2Embedding embedding = encoder.Encode(image.Pixels, image.Width, image.Height, PixelFormat.Rgb))
                {
                    Shape shape = Fixture.ShapeList().First(s => s.TwinOf == null);
                    using (Sam2Masks masks = predictor.Predict(embedding, Sam2Prompt.FromPoint(shape.ClickX, shape.ClickY)))
                    {
                        double iou = Fixture.IoU(masks.GetMask(0), Fixture.GroundTruth(shape));
                        Assert.True(iou >= 0.9, shape.Name + ": IoU " + iou);
                    }
                }
            }
        }
    }
}
