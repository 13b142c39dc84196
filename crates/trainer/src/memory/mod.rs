//! Peak resident memory of this process, the CPU time of the calling thread, the estimate of a
//! run's peak ([`estimate`]) and the ceiling it is checked against ([`limit`]).
//!
//! Peak memory is the kernel's `VmHWM` where the platform has it; `final.memory` in the report holds
//! the estimate next to `final.peak_rss_bytes`. A distributed run checks its estimate twice
//! (`crate::distributed`'s budget): before partitioning, from the dataset alone, and before
//! training, from every worker's share.

pub mod device;
pub mod estimate;
pub mod limit;

pub use estimate::{Estimate, MemoryReport, Phases};
pub use limit::Limit;

/// `bytes` in binary units with three significant digits (`1.23 GiB`).
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{bytes} B") } else { format!("{value:.2} {}", UNITS[unit]) }
}

/// CPU seconds the calling thread has used (`CLOCK_THREAD_CPUTIME_ID`), or `None` where the
/// platform does not have that clock. Unlike wall time it does not grow while the thread waits
/// for a core, so in-process workers oversubscribing the machine each show their own work;
/// work the thread hands to other threads (a kernel's thread pool) is not in it.
pub fn thread_cpu_s() -> Option<f64> {
    #[cfg(unix)]
    {
        clock_s(libc::CLOCK_THREAD_CPUTIME_ID)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// CPU seconds every thread of this process has used (`CLOCK_PROCESS_CPUTIME_ID`), or `None`
/// where the platform does not have that clock. Under MPI, one worker per process, it is the
/// worker's whole CPU: its compute pool's threads and MPI's included.
pub fn process_cpu_s() -> Option<f64> {
    #[cfg(unix)]
    {
        clock_s(libc::CLOCK_PROCESS_CPUTIME_ID)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// Seconds on `clock`, or `None` where the platform lacks it.
#[cfg(unix)]
fn clock_s(clock: libc::clockid_t) -> Option<f64> {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid, writable `timespec` for the duration of the call, and
    // `clock_gettime` writes nothing else; a clock the platform lacks makes it return -1
    // without writing.
    let rc = unsafe { libc::clock_gettime(clock, &mut now) };
    (rc == 0).then_some(now.tv_sec as f64 + now.tv_nsec as f64 * 1e-9)
}

/// This machine's identity: a hash of the kernel's boot id (`/proc/sys/kernel/random/boot_id`,
/// a UUID), the same in every network or UTS namespace of one machine and different on
/// another, kept to 52 bits so that it travels exactly in an `f64`. `None` where the platform
/// does not expose it.
pub fn machine_id() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let text = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        let hex: String = text.trim().chars().filter(|&c| c != '-').collect();
        let half = |range: std::ops::Range<usize>| u64::from_str_radix(hex.get(range)?, 16).ok();
        let words = [half(0..16)?, half(16..32)?];
        Some(graph_partition::rng::hash_key(&words) & ((1 << 52) - 1))
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// The peak resident set size (`VmHWM`) in bytes, or `None` where the platform does not expose it.
pub fn peak_rss_bytes() -> Option<u64> {
    proc_kb("/proc/self/status", "VmHWM")
}

/// The field `key` of a `/proc` file of `key: N kB` lines, in bytes, or `None` where the
/// platform has no such file.
fn proc_kb(path: &str, key: &str) -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        parse_kb(&std::fs::read_to_string(path).ok()?, key)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (path, key);
        None
    }
}

/// Extracts the line `key: N kB` of a `/proc` file's text, in bytes.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn parse_kb(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.strip_prefix(key).is_some_and(|rest| rest.starts_with(':')))?;
    let mut fields = line[key.len() + 1..].split_whitespace();
    let value: u64 = fields.next()?.parse().ok()?;
    (fields.next() == Some("kB")).then_some(value * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn thread_cpu_time_counts_work_not_sleep() {
        let start = thread_cpu_s().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let slept = thread_cpu_s().unwrap() - start;
        let mut x = 1u64;
        let busy_start = thread_cpu_s().unwrap();
        while thread_cpu_s().unwrap() - busy_start < 0.02 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        assert!(slept < 0.02, "sleeping used {slept} s of CPU");
        assert!(thread_cpu_s().unwrap() - busy_start >= 0.02);
    }

    #[cfg(unix)]
    #[test]
    fn process_cpu_time_counts_other_threads_work() {
        let (process, thread) = (process_cpu_s().unwrap(), thread_cpu_s().unwrap());
        std::thread::spawn(|| {
            let (start, mut x) = (thread_cpu_s().unwrap(), 1u64);
            while thread_cpu_s().unwrap() - start < 0.03 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
            std::hint::black_box(x);
        })
        .join()
        .unwrap();
        assert!(process_cpu_s().unwrap() - process >= 0.03);
        assert!(thread_cpu_s().unwrap() - thread < 0.02, "the spawning thread only waited");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_machine_has_one_id_below_2_pow_52() {
        let id = machine_id().expect("Linux has a boot id");
        assert_eq!(machine_id(), Some(id));
        assert!(id < 1 << 52 && (id as f64) as u64 == id);
    }

    #[test]
    fn parses_vm_hwm_line() {
        let status = "Name:\thalo\nVmPeak:\t  5000 kB\nVmHWM:\t    1234 kB\nVmRSS:\t  1000 kB\n";
        assert_eq!(parse_kb(status, "VmHWM"), Some(1234 * 1024));
        assert_eq!(parse_kb("Name:\thalo\n", "VmHWM"), None);
        assert_eq!(parse_kb("VmHWM:\t12 MB\n", "VmHWM"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn peak_grows_with_a_large_allocation() {
        let before = peak_rss_bytes().expect("Linux reports VmHWM");
        let block = std::hint::black_box(vec![1u8; 64 << 20]);
        let after = peak_rss_bytes().unwrap();
        assert!(after >= before && after >= 64 << 20, "{before} -> {after} with {} bytes live", block.len());
    }
}
