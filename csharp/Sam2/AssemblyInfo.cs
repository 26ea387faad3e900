using System.Runtime.CompilerServices;

// The tests check the status-to-exception mapper and the native struct layouts directly.
[assembly: InternalsVisibleTo("Sam2.Tests")]
