//! How a run with several workers measures each worker's compute, which the modeled epoch is
//! built on.
//!
//! In-process workers share the machine's cores. While there are at least as many cores as
//! workers, a worker's wall time outside communicator calls is its compute. With more workers
//! than cores, that wall time also counts the time a worker waited for a core, and every
//! modeled epoch grows with the number of workers. The run then serialises the workers' compute
//! (the harness's `ComputeGate`: one computes at a time, with the whole machine, as on
//! a cluster of one machine each) unless checkpoints are on (their agreement runs outside the
//! gate), in which case it keeps wall time and the report says so. Thread CPU time is no
//! remedy: the kernels hand their work to the shared compute pool, whose threads it does not
//! count. `--serialize-compute` asks for serialisation whatever the counts.
//!
//! In-process workers on GPUs share them when there are more workers than visible GPUs
//! (`harness::placement`). Their kernels then run side by side on one GPU and stretch each
//! other's time, as threads on too few cores do, so the run serialises them the same way: a
//! worker's GPU time between its communicator calls (from CUDA events, where its runner
//! measures them) is then its own.

use crate::config::{Backend, Device, TrainConfig};

/// The measure a run used, reported as `final.compute_measure`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ComputeMeasure {
    /// Wall time outside communicator calls: workers had a core each (or a process each).
    Wall,
    /// `--serialize-compute`: one worker computed at a time.
    Serialized,
    /// More in-process workers than cores: serialised without being asked.
    SerializedOversubscribed,
    /// More in-process workers than cores, but checkpoints rule out serialising: wall time, which
    /// counts the waits for a core (modeled epochs come out too long).
    WallOversubscribed,
    /// In-process workers sharing a GPU: serialised without being asked.
    SerializedSharedGpu,
    /// In-process workers sharing a GPU, but checkpoints rule out serialising: each worker's
    /// time counts the others' kernels (modeled epochs come out too long).
    WallSharedGpu,
}

impl ComputeMeasure {
    /// The measure for `config` on `backend` with `cores` cores and `gpus` visible GPUs;
    /// `serialize` is `--serialize-compute` from either the configuration or the caller.
    pub fn choose(config: &TrainConfig, backend: Backend, cores: usize, gpus: usize, serialize: bool) -> Self {
        let workers = config.distributed.workers;
        let in_process = backend.in_process();
        let shared_gpu = in_process && matches!(config.device, Device::Cuda(_)) && workers > gpus.max(1);
        let oversubscribed = in_process && workers > cores;
        let checkpoints = config.reliability.uses_checkpoints();
        match (serialize, shared_gpu, oversubscribed, checkpoints) {
            (true, ..) => ComputeMeasure::Serialized,
            (false, true, _, false) => ComputeMeasure::SerializedSharedGpu,
            (false, true, _, true) => ComputeMeasure::WallSharedGpu,
            (false, false, true, false) => ComputeMeasure::SerializedOversubscribed,
            (false, false, true, true) => ComputeMeasure::WallOversubscribed,
            (false, false, false, _) => ComputeMeasure::Wall,
        }
    }

    /// Whether the workers' compute runs one at a time.
    pub fn serializes(self) -> bool {
        matches!(
            self,
            ComputeMeasure::Serialized | ComputeMeasure::SerializedOversubscribed | ComputeMeasure::SerializedSharedGpu
        )
    }

    /// The report's name of the measure.
    pub fn as_str(self) -> &'static str {
        match self {
            ComputeMeasure::Wall => "wall",
            ComputeMeasure::Serialized => "serialized",
            ComputeMeasure::SerializedOversubscribed => "serialized (more workers than cores)",
            ComputeMeasure::WallOversubscribed => "wall (more workers than cores; checkpoints rule out serializing)",
            ComputeMeasure::SerializedSharedGpu => "serialized (workers share a GPU)",
            ComputeMeasure::WallSharedGpu => "wall (workers share a GPU; checkpoints rule out serializing)",
        }
    }
}

