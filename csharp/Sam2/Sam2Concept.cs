using System;
using System.Collections.Generic;
using System.Collections.ObjectModel;
using Microsoft.Win32.SafeHandles;

namespace Sam2
{
    /// <summary>
    /// An exemplar box of a concept: <c>{x1, y1, x2, y2}</c> in image pixels (inside the image,
    /// x1 &lt; x2, y1 &lt; y2), showing the concept (positive) or something that is not it.
    /// </summary>
    public struct Sam2Exemplar
    {
        /// <summary>Creates an exemplar box from its top-left and bottom-right corners.</summary>
        public Sam2Exemplar(float x1, float y1, float x2, float y2, bool positive = true)
        {
            X1 = x1;
            Y1 = y1;
            X2 = x2;
            Y2 = y2;
            Positive = positive;
        }

        /// <summary>Left.</summary>
        public float X1;
        /// <summary>Top.</summary>
        public float Y1;
        /// <summary>Right.</summary>
        public float X2;
        /// <summary>Bottom.</summary>
        public float Y2;
        /// <summary>True: the box shows the concept; false: it shows something that is not it.</summary>
        public bool Positive;
    }

    /// <summary>
    /// One concept to find with <see cref="Sam2ConceptModel"/>: a phrase, exemplar boxes, or both.
    /// Read during <c>Segment</c> only.
    /// </summary>
    public sealed class Sam2Concept
    {
        private readonly List<Sam2Exemplar> _exemplars = new List<Sam2Exemplar>();

        /// <summary>An empty concept; set a phrase or add exemplar boxes before segmenting.</summary>
        public Sam2Concept() { }

        /// <summary>A phrase, with exemplar boxes or none.</summary>
        public Sam2Concept(string phrase, params Sam2Exemplar[] exemplars)
        {
            Phrase = phrase;
            if (exemplars != null)
                _exemplars.AddRange(exemplars);
        }

        /// <summary>Exemplar boxes alone.</summary>
        public static Sam2Concept FromExemplars(params Sam2Exemplar[] exemplars)
        {
            return new Sam2Concept(null, exemplars);
        }

        /// <summary>
        /// Null (or only white space) with boxes alone, or a phrase ("yellow school bus") of at most
        /// 16 KiB of UTF-8. A phrase over 30 tokens is cut as SAM 3's tokenizer cuts it, and
        /// <see cref="Sam2ConceptSummary.Truncated"/> says so.
        /// </summary>
        public string Phrase { get; set; }

        /// <summary>The exemplar boxes, at most <see cref="Sam2ConceptModel.MaxExemplars"/>.</summary>
        public IList<Sam2Exemplar> Exemplars
        {
            get { return _exemplars; }
        }

        /// <summary>Adds an exemplar box and returns this concept.</summary>
        public Sam2Concept AddExemplar(float x1, float y1, float x2, float y2, bool positive = true)
        {
            _exemplars.Add(new Sam2Exemplar(x1, y1, x2, y2, positive));
            return this;
        }

        /// <summary>The native struct of concept <paramref name="index"/>; its phrase and boxes are pinned in <paramref name="pins"/>.</summary>
        internal unsafe NativeMethods.sam2_concept ToNative(int index, PinSet pins)
        {
            var native = new NativeMethods.sam2_concept();
            if (Phrase != null)
            {
                if (Phrase.IndexOf('\0') >= 0)
                    throw new ArgumentException("concepts[" + index + "].Phrase contains a NUL character", "concepts");
                native.phrase = pins.Pin(Utf8.ToNative(Phrase));
            }
            if (_exemplars.Count > 0)
            {
                var boxes = new NativeMethods.sam2_exemplar[_exemplars.Count];
                for (int j = 0; j < boxes.Length; j++)
                {
                    Sam2Exemplar e = _exemplars[j];
                    var box = new NativeMethods.sam2_exemplar();
                    box.box[0] = e.X1;
                    box.box[1] = e.Y1;
                    box.box[2] = e.X2;
                    box.box[3] = e.Y2;
                    box.positive = e.Positive ? 1u : 0u;
                    boxes[j] = box;
                }
                native.exemplars = pins.Pin(boxes);
                native.exemplar_count = (UIntPtr)boxes.Length;
            }
            return native;
        }
    }

    /// <summary>What one concept gave beside its instances.</summary>
    public struct Sam2ConceptSummary
    {
        /// <summary>The probability that the concept is in the image at all (SAM 3's presence head), in [0, 1].</summary>
        public float Presence;
        /// <summary>True when the phrase was longer than the text encoder takes (30 tokens) and was cut.</summary>
        public bool Truncated;
        /// <summary>Its instances in <see cref="Sam2ConceptResult.Instances"/>.</summary>
        public int InstanceCount;
    }

    /// <summary>One instance found, beside its mask.</summary>
    public struct Sam2ConceptInstance
    {
        /// <summary>The concept that found it: its index in the list given to <c>Segment</c>.</summary>
        public int Concept;
        /// <summary>SAM 3's score: the query's probability times the concept's presence.</summary>
        public float Score;
        /// <summary>The detector's box in image pixels (not clipped to the image).</summary>
        public Sam2Box Box;
        /// <summary>Pixels in the mask (0 when the result was made without masks).</summary>
        public long Area;
        /// <summary>Which of the decoder's queries it is.</summary>
        public int Query;
    }

