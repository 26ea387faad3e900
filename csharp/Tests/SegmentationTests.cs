using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;

namespace Sam2.Tests
{
    /// <summary>The masks are right: geometry against ground truth, and the file round trip.</summary>
    internal static class SegmentationTests
    {
        [Test]
        private static void AClickInsideEachShapeGivesThatShape()
        {
            List<Shape> shapes = Fixture.ShapeList();
            Assert.Equal(5, shapes.Count, "shapes in shapes.json");
            Sam2Prompt[] prompts = shapes.Select(s => Sam2Prompt.FromPoint(s.ClickX, s.ClickY)).ToArray();
            using (Sam2Masks masks = Fixture.Predictor.Predict(Fixture.Shapes, prompts))
            {
                Assert.Equal(shapes.Count, masks.Objects, "objects");
                Assert.Equal(1, masks.Candidates, "candidates without multimask");
                Assert.Equal(512, masks.Width, "mask width");
                Assert.Equal(384, masks.Height, "mask height");
                for (int i = 0; i < shapes.Count; i++)
                {
                    Shape shape = shapes[i];
                    byte[] truth = Fixture.GroundTruth(shape);
                    if (shape.TwinOf != null)
                    {
                        // The twins look alike: a plain click selects both.
                        truth = Fixture.Union(truth, Fixture.GroundTruth(shapes.First(s => s.Name == shape.TwinOf)));
                    }
                    byte[] mask = masks.GetMask(i);
                    Assert.Equal(512 * 384, mask.Length, shape.Name + " mask length");
                    double iou = Fixture.IoU(mask, truth);
                    Assert.AtLeast(0.9, iou, shape.Name + " IoU");
                    Assert.Equal(mask.LongCount(b => b != 0), masks.Area(i), shape.Name + " area vs the mask");
                    Assert.True(masks.Score(i) > 0.5f, shape.Name + " score " + masks.Score(i));
                    if (shape.TwinOf == null)
                    {
                        MaskBox box = masks.Box(i);
                        Assert.True(Math.Abs(box.XMin - shape.BBox[0]) <= 3 && Math.Abs(box.YMin - shape.BBox[1]) <= 3 &&
                                    Math.Abs(box.XMax - shape.BBox[2]) <= 3 && Math.Abs(box.YMax - shape.BBox[3]) <= 3,
                            shape.Name + " box " + box + " vs [" + string.Join(", ", shape.BBox) + "]");
                    }
                }
            }
        }

        [Test]
        private static void ABoxSelectsOneTwinAndANegativeClickExcludesTheOther()
        {
            List<Shape> shapes = Fixture.ShapeList();
            Shape left = shapes.First(s => s.Name == "twin_left");
            Shape right = shapes.First(s => s.Name == "twin_right");
            int[] b = left.BBox;
            var box = Sam2Prompt.FromBox(b[0] - 4, b[1] - 4, b[2] + 4, b[3] + 4);
            var negative = Sam2Prompt.FromPoint(left.ClickX, left.ClickY).AddPoint(right.ClickX, right.ClickY, PointLabel.Negative);
            using (Sam2Masks masks = Fixture.Predictor.Predict(Fixture.Shapes, box, negative))
            {
                byte[] truth = Fixture.GroundTruth(left);
                Assert.AtLeast(0.9, Fixture.IoU(masks.GetMask(0), truth), "box around the left twin");
                Assert.AtLeast(0.9, Fixture.IoU(masks.GetMask(1), truth), "left click + negative right click");
            }
        }

        [Test]
        private static void MultimaskGivesEveryCandidateAndLowResRefines()
        {
            Shape disc = Fixture.ShapeList().First(s => s.Name == "red_disc");
            using (Sam2Masks masks = Fixture.Predictor.Predict(Fixture.Shapes, new[] { Sam2Prompt.FromPoint(disc.ClickX, disc.ClickY) }, true))
            {
                Assert.Equal(1, masks.Objects, "objects");
                Assert.Equal(3, masks.Candidates, "candidates of contract A");
                Assert.Equal(3, masks.Count, "count");
                int side;
                float[] lowRes = masks.GetLowRes(masks.IndexOf(0, 0), out side);
                Assert.Equal(256, side, "low-res side");
                Assert.Equal(side * side, lowRes.Length, "low-res length");

                var refine = Sam2Prompt.FromPoint(disc.ClickX, disc.ClickY);
                refine.MaskInput = lowRes;
                using (Sam2Masks refined = Fixture.Predictor.Predict(Fixture.Shapes, refine))
                    Assert.AtLeast(0.9, Fixture.IoU(refined.GetMask(0), Fixture.GroundTruth(disc)), "refined disc IoU");
            }
        }

