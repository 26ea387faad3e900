//! ONNX's element types (`onnx.TensorProto.DataType`), once: their numbers, their sizes, and
//! ONNX Runtime's names for them. Every other module says `DataType::Float` rather than `1`, and
//! asks a tensor's size here (a leaf: it depends on nothing of the library).

use ort::value::{TensorElementType, Value, ValueType, ValueTypeMarker};

/// An element type of an ONNX tensor, by its `TensorProto.DataType` number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum DataType {
    Float = 1,
    Uint8 = 2,
    Int8 = 3,
    Uint16 = 4,
    Int16 = 5,
    Int32 = 6,
    Int64 = 7,
    String = 8,
    Bool = 9,
    Float16 = 10,
    Double = 11,
    Uint32 = 12,
    Uint64 = 13,
    Complex64 = 14,
    Complex128 = 15,
    Bfloat16 = 16,
    Float8E4m3fn = 17,
    Float8E4m3fnuz = 18,
    Float8E5m2 = 19,
    Float8E5m2fnuz = 20,
    Uint4 = 21,
    Int4 = 22,
    Float4E2m1 = 23,
    Float8E8m0 = 24,
    Uint2 = 25,
    Int2 = 26,
}

impl DataType {
    /// Every type, in the order of their numbers.
    const ALL: [DataType; 26] = [
        DataType::Float,
        DataType::Uint8,
        DataType::Int8,
        DataType::Uint16,
        DataType::Int16,
        DataType::Int32,
        DataType::Int64,
        DataType::String,
        DataType::Bool,
        DataType::Float16,
        DataType::Double,
        DataType::Uint32,
        DataType::Uint64,
        DataType::Complex64,
        DataType::Complex128,
        DataType::Bfloat16,
        DataType::Float8E4m3fn,
        DataType::Float8E4m3fnuz,
        DataType::Float8E5m2,
        DataType::Float8E5m2fnuz,
        DataType::Uint4,
        DataType::Int4,
        DataType::Float4E2m1,
        DataType::Float8E8m0,
        DataType::Uint2,
        DataType::Int2,
    ];

    /// The type of a `TensorProto.DataType` number (`None`: 0, UNDEFINED, or one this ONNX
    /// version does not define).
    pub(crate) fn from_code(code: i64) -> Option<DataType> {
        DataType::ALL.into_iter().find(|t| *t as i64 == code)
    }

    /// Its `TensorProto.DataType` number.
    pub(crate) fn code(self) -> u64 {
        self as u64
    }

    /// Bytes of one element, or `None` for types whose elements are not a whole number of bytes
    /// (the 4- and 2-bit ones) and strings.
    pub(crate) fn size(self) -> Option<usize> {
        use DataType::*;
        match self {
            Uint8 | Int8 | Bool | Float8E4m3fn | Float8E4m3fnuz | Float8E5m2 | Float8E5m2fnuz
            | Float8E8m0 => Some(1),
            Uint16 | Int16 | Float16 | Bfloat16 => Some(2),
            Float | Int32 | Uint32 => Some(4),
            Int64 | Double | Uint64 | Complex64 => Some(8),
            Complex128 => Some(16),
            String | Uint4 | Int4 | Float4E2m1 | Uint2 | Int2 => None,
        }
    }

    /// Whether its elements are integers (shape arithmetic's types).
    pub(crate) fn is_integer(self) -> bool {
        use DataType::*;
        matches!(
            self,
            Uint8 | Int8 | Uint16 | Int16 | Int32 | Int64 | Uint32 | Uint64
        )
    }

    /// The type of an ONNX Runtime element type, where ONNX has it.
    pub(crate) fn of_ort(ty: TensorElementType) -> Option<DataType> {
        use TensorElementType as T;
        Some(match ty {
            T::Float32 => DataType::Float,
            T::Uint8 => DataType::Uint8,
            T::Int8 => DataType::Int8,
            T::Uint16 => DataType::Uint16,
            T::Int16 => DataType::Int16,
            T::Int32 => DataType::Int32,
            T::Int64 => DataType::Int64,
            T::String => DataType::String,
            T::Bool => DataType::Bool,
            T::Float16 => DataType::Float16,
            T::Float64 => DataType::Double,
            T::Uint32 => DataType::Uint32,
            T::Uint64 => DataType::Uint64,
            T::Bfloat16 => DataType::Bfloat16,
            _ => return None,
        })
    }
}

/// Bytes of one element of an ONNX Runtime element type (4 for those ONNX sizes otherwise).
pub(crate) fn ort_element_size(ty: TensorElementType) -> usize {
    DataType::of_ort(ty).and_then(DataType::size).unwrap_or(4)
}

/// Bytes of a dense tensor's data (0 for a value that is not a tensor).
pub(crate) fn tensor_byte_len<T: ValueTypeMarker + ?Sized>(value: &Value<T>) -> usize {
    match value.dtype() {
        ValueType::Tensor { ty, shape, .. } => {
            let elems: i64 = shape.iter().product();
            elems.max(0) as usize * ort_element_size(*ty)
        }
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_sizes_and_ort_names_agree() {
        for t in DataType::ALL {
            assert_eq!(DataType::from_code(t.code() as i64), Some(t));
        }
        assert_eq!(DataType::from_code(0), None);
        assert_eq!(DataType::from_code(27), None);
        assert_eq!(DataType::from_code(-1), None);
        assert_eq!(DataType::Float.size(), Some(4));
        assert_eq!(DataType::Int64.size(), Some(8));
        assert_eq!(DataType::Float16.size(), Some(2));
        assert_eq!(DataType::Int4.size(), None);
        assert_eq!(DataType::Complex128.size(), Some(16));
        assert!(DataType::Int64.is_integer() && !DataType::Float.is_integer());
        assert!(!DataType::Bool.is_integer());
        assert_eq!(ort_element_size(TensorElementType::Float16), 2);
        assert_eq!(ort_element_size(TensorElementType::Bool), 1);
        assert_eq!(ort_element_size(TensorElementType::Uint64), 8);
        assert_eq!(
            DataType::of_ort(TensorElementType::Float32),
            Some(DataType::Float)
        );
    }
}
