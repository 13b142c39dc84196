//! Which host each part runs on.

use serde::{Deserialize, Serialize};

use super::PartitionError;

/// `parts` parts spread evenly over `hosts` hosts: part `i` runs on host
/// `i / devices_per_host`, the rank layout of a hosts x devices cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HostLayout {
    parts: u32,
    hosts: u32,
}

impl HostLayout {
    /// Checks that `hosts >= 1` divides `parts >= 1`.
    pub fn new(parts: usize, hosts: usize) -> Result<Self, PartitionError> {
        if parts == 0 || parts > u32::MAX as usize {
            return Err(PartitionError::LayoutParts(parts));
        }
        if hosts == 0 || !parts.is_multiple_of(hosts) {
            return Err(PartitionError::Hosts { hosts, parts });
        }
        Ok(Self { parts: parts as u32, hosts: hosts as u32 })
    }

    /// All parts on one host.
    pub fn single_host(parts: usize) -> Result<Self, PartitionError> {
        Self::new(parts, 1)
    }

    pub fn parts(&self) -> usize {
        self.parts as usize
    }

    pub fn hosts(&self) -> usize {
        self.hosts as usize
    }

    pub fn devices_per_host(&self) -> usize {
        (self.parts / self.hosts) as usize
    }

    /// The host part `part` runs on.
    #[inline]
    pub fn host_of(&self, part: usize) -> usize {
        part / self.devices_per_host()
    }

    /// The parts running on `host`.
    pub fn parts_on(&self, host: usize) -> std::ops::Range<usize> {
        let d = self.devices_per_host();
        host * d..(host + 1) * d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_spread_evenly() {
        let l = HostLayout::new(8, 2).unwrap();
        assert_eq!(l.devices_per_host(), 4);
        assert_eq!((0..8).map(|p| l.host_of(p)).collect::<Vec<_>>(), [0, 0, 0, 0, 1, 1, 1, 1]);
        assert_eq!(l.parts_on(1), 4..8);
        assert_eq!(HostLayout::new(6, 4), Err(PartitionError::Hosts { hosts: 4, parts: 6 }));
        assert_eq!(HostLayout::new(6, 0), Err(PartitionError::Hosts { hosts: 0, parts: 6 }));
    }
}
