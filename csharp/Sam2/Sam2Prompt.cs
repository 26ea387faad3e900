using System;
using System.Collections.Generic;

namespace Sam2
{
    /// <summary>A click in original image pixels.</summary>
    public struct Sam2Point
    {
        /// <summary>Creates a click.</summary>
        public Sam2Point(float x, float y, PointLabel label = PointLabel.Positive)
        {
            X = x;
            Y = y;
            Label = label;
        }

        /// <summary>Column, in image pixels.</summary>
        public float X;
        /// <summary>Row, in image pixels.</summary>
        public float Y;
        /// <summary>Include (positive) or exclude (negative) what is under the point.</summary>
        public PointLabel Label;
    }

    /// <summary>A box <c>{x1, y1, x2, y2}</c> in original image pixels.</summary>
    public struct Sam2Box
    {
        /// <summary>Creates a box from its top-left and bottom-right corners.</summary>
        public Sam2Box(float x1, float y1, float x2, float y2)
        {
            X1 = x1;
            Y1 = y1;
            X2 = x2;
            Y2 = y2;
        }

        /// <summary>Left.</summary>
        public float X1;
        /// <summary>Top.</summary>
        public float Y1;
        /// <summary>Right.</summary>
        public float X2;
        /// <summary>Bottom.</summary>
        public float Y2;
    }

    /// <summary>
    /// The prompt for one object: clicks, an optional box, and optionally the low-res logits of an
    /// earlier prediction to refine (<see cref="Sam2Masks.GetLowRes(int)"/>). Read during
    /// <see cref="Sam2Predictor.Predict(Sam2Embedding, Sam2Prompt[])"/> only.
    /// </summary>
    public sealed class Sam2Prompt
    {
        private readonly List<Sam2Point> _points = new List<Sam2Point>();

        /// <summary>An empty prompt; add points or a box before predicting.</summary>
        public Sam2Prompt() { }

        /// <summary>A prompt made of clicks.</summary>
        public Sam2Prompt(params Sam2Point[] points)
        {
            if (points == null)
                throw new ArgumentNullException("points");
            _points.AddRange(points);
        }

        /// <summary>A single positive click.</summary>
        public static Sam2Prompt FromPoint(float x, float y)
        {
            return new Sam2Prompt().AddPoint(x, y);
        }

        /// <summary>A box alone.</summary>
        public static Sam2Prompt FromBox(float x1, float y1, float x2, float y2)
        {
            return new Sam2Prompt { Box = new Sam2Box(x1, y1, x2, y2) };
        }

        /// <summary>The clicks.</summary>
        public IList<Sam2Point> Points
        {
            get { return _points; }
        }

        /// <summary>The box, or null.</summary>
        public Sam2Box? Box { get; set; }

        /// <summary>Null, or low-res logits (side × side floats) of an earlier prediction to refine.</summary>
        public float[] MaskInput { get; set; }

        /// <summary>Adds a click and returns this prompt.</summary>
        public Sam2Prompt AddPoint(float x, float y, PointLabel label = PointLabel.Positive)
        {
            _points.Add(new Sam2Point(x, y, label));
            return this;
        }
    }
}
