//! The CPU of an emulated host: a CPU cgroup per host, capped at the host's share of cores, so
//! that hosts sharing this machine do not lend each other their idle CPU (a real host has only
//! its own). cgroup v2 where its `cpu` controller is on, else v1's `cpu` hierarchy.
//!
//! Every process of a host joins its cgroup as it starts: mpirun on host 0 before it enters the
//! namespace, and the agent that starts a host's daemon ([`join_command`]) from inside host 0's
//! namespace, where `ip netns exec` has remounted `/sys`. The agent reaches the cgroups through
//! a bind mount of their parent outside `/sys` ([`Hierarchy::expose`]). Inside a host the
//! hierarchy is mounted where a real host has it ([`Hierarchy::mount_command`]), so that Halo's
//! ranks find their host's quota as on a container host.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};

/// The cgroup holding every host's cgroup, under the hierarchy's root.
const PARENT: &str = "halo-cluster";
/// The CFS period the quotas are set over, in microseconds. A real host of half a core runs
/// its ranks at half speed all the time; a quota over the kernel's default 100 ms runs them at
/// full speed for 50 ms and stops them for 50 ms, so ranks of different hosts that meet every
/// step wait for each other's stops. 10 ms keeps a stop below a step's message time.
const PERIOD_US: u64 = 10_000;

/// The cores of one emulated host, to a thousandth of a core (`0.5`, `1`, `1.25`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cpus {
    milli: u32,
}

impl Cpus {
    /// Parses a positive number of cores.
    pub fn parse(text: &str) -> Result<Self> {
        let cores: f64 = text
            .parse()
            .map_err(|_| anyhow::anyhow!("--cpus-per-host `{text}`: expected a number of cores, such as 0.5 or 2"))?;
        let milli = (cores * 1000.0).round();
        ensure!(
            cores.is_finite() && milli >= 1.0 && milli <= f64::from(u32::MAX),
            "--cpus-per-host `{text}`: a number of cores above 0"
        );
        Ok(Self { milli: milli as u32 })
    }

    /// The number of cores.
    pub fn cores(self) -> f64 {
        f64::from(self.milli) / 1000.0
    }

    /// As `parse` reads it back.
    pub fn label(self) -> String {
        self.cores().to_string()
    }
}

/// Which cgroup hierarchy carries the `cpu` controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hierarchy {
    /// cgroup v2 mounted at the path, with `cpu` among its controllers.
    V2(PathBuf),
    /// cgroup v1's `cpu` hierarchy mounted at the path.
    V1(PathBuf),
}

impl Hierarchy {
    /// The hierarchy this machine offers, or an error saying what is missing.
    pub fn find() -> Result<Self> {
        let v2 = Path::new("/sys/fs/cgroup");
        let controllers = fs::read_to_string(v2.join("cgroup.controllers")).unwrap_or_default();
        if controllers.split_whitespace().any(|c| c == "cpu") {
            return Ok(Self::V2(v2.to_owned()));
        }
        let v1 = v2.join("cpu");
        if v1.join("cpu.cfs_quota_us").exists() {
            return Ok(Self::V1(v1));
        }
        bail!(
            "--cpus-per-host needs a CPU cgroup: neither cgroup v2 with the cpu controller \
             (/sys/fs/cgroup/cgroup.controllers) nor cgroup v1's cpu hierarchy (/sys/fs/cgroup/cpu) is mounted"
        )
    }

    fn root(&self) -> &Path {
        match self {
            Self::V2(path) | Self::V1(path) => path,
        }
    }

    /// The cgroup of every host.
    fn parent(&self) -> PathBuf {
        self.root().join(PARENT)
    }

    /// The cgroup of host `name`.
    pub fn host(&self, name: &str) -> PathBuf {
        self.parent().join(name)
    }

    /// The file a process writes its pid into to join the cgroup `dir`.
    pub fn procs(dir: &Path) -> PathBuf {
        dir.join("cgroup.procs")
    }

    /// Makes one cgroup per host name, each capped at `cpus` cores.
    pub fn create(&self, hosts: &[String], cpus: Cpus) -> Result<()> {
        let parent = self.parent();
        fs::create_dir_all(&parent).with_context(|| format!("creating the cgroup {}", parent.display()))?;
        if let Self::V2(root) = self {
            // Hand the cpu controller down to the hosts' cgroups.
            for dir in [root.as_path(), parent.as_path()] {
                write(&dir.join("cgroup.subtree_control"), "+cpu")?;
            }
        }
        let quota = quota_us(cpus.cores());
        for name in hosts {
            let dir = self.host(name);
            fs::create_dir_all(&dir).with_context(|| format!("creating the cgroup {}", dir.display()))?;
            match self {
                Self::V2(_) => write(&dir.join("cpu.max"), &format!("{quota} {PERIOD_US}"))?,
                Self::V1(_) => {
                    write(&dir.join("cpu.cfs_period_us"), &PERIOD_US.to_string())?;
                    write(&dir.join("cpu.cfs_quota_us"), &quota.to_string())?;
                }
            }
        }
        Ok(())
    }

