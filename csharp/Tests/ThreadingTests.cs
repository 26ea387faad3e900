using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading;

namespace Sam2.Tests
{
    /// <summary>Handles are thread-safe: many threads on one predictor and one embedding.</summary>
    internal static class ThreadingTests
    {
        private const int Threads = 8;
        private const int Iterations = 6;

        [Test]
        private static void EightThreadsPredictOnOnePredictorAndOneEmbedding()
        {
            List<Shape> shapes = Fixture.ShapeList();
            Sam2Prompt[] prompts = shapes.Select(s => Sam2Prompt.FromPoint(s.ClickX, s.ClickY)).ToArray();
            // Single-threaded references.
            var expectedMasks = new byte[prompts.Length][];
            var expectedScores = new float[prompts.Length];
            for (int i = 0; i < prompts.Length; i++)
                using (Sam2Masks masks = Fixture.Predictor.Predict(Fixture.Shapes, prompts[i]))
                {
                    expectedMasks[i] = masks.GetMask(0);
                    expectedScores[i] = masks.Score(0);
                }

            int predictions = 0;
            OnThreads(Threads, t =>
            {
                for (int i = 0; i < Iterations; i++)
                {
                    int k = (t + i) % prompts.Length;
                    using (Sam2Masks masks = Fixture.Predictor.Predict(Fixture.Shapes, prompts[k]))
                        Assert.True(masks.GetMask(0).SequenceEqual(expectedMasks[k]) && masks.Score(0) == expectedScores[k],
                            "iteration " + i + ": " + shapes[k].Name + " differs");
                    Interlocked.Increment(ref predictions);
                }
            });
            Assert.Equal(Threads * Iterations, predictions, "predictions made");
        }

        [Test]
        private static void ErrorsAreReportedToTheThreadThatFailed()
        {
            // The native message is per thread: concurrent failures of different kinds never see
            // each other's messages.
            OnThreads(Threads, t =>
            {
                for (int i = 0; i < 200; i++)
                {
                    if (t % 2 == 0)
                    {
                        var e = Assert.Throws<ArgumentException>(() => Fixture.Predictor.Predict(Fixture.Shapes, Sam2Prompt.FromPoint(9999, 1)), "outside");
                        Assert.Equal("points", e.ParamName, "ParamName on thread " + t);
                    }
                    else
                    {
                        var e = Assert.Throws<ArgumentException>(() => Fixture.Predictor.Predict(Fixture.Shapes, Sam2Prompt.FromBox(50, 50, 10, 10)), "reversed box");
                        Assert.Equal("box", e.ParamName, "ParamName on thread " + t);
                    }
                }
            });
        }

        [Test]
        private static void DisposingAPredictorWhileOthersPredictIsSafe()
        {
            // Calls already inside the library complete (the SafeHandle defers the native free
            // until they return); every call after Dispose throws ObjectDisposedException; nothing
            // crashes.
            var predictor = new Sam2Predictor(null, Fixture.DecoderPath);
            var failures = new List<string>();
            int completed = 0, refused = 0;
            var deadline = DateTime.UtcNow.AddSeconds(20);
            using (var started = new CountdownEvent(Threads))
            {
                var threads = Enumerable.Range(0, Threads).Select(t => new Thread(() =>
                {
                    started.Signal();
                    while (DateTime.UtcNow < deadline)
                    {
                        try
                        {
                            using (Sam2Masks masks = predictor.Predict(Fixture.Shapes, Sam2Prompt.FromPoint(100, 112)))
                                masks.GetMask(0);
                            Interlocked.Increment(ref completed);
                        }
                        catch (ObjectDisposedException)
                        {
                            Interlocked.Increment(ref refused);
                            return;
                        }
                        catch (Exception e)
                        {
                            lock (failures) failures.Add(e.GetType().Name + ": " + e.Message);
                            return;
                        }
                    }
                    lock (failures) failures.Add("a thread was never refused");
                })).ToList();
                threads.ForEach(th => th.Start());
                started.Wait();
                Thread.Sleep(50);
                predictor.Dispose();
                threads.ForEach(th => th.Join());
            }
            Assert.True(failures.Count == 0, string.Join("; ", failures));
            Assert.Equal(Threads, refused, "threads refused after Dispose");
        }

        [Test]
        private static void FourThreadsEncodeOnOneEncoder()
        {
            PnmImage image = Fixture.ShapesImage;
            byte[] expected;
            using (Sam2Masks masks = Fixture.Predictor.Predict(Fixture.Shapes, Sam2Prompt.FromPoint(430, 118)))
                expected = masks.GetMask(0);
            OnThreads(4, t =>
            {
                using (Sam2Embedding embedding = Fixture.Encoder.Encode(image.Pixels, image.Width, image.Height, PixelFormat.Rgb))
                using (Sam2Masks masks = Fixture.Predictor.Predict(embedding, Sam2Prompt.FromPoint(430, 118)))
                    Assert.True(masks.GetMask(0).SequenceEqual(expected), "a different mask");
            });
        }

        /// <summary>
        /// Runs <paramref name="body"/>(thread index) on <paramref name="count"/> threads released
        /// together, and fails with what every thread that threw threw.
        /// </summary>
        private static void OnThreads(int count, Action<int> body)
        {
            var failures = new List<string>();
            using (var start = new Barrier(count))
            {
                var threads = Enumerable.Range(0, count).Select(t => new Thread(() =>
                {
                    try
                    {
                        start.SignalAndWait();
                        body(t);
                    }
                    catch (Exception e)
                    {
                        lock (failures) failures.Add("thread " + t + ": " + e.GetType().Name + ": " + e.Message);
                    }
                })).ToList();
                threads.ForEach(th => th.Start());
                threads.ForEach(th => th.Join());
            }
            Assert.True(failures.Count == 0, string.Join("; ", failures));
        }
    }
}
