using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;

namespace Sam2.Tests
{
    /// <summary>
    /// The tracking clip, read from the file tools/models/track_clip.py writes
    /// ($SAM2_MODELS/track/clip.bin, made by tools/setup/setup.sh; its layout is in track_clip.py's
    /// doc string): 320 × 240 RGB, 24 frames; a red disc moves right and passes behind a bar
    /// (hidden on frames 11–14); a blue square moves left.
    /// </summary>
    internal static class Clip
    {
        internal const int Width = 320, Height = 240, Frames = 24;
        private const int Objects = 2, Header = 28, Centres = Frames * Objects * 8;
        private const int Plane = Width * Height, FrameBytes = Plane * (3 + Objects);

        private static readonly Lazy<byte[]> Bytes = new Lazy<byte[]>(() =>
        {
            string path = Path.Combine(Fixture.Models, "track", "clip.bin");
            byte[] b = File.ReadAllBytes(path);
            int[] want = { 1, Width, Height, Frames, Objects };
            bool ok = b.Length == Header + Centres + Frames * FrameBytes
                && System.Text.Encoding.ASCII.GetString(b, 0, 8) == "SAM2CLIP";
            for (int i = 0; ok && i < want.Length; i++) ok = Word(b, 8 + 4 * i) == want[i];
            if (!ok) throw new InvalidDataException(path + " is not the clip of tools/models/track_clip.py (run tools/setup/setup.sh)");
            return b;
        });

        private static int Word(byte[] b, int i)
        {
            return b[i] | b[i + 1] << 8 | b[i + 2] << 16 | b[i + 3] << 24;
        }

        private static void Centre(int t, int k, out int x, out int y)
        {
            int i = Header + (t * Objects + k) * 8;
            x = Word(Bytes.Value, i);
            y = Word(Bytes.Value, i + 4);
        }

        internal static void DiscCentre(int t, out int x, out int y)
        {
            Centre(t, 0, out x, out y);
        }

        internal static void SquareCentre(int t, out int x, out int y)
        {
            Centre(t, 1, out x, out y);
        }

        /// <summary>Frame t's pixels and the ground truth of the disc and of the square (0/1 bytes).</summary>
        internal static byte[] Frame(int t, out byte[] disc, out byte[] square)
        {
            int at = Header + Centres + t * FrameBytes;
            var rgb = new byte[Plane * 3];
            disc = new byte[Plane];
            square = new byte[Plane];
            Array.Copy(Bytes.Value, at, rgb, 0, rgb.Length);
            Array.Copy(Bytes.Value, at + Plane * 3, disc, 0, Plane);
            Array.Copy(Bytes.Value, at + Plane * 4, square, 0, Plane);
            return rgb;
        }

        internal static Sam2Image Image(int t)
        {
            byte[] disc, square;
            return new Sam2Image(Frame(t, out disc, out square), Width, Height, PixelFormat.Rgb);
        }

        internal static Sam2Tracker OpenTracker(Sam2TrackerOptions options = null)
        {
            return Sam2Tracker.FromDirectory(Path.Combine(Fixture.Models, "track"), options);
        }

        internal static Sam2Prompt DiscClick(int t)
        {
            int x, y;
            DiscCentre(t, out x, out y);
            return Sam2Prompt.FromPoint(x, y);
        }

        internal static Sam2Prompt SquareClick(int t)
        {
            int x, y;
            SquareCentre(t, out x, out y);
            return Sam2Prompt.FromPoint(x, y);
        }
    }

    /// <summary>
    /// Video tracking through the wrapper on the generated tracker ($SAM2_MODELS/track): the disc
    /// and the square followed over the clip (IoU ≥ 0.9 where visible, Present false with an empty
    /// mask where the disc is hidden), lazily, forward and backward; remove, reset, memory,
    /// disposal, and argument errors as .NET exceptions naming the native argument.
    /// </summary>
    internal static class TrackerTests
    {
        /// <summary>Checks one object against its ground truth; returns its IoU, or -1 when hidden.</summary>
        private static double Check(Sam2TrackedObject o, byte[] truth, string what)
        {
            Assert.Equal(o.Mask.LongCount(b => b != 0), o.Area, what + ": area");
            Assert.Equal(o.Present, o.Score > 0, what + ": present is score > 0");
            if (!truth.Any(b => b != 0))
            {
                Assert.True(!o.Present, what + ": hidden but present (score " + o.Score + ")");
                Assert.Equal(0L, o.Area, what + ": an absent object's mask is empty");
                Assert.Equal(0, o.Box.XMax, what + ": an absent object's box");
                return -1;
            }
            double iou = Fixture.IoU(o.Mask, truth);
            Assert.True(o.Present, what + ": visible but absent");
            Assert.AtLeast(0.9, iou, what + ": IoU");
            return iou;
        }

