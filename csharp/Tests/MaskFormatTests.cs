using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;

namespace Sam2.Tests
{
    /// <summary>The mask formats (caller buffers, crops, COCO RLE, polygons) and model pairs by name.</summary>
    internal static class MaskFormatTests
    {
        private static Sam2Masks PredictShapes()
        {
            Sam2Prompt[] prompts = Fixture.ShapeList().Select(s => Sam2Prompt.FromPoint(s.ClickX, s.ClickY)).ToArray();
            return Fixture.Predictor.Predict(Fixture.Shapes, prompts);
        }

        [Test]
        private static void OneBufferServesEveryMaskAndCropsMatchTheBox()
        {
            using (Sam2Masks masks = PredictShapes())
            {
                var buffer = new byte[masks.Width * masks.Height];
                var crop = new byte[masks.Width * masks.Height];
                for (int i = 0; i < masks.Count; i++)
                {
                    masks.GetMask(i, buffer);
                    Assert.SameBytes(masks.GetMask(i), buffer, "GetMask(" + i + ", buffer)");
                    MaskBox box;
                    int length = masks.GetCroppedMask(i, crop, out box);
                    Assert.Equal(masks.Box(i).ToString(), box.ToString(), "crop box " + i);
                    int w = box.XMax - box.XMin + 1;
                    Assert.Equal(w * (box.YMax - box.YMin + 1), length, "crop length " + i);
                    for (int y = box.YMin; y <= box.YMax; y++)
                        for (int x = box.XMin; x <= box.XMax; x++)
                            if (crop[(y - box.YMin) * w + x - box.XMin] != buffer[y * masks.Width + x])
                                throw new AssertionException("crop " + i + " differs at (" + x + ", " + y + ")");
                    MaskBox again;
                    Assert.SameBytes(crop.Take(length).ToArray(), masks.GetCroppedMask(i, out again), "GetCroppedMask(i, out box)");
                }
                Assert.Equal("buffer", Assert.Throws<ArgumentException>(() => masks.GetMask(0, new byte[10]), "small buffer").ParamName, "small buffer");
                MaskBox ignored;
                Assert.Equal("buffer", Assert.Throws<ArgumentException>(() => masks.GetCroppedMask(0, new byte[10], out ignored), "small crop").ParamName, "small crop");
            }
        }

        [Test]
        private static void RleAndPolygonsGiveTheMaskBack()
        {
            using (Sam2Masks masks = PredictShapes())
            {
                for (int i = 0; i < masks.Count; i++)
                {
                    byte[] mask = masks.GetMask(i);
                    uint[] counts = masks.GetRleCounts(i);
                    var decoded = new byte[mask.Length];
                    long at = 0;
                    for (int r = 0; r < counts.Length; r++)
                    {
                        for (long k = at; k < at + counts[r]; k++)
                            decoded[(k % masks.Height) * masks.Width + k / masks.Height] = (byte)(r % 2);
                        at += counts[r];
                    }
                    Assert.Equal((long)mask.Length, at, "RLE counts add up");
                    Assert.SameBytes(mask, decoded, "RLE counts of mask " + i);
                    string text = masks.GetRleString(i);
                    Assert.True(text.Length > 0 && text.Length < counts.Length * 6, "RLE string of mask " + i + ": " + text);

                    MaskPolygon[] polygons = masks.GetPolygons(i);
                    Assert.True(polygons.Length >= 1, "polygons of mask " + i);
                    byte[] back = Rasterize(polygons, masks.Width, masks.Height);
                    Assert.AtLeast(0.99, Fixture.IoU(mask, back), "polygons at tolerance 0 of mask " + i);
                    MaskPolygon[] simple = masks.GetPolygons(i, 1.5f);
                    Assert.True(simple.Sum(p => p.Outer.Length) < polygons.Sum(p => p.Outer.Length), "tolerance drops points");
                    Assert.AtLeast(0.9, Fixture.IoU(mask, Rasterize(simple, masks.Width, masks.Height)), "polygons at tolerance 1.5");
                }
                Assert.Equal("tolerance", Assert.Throws<ArgumentException>(() => masks.GetPolygons(0, -1f), "negative tolerance").ParamName, "negative tolerance");
            }
        }

        [Test]
        private static void ARingWithAnIslandGivesTwoComponentsAndOneHole()
        {
            const int w = 40, h = 30;
            var mask = new byte[w * h];
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w; x++)
                {
                    double r = Math.Sqrt((x + 0.5 - 20) * (x + 0.5 - 20) + (y + 0.5 - 15) * (y + 0.5 - 15));
                    mask[y * w + x] = (byte)((r < 13 && r >= 7) || r < 3 ? 1 : 0);
                }
            using (Sam2Masks masks = Sam2TestSupport.MasksFromBytes(mask, w, h))
            {
                MaskPolygon[] polygons = masks.GetPolygons(0);
                Assert.Equal(2, polygons.Length, "the ring and the island");
                Assert.Equal(1, polygons[0].Holes.Length, "the ring's hole");
                Assert.Equal(0, polygons[1].Holes.Length, "the island has none");
                Assert.SameBytes(mask, Rasterize(polygons, w, h), "polygons rasterised back");
                uint[] counts = masks.GetRleCounts(0);
                Assert.Equal((long)mask.Count(b => b != 0), counts.Where((c, i) => i % 2 == 1).Sum(c => (long)c), "RLE area");
            }
        }

        [Test]
        private static void ModelPairsAreFoundByName()
        {
            Sam2ModelPair pair = Sam2ModelPair.Find(Path.Combine(Fixture.Models, "tiny_a"));
            Assert.Equal(Fixture.EncoderPath, pair.EncoderPath, "tiny_a encoder");
            Assert.Equal(Fixture.Model("tiny_a_decoder"), pair.DecoderPath, "tiny_a decoder");
            var e = Assert.Throws<Sam2Exception>(() => Sam2ModelPair.Find(Fixture.Models), "a directory of several pairs");
            Assert.Contains("tiny_a_fp16", e.Message, "the candidates are listed");
        }

        /// <summary>Even-odd fill at pixel centres.</summary>
        private static byte[] Rasterize(MaskPolygon[] polygons, int width, int height)
        {
            var rings = new List<float[]>();
            foreach (MaskPolygon p in polygons)
            {
                rings.Add(p.Outer);
                rings.AddRange(p.Holes);
            }
            var mask = new byte[width * height];
            var xs = new List<double>();
            for (int y = 0; y < height; y++)
            {
                double cy = y + 0.5;
                xs.Clear();
                foreach (float[] ring in rings)
                {
                    int n = ring.Length / 2;
                    for (int i = 0; i < n; i++)
                    {
                        int j = (i + 1) % n;
                        double ax = ring[2 * i], ay = ring[2 * i + 1], bx = ring[2 * j], by = ring[2 * j + 1];
                        if ((ay <= cy) != (by <= cy))
                            xs.Add(ax + (cy - ay) / (by - ay) * (bx - ax));
                    }
                }
                xs.Sort();
                for (int k = 0; k + 1 < xs.Count; k += 2)
                    for (int x = (int)Math.Max(0, Math.Ceiling(xs[k] - 0.5)); x < Math.Min(width, Math.Ceiling(xs[k + 1] - 0.5)); x++)
                        mask[y * width + x] = 1;
            }
            return mask;
        }
    }
}
