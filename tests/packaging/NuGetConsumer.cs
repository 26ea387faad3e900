// A .NET host that uses sam2 from its NuGet package the way an application's output does: Sam2.dll
// from lib/netstandard2.0, libsam2.so from runtimes/linux-x64/native and ONNX Runtime's native
// library (from the Microsoft.ML.OnnxRuntime package) side by side. tools/ci/test-packaging.sh
// compiles it (with csharp/Shared/, the test-image reader) with mcs against the packaged Sam2.dll
// and runs it with mono, with neither SAM2_ONNXRUNTIME_PATH nor ORT_DYLIB_PATH set: the library
// must find ONNX Runtime beside itself.
//
// Usage: NuGetConsumer.exe ENCODER DECODER TESTDATA_DIR VERSION
using System;
using System.IO;
using Sam2;

internal static class NuGetConsumer
{
    private static int Main(string[] args)
    {
        if (args.Length != 4)
        {
            Console.Error.WriteLine("usage: NuGetConsumer.exe ENCODER DECODER TESTDATA_DIR VERSION");
            return 2;
        }
        try
        {
            string loaded = null;
            Sam2Runtime.LogLevel = Sam2LogLevel.Info;
            Sam2Runtime.Log += (sender, e) =>
            {
                if (e.Message.Contains("loaded ONNX Runtime"))
                    loaded = e.Message;
            };
            Sam2Runtime.Initialize();
            Console.WriteLine(loaded);
            Require(loaded != null && loaded.Contains("(beside libsam2)"), "ONNX Runtime was found beside libsam2");

            Version assembly = typeof(Sam2Runtime).Assembly.GetName().Version;
            Console.WriteLine("Sam2.dll " + assembly + ", native " + Sam2Runtime.Version + ", binding " +
                              Sam2Runtime.BindingVersion + ", ONNX Runtime " + Sam2Runtime.RuntimeVersion);
            Require(Sam2Runtime.Version == args[3], "native version is " + args[3]);
            Require(Sam2Runtime.BindingVersion == args[3], "binding version is " + args[3]);
            Require(assembly.ToString() == args[3] + ".0", "assembly version is " + args[3] + ".0");

            PnmImage image = Pnm.Read(Path.Combine(args[2], "shapes.ppm"), 3);
            byte[] truth = Pnm.Read(Path.Combine(args[2], "shapes_red_disc.pgm"), 1).Pixels;
            using (var encoder = new Sam2Encoder(args[0]))
            using (var predictor = new Sam2Predictor(encoder, args[1]))
            using (Sam2Embedding embedding = encoder.Encode(image.Pixels, image.Width, image.Height, PixelFormat.Rgb))
            using (Sam2Masks masks = predictor.Predict(embedding, Sam2Prompt.FromPoint(100, 112)))
            {
                byte[] mask = masks.GetMask(0);
                int both = 0, either = 0;
                for (int i = 0; i < mask.Length; i++)
                {
                    bool a = mask[i] != 0, b = truth[i] != 0;
                    if (a && b) both++;
                    if (a || b) either++;
                }
                double iou = either == 0 ? 1.0 : (double)both / either;
                Console.WriteLine("click (100, 112) on shapes.ppm: red disc IoU " + iou.ToString("F3"));
                Require(iou >= 0.9, "IoU >= 0.9");
            }
            return 0;
        }
        catch (Exception e)
        {
            Console.Error.WriteLine("NuGetConsumer failed: " + e);
            return 1;
        }
    }

    private static void Require(bool condition, string what)
    {
        if (!condition)
            throw new Exception("check failed: " + what);
    }
}
