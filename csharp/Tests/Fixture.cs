// Shared test data: paths from the environment (tools/setup/setup.sh, tools/setup/setup-sam3.sh),
// images, ground truth, one encoder/predictor/embedding of the shapes image and one SAM 3 model and
// embedding of the demo image, reused by the tests that only read them.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.IO;
using System.Text;

namespace Sam2.Tests
{
    internal sealed class Shape
    {
        public string Name;
        public int ClickX;
        public int ClickY;
        public int[] BBox;
        public string TwinOf;
        public string MaskFile;
    }

    internal static class Fixture
    {
        private static readonly object Lock = new object();
        private static Sam2Encoder _encoder;
        private static Sam2Predictor _predictor;
        private static Sam2Embedding _shapes;
        private static Sam2ConceptModel _conceptModel;
        private static Sam2Embedding _conceptDemo;
        private static string _scratch;

        internal static string Models
        {
            get { return Require("SAM2_MODELS"); }
        }

        internal static string TestData
        {
            get { return Require("SAM2_TESTDATA"); }
        }

        internal static string Model(string name)
        {
            return Path.Combine(Models, name + ".onnx");
        }

        internal static string EncoderPath
        {
            get { return Model("tiny_a_encoder"); }
        }

        internal static string DecoderPath
        {
            get { return Model("tiny_a_decoder"); }
        }

        /// <summary>A fresh directory for this run, deleted at the end.</summary>
        internal static string Scratch
        {
            get
            {
                lock (Lock)
                {
                    if (_scratch == null)
                    {
                        _scratch = Path.Combine(Path.GetTempPath(), "sam2-cs-tests-" + Guid.NewGuid().ToString("N"));
                        Directory.CreateDirectory(_scratch);
                    }
                    return _scratch;
                }
            }
        }

        /// <summary>The shared tiny_a encoder (host output). Do not dispose.</summary>
        internal static Sam2Encoder Encoder
        {
            get
            {
                lock (Lock)
                    return _encoder ?? (_encoder = new Sam2Encoder(EncoderPath, new Sam2EncoderOptions { OutputTarget = OutputTarget.Host }));
            }
        }

        /// <summary>The shared tiny_a predictor, bound to <see cref="Encoder"/>. Do not dispose.</summary>
        internal static Sam2Predictor Predictor
        {
            get
            {
                lock (Lock)
                    return _predictor ?? (_predictor = new Sam2Predictor(Encoder, DecoderPath));
            }
        }

        /// <summary>The shared embedding of shapes.ppm. Do not dispose.</summary>
        internal static Sam2Embedding Shapes
        {
            get
            {
                lock (Lock)
                {
                    if (_shapes == null)
                    {
                        PnmImage image = ShapesImage;
                        _shapes = Encoder.Encode(image.Pixels, image.Width, image.Height, PixelFormat.Rgb);
                    }
                    return _shapes;
                }
            }
        }

        /// <summary>SAM 3's reduced export (tools/setup/setup-sam3.sh): a folder of its three graphs.</summary>
        internal static string Sam3Models
        {
            get { return Require("SAM2_SAM3_MODELS", "tools/setup/setup-sam3.sh"); }
        }

        /// <summary>CLIP's vocabulary file, which SAM 3's export needs beside it or named.</summary>
        internal static string Sam3Vocabulary
        {
            get { return Require("SAM2_SAM3_VOCAB", "tools/setup/setup-sam3.sh"); }
        }

        /// <summary>The shared SAM 3 model (host output, the vocabulary named). Do not dispose.</summary>
        internal static Sam2ConceptModel ConceptModel
        {
            get
            {
                lock (Lock)
                    return _conceptModel ?? (_conceptModel = new Sam2ConceptModel(Sam3Models, new Sam2ConceptModelOptions
                    {
                        OutputTarget = OutputTarget.Host,
                        VocabularyPath = Sam3Vocabulary,
                    }));
            }
        }

        /// <summary>The shared SAM 3 embedding of demo.ppm (800 × 600). Do not dispose.</summary>
        internal static Sam2Embedding ConceptDemo
        {
            get
            {
                lock (Lock)
                {
                    if (_conceptDemo == null)
                    {
                        PnmImage image = DemoImage;
                        _conceptDemo = ConceptModel.Encode(image.Pixels, image.Width, image.Height, PixelFormat.Rgb);
                    }
                    return _conceptDemo;
                }
            }
        }

        internal static PnmImage DemoImage
        {
            get { return Pnm.Read(Path.Combine(TestData, "demo.ppm"), 3); }
        }

        internal static PnmImage ShapesImage
        {
            get { return Pnm.Read(Path.Combine(TestData, "shapes.ppm"), 3); }
        }

        internal static List<Shape> ShapeList()
        {
            var root = (Dictionary<string, object>)MiniJson.Parse(File.ReadAllText(Path.Combine(TestData, "shapes.json")));
            var shapes = new List<Shape>();
            foreach (Dictionary<string, object> s in (List<object>)root["shapes"])
            {
                var click = (List<object>)s["click"];
                var bbox = (List<object>)s["bbox"];
                shapes.Add(new Shape
                {
                    Name = (string)s["name"],
                    ClickX = Convert.ToInt32(click[0]),
                    ClickY = Convert.ToInt32(click[1]),
                    BBox = new[] { Convert.ToInt32(bbox[0]), Convert.ToInt32(bbox[1]), Convert.ToInt32(bbox[2]), Convert.ToInt32(bbox[3]) },
                    TwinOf = s["twin_of"] as string,
                    MaskFile = (string)s["mask"],
                });
            }
            return shapes;
        }

