// A self-contained test runner (no NUnit: only mscorlib, System and System.Core are available
// under Mono). Runs every static method marked [Test], prints one line per test and, as its last
// line, "N passed, M failed"; the exit code is 1 when a test failed.
//
// Usage: Sam2.Tests.exe [substring-of-test-name ...]
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Reflection;

namespace Sam2.Tests
{
    [AttributeUsage(AttributeTargets.Method)]
    internal sealed class TestAttribute : Attribute
    {
        /// <summary>Lower runs earlier; ties run in declaration order, class by class.</summary>
        public int Order { get; set; }
    }

    internal static class TestRunner
    {
        private static int Main(string[] args)
        {
            var tests = typeof(TestRunner).Assembly.GetTypes()
                .SelectMany(t => t.GetMethods(BindingFlags.Public | BindingFlags.NonPublic | BindingFlags.Static))
                .Select(m => new { Method = m, Attribute = m.GetCustomAttribute<TestAttribute>() })
                .Where(t => t.Attribute != null)
                .OrderBy(t => t.Attribute.Order)
                .ThenBy(t => t.Method.DeclaringType.Name, StringComparer.Ordinal)
                .ThenBy(t => t.Method.MetadataToken)
                .Select(t => t.Method)
                .Where(m => args.Length == 0 || args.Any(a => Name(m).IndexOf(a, StringComparison.OrdinalIgnoreCase) >= 0))
                .ToList();

            int passed = 0, failed = 0;
            var total = Stopwatch.StartNew();
            foreach (MethodInfo test in tests)
            {
                var watch = Stopwatch.StartNew();
                Exception failure = null;
                try
                {
                    test.Invoke(null, null);
                }
                catch (TargetInvocationException e)
                {
                    failure = e.InnerException ?? e;
                }
                catch (Exception e)
                {
                    failure = e;
                }
                watch.Stop();
                if (failure == null)
                {
                    passed++;
                    Console.WriteLine("ok    " + Name(test) + " (" + watch.ElapsedMilliseconds + " ms)");
                }
                else
                {
                    failed++;
                    Console.WriteLine("FAIL  " + Name(test) + " (" + watch.ElapsedMilliseconds + " ms): " +
                                      failure.GetType().Name + ": " + failure.Message);
                    foreach (string line in (failure.StackTrace ?? "").Split('\n'))
                        if (line.Trim().Length > 0)
                            Console.WriteLine("        " + line.Trim());
                }
            }
            Fixture.Cleanup();
            Console.WriteLine("(" + tests.Count + " tests in " + total.ElapsedMilliseconds + " ms)");
            Console.WriteLine(passed + " passed, " + failed + " failed");
            return failed == 0 && tests.Count > 0 ? 0 : 1;
        }

        private static string Name(MethodInfo test)
        {
            return test.DeclaringType.Name + "." + test.Name;
        }
    }

    /// <summary>Assertions that say what was expected and what was found.</summary>
    internal static class Assert
    {
        internal static void True(bool condition, string what)
        {
            if (!condition)
                throw new AssertionException(what);
        }

        internal static void Equal<T>(T expected, T actual, string what)
        {
            if (!EqualityComparer<T>.Default.Equals(expected, actual))
                throw new AssertionException(what + ": expected <" + expected + ">, got <" + actual + ">");
        }

        internal static void AtLeast(double minimum, double actual, string what)
        {
            if (!(actual >= minimum))
                throw new AssertionException(what + ": expected at least " + minimum + ", got " + actual);
        }

        internal static void Contains(string expected, string actual, string what)
        {
            if (actual == null || actual.IndexOf(expected, StringComparison.Ordinal) < 0)
                throw new AssertionException(what + ": expected to contain \"" + expected + "\", got \"" + actual + "\"");
        }

        internal static void SameBytes(byte[] expected, byte[] actual, string what)
        {
            Equal(expected.Length, actual.Length, what + " (length)");
            for (int i = 0; i < expected.Length; i++)
                if (expected[i] != actual[i])
                    throw new AssertionException(what + ": first difference at byte " + i);
        }

        /// <summary>Runs <paramref name="action"/> and returns the exception of exactly type T it throws.</summary>
        internal static T Throws<T>(Action action, string what) where T : Exception
        {
            try
            {
                action();
            }
            catch (Exception e)
            {
                if (e.GetType() == typeof(T))
                    return (T)e;
                throw new AssertionException(what + ": expected " + typeof(T).Name + ", got " + e.GetType().Name + ": " + e.Message);
            }
            throw new AssertionException(what + ": expected " + typeof(T).Name + ", nothing was thrown");
        }
    }

    internal sealed class AssertionException : Exception
    {
        internal AssertionException(string message) : base(message) { }
    }
}
