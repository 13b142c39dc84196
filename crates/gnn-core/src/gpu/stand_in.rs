//! The API of the device path in a build without the `cuda` feature: a [`Device`] can never be
//! made, and asking for one says how to get a build that can.

use std::convert::Infallible;

use super::MemoryInfo;

/// Why the device path is unavailable.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GpuError {
    #[error("this halo was built without CUDA support: rebuild with `--features cuda` to use a GPU")]
    NotBuilt,
}

/// A CUDA device; uninhabited here.
#[derive(Debug)]
pub struct Device {
    never: Infallible,
}

impl Device {
    /// Always [`GpuError::NotBuilt`].
    pub fn new(_ordinal: usize) -> Result<Self, GpuError> {
        Err(GpuError::NotBuilt)
    }

    /// Always [`GpuError::NotBuilt`].
    pub fn count() -> Result<usize, GpuError> {
        Err(GpuError::NotBuilt)
    }

    pub fn ordinal(&self) -> usize {
        match self.never {}
    }

    pub fn memory(&self) -> Result<MemoryInfo, GpuError> {
        match self.never {}
    }

    pub fn peak_bytes(&self) -> Result<u64, GpuError> {
        match self.never {}
    }

    pub fn reset_peak(&self) -> Result<(), GpuError> {
        match self.never {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_build_names_the_feature_to_enable() {
        let err = Device::new(0).unwrap_err();
        assert_eq!(err, GpuError::NotBuilt);
        assert_eq!(Device::count().unwrap_err(), GpuError::NotBuilt);
        assert!(err.to_string().contains("--features cuda"));
    }
}
