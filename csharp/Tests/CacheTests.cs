using System;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;

namespace Sam2.Tests
{
    /// <summary>The embedding cache and its Task/CancellationToken surface.</summary>
    internal static class CacheTests
    {
        /// <summary>The shapes image with <paramref name="variant"/> pixels changed: another image to the cache.</summary>
        private static PnmImage Variant(int variant)
        {
            PnmImage image = Fixture.ShapesImage;
            for (int i = 0; i < variant; i++)
                image.Pixels[i * 3] ^= 0x5a;
            return image;
        }

        private static double RedDiscIoU(Sam2Embedding embedding)
        {
            using (Sam2Masks masks = Fixture.Predictor.Predict(embedding, Sam2Prompt.FromPoint(100, 112)))
                return Fixture.IoU(masks.GetMask(0), Fixture.GroundTruth(Fixture.ShapeList()[0]));
        }

        private static void WaitUntil(string what, Func<bool> condition)
        {
            var watch = Stopwatch.StartNew();
            while (!condition())
            {
                if (watch.Elapsed > TimeSpan.FromSeconds(30))
                    throw new AssertionException("timed out waiting for " + what);
                Thread.Sleep(2);
            }
        }

        [Test]
        private static void OpeningAnImageTwiceEncodesItOnce()
        {
            PnmImage image = Fixture.ShapesImage;
            using (var cache = new Sam2Cache())
            {
                CacheSource source;
                using (Sam2Embedding first = cache.Encode(Fixture.Encoder, image.Pixels, image.Width, image.Height, 0, PixelFormat.Rgb, out source))
                {
                    Assert.Equal(CacheSource.Miss, source, "first open");
                    Assert.AtLeast(0.9, RedDiscIoU(first), "red_disc on the first embedding");
                }
                using (Sam2Embedding again = cache.Encode(Fixture.Encoder, image.Pixels, image.Width, image.Height, 0, PixelFormat.Rgb, out source))
                {
                    Assert.Equal(CacheSource.Hit, source, "second open");
                    Assert.AtLeast(0.9, RedDiscIoU(again), "red_disc on the kept embedding");
                }
                Sam2CacheStats stats = cache.Stats;
                Assert.Equal(1L, stats.Misses, "Misses");
                Assert.Equal(1L, stats.Hits, "Hits");
                Assert.Equal(1L, stats.Entries, "Entries");
                Assert.True(stats.HostBytes > 0, "HostBytes counts the kept embedding");
                cache.Clear();
                Assert.Equal(0L, cache.Stats.Entries, "Entries after Clear");
            }
        }

        [Test]
        private static void EncodeAsyncHandsTheEmbeddingToATask()
        {
            PnmImage image = Variant(3);
            using (var cache = new Sam2Cache())
            {
                Task<Sam2Embedding> task = cache.EncodeAsync(Fixture.Encoder, image.Pixels, image.Width, image.Height, 0, PixelFormat.Rgb);
                Assert.True(task.Wait(TimeSpan.FromSeconds(60)), "the task completes");
                using (Sam2Embedding embedding = task.Result)
                {
                    Assert.Equal(image.Width, embedding.ImageWidth, "ImageWidth");
                    Assert.AtLeast(0.9, RedDiscIoU(embedding), "red_disc");
                }
                CacheSource source;
                using (cache.Encode(Fixture.Encoder, image.Pixels, image.Width, image.Height, 0, PixelFormat.Rgb, out source))
                    Assert.Equal(CacheSource.Hit, source, "the async result was kept");
            }
        }

        [Test]
        private static void PrefetchedImagesOpenFromTheCache()
        {
            using (var cache = new Sam2Cache())
            {
                for (int v = 1; v <= 3; v++)
                {
                    PnmImage image = Variant(v);
                    Assert.True(cache.Prefetch(Fixture.Encoder, image.Pixels, image.Width, image.Height, 0, PixelFormat.Rgb), "prefetch " + v);
                }
                WaitUntil("the prefetches", () => cache.Stats.Entries == 3);
                for (int v = 1; v <= 3; v++)
                {
                    PnmImage image = Variant(v);
                    CacheSource source;
                    using (cache.Encode(Fixture.Encoder, image.Pixels, image.Width, image.Height, 0, PixelFormat.Rgb, out source))
                        Assert.Equal(CacheSource.Hit, source, "open " + v);
                }
            }
        }

