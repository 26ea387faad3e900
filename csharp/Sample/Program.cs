// Sample: encode an image once, prompt it with a click and a box, show what happens when a device
// embedding is saved, and round-trip a host embedding through a file.
//
// Usage: Sample.exe [models-dir [testdata-dir [model-name]]]
// Defaults: $SAM2_MODELS, $SAM2_TESTDATA, tiny_a. The pair is found by name (Sam2ModelPair.Find):
// a real export directory works too (samexporter's NAME.encoder.onnx, ONNX Runtime's
// NAME_image_encoder.onnx), with NAME as the model name, or "" when it holds one pair only. ONNX Runtime is found through
// $SAM2_ONNXRUNTIME_PATH (see tools/setup/setup.sh).
using System;
using System.IO;
using Sam2;

internal static class Program
{
    private static int Main(string[] args)
    {
        string models = args.Length > 0 ? args[0] : Environment.GetEnvironmentVariable("SAM2_MODELS");
        string testdata = args.Length > 1 ? args[1] : Environment.GetEnvironmentVariable("SAM2_TESTDATA");
        string model = args.Length > 2 ? args[2] : "tiny_a";
        if (string.IsNullOrEmpty(models) || string.IsNullOrEmpty(testdata))
        {
            Console.Error.WriteLine("usage: Sample.exe MODELS_DIR TESTDATA_DIR [MODEL] (or set SAM2_MODELS and SAM2_TESTDATA)");
            return 2;
        }

        try
        {
            Run(models, testdata, model);
            return 0;
        }
        catch (Exception e)
        {
            Console.Error.WriteLine("sample failed: " + e);
            return 1;
        }
    }

    private static void Run(string models, string testdata, string model)
    {
        Sam2Runtime.LogLevel = Sam2LogLevel.Info;
        Sam2Runtime.Log += (sender, e) => Console.WriteLine("  [sam2 " + e.Level + "] " + e.Message);
        Sam2Runtime.Initialize(Environment.GetEnvironmentVariable("SAM2_ONNXRUNTIME_PATH"));
        Console.WriteLine("sam2 " + Sam2Runtime.Version + " on ONNX Runtime " + Sam2Runtime.RuntimeVersion);

        PnmImage image = Pnm.Read(Path.Combine(testdata, "demo.ppm"), 3);
        byte[] pixels = image.Pixels;
        int width = image.Width, height = image.Height;
        Console.WriteLine("image demo.ppm: " + width + "x" + height);

        string scratch = Path.Combine(Path.GetTempPath(), "sam2-sample-" + Guid.NewGuid().ToString("N"));
        Directory.CreateDirectory(scratch);
        try
        {
            var encoderOptions = new Sam2EncoderOptions { OutputTarget = OutputTarget.Host };
            Sam2ModelPair pair = Sam2ModelPair.Find(model.Length == 0 ? models : Path.Combine(models, model));
            Console.WriteLine("models: " + Path.GetFileName(pair.EncoderPath) + " + " + Path.GetFileName(pair.DecoderPath));
            using (var encoder = new Sam2Encoder(pair.EncoderPath, encoderOptions))
            using (var predictor = new Sam2Predictor(encoder, pair.DecoderPath))
            using (Sam2Embedding embedding = encoder.Encode(pixels, width, height, PixelFormat.Rgb))
            {
                Console.WriteLine("encoder runs on " + encoder.Device + " (" + string.Join(",", encoder.ExecutionProviders) +
                                  "), predictor on " + predictor.Device);
                Console.WriteLine("embedding: " + embedding.ImageWidth + "x" + embedding.ImageHeight + " in \"" +
                                  embedding.AllocatorName + "\" memory, serializable: " + embedding.IsSerializable +
                                  ", encoder " + embedding.Fingerprint);

                var click = Sam2Prompt.FromPoint(580, 190);
                var box = Sam2Prompt.FromBox(52, 82, 327, 257);
                using (Sam2Masks masks = predictor.Predict(embedding, click, box))
                {
                    Describe(masks, "click (580, 190)", 0);
                    Describe(masks, "box [52, 82, 327, 257]", 1);

                    // Save the host embedding and show the loaded one predicts the same masks.
                    string file = Path.Combine(scratch, "demo.sam2emb");
                    embedding.Save(file);
                    Console.WriteLine("saved host embedding: " + file + " (" + new FileInfo(file).Length + " bytes)");
                    using (Sam2Embedding loaded = Sam2Embedding.Load(file, predictor))
                    using (Sam2Masks again = predictor.Predict(loaded, click, box))
                    {
                        bool same = again.Count == masks.Count;
                        for (int i = 0; same && i < masks.Count; i++)
                            same = Equal(masks.GetMask(i), again.GetMask(i)) && masks.Score(i) == again.Score(i);
                        Console.WriteLine("loaded embedding (" + loaded.Fingerprint + ") predicts the same masks: " + same);
                        if (!same)
                            throw new InvalidOperationException("the loaded embedding predicted different masks");
                    }
                }
            }
        }
        finally
        {
            Directory.Delete(scratch, true);
        }
    }

    private static void Describe(Sam2Masks masks, string prompt, int obj)
    {
        int index = masks.IndexOf(obj, 0);
        Console.WriteLine(prompt + ": score " + masks.Score(index).ToString("0.000") + ", box " + masks.Box(index) +
                          ", area " + masks.Area(index) + " px");
    }

    private static bool Equal(byte[] a, byte[] b)
    {
        if (a.Length != b.Length)
            return false;
        for (int i = 0; i < a.Length; i++)
            if (a[i] != b[i])
                return false;
        return true;
    }
}