        [Test]
        private static void BothObjectsAreFollowedAndTheDiscIsAbsentBehindTheBar()
        {
            var options = new Sam2TrackerOptions { NumFrames = Clip.Frames };
            Assert.Equal(16, new Sam2TrackerOptions().MemoryFrames, "default memory_frames");
            Assert.True(new Sam2TrackerOptions().CorrectionsAsConditioning, "default corrections_as_conditioning");
            using (Sam2Tracker tracker = Clip.OpenTracker(options))
            {
                Assert.Equal(ExecutionProvider.Cpu, tracker.Device.Provider, "device");
                Assert.Equal(Precision.Fp32, tracker.Precision, "precision");
                byte[] disc, square;
                var first = new Sam2Image(Clip.Frame(0, out disc, out square), Clip.Width, Clip.Height, PixelFormat.Rgb);
                Sam2TrackedObject d0 = tracker.AddPrompt(0, first, 1, Clip.DiscClick(0));
                Assert.Equal(1, d0.ObjectId, "object id");
                Check(d0, disc, "prompted disc");
                Assert.True(d0.LowRes == null, "no low-res logits unless asked");
                Sam2TrackedObject s0 = tracker.AddPrompt(0, first, 2, Clip.SquareClick(0), lowRes: true);
                Check(s0, square, "prompted square");
                Assert.Equal(256 * 256, s0.LowRes.Length, "low-res logits asked for");
                Assert.Equal(2L, tracker.MemoryFrames, "each prompt's memory is encoded with it");
                Assert.True(tracker.MemoryBytes > 2L * 1024 * 1024 && tracker.MemoryBytes < 40L * 1024 * 1024,
                            "two prompted frames (1.25 MiB each), the last frame's features and the input kept for the next frame: " + tracker.MemoryBytes);

                // Lazy: each frame is made when the enumeration reaches it.
                int made = 0;
                var truths = new Dictionary<int, byte[][]>();
                IEnumerable<Sam2VideoFrame> clip = Enumerable.Range(0, Clip.Frames).Select(t =>
                {
                    made++;
                    byte[] dt, st;
                    byte[] rgb = Clip.Frame(t, out dt, out st);
                    truths[t] = new[] { dt, st };
                    return new Sam2VideoFrame(t, new Sam2Image(rgb, Clip.Width, Clip.Height, PixelFormat.Rgb));
                });
                IEnumerable<Sam2TrackedFrame> results = tracker.Track(clip, TrackDirection.Forward);
                Assert.Equal(0, made, "nothing tracked before the enumeration starts");
                int hidden = 0, seen = 0;
                double minDisc = 1;
                foreach (Sam2TrackedFrame frame in results)
                {
                    Assert.Equal(seen + 1, made, "one frame read per result");
                    Assert.Equal(seen, frame.FrameIndex, "frame index");
                    Assert.Equal(Clip.Width, frame.Width, "width");
                    Assert.Equal(2, frame.Objects.Count, "two objects");
                    Assert.Equal(2, frame.Objects[1].ObjectId, "increasing id order");
                    double iou = Check(frame.Find(1), truths[seen][0], "frame " + seen + " disc");
                    if (iou < 0) hidden++;
                    else minDisc = Math.Min(minDisc, iou);
                    Check(frame.Find(2), truths[seen][1], "frame " + seen + " square");
                    seen++;
                }
                Assert.Equal(Clip.Frames, seen, "every frame");
                Assert.Equal(4, hidden, "the disc is hidden on frames 11-14");
                Assert.AtLeast(0.95, minDisc, "the disc's worst IoU where visible");
                Assert.Equal(2L * (1 + 16), tracker.MemoryFrames, "prompted frame and 16 tracked frames per object");
            }
        }