        [Test]
        private static void AFullQueueRefusesBackgroundRequestsOnly()
        {
            PnmImage image = Variant(5);
            using (var cache = new Sam2Cache(new Sam2CacheOptions { QueueLimit = 0 }))
            {
                Assert.True(!cache.Prefetch(Fixture.Encoder, image.Pixels, image.Width, image.Height, 0, PixelFormat.Rgb), "Prefetch says it was not taken");
                var e = Assert.Throws<Sam2Exception>(() => cache.EncodeInBackground(Fixture.Encoder, image.Pixels, image.Width, image.Height, 0, PixelFormat.Rgb, EncodePriority.Background), "EncodeInBackground");
                Assert.Equal(Sam2Status.QueueFull, e.Status, "Status");
                Assert.Contains("queue_limit", e.Message, "the message names the limit");
                Task<Sam2Embedding> background = cache.EncodeAsync(Fixture.Encoder, image.Pixels, image.Width, image.Height, 0, PixelFormat.Rgb, EncodePriority.Background);
                Assert.True(background.IsFaulted, "a background EncodeAsync fails in its task");
                Task<Sam2Embedding> foreground = cache.EncodeAsync(Fixture.Encoder, image.Pixels, image.Width, image.Height, 0, PixelFormat.Rgb);
                using (Sam2Embedding embedding = foreground.Result)
                    Assert.Equal(image.Height, embedding.ImageHeight, "a foreground request is never refused for a full queue");
            }
            Assert.Throws<ArgumentOutOfRangeException>(() => new Sam2CacheOptions { HostBudgetBytes = -1 }, "a negative budget");
            Assert.Throws<ArgumentNullException>(() => new Sam2Cache().Encode(null, image.Pixels, image.Width, image.Height, 0, PixelFormat.Rgb), "a null encoder");
        }

        /// <summary>The bench encoder takes about a second: long enough to cancel it in flight.</summary>
        [Test]
        private static void CancellingTheTokenStopsTheEncodeAndCancelsTheTask()
        {
            PnmImage image = Variant(7);
            using (var encoder = new Sam2Encoder(Fixture.Model("bench_a_encoder")))
            using (var cache = new Sam2Cache())
            using (var cts = new CancellationTokenSource())
            {
                var watch = Stopwatch.StartNew();
                using (encoder.Encode(image.Pixels, image.Width, image.Height, PixelFormat.Rgb)) { }
                TimeSpan encodeTime = watch.Elapsed;

                Task<Sam2Embedding> task = cache.EncodeAsync(encoder, image.Pixels, image.Width, image.Height, 0, PixelFormat.Rgb,
                    EncodePriority.Background, cts.Token);
                WaitUntil("the encode to start", () => cache.Stats.Running == 1);
                Thread.Sleep(TimeSpan.FromMilliseconds(encodeTime.TotalMilliseconds / 5));
                watch.Restart();
                cts.Cancel();
                try
                {
                    task.Wait(TimeSpan.FromSeconds(60));
                    throw new AssertionException("the task completed instead of being cancelled");
                }
                catch (AggregateException e)
                {
                    Assert.True(e.InnerException is TaskCanceledException, "TaskCanceledException, got " + e.InnerException.GetType().Name);
                }
                Assert.True(task.IsCanceled, "IsCanceled");
                WaitUntil("the worker to stop", () => cache.Stats.Running == 0);
                TimeSpan stopTime = watch.Elapsed;
                Console.WriteLine("        encode {0:F0} ms; cancelled in flight, stopped after {1:F0} ms", encodeTime.TotalMilliseconds, stopTime.TotalMilliseconds);
                Assert.True(stopTime.TotalMilliseconds < encodeTime.TotalMilliseconds / 2, "the run stopped between nodes, not at its end");
                Assert.Equal(1L, cache.Stats.Cancelled, "Cancelled");
                Assert.Equal(0L, cache.Stats.Entries, "nothing was kept");

                // A job's own wait: a timeout while it runs, OperationCanceledException once cancelled.
                using (Sam2EncodeJob job = cache.EncodeInBackground(encoder, image.Pixels, image.Width, image.Height, 0, PixelFormat.Rgb, EncodePriority.Background))
                {
                    Assert.Throws<TimeoutException>(() => job.Wait(TimeSpan.Zero), "Wait(0) while it runs");
                    job.Cancel();
                    Assert.Equal(EncodeJobState.Cancelled, job.State, "State");
                    Assert.Throws<OperationCanceledException>(() => job.Wait(), "Wait after Cancel");
                }
            }
        }
    }
}
