using System;
using System.Collections.Generic;
using System.Linq;

namespace Sam2.Tests
{
    /// <summary>
    /// Segment everything through the wrapper: with SAM2's default thresholds on a 16 × 16 grid,
    /// every shape of shapes.ppm is found once (IoU ≥ 0.9, the twins as one object, no second mask
    /// of IoU ≥ 0.5 with it); the info agrees with the pixels and the run lengths; bad options
    /// throw ArgumentException naming the field.
    /// </summary>
    internal static class EverythingTests
    {
        [Test]
        private static void EveryShapeIsFoundOnce()
        {
            PnmImage image = Fixture.ShapesImage;
            var options = new Sam2EverythingOptions { PointsPerSide = 16 };
            Assert.Equal(0.8f, new Sam2EverythingOptions().PredIouThresh, "SAM2's default pred_iou_thresh");
            Assert.Equal(32, new Sam2EverythingOptions().PointsPerSide, "SAM2's default points_per_side");
            using (Sam2Everything all = Sam2Everything.Segment(Fixture.Encoder, Fixture.Predictor, image.Pixels,
                image.Width, image.Height, 0, PixelFormat.Rgb, options))
            {
                Assert.Equal(512, all.Width, "width");
                Assert.Equal(384, all.Height, "height");
                Assert.Equal(5, all.Count, "the four objects and the background");
                var masks = Enumerable.Range(0, all.Count).Select(all.GetMask).ToList();
                for (int i = 0; i < all.Count; i++)
                {
                    Sam2EverythingMask info = all.Info(i);
                    Assert.Equal(masks[i].LongCount(b => b != 0), info.Area, "area " + i);
                    Assert.True(info.PredictedIou > 0.8f && info.StabilityScore >= 0.95f, "filters " + i);
                    Assert.Equal(512, info.CropX1, "crop box");
                    uint[] runs = all.GetRunLengths(i);
                    Assert.Equal(512L * 384, runs.Sum(r => (long)r), "run lengths cover the image");
                    Assert.Equal(info.Area, runs.Where((r, k) => k % 2 == 1).Sum(r => (long)r), "1-runs add up to the area");
                }
                List<Shape> shapes = Fixture.ShapeList();
                foreach (Shape shape in shapes.Where(s => s.Name != "twin_right"))
                {
                    byte[] truth = Fixture.GroundTruth(shape);
                    if (shape.TwinOf != null)
                        truth = Fixture.Union(truth, Fixture.GroundTruth(shapes.First(s => s.Name == shape.TwinOf)));
                    double[] ious = masks.Select(m => Fixture.IoU(m, truth)).ToArray();
                    Assert.Equal(1, ious.Count(v => v >= 0.9), shape.Name + " found once (best IoU " + ious.Max() + ")");
                    Assert.Equal(1, ious.Count(v => v >= 0.5), shape.Name + " without duplicates");
                }
                using (Sam2Everything again = Sam2Everything.Segment(Fixture.Predictor, Fixture.Shapes, options))
                {
                    Assert.Equal(all.Count, again.Count, "the embedding gives what the image gives");
                    for (int i = 0; i < all.Count; i++)
                        Assert.SameBytes(masks[i], again.GetMask(i), "mask " + i);
                }
                Assert.Throws<ArgumentOutOfRangeException>(() => all.Info(all.Count), "index out of range");
            }
        }

        [Test]
        private static void ProgressIsReportedAndFalseCancels()
        {
            var seen = new List<long[]>();
            var options = new Sam2EverythingOptions
            {
                PointsPerSide = 4,
                PointsPerBatch = 4,
                Progress = (done, total) => { seen.Add(new[] { done, total }); return true; },
            };
            Assert.Equal(1048576L, options.MaxClicks, "default max_clicks");
            Assert.Equal(4L << 30, options.MaxMemoryBytes, "default max_memory_bytes");
            using (Sam2Everything.Segment(Fixture.Predictor, Fixture.Shapes, options)) { }
            Assert.Equal(6, seen.Count, "a report before the batches, after each of 4, at the end");
            Assert.Equal(16L, seen[seen.Count - 1][0], "clicks done");
            Assert.Equal(16L, seen[seen.Count - 1][1], "clicks in all");
            options.Progress = (done, total) => done < 8;
            var e = Assert.Throws<OperationCanceledException>(
                () => Sam2Everything.Segment(Fixture.Predictor, Fixture.Shapes, options), "a cancel");
            Assert.Contains("after 8 of 16 clicks", e.Message, "message");
            options.Progress = (done, total) => { throw new InvalidTimeZoneException("from the callback"); };
            Assert.Throws<InvalidTimeZoneException>(
                () => Sam2Everything.Segment(Fixture.Predictor, Fixture.Shapes, options), "the callback's exception");
            options.Progress = null;
            options.MaxClicks = 15;
            var budget = Assert.Throws<ArgumentException>(
                () => Sam2Everything.Segment(Fixture.Predictor, Fixture.Shapes, options), "over the work budget");
            Assert.Contains("16 clicks", budget.Message, "message");
        }

        [Test]
        private static void ANativePanicIsASam2ExceptionWithItsMessage()
        {
            foreach (bool onWorker in new[] { false, true })
            {
                var e = Assert.Throws<Sam2Exception>(() => Sam2TestSupport.Panic("boom from .NET", onWorker), "a panic");
                Assert.Equal(Sam2Status.Panic, e.Status, "status");
                Assert.Contains("boom from .NET", e.Message, "message");
            }
        }

        [Test]
        private static void BadOptionsNameTheField()
        {
            var e = Assert.Throws<ArgumentException>(
                () => Sam2Everything.Segment(Fixture.Predictor, Fixture.Shapes, new Sam2EverythingOptions { PointsPerBatch = 0 }),
                "points_per_batch 0");
            Assert.Contains("points_per_batch", e.Message, "message");
            e = Assert.Throws<ArgumentException>(
                () => Sam2Everything.Segment(Fixture.Predictor, Fixture.Shapes, new Sam2EverythingOptions { CropNLayers = 1 }),
                "crops on an embedding");
            Assert.Contains("crop_n_layers", e.Message, "message");
            Assert.Throws<ArgumentNullException>(() => Sam2Everything.Segment(null, Fixture.Shapes), "null predictor");
        }
    }
}