        [Test]
        private static void PixelFormatsAndStridesDescribeTheSameImage()
        {
            PnmImage rgb = Fixture.ShapesImage;
            int w = rgb.Width, h = rgb.Height;
            // BGRA with 16 bytes of padding per row.
            int stride = w * 4 + 16;
            var bgra = new byte[stride * h];
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w; x++)
                {
                    int s = (y * w + x) * 3, d = y * stride + x * 4;
                    bgra[d] = rgb.Pixels[s + 2];
                    bgra[d + 1] = rgb.Pixels[s + 1];
                    bgra[d + 2] = rgb.Pixels[s];
                    bgra[d + 3] = 255;
                }
            Shape rect = Fixture.ShapeList().First(s => s.Name == "green_rect");
            using (Sam2Embedding embedding = Fixture.Encoder.Encode(bgra, w, h, stride, PixelFormat.Bgra))
            using (Sam2Masks masks = Fixture.Predictor.Predict(embedding, Sam2Prompt.FromPoint(rect.ClickX, rect.ClickY)))
                Assert.AtLeast(0.9, Fixture.IoU(masks.GetMask(0), Fixture.GroundTruth(rect)), "green_rect from BGRA with padding");
        }

        [Test]
        private static void PixelsInUnmanagedMemoryEncodeLikeAnArray()
        {
            PnmImage image = Fixture.ShapesImage;
            IntPtr buffer = System.Runtime.InteropServices.Marshal.AllocHGlobal(image.Pixels.Length);
            try
            {
                System.Runtime.InteropServices.Marshal.Copy(image.Pixels, 0, buffer, image.Pixels.Length);
                var options = new Sam2EncoderOptions { OutputTarget = OutputTarget.Host, IntraThreads = 1 };
                using (var encoder = new Sam2Encoder(Fixture.EncoderPath, options))
                using (Sam2Embedding embedding = encoder.Encode(buffer, image.Pixels.Length, image.Width, image.Height, 0, PixelFormat.Rgb))
                using (Sam2Masks expected = Fixture.Predictor.Predict(Fixture.Shapes, Sam2Prompt.FromPoint(258, 93)))
                using (Sam2Masks actual = Fixture.Predictor.Predict(embedding, Sam2Prompt.FromPoint(258, 93)))
                    AssertSameMasks(expected, actual, "unmanaged pixels");
                var e = Assert.Throws<ArgumentException>(() => Fixture.Encoder.Encode(buffer, 100, image.Width, image.Height, 0, PixelFormat.Rgb), "a length too short");
                Assert.Equal("pixels", e.ParamName, "ParamName");
            }
            finally
            {
                System.Runtime.InteropServices.Marshal.FreeHGlobal(buffer);
            }
        }

        [Test]
        private static void ASavedAndLoadedEmbeddingPredictsIdenticalMasks()
        {
            // A non-ASCII path also checks the UTF-8 marshalling of strings.
            string file = Path.Combine(Fixture.Scratch, "formes-été-日本.sam2emb");
            Fixture.Shapes.Save(file);
            Assert.True(File.Exists(file), "the file exists under its UTF-8 name");
            Sam2Prompt[] prompts = Fixture.ShapeList().Select(s => Sam2Prompt.FromPoint(s.ClickX, s.ClickY)).ToArray();
            foreach (Placement placement in new[] { Placement.Host, Placement.Device })
            {
                using (Sam2Embedding loaded = Sam2Embedding.Load(file, Fixture.Predictor, placement))
                {
                    Assert.Equal(Fixture.Shapes.Fingerprint, loaded.Fingerprint, "fingerprint");
                    Assert.Equal(512, loaded.ImageWidth, "image width");
                    Assert.Equal(384, loaded.ImageHeight, "image height");
                    Assert.Equal(true, loaded.IsSerializable, "a loaded CPU embedding is serializable");
                    Assert.Equal("Cpu", loaded.AllocatorName, "allocator");
                    using (Sam2Masks expected = Fixture.Predictor.Predict(Fixture.Shapes, prompts, true))
                    using (Sam2Masks actual = Fixture.Predictor.Predict(loaded, prompts, true))
                        AssertSameMasks(expected, actual, "loaded (" + placement + ")");
                }
            }
            using (Sam2Embedding anyModel = Sam2Embedding.Load(file))
                Assert.Equal(Fixture.Shapes.Fingerprint, anyModel.Fingerprint, "loaded without a predictor");
        }

        [Test]
        private static void ToHostOfAHostEmbeddingPredictsIdenticalMasks()
        {
            using (Sam2Embedding copy = Fixture.Shapes.ToHost())
            using (Sam2Masks expected = Fixture.Predictor.Predict(Fixture.Shapes, Sam2Prompt.FromPoint(430, 118)))
            using (Sam2Masks actual = Fixture.Predictor.Predict(copy, Sam2Prompt.FromPoint(430, 118)))
            {
                Assert.Equal(true, copy.IsSerializable, "serializable");
                AssertSameMasks(expected, actual, "host copy");
            }
        }

        internal static void AssertSameMasks(Sam2Masks expected, Sam2Masks actual, string what)
        {
            Assert.Equal(expected.Count, actual.Count, what + ": count");
            for (int i = 0; i < expected.Count; i++)
            {
                Assert.SameBytes(expected.GetMask(i), actual.GetMask(i), what + ": mask " + i);
                Assert.Equal(expected.Score(i), actual.Score(i), what + ": score " + i);
                Assert.Equal(expected.Box(i).ToString(), actual.Box(i).ToString(), what + ": box " + i);
            }
        }
    }
}
