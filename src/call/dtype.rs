//! Tensor element types, named as torch names them.

use std::fmt;

/// A torch dtype. Only the names porters meet in `flash_attn_with_kvcache` calls are modelled;
/// anything else is rejected by the call-spec parser with the list of known names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dtype {
    Float16,
    Bfloat16,
    Float8E4m3fn,
    Float8E5m2,
    Float32,
    Float64,
    Int8,
    Uint8,
    Int16,
    Int32,
    Int64,
    Bool,
}

impl Dtype {
    pub const ALL: [Dtype; 12] = [
        Dtype::Float16,
        Dtype::Bfloat16,
        Dtype::Float8E4m3fn,
        Dtype::Float8E5m2,
        Dtype::Float32,
        Dtype::Float64,
        Dtype::Int8,
        Dtype::Uint8,
        Dtype::Int16,
        Dtype::Int32,
        Dtype::Int64,
        Dtype::Bool,
    ];

    /// The name after `torch.` (`torch.float16` → `float16`).
    pub fn torch_name(self) -> &'static str {
        match self {
            Dtype::Float16 => "float16",
            Dtype::Bfloat16 => "bfloat16",
            Dtype::Float8E4m3fn => "float8_e4m3fn",
            Dtype::Float8E5m2 => "float8_e5m2",
            Dtype::Float32 => "float32",
            Dtype::Float64 => "float64",
            Dtype::Int8 => "int8",
            Dtype::Uint8 => "uint8",
            Dtype::Int16 => "int16",
            Dtype::Int32 => "int32",
            Dtype::Int64 => "int64",
            Dtype::Bool => "bool",
        }
    }

    /// Parses a torch name, with or without the `torch.` prefix, including torch's aliases
    /// (`half`, `float`, `int`, `long`, ...).
    pub fn from_torch_name(name: &str) -> Option<Dtype> {
        let name = name.strip_prefix("torch.").unwrap_or(name);
        let dtype = match name {
            "float16" | "half" => Dtype::Float16,
            "bfloat16" => Dtype::Bfloat16,
            "float8_e4m3fn" => Dtype::Float8E4m3fn,
            "float8_e5m2" => Dtype::Float8E5m2,
            "float32" | "float" => Dtype::Float32,
            "float64" | "double" => Dtype::Float64,
            "int8" => Dtype::Int8,
            "uint8" => Dtype::Uint8,
            "int16" | "short" => Dtype::Int16,
            "int32" | "int" => Dtype::Int32,
            "int64" | "long" => Dtype::Int64,
            "bool" => Dtype::Bool,
            _ => return None,
        };
        Some(dtype)
    }

    /// ATen's `ScalarType` name, as in `expected scalar type Int but found Long`.
    pub fn aten_name(self) -> &'static str {
        match self {
            Dtype::Float16 => "Half",
            Dtype::Bfloat16 => "BFloat16",
            Dtype::Float8E4m3fn => "Float8_e4m3fn",
            Dtype::Float8E5m2 => "Float8_e5m2",
            Dtype::Float32 => "Float",
            Dtype::Float64 => "Double",
            Dtype::Int8 => "Char",
            Dtype::Uint8 => "Byte",
            Dtype::Int16 => "Short",
            Dtype::Int32 => "Int",
            Dtype::Int64 => "Long",
            Dtype::Bool => "Bool",
        }
    }

    pub fn size_bytes(self) -> usize {
        match self {
            Dtype::Float8E4m3fn | Dtype::Float8E5m2 | Dtype::Int8 | Dtype::Uint8 | Dtype::Bool => 1,
            Dtype::Float16 | Dtype::Bfloat16 | Dtype::Int16 => 2,
            Dtype::Float32 | Dtype::Int32 => 4,
            Dtype::Float64 | Dtype::Int64 => 8,
        }
    }

    pub fn is_floating_point(self) -> bool {
        matches!(
            self,
            Dtype::Float16
                | Dtype::Bfloat16
                | Dtype::Float8E4m3fn
                | Dtype::Float8E5m2
                | Dtype::Float32
                | Dtype::Float64
        )
    }

    /// The values an integer dtype holds, inclusive (`bool` holds 0 and 1); `None` for floats.
    pub fn int_range(self) -> Option<(i64, i64)> {
        Some(match self {
            Dtype::Bool => (0, 1),
            Dtype::Int8 => (i8::MIN.into(), i8::MAX.into()),
            Dtype::Uint8 => (0, u8::MAX.into()),
            Dtype::Int16 => (i16::MIN.into(), i16::MAX.into()),
            Dtype::Int32 => (i32::MIN.into(), i32::MAX.into()),
            Dtype::Int64 => (i64::MIN, i64::MAX),
            _ => return None,
        })
    }

    /// The dtypes attention kernels take as q/k/v (fp16, bf16, fp8 e4m3).
    pub fn is_attention_input(self) -> bool {
        matches!(self, Dtype::Float16 | Dtype::Bfloat16 | Dtype::Float8E4m3fn)
    }

    /// safetensors' name for the dtype (`BF16`, `F8_E4M3`, `I32`, ...).
    pub fn safetensors(self) -> safetensors::Dtype {
        use safetensors::Dtype as S;
        match self {
            Dtype::Float16 => S::F16,
            Dtype::Bfloat16 => S::BF16,
            Dtype::Float8E4m3fn => S::F8_E4M3,
            Dtype::Float8E5m2 => S::F8_E5M2,
            Dtype::Float32 => S::F32,
            Dtype::Float64 => S::F64,
            Dtype::Int8 => S::I8,
            Dtype::Uint8 => S::U8,
            Dtype::Int16 => S::I16,
            Dtype::Int32 => S::I32,
            Dtype::Int64 => S::I64,
            Dtype::Bool => S::BOOL,
        }
    }

    pub fn from_safetensors(dtype: safetensors::Dtype) -> Option<Dtype> {
        Dtype::ALL.into_iter().find(|d| d.safetensors() == dtype)
    }
}

impl fmt::Display for Dtype {
    /// Python's `str(torch.bfloat16)`: `torch.bfloat16`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "torch.{}", self.torch_name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torch_names_round_trip() {
        for dtype in Dtype::ALL {
            assert_eq!(Dtype::from_torch_name(dtype.torch_name()), Some(dtype));
            assert_eq!(Dtype::from_torch_name(&dtype.to_string()), Some(dtype));
            assert_eq!(Dtype::from_safetensors(dtype.safetensors()), Some(dtype));
        }
        assert_eq!(Dtype::from_torch_name("long"), Some(Dtype::Int64));
        assert_eq!(Dtype::from_torch_name("complex64"), None);
    }
}
