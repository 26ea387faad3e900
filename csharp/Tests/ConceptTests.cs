using System;
using System.Collections.Generic;
using System.Linq;

namespace Sam2.Tests
{
    /// <summary>
    /// SAM 3 through the wrapper, on the reduced export tools/setup/setup-sam3.sh makes
    /// (SAM2_SAM3_MODELS, CLIP's vocabulary at SAM2_SAM3_VOCAB; unset, every test fails saying so)
    /// and testdata/demo.ppm: a phrase and an exemplar box in one call give two concepts; threshold
    /// 0 keeps all 200 queries; MaxInstances caps; each mask covers its area; instances come best
    /// first per concept; a SAM2 embedding is refused as another model's; bad input throws
    /// ArgumentException naming the argument; disposing twice is harmless. The reduced export's
    /// weights are random, so few or no instances pass SAM 3's 0.5: counts are asserted at
    /// threshold 0 only. Each concept is one decoder run (~2 s): six in all.
    /// </summary>
    internal static class ConceptTests
    {
        private const int Queries = 200;
        private static readonly Sam2Exemplar Star = new Sam2Exemplar(52, 82, 327, 257);

        [Test]
        private static void APhraseAndAnExemplarBoxInOneCallGiveTwoConcepts()
        {
            Sam2ConceptModel model = Fixture.ConceptModel;
            Assert.Equal(8, model.MaxExemplars, "the decoder's box slots");
            Sam2Embedding demo = Fixture.ConceptDemo;
            Assert.Equal(800, demo.ImageWidth, "embedding width");
            Assert.True(demo.IsSerializable, "OutputTarget.Host gives a host embedding");
            var concepts = new[] { new Sam2Concept("purple star"), Sam2Concept.FromExemplars(Star) };
            using (Sam2ConceptResult result = model.Segment(demo, concepts))
            {
                Assert.Equal(800, result.Width, "width");
                Assert.Equal(600, result.Height, "height");
                Assert.True(result.HasMasks, "masks by default");
                Assert.Equal(2, result.Concepts.Count, "one summary per concept");
                foreach (Sam2ConceptSummary summary in result.Concepts)
                {
                    Assert.True(summary.Presence >= 0f && summary.Presence <= 1f, "presence " + summary.Presence + " in [0, 1]");
                    Assert.True(!summary.Truncated, "a two-word phrase is not cut");
                }
                CheckInstances(result, 0.5f);
                Assert.Throws<ArgumentOutOfRangeException>(() => result.GetMask(result.Instances.Count), "an index past the instances");
            }
        }

        [Test]
        private static void OneEncodeServesTheClicksThroughAPredictorOfTheSharedEncoder()
        {
            // The set-up's export has SAM 3's click head: its decoder, opened for the concept
            // model's encoder, segments a click on the concept embedding.
            string decoder = System.IO.Path.Combine(Fixture.Sam3Models, "sam3_interactive_decoder.onnx");
            using (Sam2Encoder encoder = Fixture.ConceptModel.OpenEncoder())
            using (var predictor = new Sam2Predictor(encoder, decoder))
            using (Sam2Masks masks = predictor.Predict(Fixture.ConceptDemo, Sam2Prompt.FromPoint(580, 190)))
            {
                Assert.Equal(1, masks.Count, "one mask for one click");
                Assert.Equal(800, masks.Width, "the image's width");
            }
        }