    /// <summary>Owns a <c>sam2_concept_result*</c>; released with <c>sam2_concept_result_free</c>.</summary>
    internal sealed class ConceptResultHandle : SafeHandleZeroOrMinusOneIsInvalid
    {
        /// <summary>Used by the marshaller for out-params.</summary>
        public ConceptResultHandle() : base(true) { }

        protected override bool ReleaseHandle()
        {
            NativeMethods.sam2_concept_result_free(handle);
            return true;
        }
    }

    /// <summary>
    /// The instances of one <see cref="Sam2ConceptModel"/> segmentation (<c>sam2_concept_result</c>).
    /// <see cref="Concepts"/> and <see cref="Instances"/> are managed copies read when it is made;
    /// the masks stay native until <see cref="GetMask(int)"/> copies one. Immutable; it does not
    /// depend on the model or the embedding and may outlive them.
    /// </summary>
    public sealed class Sam2ConceptResult : Sam2NativeObject
    {
        internal unsafe Sam2ConceptResult(ConceptResultHandle handle, bool masks) : base(handle)
        {
            try
            {
                UIntPtr instances, concepts;
                uint width, height;
                Sam2Error.Check(NativeMethods.sam2_concept_result_count(handle, out instances, out concepts, out width, out height));
                Width = checked((int)width);
                Height = checked((int)height);
                HasMasks = masks;
                var summaries = new Sam2ConceptSummary[checked((int)concepts.ToUInt64())];
                for (int i = 0; i < summaries.Length; i++)
                {
                    NativeMethods.sam2_concept_summary s;
                    Sam2Error.Check(NativeMethods.sam2_concept_result_summary(handle, (UIntPtr)i, out s));
                    summaries[i] = new Sam2ConceptSummary
                    {
                        Presence = s.presence,
                        Truncated = s.truncated != 0,
                        InstanceCount = checked((int)s.instances.ToUInt64()),
                    };
                }
                var found = new Sam2ConceptInstance[checked((int)instances.ToUInt64())];
                for (int i = 0; i < found.Length; i++)
                {
                    NativeMethods.sam2_instance_info info;
                    Sam2Error.Check(NativeMethods.sam2_concept_result_instance(handle, (UIntPtr)i, out info));
                    found[i] = new Sam2ConceptInstance
                    {
                        Concept = checked((int)info.concept.ToUInt64()),
                        Score = info.score,
                        Box = new Sam2Box(info.box[0], info.box[1], info.box[2], info.box[3]),
                        Area = checked((long)info.area),
                        Query = checked((int)info.query),
                    };
                }
                Concepts = new ReadOnlyCollection<Sam2ConceptSummary>(summaries);
                Instances = new ReadOnlyCollection<Sam2ConceptInstance>(found);
            }
            catch
            {
                handle.Dispose();
                throw;
            }
        }

        internal ConceptResultHandle Handle
        {
            get { return (ConceptResultHandle)OpenHandle; }
        }

        /// <summary>Width of every mask (the image's).</summary>
        public int Width { get; private set; }

        /// <summary>Height of every mask (the image's).</summary>
        public int Height { get; private set; }

        /// <summary>False when the segmentation was asked for boxes and scores only (<see cref="Sam2ConceptSegmentOptions.Masks"/>).</summary>
        public bool HasMasks { get; private set; }

        /// <summary>What each concept gave, in the order given.</summary>
        public IReadOnlyList<Sam2ConceptSummary> Concepts { get; private set; }

        /// <summary>Every instance, concept by concept in the order given, the best first within each.</summary>
        public IReadOnlyList<Sam2ConceptInstance> Instances { get; private set; }

        /// <summary>Instance <paramref name="index"/>'s mask: Width × Height bytes, row-major, 1 inside.</summary>
        /// <exception cref="ArgumentException">The result was made without masks (<see cref="HasMasks"/>).</exception>
        public byte[] GetMask(int index)
        {
            var mask = new byte[checked(Width * Height)];
            GetMask(index, mask);
            return mask;
        }

        /// <summary>Copies instance <paramref name="index"/>'s mask into <paramref name="buffer"/> (at least Width × Height bytes), for a host that reuses one array.</summary>
        /// <exception cref="ArgumentException">The buffer is too small (ParamName "buffer"), or the result was made without masks.</exception>
        public void GetMask(int index, byte[] buffer)
        {
            ConceptResultHandle handle = Handle;
            if (index < 0 || index >= Instances.Count)
                throw new ArgumentOutOfRangeException("index", index, "must be below Instances.Count (" + Instances.Count + ")");
            if (buffer == null)
                throw new ArgumentNullException("buffer");
            if (buffer.Length < Width * Height)
                throw new ArgumentException("must hold at least Width × Height = " + (Width * Height) + " bytes, not " + buffer.Length, "buffer");
            Sam2Error.Check(NativeMethods.sam2_concept_result_mask(handle, (UIntPtr)index, buffer, (UIntPtr)buffer.Length));
        }
    }
}
