// Reads the test images (testdata/*.ppm, *.pgm) for the programs around the library: the sample,
// the tests and the packaging test's NuGet consumer. One copy: csharp/Shared/ is compiled into each
// of them (tools/ci/test-csharp.sh, tools/ci/test-packaging.sh, Sample.csproj, Tests.csproj); it is
// not part of Sam2.dll.
using System;
using System.Globalization;
using System.IO;
using System.Text;

/// <summary>A decoded image: Height rows of Width pixels of Channels bytes, tightly packed.</summary>
internal sealed class PnmImage
{
    public int Width;
    public int Height;
    public int Channels;
    public byte[] Pixels;
}

/// <summary>Binary Netpbm: PGM (P5, one byte a pixel) and PPM (P6, RGB), maxval 255.</summary>
internal static class Pnm
{
    /// <summary>Reads a binary PGM or PPM; comments in the header are skipped.</summary>
    /// <param name="path">The file.</param>
    /// <param name="channels">3 to accept only a PPM, 1 only a PGM, 0 either.</param>
    /// <exception cref="InvalidDataException">Another format, another maxval, or too few pixels.</exception>
    internal static PnmImage Read(string path, int channels = 0)
    {
        byte[] data = File.ReadAllBytes(path);
        int pos = 0;
        string magic = Token(data, ref pos);
        int found = magic == "P6" ? 3 : magic == "P5" ? 1 : 0;
        if (found == 0 || (channels != 0 && channels != found))
            throw new InvalidDataException(path + ": not a binary " + (channels == 3 ? "PPM (P6)" : channels == 1 ? "PGM (P5)" : "PGM/PPM"));
        int width = int.Parse(Token(data, ref pos), CultureInfo.InvariantCulture);
        int height = int.Parse(Token(data, ref pos), CultureInfo.InvariantCulture);
        if (Token(data, ref pos) != "255")
            throw new InvalidDataException(path + ": only maxval 255 is supported");
        pos++; // the single whitespace byte after maxval
        var pixels = new byte[width * height * found];
        if (data.Length - pos < pixels.Length)
            throw new InvalidDataException(path + ": truncated");
        Buffer.BlockCopy(data, pos, pixels, 0, pixels.Length);
        return new PnmImage { Width = width, Height = height, Channels = found, Pixels = pixels };
    }

    private static string Token(byte[] data, ref int pos)
    {
        while (pos < data.Length)
        {
            if (data[pos] == '#')
                while (pos < data.Length && data[pos] != '\n')
                    pos++;
            else if (char.IsWhiteSpace((char)data[pos]))
                pos++;
            else
                break;
        }
        var token = new StringBuilder();
        while (pos < data.Length && !char.IsWhiteSpace((char)data[pos]))
            token.Append((char)data[pos++]);
        return token.ToString();
    }
}
