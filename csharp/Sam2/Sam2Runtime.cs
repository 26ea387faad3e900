using System;
using System.Threading;

namespace Sam2
{
    /// <summary>A log message from the native library.</summary>
    public sealed class Sam2LogEventArgs : EventArgs
    {
        internal Sam2LogEventArgs(Sam2LogLevel level, string message)
        {
            Level = level;
            Message = message;
        }

        /// <summary>Severity.</summary>
        public Sam2LogLevel Level { get; private set; }

        /// <summary>The message text.</summary>
        public string Message { get; private set; }
    }

    /// <summary>
    /// Process-wide state of the native library: which ONNX Runtime it loads, versions, and its log.
    /// A static class: a process holds one ONNX Runtime for its whole life, so there is nothing
    /// to dispose.
    /// </summary>
    public static class Sam2Runtime
    {
        private static readonly object LogLock = new object();
        private static EventHandler<Sam2LogEventArgs> _logHandlers;
        private static Sam2LogLevel _logLevel = Sam2LogLevel.Warning;
        private static bool _logRegistered;

        // The delegate handed to sam2_set_log_callback. It stays reachable from this static field
        // for the life of the process, not only while registered: the library may still be inside
        // a call to it on another thread when sam2_set_log_callback(NULL) returns, and a collected
        // delegate's thunk would crash that thread.
        private static readonly NativeMethods.sam2_log_callback NativeLogCallback = OnNativeLog;

        /// <summary>
        /// Loads ONNX Runtime and creates the library's environment (<c>sam2_runtime_init</c>).
        /// Optional: every other call initialises by searching on first use.
        /// </summary>
        /// <param name="onnxRuntimePath">Full path of libonnxruntime (1.30 or newer), or null to
        /// search: SAM2_ONNXRUNTIME_PATH, ORT_DYLIB_PATH, the directory of libsam2, then the
        /// system's library search.</param>
        /// <exception cref="Sam2Exception">Status RuntimeNotFound: nothing usable loaded (the message names every path tried).</exception>
        /// <exception cref="Sam2EnvironmentConfigurationException">A different ONNX Runtime is already loaded.</exception>
        public static void Initialize(string onnxRuntimePath = null)
        {
            byte[] path = Utf8.ToNative(onnxRuntimePath, "onnxRuntimePath");
            Sam2Error.Check(NativeMethods.sam2_runtime_init(path));
        }

        /// <summary>The native library's version, "MAJOR.MINOR.PATCH" (<c>sam2_version</c>).</summary>
        public static string Version
        {
            get { return Utf8.FromNative(NativeMethods.sam2_version()); }
        }

        /// <summary>The sam2 version of the header this wrapper was written against (SAM2_VERSION_MAJOR/MINOR/PATCH).</summary>
        public static string BindingVersion
        {
            get
            {
                return NativeMethods.SAM2_VERSION_MAJOR + "." + NativeMethods.SAM2_VERSION_MINOR + "." + NativeMethods.SAM2_VERSION_PATCH;
            }
        }

        /// <summary>The loaded ONNX Runtime's version ("1.31.1"), or null before it is loaded.</summary>
        public static string RuntimeVersion
        {
            get { return Utf8.FromNative(NativeMethods.sam2_runtime_version()); }
        }

        /// <summary>The library's description of a status code (<c>sam2_status_str</c>).</summary>
        public static string DescribeStatus(Sam2Status status)
        {
            return Utf8.FromNative(NativeMethods.sam2_status_str((uint)status));
        }

        /// <summary>
        /// Lowest level delivered to <see cref="Log"/> (default <see cref="Sam2LogLevel.Warning"/>).
        /// </summary>
        public static Sam2LogLevel LogLevel
        {
            get { lock (LogLock) return _logLevel; }
            set
            {
                lock (LogLock)
                {
                    if (value > Sam2LogLevel.Error)
                        throw new ArgumentOutOfRangeException("value", value, "must be Debug, Info, Warning or Error");
                    _logLevel = value;
                    if (_logRegistered)
                        Sam2Error.Check(NativeMethods.sam2_set_log_callback(NativeLogCallback, IntPtr.Zero, (uint)value));
                }
            }
        }

        /// <summary>
        /// Log messages of the native library at <see cref="LogLevel"/> or above. The native
        /// callback is installed when the first handler is added and removed with the last.
        /// Handlers may run on any thread, including ONNX Runtime's, must be quick, and must not
        /// call into sam2. An exception thrown by a handler is swallowed (it must not unwind into
        /// native code).
        /// </summary>
        public static event EventHandler<Sam2LogEventArgs> Log
        {
            add
            {
                lock (LogLock)
                {
                    if (!_logRegistered && value != null)
                    {
                        Sam2Error.Check(NativeMethods.sam2_set_log_callback(NativeLogCallback, IntPtr.Zero, (uint)_logLevel));
                        _logRegistered = true;
                    }
                    _logHandlers += value;
                }
            }
            remove
            {
                lock (LogLock)
                {
                    _logHandlers -= value;
                    if (_logHandlers == null && _logRegistered)
                    {
                        _logRegistered = false;
                        Sam2Error.Check(NativeMethods.sam2_set_log_callback(null, IntPtr.Zero, (uint)_logLevel));
                    }
                }
            }
        }

        /// <summary>True while the native log callback is installed (some handler is registered).</summary>
        public static bool IsLogCallbackInstalled
        {
            get { lock (LogLock) return _logRegistered; }
        }

        private static void OnNativeLog(uint level, IntPtr message, IntPtr userData)
        {
            // Nothing may unwind into the native caller: every failure here is swallowed, and one
            // failing handler does not keep the message from the others.
            try
            {
                EventHandler<Sam2LogEventArgs> handlers = Volatile.Read(ref _logHandlers);
                if (handlers == null)
                    return;
                var args = new Sam2LogEventArgs((Sam2LogLevel)level, Utf8.FromNative(message));
                foreach (Delegate handler in handlers.GetInvocationList())
                {
                    try
                    {
                        ((EventHandler<Sam2LogEventArgs>)handler)(null, args);
                    }
                    catch (Exception)
                    {
                    }
                }
            }
            catch (Exception)
            {
            }
        }
    }
}