        /// <summary>A ground-truth mask as 0/1 bytes.</summary>
        internal static byte[] GroundTruth(Shape shape)
        {
            PnmImage pgm = Pnm.Read(Path.Combine(TestData, shape.MaskFile), 1);
            var mask = new byte[pgm.Pixels.Length];
            for (int i = 0; i < mask.Length; i++)
                mask[i] = (byte)(pgm.Pixels[i] >= 128 ? 1 : 0);
            return mask;
        }

        internal static double IoU(byte[] a, byte[] b)
        {
            if (a.Length != b.Length)
                throw new ArgumentException("masks of different sizes: " + a.Length + " and " + b.Length);
            long inter = 0, union = 0;
            for (int i = 0; i < a.Length; i++)
            {
                bool x = a[i] != 0, y = b[i] != 0;
                if (x && y) inter++;
                if (x || y) union++;
            }
            return union == 0 ? 0 : (double)inter / union;
        }

        internal static byte[] Union(byte[] a, byte[] b)
        {
            var u = new byte[a.Length];
            for (int i = 0; i < a.Length; i++)
                u[i] = (byte)(a[i] != 0 || b[i] != 0 ? 1 : 0);
            return u;
        }

        internal static void Cleanup()
        {
            lock (Lock)
            {
                if (_conceptDemo != null) _conceptDemo.Dispose();
                if (_conceptModel != null) _conceptModel.Dispose();
                if (_shapes != null) _shapes.Dispose();
                if (_predictor != null) _predictor.Dispose();
                if (_encoder != null) _encoder.Dispose();
                if (_scratch != null && Directory.Exists(_scratch))
                    Directory.Delete(_scratch, true);
            }
        }

        private static string Require(string variable, string setup = "tools/setup/setup.sh")
        {
            string value = Environment.GetEnvironmentVariable(variable);
            if (string.IsNullOrEmpty(value))
                throw new InvalidOperationException(variable + " is not set; source " + setup + " first");
            return value;
        }
    }

    /// <summary>Just enough JSON for testdata/shapes.json (objects, arrays, strings, numbers, literals).</summary>
    internal static class MiniJson
    {
        internal static object Parse(string text)
        {
            int pos = 0;
            object value = Value(text, ref pos);
            Skip(text, ref pos);
            if (pos != text.Length)
                throw new FormatException("trailing characters at " + pos);
            return value;
        }

        private static object Value(string s, ref int pos)
        {
            Skip(s, ref pos);
            if (pos >= s.Length)
                throw new FormatException("unexpected end");
            char c = s[pos];
            if (c == '{')
            {
                var obj = new Dictionary<string, object>();
                pos++;
                Skip(s, ref pos);
                if (s[pos] == '}') { pos++; return obj; }
                while (true)
                {
                    Skip(s, ref pos);
                    string key = String(s, ref pos);
                    Skip(s, ref pos);
                    Expect(s, ref pos, ':');
                    obj[key] = Value(s, ref pos);
                    Skip(s, ref pos);
                    if (s[pos] == ',') { pos++; continue; }
                    Expect(s, ref pos, '}');
                    return obj;
                }
            }
            if (c == '[')
            {
                var list = new List<object>();
                pos++;
                Skip(s, ref pos);
                if (s[pos] == ']') { pos++; return list; }
                while (true)
                {
                    list.Add(Value(s, ref pos));
                    Skip(s, ref pos);
                    if (s[pos] == ',') { pos++; continue; }
                    Expect(s, ref pos, ']');
                    return list;
                }
            }
            if (c == '"')
                return String(s, ref pos);
            if (Literal(s, ref pos, "true")) return true;
            if (Literal(s, ref pos, "false")) return false;
            if (Literal(s, ref pos, "null")) return null;
            int start = pos;
            while (pos < s.Length && "+-0123456789.eE".IndexOf(s[pos]) >= 0)
                pos++;
            if (start == pos)
                throw new FormatException("unexpected '" + c + "' at " + pos);
            return double.Parse(s.Substring(start, pos - start), CultureInfo.InvariantCulture);
        }

        private static string String(string s, ref int pos)
        {
            Expect(s, ref pos, '"');
            var sb = new StringBuilder();
            while (s[pos] != '"')
            {
                char c = s[pos++];
                if (c != '\\') { sb.Append(c); continue; }
                char e = s[pos++];
                switch (e)
                {
                    case 'n': sb.Append('\n'); break;
                    case 't': sb.Append('\t'); break;
                    case 'r': sb.Append('\r'); break;
                    case 'b': sb.Append('\b'); break;
                    case 'f': sb.Append('\f'); break;
                    case 'u': sb.Append((char)Convert.ToInt32(s.Substring(pos, 4), 16)); pos += 4; break;
                    default: sb.Append(e); break;
                }
            }
            pos++;
            return sb.ToString();
        }

        private static bool Literal(string s, ref int pos, string word)
        {
            if (string.CompareOrdinal(s, pos, word, 0, word.Length) != 0)
                return false;
            pos += word.Length;
            return true;
        }

        private static void Expect(string s, ref int pos, char c)
        {
            if (pos >= s.Length || s[pos] != c)
                throw new FormatException("expected '" + c + "' at " + pos);
            pos++;
        }

        private static void Skip(string s, ref int pos)
        {
            while (pos < s.Length && char.IsWhiteSpace(s[pos]))
                pos++;
        }
    }
}