    /// Bind-mounts the hosts' cgroups at `at` (an empty folder outside `/sys`), where processes
    /// inside a host's namespace reach them: `at/<host>/cgroup.procs`.
    pub fn expose(&self, at: &Path) -> Result<()> {
        fs::create_dir_all(at).with_context(|| format!("creating {}", at.display()))?;
        let parent = self.parent();
        let status = std::process::Command::new("mount")
            .arg("--bind")
            .args([&parent, at])
            .status()
            .context("cannot run `mount` (package mount)")?;
        ensure!(status.success(), "`mount --bind {} {}` failed ({status})", parent.display(), at.display());
        Ok(())
    }

    /// Undoes [`Hierarchy::expose`] at `at`, if it is mounted there.
    pub fn hide(at: &Path) -> Result<()> {
        let mounts = fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let target = at.display().to_string();
        if mounts.lines().any(|line| line.split_whitespace().nth(1) == Some(target.as_str())) {
            let status = std::process::Command::new("umount").arg(at).status().context("cannot run `umount`")?;
            ensure!(status.success(), "`umount {target}` failed ({status})");
        }
        Ok(())
    }

    /// The shell words that mount this hierarchy at its usual place inside a host's namespace
    /// (whose `/sys` is a fresh sysfs without it), so that the host's processes read their own
    /// quota as a container's do.
    pub fn mount_command(&self) -> String {
        match self {
            Self::V2(_) => "mount -t cgroup2 halo-cgroup /sys/fs/cgroup".to_owned(),
            Self::V1(_) => "mount -t tmpfs halo-cgroup /sys/fs/cgroup && mkdir -p /sys/fs/cgroup/cpu && \
                            mount -t cgroup -o cpu halo-cgroup /sys/fs/cgroup/cpu"
                .to_owned(),
        }
    }

    /// Removes the hosts' cgroups (their processes must be gone) and their parent.
    pub fn remove(&self) -> Result<()> {
        let parent = self.parent();
        let Ok(entries) = fs::read_dir(&parent) else { return Ok(()) };
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_dir(&entry.path())?;
            }
        }
        remove_dir(&parent)
    }
}

/// The quota of `cpus` cores per [`PERIOD_US`], in microseconds (at least 1 ms, the kernel's
/// floor).
fn quota_us(cpus: f64) -> u64 {
    ((cpus * PERIOD_US as f64).round() as u64).max(1000)
}

fn write(path: &Path, value: &str) -> Result<()> {
    fs::write(path, value).with_context(|| format!("writing `{value}` to {}", path.display()))
}

/// Removes an empty cgroup; a cgroup still holding a process is named.
fn remove_dir(dir: &Path) -> Result<()> {
    match fs::remove_dir(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            let procs = fs::read_to_string(Hierarchy::procs(dir)).unwrap_or_default();
            Err(e).with_context(|| {
                format!(
                    "removing the cgroup {} (processes still in it: {})",
                    dir.display(),
                    procs.split_whitespace().collect::<Vec<_>>().join(" ")
                )
            })
        }
        _ => Ok(()),
    }
}

/// The shell words that put the shell running them into the cgroup whose `procs` file is
/// given, before it `exec`s the rest of its command.
pub fn join_command(procs: &Path) -> String {
    format!("echo $$ > '{}' && ", procs.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotas_are_the_cores_share_of_the_period() {
        assert_eq!(quota_us(0.5), 5_000);
        assert_eq!(quota_us(2.0), 20_000);
        assert_eq!(quota_us(0.001), 1000, "the kernel's floor");
    }

    #[test]
    fn cores_parse_to_a_thousandth() {
        assert_eq!(Cpus::parse("0.5").unwrap().cores(), 0.5);
        assert_eq!(Cpus::parse("2").unwrap().label(), "2");
        assert!(Cpus::parse("0").unwrap_err().to_string().contains("above 0"));
        assert!(Cpus::parse("-1").is_err() && Cpus::parse("NaN").is_err());
        assert!(Cpus::parse("half").unwrap_err().to_string().contains("--cpus-per-host `half`"));
    }

    #[test]
    fn hosts_live_under_one_parent() {
        let h = Hierarchy::V1(PathBuf::from("/sys/fs/cgroup/cpu"));
        assert_eq!(h.host("halo-h2"), PathBuf::from("/sys/fs/cgroup/cpu/halo-cluster/halo-h2"));
        assert_eq!(
            Hierarchy::procs(&h.host("halo-h2")),
            PathBuf::from("/sys/fs/cgroup/cpu/halo-cluster/halo-h2/cgroup.procs")
        );
        assert_eq!(join_command(Path::new("/x/cgroup.procs")), "echo $$ > '/x/cgroup.procs' && ");
    }
}
