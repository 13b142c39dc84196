//! cache-quant
