using System;
using System.IO;
using System.Linq;

namespace Sam2.Tests
{
    /// <summary>The real SAM2 architecture (random weights) from samexporter and ONNX Runtime's
    /// tools, and EdgeTAM's image pair (ONNX Runtime's tools on EdgeTAM), through the wrapper with
    /// default options ($SAM2_REAL_MODELS from tools/setup/setup-real.sh, $SAM2_EDGETAM_MODELS from
    /// tools/setup/setup-edgetam.sh).</summary>
    internal static class RealModelTests
    {
        private static string Model(string variable, string setup, string file)
        {
            string dir = Environment.GetEnvironmentVariable(variable);
            if (string.IsNullOrEmpty(dir))
                throw new InvalidOperationException(variable + " is not set: run `. " + setup + "` first");
            return Path.Combine(dir, file);
        }

        private static string Real(string file) => Model("SAM2_REAL_MODELS", "tools/setup/setup-real.sh", file);

        private static string EdgeTam(string file) => Model("SAM2_EDGETAM_MODELS", "tools/setup/setup-edgetam.sh", file);

        [Test]
        private static void RealExportsEncodeClickAndBatchWithDefaultOptions()
        {
            PnmImage image = Pnm.Read(Path.Combine(Fixture.TestData, "demo.ppm"), 3);
            string[][] pairs =
            {
                new[] { Real("sam2.1_hiera_tiny.encoder.onnx"), Real("sam2.1_hiera_tiny.decoder.onnx") },
                new[] { Real("sam2.1_hiera_tiny_image_encoder.onnx"), Real("sam2.1_hiera_tiny_image_decoder.onnx") },
                new[] { EdgeTam("edgetam_image_encoder.onnx"), EdgeTam("edgetam_image_decoder.onnx") },
            };
            foreach (string[] pair in pairs)
            {
                using (var encoder = new Sam2Encoder(pair[0]))
                using (var predictor = new Sam2Predictor(encoder, pair[1]))
                using (Sam2Embedding embedding = encoder.Encode(image.Pixels, image.Width, image.Height, PixelFormat.Rgb))
                {
                    Sam2Prompt[] prompts =
                    {
                        Sam2Prompt.FromPoint(580, 190),
                        Sam2Prompt.FromBox(52, 82, 327, 257),
                        Sam2Prompt.FromPoint(160, 440).AddPoint(630, 460, PointLabel.Negative),
                    };
                    using (Sam2Masks batch = predictor.Predict(embedding, prompts))
                    {
                        Assert.Equal(3, batch.Objects, pair[1] + " objects");
                        for (int i = 0; i < prompts.Length; i++)
                        {
                            using (Sam2Masks one = predictor.Predict(embedding, new[] { prompts[i] }))
                            {
                                double iou = Fixture.IoU(batch.GetMask(i), one.GetMask(0));
                                Assert.AtLeast(0.999, iou, pair[1] + " batch vs single, prompt " + i);
                                Assert.True(Math.Abs(batch.Score(i) - one.Score(0)) < 1e-4f, pair[1] + " score " + i);
                            }
                            long area = batch.Area(i);
                            Assert.True(area > 0 && area < (long)image.Width * image.Height, pair[1] + " area " + area);
                        }
                        Assert.True(Fixture.IoU(batch.GetMask(0), batch.GetMask(1)) < 0.99, pair[1] + ": prompts give different masks");
                    }
                }
            }
        }
    }
}