        [Test]
        private static void AtThresholdZeroEveryQueryIsAnInstance()
        {
            var defaults = new Sam2ConceptSegmentOptions();
            Assert.Equal(0.5f, defaults.ScoreThreshold, "SAM 3's threshold");
            Assert.Equal(Queries, defaults.MaxInstances, "default cap: every query");
            Assert.Equal(Suppression.None, defaults.Nms, "no suppression by default");
            Assert.True(defaults.Masks, "masks by default");
            var options = new Sam2ConceptSegmentOptions { ScoreThreshold = 0f, Masks = false };
            using (Sam2ConceptResult result = Fixture.ConceptModel.Segment(Fixture.ConceptDemo,
                new[] { new Sam2Concept("shape") }, options))
            {
                Assert.Equal(Queries, result.Instances.Count, "instances");
                Assert.Equal(Queries, result.Concepts[0].InstanceCount, "the summary's count");
                Assert.Equal(Queries, result.Instances.Select(i => i.Query).Distinct().Count(), "each query once");
                Assert.True(!result.HasMasks, "HasMasks");
                Assert.True(result.Instances.All(i => i.Area == 0), "no areas without masks");
                CheckInstances(result, 0f);
                var e = Assert.Throws<ArgumentException>(() => result.GetMask(0), "a mask of a result without masks");
                Assert.Contains("without masks", e.Message, "message");
            }
        }

        [Test]
        private static void MaxInstancesCapsEachConceptAndEachMaskCoversItsArea()
        {
            var options = new Sam2ConceptSegmentOptions { ScoreThreshold = 0f, MaxInstances = 3 };
            var concepts = new List<Sam2Concept>
            {
                new Sam2Concept("purple star"),
                Sam2Concept.FromExemplars(Star, new Sam2Exemplar(500, 100, 700, 300, positive: false)),
            };
            using (Sam2ConceptResult result = Fixture.ConceptModel.Segment(Fixture.ConceptDemo, concepts, options))
            {
                Assert.Equal(6, result.Instances.Count, "three per concept");
                Assert.Equal(3, result.Concepts[0].InstanceCount, "concept 0");
                Assert.Equal(3, result.Concepts[1].InstanceCount, "concept 1");
                CheckInstances(result, 0f);
                var buffer = new byte[result.Width * result.Height];
                for (int i = 0; i < result.Instances.Count; i++)
                {
                    byte[] mask = result.GetMask(i);
                    result.GetMask(i, buffer);
                    Assert.SameBytes(mask, buffer, "GetMask into a buffer, instance " + i);
                }
                var small = Assert.Throws<ArgumentException>(() => result.GetMask(0, new byte[16]), "a buffer too small");
                Assert.Equal("buffer", small.ParamName, "ParamName");
            }
        }

        [Test]
        private static void ASam2EmbeddingIsRefusedAsAnotherModels()
        {
            var e = Assert.Throws<Sam2Exception>(() => Fixture.ConceptModel.Segment(Fixture.Shapes, "purple star"), "a tiny_a embedding");
            Assert.Equal(Sam2Status.ModelMismatch, e.Status, "status");
            Assert.Contains("SAM2", e.Message, "the message says what made it");
        }

        [Test]
        private static void BadInputThrowsArgumentExceptionNamingTheArgument()
        {
            Sam2ConceptModel model = Fixture.ConceptModel;
            Sam2Embedding demo = Fixture.ConceptDemo;
            Refused("concepts", "at least one", () => model.Segment(demo, new Sam2Concept[0]), "no concept");
            Refused("phrases", "at least one", () => model.Segment(demo), "no phrase");
            Refused("concept", "neither a phrase nor an exemplar box", () => model.Segment(demo, new[] { new Sam2Concept() }), "an empty concept");
            Refused("exemplars", "finite", () => model.Segment(demo, new[] { new Sam2Concept("cat").AddExemplar(float.NaN, 0, 10, 10) }), "a NaN box");
            Refused("exemplars", "inverted", () => model.Segment(demo, new[] { new Sam2Concept("cat").AddExemplar(20, 20, 10, 30) }), "an inverted box");
            Refused("exemplars", "at most 8", () => model.Segment(demo, new[] { new Sam2Concept("cat", Enumerable.Repeat(Star, 9).ToArray()) }), "9 boxes");
            Refused("score_threshold", "[0, 1]", () => model.Segment(demo, new[] { new Sam2Concept("cat") },
                new Sam2ConceptSegmentOptions { ScoreThreshold = float.NaN }), "ScoreThreshold NaN");
            Refused("concepts", "NUL", () => model.Segment(demo, new[] { new Sam2Concept("c\0at") }), "a NUL in a phrase");
            var missing = Assert.Throws<ArgumentNullException>(() => model.Segment(null, "cat"), "no embedding");
            Assert.Equal("embedding", missing.ParamName, "ParamName");
            missing = Assert.Throws<ArgumentNullException>(() => model.Segment(demo, new Sam2Concept[] { null }), "a null concept");
            Assert.Equal("concepts", missing.ParamName, "ParamName");
            Assert.Throws<ArgumentOutOfRangeException>(() => new Sam2ConceptSegmentOptions { MaxInstances = -1 }, "a negative cap");
        }

