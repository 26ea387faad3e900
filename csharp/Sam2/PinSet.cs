using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;

namespace Sam2
{
    /// <summary>Arrays pinned for the duration of one native call; Dispose unpins them all.</summary>
    internal sealed class PinSet : IDisposable
    {
        private readonly List<GCHandle> _handles = new List<GCHandle>();

        /// <summary>Pins <paramref name="array"/> (of blittable elements) and returns the address of its first element.</summary>
        internal IntPtr Pin(Array array)
        {
            GCHandle handle = GCHandle.Alloc(array, GCHandleType.Pinned);
            _handles.Add(handle);
            return handle.AddrOfPinnedObject();
        }

        public void Dispose()
        {
            foreach (GCHandle handle in _handles)
                handle.Free();
            _handles.Clear();
        }
    }
}
