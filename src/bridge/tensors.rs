//! safetensors files of a bundle: tensors kept as raw little-endian bytes in their own dtype, so
//! that caches compare bit for bit and nothing is rounded twice.

use crate::call::{Dtype, TensorArg};
use crate::files::{self, FileError};
use crate::memory::{Budget, OverBudget};
use crate::numeric::{from_le_bytes, to_le_bytes};
use crate::tensor::HostTensor;
use ndarray::{ArrayD, IxDyn};
use safetensors::SafeTensors;
use safetensors::tensor::TensorView;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// One tensor as stored: dtype, logical shape, row-major little-endian bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredTensor {
    pub dtype: Dtype,
    pub shape: Vec<usize>,
    pub bytes: Vec<u8>,
}

impl StoredTensor {
    pub fn from_host(t: &HostTensor) -> StoredTensor {
        let values: Vec<f64> = t.data.iter().copied().collect();
        StoredTensor::from_values(t.dtype, t.shape(), &values)
    }

    /// How a bundle stores the tensor argument `arg` with the values `t`: row-major over its
    /// shape, or, when its layout maps several elements to one memory location (`expand`'s stride
    /// 0), as its storage (1-D, `arg.storage_extent()` elements) for the runner to view with the
    /// strides of `call.json`: a copy into such a layout is refused by torch.
    pub fn for_arg(t: &HostTensor, arg: &TensorArg) -> StoredTensor {
        if !arg.aliases() {
            return StoredTensor::from_host(t);
        }
        let mut storage = vec![0.0; arg.storage_extent().unwrap_or(0)];
        for (offset, value) in arg.storage_offsets().into_iter().zip(t.data.iter()) {
            storage[offset] = *value;
        }
        StoredTensor::from_values(t.dtype, &[storage.len()], &storage)
    }

    /// Stores `values` (row-major over `shape`) as `dtype`, rounding as torch's conversion does.
    pub fn from_values(dtype: Dtype, shape: &[usize], values: &[f64]) -> StoredTensor {
        StoredTensor {
            dtype,
            shape: shape.to_vec(),
            bytes: to_le_bytes(dtype, values),
        }
    }

    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// The values, exactly (every stored dtype converts to f64 without rounding).
    pub fn to_host(&self) -> HostTensor {
        let values = from_le_bytes(self.dtype, &self.bytes);
        HostTensor {
            dtype: self.dtype,
            data: ArrayD::from_shape_vec(IxDyn(&self.shape), values)
                .expect("safetensors checked that the bytes match the shape"),
        }
    }
}

/// Tensors of one file, by name.
pub type TensorFile = BTreeMap<String, StoredTensor>;

#[derive(Debug, Error)]
pub enum TensorFileError {
    #[error(transparent)]
    File(#[from] FileError),
    #[error("{path}: not a safetensors file: {message}")]
    Format { path: PathBuf, message: String },
    #[error(
        "{path}: tensor `{name}` has dtype {dtype:?}, which no torch dtype fa3conform models has"
    )]
    Dtype {
        path: PathBuf,
        name: String,
        dtype: safetensors::Dtype,
    },
    #[error("{path}: {over}")]
    OverBudget { path: PathBuf, over: OverBudget },
}