        /// <summary>The int8 variant of the generated tracker (made by the set-up with sam2-variant) says so and follows the disc as the original does.</summary>
        [Test]
        private static void TheInt8VariantSaysSoAndFollowsTheDisc()
        {
            string dir = Path.Combine(Fixture.Models, "variants", "track_int8");
            using (Sam2Tracker tracker = Sam2Tracker.FromDirectory(dir))
            {
                Assert.Equal(Precision.Int8, tracker.Precision, "precision");
                byte[] disc, square;
                var first = new Sam2Image(Clip.Frame(0, out disc, out square), Clip.Width, Clip.Height, PixelFormat.Rgb);
                Check(tracker.AddPrompt(0, first, 1, Clip.DiscClick(0)), disc, "int8: prompted disc");
                for (int t = 1; t < 4; t++)
                {
                    var image = new Sam2Image(Clip.Frame(t, out disc, out square), Clip.Width, Clip.Height, PixelFormat.Rgb);
                    Check(tracker.Track(t, image).Find(1), disc, "int8: frame " + t + " disc");
                }
            }
        }

        /// <summary>Every load-time rewrite switched off: the modules load as exported and follow the disc with the same scores; an unknown bit is refused naming the field.</summary>
        [Test]
        private static void RewritesSwitchedOffChangeNothingTracked()
        {
            using (Sam2Tracker on = Clip.OpenTracker())
            using (Sam2Tracker off = Clip.OpenTracker(new Sam2TrackerOptions { DisabledRewrites = Rewrites.All }))
            {
                byte[] disc, square;
                var first = new Sam2Image(Clip.Frame(0, out disc, out square), Clip.Width, Clip.Height, PixelFormat.Rgb);
                on.AddPrompt(0, first, 1, Clip.DiscClick(0));
                off.AddPrompt(0, first, 1, Clip.DiscClick(0));
                for (int t = 1; t < 4; t++)
                {
                    var image = new Sam2Image(Clip.Frame(t, out disc, out square), Clip.Width, Clip.Height, PixelFormat.Rgb);
                    Sam2TrackedObject a = on.Track(t, image).Find(1), b = off.Track(t, image).Find(1);
                    Check(b, disc, "rewrites off: frame " + t + " disc");
                    Assert.True(Math.Abs(a.Score - b.Score) <= 1e-3 * (1 + Math.Abs(a.Score)), "frame " + t + ": score " + b.Score + " against " + a.Score);
                }
            }
            var e = Assert.Throws<ArgumentException>(() => Clip.OpenTracker(new Sam2TrackerOptions { DisabledRewrites = (Rewrites)64 }), "bit 64");
            Assert.Equal("options.disabled_rewrites", e.ParamName, "ParamName");
        }

        [Test]
        private static void TrackingBackwardsFromTheLastFrame()
        {
            using (Sam2Tracker tracker = Clip.OpenTracker(new Sam2TrackerOptions { NumFrames = Clip.Frames, MemoryFrames = 6 }))
            {
                int last = Clip.Frames - 1;
                tracker.AddPrompt(last, Clip.Image(last), 3, Clip.DiscClick(last));
                IEnumerable<Sam2Image> backwards = Enumerable.Range(0, Clip.Frames).Reverse().Select(Clip.Image);
                int expected = last, hidden = 0;
                foreach (Sam2TrackedFrame frame in tracker.Track(backwards, last, TrackDirection.Backward))
                {
                    Assert.Equal(expected, frame.FrameIndex, "numbered down from the first index");
                    byte[] disc, square;
                    Clip.Frame(expected, out disc, out square);
                    if (Check(frame.Objects[0], disc, "frame " + expected) < 0)
                        hidden++;
                    expected--;
                }
                Assert.Equal(-1, expected, "down to frame 0");
                Assert.Equal(4, hidden, "hidden frames");
                Assert.Equal(1L + 6, tracker.MemoryFrames, "memory_frames 6");
            }
        }

        [Test]
        private static void RemoveObjectResetAndAsync()
        {
            using (Sam2Tracker tracker = Clip.OpenTracker())
            {
                Sam2Image f0 = Clip.Image(0);
                tracker.AddPrompt(0, f0, 7, Clip.DiscClick(0));
                tracker.AddPrompt(0, f0, 9, Clip.SquareClick(0));
                Assert.True(tracker.RemoveObject(7), "removed");
                Assert.True(!tracker.RemoveObject(7), "already removed");
                Assert.True(!tracker.RemoveObject(-1), "a negative id is never an object");
                byte[] disc, square;
                var f1 = new Sam2Image(Clip.Frame(1, out disc, out square), Clip.Width, Clip.Height, PixelFormat.Rgb);
                Sam2TrackedFrame frame = tracker.TrackAsync(1, f1).Result;
                Assert.Equal(1, frame.Objects.Count, "only object 9 left");
                Assert.Equal(9, frame.Objects[0].ObjectId, "object 9");
                Check(frame.Objects[0], square, "square on frame 1 (async)");
                tracker.Reset();
                Assert.Equal(0L, tracker.MemoryFrames, "reset forgets every memory");
                var e = Assert.Throws<ArgumentException>(() => tracker.Track(2, Clip.Image(2)), "no object after reset");
                Assert.Equal("tracker", e.ParamName, "ParamName");
                Assert.Contains("no object", e.Message, "message");
            }
        }

