using System;
using System.IO;

namespace Sam2.Tests
{
    /// <summary>Dispose order, double Dispose, and use after Dispose.</summary>
    internal static class LifetimeTests
    {
        [Test]
        private static void AnEmbeddingOutlivesItsEncoder()
        {
            PnmImage image = Fixture.ShapesImage;
            Sam2Embedding embedding;
            using (var encoder = new Sam2Encoder(Fixture.EncoderPath))
                embedding = encoder.Encode(image.Pixels, image.Width, image.Height, PixelFormat.Rgb);
            using (embedding)
            using (Sam2Masks masks = Fixture.Predictor.Predict(embedding, Sam2Prompt.FromPoint(100, 112)))
                Assert.AtLeast(0.9, Fixture.IoU(masks.GetMask(0), Fixture.GroundTruth(Fixture.ShapeList()[0])), "red_disc after the encoder was disposed");
        }

        [Test]
        private static void APredictorOutlivesTheEncoderItWasBoundTo()
        {
            Sam2Predictor predictor;
            using (var encoder = new Sam2Encoder(Fixture.EncoderPath))
                predictor = new Sam2Predictor(encoder, Fixture.DecoderPath);
            using (predictor)
            using (Sam2Masks masks = predictor.Predict(Fixture.Shapes, Sam2Prompt.FromPoint(100, 112)))
                Assert.AtLeast(0.9, Fixture.IoU(masks.GetMask(0), Fixture.GroundTruth(Fixture.ShapeList()[0])), "red_disc");
        }

        [Test]
        private static void MasksOutliveThePredictorAndTheEmbedding()
        {
            PnmImage image = Fixture.ShapesImage;
            Sam2Masks masks;
            using (var encoder = new Sam2Encoder(Fixture.EncoderPath))
            using (Sam2Embedding embedding = encoder.Encode(image.Pixels, image.Width, image.Height, PixelFormat.Rgb))
            using (var predictor = new Sam2Predictor(encoder, Fixture.DecoderPath))
                masks = predictor.Predict(embedding, Sam2Prompt.FromPoint(258, 93));
            using (masks)
            {
                GC.Collect();
                GC.WaitForPendingFinalizers();
                Shape rect = Fixture.ShapeList()[1];
                Assert.AtLeast(0.9, Fixture.IoU(masks.GetMask(0), Fixture.GroundTruth(rect)), "green_rect after everything else was disposed");
                Assert.True(masks.Score(0) > 0.5f, "score");
                Assert.Equal(65536, masks.GetLowRes(0).Length, "low-res");
            }
        }

        [Test]
        private static void DisposingTwiceIsHarmless()
        {
            var encoder = new Sam2Encoder(Fixture.EncoderPath);
            var predictor = new Sam2Predictor(encoder, Fixture.DecoderPath);
            PnmImage image = Fixture.ShapesImage;
            Sam2Embedding embedding = encoder.Encode(image.Pixels, image.Width, image.Height, PixelFormat.Rgb);
            Sam2Embedding simulated = Sam2TestSupport.SimulateDeviceEmbedding(embedding, "Cuda");
            Sam2Masks masks = predictor.Predict(embedding, Sam2Prompt.FromPoint(100, 112));
            foreach (IDisposable d in new IDisposable[] { masks, simulated, embedding, predictor, encoder })
            {
                d.Dispose();
                d.Dispose();
            }
        }

        [Test]
        private static void UsingADisposedObjectThrowsObjectDisposedException()
        {
            var encoder = new Sam2Encoder(Fixture.EncoderPath);
            var predictor = new Sam2Predictor(encoder, Fixture.DecoderPath);
            PnmImage image = Fixture.ShapesImage;
            Sam2Embedding embedding = encoder.Encode(image.Pixels, image.Width, image.Height, PixelFormat.Rgb);
            Sam2Masks masks = predictor.Predict(embedding, Sam2Prompt.FromPoint(100, 112));
            string file = Path.Combine(Fixture.Scratch, "disposed.sam2emb");
            embedding.Save(file);

            masks.Dispose();
            Assert.Throws<ObjectDisposedException>(() => masks.GetMask(0), "masks.GetMask");
            Assert.Throws<ObjectDisposedException>(() => masks.Score(0), "masks.Score");
            Assert.Throws<ObjectDisposedException>(() => masks.Box(0), "masks.Box");
            Assert.Throws<ObjectDisposedException>(() => masks.Area(0), "masks.Area");
            Assert.Throws<ObjectDisposedException>(() => masks.GetLowRes(0), "masks.GetLowRes");

            embedding.Dispose();
            Assert.Throws<ObjectDisposedException>(() => embedding.Save(file), "embedding.Save");
            Assert.Throws<ObjectDisposedException>(() => { var unused = embedding.AllocatorName; }, "embedding.AllocatorName");
            Assert.Throws<ObjectDisposedException>(() => { var unused = embedding.IsSerializable; }, "embedding.IsSerializable");
            Assert.Throws<ObjectDisposedException>(() => { var unused = embedding.ImageWidth; }, "embedding.ImageWidth");
            Assert.Throws<ObjectDisposedException>(() => { var unused = embedding.Fingerprint; }, "embedding.Fingerprint");
            Assert.Throws<ObjectDisposedException>(() => embedding.ToHost(), "embedding.ToHost");
            Assert.Throws<ObjectDisposedException>(() => predictor.Predict(embedding, Sam2Prompt.FromPoint(1, 1)), "Predict with a disposed embedding");
            Assert.Throws<ObjectDisposedException>(() => Sam2TestSupport.SimulateDeviceEmbedding(embedding, "Cuda"), "simulating a disposed embedding");

            predictor.Dispose();
            Assert.Throws<ObjectDisposedException>(() => predictor.Predict(Fixture.Shapes, Sam2Prompt.FromPoint(1, 1)), "predictor.Predict");
            Assert.Throws<ObjectDisposedException>(() => { var unused = predictor.Device; }, "predictor.Device");
            Assert.Throws<ObjectDisposedException>(() => Sam2Embedding.Load(file, predictor), "Load for a disposed predictor");

            encoder.Dispose();
            Assert.Throws<ObjectDisposedException>(() => encoder.Encode(image.Pixels, image.Width, image.Height, PixelFormat.Rgb), "encoder.Encode");
            Assert.Throws<ObjectDisposedException>(() => { var unused = encoder.Fingerprint; }, "encoder.Fingerprint");
            Assert.Throws<ObjectDisposedException>(() => { var unused = encoder.ExecutionProviders; }, "encoder.ExecutionProviders");
            Assert.Throws<ObjectDisposedException>(() => new Sam2Predictor(encoder, Fixture.DecoderPath), "a predictor bound to a disposed encoder");
        }

        [Test]
        private static void UndisposedObjectsAreReleasedByTheFinalizer()
        {
            // Nothing to observe but the absence of a crash: SafeHandle finalizers free the handles.
            for (int i = 0; i < 3; i++)
                Leak();
            GC.Collect();
            GC.WaitForPendingFinalizers();
            GC.Collect();
        }

        private static void Leak()
        {
            var predictor = new Sam2Predictor(null, Fixture.DecoderPath);
            Sam2Masks masks = predictor.Predict(Fixture.Shapes, Sam2Prompt.FromPoint(100, 112));
            Sam2Embedding copy = Fixture.Shapes.ToHost();
            GC.KeepAlive(masks);
            GC.KeepAlive(copy);
        }
    }
}