fn format_error(path: &Path, e: impl ToString) -> TensorFileError {
    TensorFileError::Format {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// Writes `tensors` to `path`, through no symbolic link ([`files::write_new`]).
pub fn write_tensor_file(path: &Path, tensors: &TensorFile) -> Result<(), TensorFileError> {
    let views = tensors
        .iter()
        .map(|(name, t)| {
            TensorView::new(t.dtype.safetensors(), t.shape.clone(), &t.bytes)
                .map(|view| (name.as_str(), view))
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format_error(path, format!("{e:?}")))?;
    let metadata = HashMap::from([("format".to_string(), "fa3conform-bundle-1".to_string())]);
    let bytes = safetensors::serialize(views, &Some(metadata))
        .map_err(|e| format_error(path, format!("{e:?}")))?;
    Ok(files::write_new(path, &bytes)?)
}

/// Reads every tensor of `path` within `budget`, which holds the file's stored tensors and their
/// decoding to f64 afterwards (the file's own bytes only while reading). The decoded size is
/// checked from the header before anything is copied.
pub fn read_tensor_file(path: &Path, budget: &mut Budget) -> Result<TensorFile, TensorFileError> {
    let buffer = files::read(path, budget.left())?;
    let file =
        SafeTensors::deserialize(&buffer).map_err(|e| format_error(path, format!("{e:?}")))?;
    let views = file.tensors();
    let stored: u128 = views.iter().map(|(_, v)| v.data().len() as u128).sum();
    let decoded: u128 = views
        .iter()
        .map(|(_, v)| v.shape().iter().map(|&d| d as u128).product::<u128>() * 8)
        .sum();
    let over = |over| TensorFileError::OverBudget {
        path: path.to_path_buf(),
        over,
    };
    budget
        .hold("its bytes", buffer.len() as u128)
        .and_then(|()| budget.hold("its tensors, stored and decoded to f64", stored + decoded))
        .map_err(over)?;
    budget.release(buffer.len() as u128);
    views
        .into_iter()
        .map(|(name, view)| {
            let dtype =
                Dtype::from_safetensors(view.dtype()).ok_or_else(|| TensorFileError::Dtype {
                    path: path.to_path_buf(),
                    name: name.clone(),
                    dtype: view.dtype(),
                })?;
            // ndarray holds at most isize::MAX elements over the non-zero axes; a tensor with a
            // zero axis has no bytes, so safetensors accepts any other axis.
            let elements = view
                .shape()
                .iter()
                .filter(|&&d| d != 0)
                .try_fold(1usize, |n, &d| n.checked_mul(d))
                .filter(|&n| n <= isize::MAX as usize);
            if elements.is_none() {
                return Err(format_error(
                    path,
                    format!(
                        "tensor `{name}` has shape {:?}, too large to index",
                        view.shape()
                    ),
                ));
            }
            let tensor = StoredTensor {
                dtype,
                shape: view.shape().to_vec(),
                bytes: view.data().to_vec(),
            };
            Ok((name, tensor))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_keeps_bytes_and_dtypes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.safetensors");
        let tensors = TensorFile::from([
            // 1 + 2^-8 is a bf16 tie: stored as 1.0, as torch rounds it.
            (
                "q".to_string(),
                StoredTensor::from_values(Dtype::Bfloat16, &[1, 2], &[1.0 + 2f64.powi(-8), -2.5]),
            ),
            (
                "cache_seqlens".to_string(),
                StoredTensor::from_values(Dtype::Int32, &[3], &[0.0, 7.0, -1.0]),
            ),
            (
                "empty".to_string(),
                StoredTensor::from_values(Dtype::Float8E4m3fn, &[0, 4], &[]),
            ),
        ]);
        write_tensor_file(&path, &tensors).unwrap();
        let back = read_tensor_file(&path, &mut Budget::new(1 << 20)).unwrap();
        assert_eq!(back, tensors);
        assert_eq!(
            back["q"].to_host().data.iter().copied().collect::<Vec<_>>(),
            [1.0, -2.5]
        );
        assert_eq!(back["cache_seqlens"].bytes[4..8], 7i32.to_le_bytes());
    }

    #[test]
    fn refuses_over_cap_and_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.safetensors");
        let tensors = TensorFile::from([(
            "x".to_string(),
            StoredTensor::from_values(Dtype::Int8, &[64], &[1.0; 64]),
        )]);
        write_tensor_file(&path, &tensors).unwrap();
        // 64 one-byte values: 64 bytes stored and 512 bytes as f64.
        let err = read_tensor_file(&path, &mut Budget::new(400)).unwrap_err();
        assert!(
            matches!(&err, TensorFileError::OverBudget { over, .. } if over.needed == 576),
            "{err}"
        );
        std::fs::write(&path, b"not a tensor file").unwrap();
        let err = read_tensor_file(&path, &mut Budget::new(1 << 20)).unwrap_err();
        assert!(matches!(err, TensorFileError::Format { .. }), "{err}");
    }

    #[test]
    fn a_device_is_read_only_up_to_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("inputs.safetensors");
        std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
        let cap = 1 << 20;
        match read_tensor_file(&path, &mut Budget::new(cap)) {
            Err(TensorFileError::File(FileError::OverCap { cap: refused, .. })) => {
                assert_eq!(refused, cap)
            }
            other => panic!("{other:?}"),
        }
    }

    /// A zero axis makes the tensor empty, so the file is valid safetensors whatever the other
    /// axes say; their product must still be indexable.
    #[test]
    fn an_empty_tensor_with_huge_axes_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.safetensors");
        let header = format!(
            r#"{{"x":{{"dtype":"F32","shape":[0,{0},{0}],"data_offsets":[0,0]}}}}"#,
            1u64 << 62
        );
        let mut file = (header.len() as u64).to_le_bytes().to_vec();
        file.extend_from_slice(header.as_bytes());
        std::fs::write(&path, file).unwrap();
        let error = read_tensor_file(&path, &mut Budget::new(1 << 20))
            .unwrap_err()
            .to_string();
        assert!(error.ends_with("too large to index"), "{error}");
    }
}
