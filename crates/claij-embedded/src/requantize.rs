//! Rewrites a GGUF file with its quantized matrices in another format (Q4_1 → Q8_0:
//! candle has fast kernels for Q8_0, none for Q4_1).

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::Path;

use candle_core::Device;
use candle_core::quantized::{GgmlDType, QTensor, gguf_file};

/// Requantizing failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot requantize {src} into {dst}: {reason}")]
pub struct RequantizeError {
    /// The source file.
    pub src: String,
    /// The destination file.
    pub dst: String,
    /// What went wrong.
    pub reason: String,
}

/// Writes `dst` from `src` with every tensor of a quantized type other than `to`
/// requantized to `to` (float tensors such as norms are kept). Metadata is copied. The
/// file is written beside `dst` and renamed into place, so `dst` is complete or absent.
pub fn requantize(src: &Path, dst: &Path, to: GgmlDType) -> Result<(), RequantizeError> {
    let fail = |reason: String| RequantizeError {
        src: src.display().to_string(),
        dst: dst.display().to_string(),
        reason,
    };
    let file = File::open(src).map_err(|e| fail(e.to_string()))?;
    let mut reader = BufReader::new(file);
    let content = gguf_file::Content::read(&mut reader).map_err(|e| fail(e.to_string()))?;
    let device = Device::Cpu;
    let mut names: Vec<&String> = content.tensor_infos.keys().collect();
    names.sort();
    let mut tensors: Vec<(String, QTensor)> = Vec::with_capacity(names.len());
    for name in names {
        let q = content
            .tensor(&mut reader, name, &device)
            .map_err(|e| fail(format!("tensor {name}: {e}")))?;
        let keep = matches!(q.dtype(), GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16)
            || q.dtype() == to
            || q.shape()
                .dims()
                .last()
                .is_none_or(|d| d % to.block_size() != 0);
        let q = if keep {
            q
        } else {
            let t = q
                .dequantize(&device)
                .map_err(|e| fail(format!("tensor {name}: {e}")))?;
            QTensor::quantize(&t, to).map_err(|e| fail(format!("tensor {name}: {e}")))?
        };
        tensors.push((name.clone(), q));
    }
    let mut metadata: Vec<(&str, &gguf_file::Value)> = content
        .metadata
        .iter()
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    metadata.sort_by_key(|(k, _)| *k);
    let tensor_refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let tmp = dst.with_extension("gguf.partial");
    {
        let out = File::create(&tmp).map_err(|e| fail(e.to_string()))?;
        let mut writer = BufWriter::new(out);
        gguf_file::write(&mut writer, &metadata, &tensor_refs).map_err(|e| fail(e.to_string()))?;
        let out = writer
            .into_inner()
            .map_err(|e| fail(e.error().to_string()))?;
        out.sync_all().map_err(|e| fail(e.to_string()))?;
    }
    std::fs::rename(&tmp, dst).map_err(|e| fail(e.to_string()))?;
    Ok(())
}