        [Test]
        private static void ArgumentErrorsNameTheNativeArgument()
        {
            Sam2Image f0 = Clip.Image(0);
            using (Sam2Tracker tracker = Clip.OpenTracker(new Sam2TrackerOptions { NumFrames = Clip.Frames }))
            {
                var e = Assert.Throws<ArgumentException>(() => tracker.AddPrompt(Clip.Frames, f0, 1, Clip.DiscClick(0)), "frame past num_frames");
                Assert.Equal("frame_index", e.ParamName, "ParamName");
                Assert.Contains("outside the clip of 24 frames", e.Message, "message");
                e = Assert.Throws<ArgumentException>(() => tracker.AddPrompt(0, f0, 1, Sam2Prompt.FromPoint(400, 10)), "click outside the frame");
                Assert.Contains("outside", e.Message, "message");
                Assert.Throws<ArgumentException>(() => tracker.AddPrompt(0, f0, 1, Sam2Prompt.FromPoint(float.NaN, 10)), "NaN");
                var withMask = Sam2Prompt.FromPoint(10, 10);
                withMask.MaskInput = new float[256 * 256];
                e = Assert.Throws<ArgumentException>(() => tracker.AddPrompt(0, f0, 1, withMask), "a mask prompt");
                Assert.Equal("prompt.mask_input", e.ParamName, "ParamName");
                Assert.Equal(0L, tracker.MemoryFrames, "no refused prompt made an object");
                Assert.Throws<ArgumentNullException>(() => tracker.AddPrompt(0, null, 1, Clip.DiscClick(0)), "null image");
                Assert.Throws<ArgumentNullException>(() => tracker.AddPrompt(0, f0, 1, null), "null prompt");
                Assert.Throws<ArgumentOutOfRangeException>(() => tracker.AddPrompt(-1, f0, 1, Clip.DiscClick(0)), "negative frame");
                Assert.Throws<ArgumentOutOfRangeException>(() => tracker.AddPrompt(0, f0, -1, Clip.DiscClick(0)), "negative id");
                tracker.AddPrompt(0, f0, 1, Clip.DiscClick(0));
                e = Assert.Throws<ArgumentException>(() => tracker.Track(1, f0, (TrackDirection)2), "a bad direction");
                Assert.Equal("direction", e.ParamName, "ParamName");
                e = Assert.Throws<ArgumentException>(() => tracker.Track(1, new Sam2Image(new byte[10], Clip.Width, Clip.Height, PixelFormat.Rgb)), "short buffer");
                Assert.Equal("pixels", e.ParamName, "ParamName");
                Assert.Throws<ArgumentNullException>(() => tracker.Track(null, TrackDirection.Forward), "null sequence");
                // A null element fails when the enumeration reaches it.
                IEnumerator<Sam2TrackedFrame> it = tracker.Track(new Sam2VideoFrame[] { null }).GetEnumerator();
                Assert.Throws<ArgumentNullException>(() => it.MoveNext(), "null frame");
            }
            e2(() => Clip.OpenTracker(new Sam2TrackerOptions { MemoryFrames = 3 }), "options.memory_frames");
            e2(() => Clip.OpenTracker(new Sam2TrackerOptions { MemoryFrames = 2000 }), "options.memory_frames");
            Assert.Throws<ArgumentOutOfRangeException>(() => new Sam2TrackerOptions { NumFrames = -1 }, "negative num_frames");
            string track = Path.Combine(Fixture.Models, "track");
            var m = Assert.Throws<Sam2Exception>(() => new Sam2Tracker(Fixture.EncoderPath, Path.Combine(track, "memory_attention.onnx"),
                Path.Combine(track, "image_decoder.onnx"), Path.Combine(track, "memory_encoder.onnx")), "an image encoder as the video one");
            Assert.Equal(Sam2Status.Model, m.Status, "status");
            Assert.Contains("vision_feats", m.Message, "message names the missing tensor");
            Assert.Throws<ArgumentNullException>(() => new Sam2Tracker(null, "a", "b", "c"), "null path");
            Assert.Throws<ArgumentNullException>(() => Sam2Tracker.FromDirectory(null), "null directory");
            Assert.Throws<ArgumentNullException>(() => new Sam2Image(null, 1, 1, PixelFormat.Rgb), "null pixels");
        }

