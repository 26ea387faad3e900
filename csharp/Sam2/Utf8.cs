using System;
using System.Runtime.InteropServices;
using System.Text;

namespace Sam2
{
    /// <summary>UTF-8 marshalling by hand, the same on Mono and every .NET.</summary>
    internal static class Utf8
    {
        private static readonly UTF8Encoding Strict = new UTF8Encoding(false, true);

        /// <summary>NUL-terminated UTF-8 bytes of <paramref name="value"/>, or null for null.</summary>
        internal static byte[] ToNative(string value)
        {
            if (value == null)
                return null;
            if (value.IndexOf('\0') >= 0)
                throw new ArgumentException("must not contain NUL characters", "value");
            int count = Strict.GetByteCount(value);
            var bytes = new byte[count + 1];
            Strict.GetBytes(value, 0, value.Length, bytes, 0);
            return bytes;
        }

        /// <summary>NUL-terminated UTF-8 bytes of an argument; a NUL inside is reported under <paramref name="paramName"/>.</summary>
        internal static byte[] ToNative(string value, string paramName)
        {
            if (value != null && value.IndexOf('\0') >= 0)
                throw new ArgumentException("must not contain NUL characters", paramName);
            return ToNative(value);
        }

        /// <summary>Decodes a NUL-terminated UTF-8 string the library owns; IntPtr.Zero gives null.</summary>
        internal static string FromNative(IntPtr text)
        {
            if (text == IntPtr.Zero)
                return null;
            int length = 0;
            while (Marshal.ReadByte(text, length) != 0)
                length++;
            if (length == 0)
                return string.Empty;
            var bytes = new byte[length];
            Marshal.Copy(text, bytes, 0, length);
            return Encoding.UTF8.GetString(bytes);
        }

        /// <summary>Decodes <paramref name="length"/> bytes of a caller buffer.</summary>
        internal static string FromBuffer(byte[] buffer, int length)
        {
            return Encoding.UTF8.GetString(buffer, 0, length);
        }
    }
}