/// The cores this process may run on (1 where the platform does not say).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// The CPU this process's host gives it: the cores it may run on, capped by the quota of its
/// CPU cgroup (cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us` over `cpu.cfs_period_us`; the
/// tightest of its cgroup and the cgroups above it), as a container or an emulated host has.
#[derive(Debug, Clone, PartialEq)]
pub struct HostCpu {
    pub cores: f64,
    /// The cgroup whose quota caps `cores`; `None` where no quota is below the cores. Processes
    /// in one such cgroup share its quota as processes of one machine share its cores.
    pub quota_group: Option<String>,
}

/// This process's [`HostCpu`].
pub fn host_cpu() -> HostCpu {
    let cores = cores() as f64;
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    match cgroup_quota(&own, |path| std::fs::read_to_string(path).ok()) {
        Some((quota, group)) if quota < cores => HostCpu { cores: quota, quota_group: Some(group) },
        _ => HostCpu { cores, quota_group: None },
    }
}

/// Where cgroup v1's `cpu` controller is mounted, by the names distributions give it.
const CGROUP_V1_CPU: [&str; 2] = ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"];

/// The tightest CPU quota, in cores, over the cgroup that `own` (`/proc/self/cgroup`'s text)
/// names and its parents, with the cgroup it belongs to; `read` reads a file's text.
fn cgroup_quota(own: &str, read: impl Fn(&str) -> Option<String>) -> Option<(f64, String)> {
    let quota_at = |dir: &str, v1: bool| -> Option<f64> {
        if v1 {
            CGROUP_V1_CPU.iter().find_map(|base| {
                let quota: f64 = read(&format!("{base}{dir}/cpu.cfs_quota_us"))?.trim().parse().ok()?;
                let period: f64 = read(&format!("{base}{dir}/cpu.cfs_period_us"))?.trim().parse().ok()?;
                (quota > 0.0 && period > 0.0).then(|| quota / period)
            })
        } else {
            let max = read(&format!("/sys/fs/cgroup{dir}/cpu.max"))?;
            let mut words = max.split_whitespace();
            let quota: f64 = words.next()?.parse().ok()?;
            let period: f64 = words.next()?.parse().ok()?;
            (quota > 0.0 && period > 0.0).then(|| quota / period)
        }
    };
    own.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        let v1 = controllers.split(',').any(|c| c == "cpu");
        if !v1 && !controllers.is_empty() {
            return None;
        }
        let mut dir = path.trim_end_matches('/').to_owned();
        let mut tightest: Option<(f64, String)> = None;
        loop {
            if let Some(q) = quota_at(&dir, v1).filter(|&q| tightest.as_ref().is_none_or(|(t, _)| q < *t)) {
                let group = if dir.is_empty() { "/".to_owned() } else { dir.clone() };
                tightest = Some((q, group));
            }
            match dir.rfind('/') {
                Some(cut) => dir.truncate(cut),
                None => break,
            }
            if dir.is_empty() {
                // The root cgroup carries no quota.
                break;
            }
        }
        tightest
    })
}