        private static void e2(Action make, string paramName)
        {
            var e = Assert.Throws<ArgumentException>(make, paramName);
            Assert.Equal(paramName, e.ParamName, "ParamName");
        }

        [Test]
        private static void DisposalEndsUseAndResultsOutliveTheTracker()
        {
            Sam2TrackedFrame kept;
            IEnumerator<Sam2TrackedFrame> running;
            Sam2Tracker tracker = Clip.OpenTracker();
            tracker.AddPrompt(0, Clip.Image(0), 1, Clip.SquareClick(0));
            running = tracker.Track(Enumerable.Range(0, Clip.Frames).Select(Clip.Image), 0).GetEnumerator();
            Assert.True(running.MoveNext(), "first frame");
            kept = running.Current;
            tracker.Dispose();
            tracker.Dispose();
            Assert.Throws<ObjectDisposedException>(() => running.MoveNext(), "an enumeration after Dispose");
            Assert.Throws<ObjectDisposedException>(() => tracker.Track(1, Clip.Image(1)), "Track after Dispose");
            Assert.Throws<ObjectDisposedException>(() => tracker.Reset(), "Reset after Dispose");
            Assert.Throws<ObjectDisposedException>(() => { long n = tracker.MemoryFrames; }, "MemoryFrames after Dispose");
            Assert.Throws<ObjectDisposedException>(() => { long n = tracker.MemoryBytes; }, "MemoryBytes after Dispose");
            Assert.Throws<ObjectDisposedException>(() => tracker.Track(new Sam2VideoFrame[0]), "a new enumeration after Dispose");
            byte[] disc, square;
            Clip.Frame(0, out disc, out square);
            Check(kept.Objects[0], square, "a result kept after Dispose");
        }

        /// <summary>EdgeTAM's four video modules ($SAM2_EDGETAM_MODELS,
        /// tools/setup/setup-edgetam.sh) through the same wrapper and entry points: found in the
        /// export's folder by their file names, a click on frame 0 of the clip, two frames tracked.
        /// Each tracked frame adds EdgeTAM's memory (512 tokens of 64 floats, 128 KiB, where a SAM2
        /// memory is a 64 x 64 map of 64 channels, 1 MiB), a pointer, and as much again to the
        /// stacked memories and positions the tracker keeps.</summary>
        [Test]
        private static void EdgeTamTracksThroughTheSameWrapper()
        {
            string dir = Environment.GetEnvironmentVariable("SAM2_EDGETAM_MODELS");
            if (string.IsNullOrEmpty(dir))
                throw new InvalidOperationException("SAM2_EDGETAM_MODELS is not set: run `. tools/setup/setup-edgetam.sh` first");
            using (Sam2Tracker tracker = Sam2Tracker.FromDirectory(dir, new Sam2TrackerOptions { NumFrames = 3 }))
            {
                Sam2TrackedObject d0 = tracker.AddPrompt(0, Clip.Image(0), 1, Clip.DiscClick(0), lowRes: true);
                Assert.Equal(256 * 256, d0.LowRes.Length, "low-res logits");
                Assert.Equal(1L, tracker.MemoryFrames, "the prompt's memory");
                var bytes = new List<long> { tracker.MemoryBytes };
                int seen = 0;
                foreach (Sam2TrackedFrame frame in tracker.Track(Enumerable.Range(1, 2).Select(t => new Sam2VideoFrame(t, Clip.Image(t)))))
                {
                    Assert.Equal(seen + 1, frame.FrameIndex, "frame index");
                    Assert.Equal(1, frame.Objects.Count, "one object");
                    Assert.Equal(Clip.Width, frame.Width, "width");
                    bytes.Add(tracker.MemoryBytes);
                    seen++;
                }
                Assert.Equal(2, seen, "both frames");
                Assert.Equal(3L, tracker.MemoryFrames, "the prompted frame and two tracked ones");
                long grew = bytes[2] - bytes[1];
                Assert.True(grew >= 128L * 1024 && grew < 1024L * 1024,
                            "a tracked frame adds EdgeTAM's 128 KiB memory, a pointer and their share of the kept stacked memories and positions, less than SAM2's 1 MiB memory alone: " + grew);
            }
        }
    }
}