        [Test]
        private static void DisposingTwiceIsHarmless()
        {
            var model = new Sam2ConceptModel(Fixture.Sam3Models, new Sam2ConceptModelOptions { VocabularyPath = Fixture.Sam3Vocabulary });
            Sam2ConceptResult result = model.Segment(Fixture.ConceptDemo, "purple star");
            Assert.Equal(1, result.Concepts.Count, "one phrase, one concept");
            model.Dispose();
            model.Dispose();
            Assert.Throws<ObjectDisposedException>(() => { int unused = model.MaxExemplars; }, "the model after Dispose");
            Assert.Throws<ObjectDisposedException>(() => model.Segment(Fixture.ConceptDemo, "cat"), "Segment after Dispose");
            Assert.Equal(1, result.Concepts.Count, "a result outlives its model");
            result.Dispose();
            result.Dispose();
            Assert.Throws<ObjectDisposedException>(() => result.GetMask(0), "a mask after Dispose");
        }

        /// <summary>The result's conventions: concepts in order, each instance above the threshold
        /// and the best first within its concept, summaries that count them, masks of their area.</summary>
        private static void CheckInstances(Sam2ConceptResult result, float threshold)
        {
            var perConcept = new int[result.Concepts.Count];
            int lastConcept = 0;
            float lastScore = float.PositiveInfinity;
            for (int i = 0; i < result.Instances.Count; i++)
            {
                Sam2ConceptInstance instance = result.Instances[i];
                Assert.True(instance.Concept >= lastConcept && instance.Concept < perConcept.Length, "instance " + i + ": concepts in order");
                if (instance.Concept != lastConcept)
                    lastScore = float.PositiveInfinity;
                Assert.True(instance.Score > threshold && instance.Score <= lastScore, "instance " + i + ": score " + instance.Score + " above " + threshold + ", best first");
                Assert.True(instance.Query >= 0 && instance.Query < Queries, "instance " + i + ": query");
                Sam2Box box = instance.Box;
                Assert.True(new[] { box.X1, box.Y1, box.X2, box.Y2 }.All(v => !float.IsNaN(v) && !float.IsInfinity(v)), "instance " + i + ": finite box");
                Assert.True(box.X1 <= box.X2 && box.Y1 <= box.Y2, "instance " + i + ": box corners in order");
                if (result.HasMasks)
                {
                    byte[] mask = result.GetMask(i);
                    Assert.Equal(result.Width * result.Height, mask.Length, "instance " + i + ": mask size");
                    Assert.Equal(instance.Area, mask.LongCount(b => b != 0), "instance " + i + ": mask area");
                }
                lastConcept = instance.Concept;
                lastScore = instance.Score;
                perConcept[instance.Concept]++;
            }
            for (int k = 0; k < perConcept.Length; k++)
                Assert.Equal(perConcept[k], result.Concepts[k].InstanceCount, "concept " + k + ": instances counted");
        }

        private static void Refused(string paramName, string reason, Action call, string what)
        {
            var e = Assert.Throws<ArgumentException>(call, what);
            Assert.Equal(paramName, e.ParamName, what + ": ParamName");
            Assert.Contains(reason, e.Message, what + ": message");
        }
    }
}