/// The GPUs visible to this process for a run on a device (0 on the CPU, and where none can
/// be counted: the run's device workers then fail to open theirs, naming why).
pub fn gpus(config: &TrainConfig) -> usize {
    match config.device {
        Device::Cpu => 0,
        Device::Cuda(_) => gnn_core::gpu::Device::count().unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn more_in_process_workers_than_cores_serialize_unless_checkpoints_are_on() {
        let mut config = TrainConfig::default();
        config.distributed.workers = 8;
        let choose = |c: &TrainConfig, backend, serialize| ComputeMeasure::choose(c, backend, 2, 0, serialize);
        assert_eq!(choose(&config, Backend::Local, false), ComputeMeasure::SerializedOversubscribed);
        assert_eq!(choose(&config, Backend::Local, true), ComputeMeasure::Serialized);
        assert_eq!(choose(&config, Backend::Mpi, false), ComputeMeasure::Wall, "a process per worker");
        config.reliability.checkpoint_dir = Some("ck".into());
        assert_eq!(choose(&config, Backend::Local, false), ComputeMeasure::WallOversubscribed);
        assert!(!ComputeMeasure::WallOversubscribed.serializes());
        config.distributed.workers = 2;
        assert_eq!(choose(&config, Backend::Local, false), ComputeMeasure::Wall);
    }

    #[test]
    fn a_cgroups_quota_caps_the_hosts_cores() {
        let files = |entries: &'static [(&'static str, &'static str)]| {
            move |path: &str| entries.iter().find(|(p, _)| *p == path).map(|(_, t)| t.to_string())
        };
        // cgroup v1: the host's cgroup holds half a core, its parent more.
        let v1 = files(&[
            ("/sys/fs/cgroup/cpu/halo-cluster/halo-h0/cpu.cfs_quota_us", "50000\n"),
            ("/sys/fs/cgroup/cpu/halo-cluster/halo-h0/cpu.cfs_period_us", "100000\n"),
            ("/sys/fs/cgroup/cpu/halo-cluster/cpu.cfs_quota_us", "-1\n"),
            ("/sys/fs/cgroup/cpu/halo-cluster/cpu.cfs_period_us", "100000\n"),
        ]);
        let own = "4:memory:/x\n1:cpu:/halo-cluster/halo-h0\n0::/\n";
        assert_eq!(cgroup_quota(own, v1), Some((0.5, "/halo-cluster/halo-h0".to_owned())));
        // cgroup v2: the parent's quota is the tighter one.
        let v2 =
            files(&[("/sys/fs/cgroup/a/b/cpu.max", "max 100000\n"), ("/sys/fs/cgroup/a/cpu.max", "150000 100000\n")]);
        assert_eq!(cgroup_quota("0::/a/b\n", v2), Some((1.5, "/a".to_owned())));
        // No quota, or none readable: no cap.
        assert_eq!(cgroup_quota("0::/a/b\n", files(&[])), None);
        assert_eq!(cgroup_quota("", files(&[])), None);
    }

    #[test]
    fn in_process_workers_sharing_a_gpu_serialize_unless_checkpoints_are_on() {
        let mut config = TrainConfig { device: Device::Cuda(0), ..TrainConfig::default() };
        config.distributed.workers = 4;
        let choose = |c: &TrainConfig, backend, gpus| ComputeMeasure::choose(c, backend, 16, gpus, false);
        assert_eq!(choose(&config, Backend::Local, 1), ComputeMeasure::SerializedSharedGpu);
        assert_eq!(choose(&config, Backend::Local, 2), ComputeMeasure::SerializedSharedGpu);
        assert_eq!(choose(&config, Backend::Local, 4), ComputeMeasure::Wall, "a GPU each");
        assert_eq!(choose(&config, Backend::Mpi, 1), ComputeMeasure::Wall, "processes have no common gate");
        assert!(ComputeMeasure::SerializedSharedGpu.serializes());
        assert_eq!(ComputeMeasure::choose(&config, Backend::Local, 16, 1, true), ComputeMeasure::Serialized);
        // More workers than cores too: the GPU is named, the cause that matters on a device.
        assert_eq!(ComputeMeasure::choose(&config, Backend::Local, 2, 1, false), ComputeMeasure::SerializedSharedGpu);
        config.reliability.checkpoint_dir = Some("ck".into());
        assert_eq!(choose(&config, Backend::Local, 1), ComputeMeasure::WallSharedGpu);
        assert!(!ComputeMeasure::WallSharedGpu.serializes());
        config.device = Device::Cpu;
        config.reliability.checkpoint_dir = None;
        assert_eq!(choose(&config, Backend::Local, 0), ComputeMeasure::Wall, "CPU workers with cores enough");
    }
}
