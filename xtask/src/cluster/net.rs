//! The network of an emulated cluster: one network namespace per host, each joined to one bridge
//! in the root namespace by a veth pair, each link shaped both ways by `tbf`.
//!
//! Every name and address here is the cluster's own: namespaces `halo-h<i>`, the bridge
//! `halo-br`, root-side veth ends `halo-v<i>`, and the subnet [`SUBNET`]. [`remove`] deletes
//! whatever carries those names, so it also cleans up after a crashed `up`.

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// The subnet of the bridge and the hosts; the bridge is `.1`, host `i` is `.(10 + i)`.
pub const SUBNET: &str = "10.213.57.0/24";
const PREFIX: &str = "10.213.57";
/// Prefix of every host's namespace (and hostname).
pub const HOST_PREFIX: &str = "halo-h";
const BRIDGE: &str = "halo-br";
const VETH_PREFIX: &str = "halo-v";
/// Hosts the subnet has room for.
pub const MAX_HOSTS: usize = 200;
/// Each host's `net.ipv4.tcp_retries2`: how many times TCP retransmits unacknowledged bytes
/// before it gives the connection up (about 25 s with 6, 15 minutes with Linux's 15).
pub const TCP_RETRIES: u32 = 6;

/// Capabilities the cluster needs, as (bit in `CapEff`, name).
const CAPABILITIES: [(u32, &str); 2] = [(12, "CAP_NET_ADMIN"), (21, "CAP_SYS_ADMIN")];
/// Programs the cluster runs.
const PROGRAMS: [(&str, &str); 4] =
    [("ip", "iproute2"), ("tc", "iproute2"), ("unshare", "util-linux"), ("mpirun", "openmpi-bin")];

/// The name (namespace and hostname) of host `i`.
pub fn host_name(i: usize) -> String {
    format!("{HOST_PREFIX}{i}")
}

/// The address of host `i`.
pub fn host_address(i: usize) -> String {
    format!("{PREFIX}.{}", 10 + i)
}

/// Why this process cannot build the cluster, or `None` when it can: the missing capabilities
/// (read from `/proc/self/status`) and programs, each named.
pub fn missing_privileges() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let effective = status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0);
    let mut missing: Vec<String> = CAPABILITIES
        .iter()
        .filter(|(bit, _)| effective & (1 << bit) == 0)
        .map(|(_, name)| format!("{name} (run as root)"))
        .collect();
    for (program, package) in PROGRAMS {
        if !on_path(program) {
            missing.push(format!("`{program}` (package {package})"));
        }
    }
    (!missing.is_empty()).then(|| format!("the emulated cluster needs {}", missing.join(", ")))
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// Runs a command and returns its standard output; a failure names the command and its stderr.
pub fn sh(program: &str, args: &[&str]) -> Result<String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("cannot run `{program}` (is it installed and on PATH?)"))?;
    if !output.status.success() {
        bail!(
            "`{program} {}` failed ({}): {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// How long the rate's worth of bytes `tbf` lets through at once ([`Rate::burst_bytes`]).
const BURST_WINDOW_S: f64 = 1e-3;

/// Two full Ethernet frames: `tbf` needs at least one frame of tokens to send at all.
const MIN_BURST_BYTES: u64 = 2 * 1514;

/// The bits per second of a positive number followed by `kbit`, `mbit` or `gbit`.
fn bits_per_s(text: &str) -> Option<f64> {
    let (unit, scale) = [("kbit", 1e3), ("mbit", 1e6), ("gbit", 1e9)].into_iter().find(|(u, _)| text.ends_with(u))?;
    let number = text[..text.len() - unit.len()].parse::<f64>().ok()?;
    (number.is_finite() && number > 0.0).then_some(number * scale)
}

/// A link rate `tc` understands (`1gbit`, `100mbit`, `500kbit`), or `None` for unshaped links.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rate(pub Option<String>);

impl Rate {
    /// Parses `none` or a number followed by `kbit`, `mbit` or `gbit`.
    pub fn parse(text: &str) -> Result<Self> {
        if text == "none" {
            return Ok(Self(None));
        }
        match bits_per_s(text) {
            Some(_) => Ok(Self(Some(text.to_owned()))),
            None => bail!("--rate `{text}`: expected `none` or a rate such as 100mbit, 1gbit or 500kbit"),
        }
    }

    /// The bytes `tbf` may send at once above the rate: what the rate moves in
    /// [`BURST_WINDOW_S`], and never less than two full Ethernet frames. A wire never sends
    /// above its rate; a larger burst lets a small message through at the veth's own speed.
    pub fn burst_bytes(&self) -> Option<u64> {
        let bits_per_s = bits_per_s(self.0.as_deref()?)?;
        Some(((bits_per_s / 8.0 * BURST_WINDOW_S) as u64).max(MIN_BURST_BYTES))
    }

    /// The rate as written, or `none`.
    pub fn label(&self) -> &str {
        self.0.as_deref().unwrap_or("none")
    }
}

/// Sets the rate of both ends of host `i`'s link (or removes the shaping): the host's `eth0`
/// shapes what it sends, the bridge's end what it receives.
pub fn shape(i: usize, rate: &Rate) -> Result<()> {
    let (ns, veth) = (host_name(i), format!("{VETH_PREFIX}{i}"));
    for (netns, dev) in [(ns.as_str(), "eth0"), ("", veth.as_str())] {
        let tc = |args: &[&str]| {
            let mut all = if netns.is_empty() { Vec::new() } else { vec!["-n", netns] };
            all.extend_from_slice(args);
            sh("tc", &all)
        };
        // Removing a qdisc that is not there fails; that is the state wanted.
        let _ = tc(&["qdisc", "del", "dev", dev, "root"]);
        if let (Some(text), Some(burst)) = (&rate.0, rate.burst_bytes()) {
            let burst = format!("{burst}b");
            tc(&["qdisc", "add", "dev", dev, "root", "tbf", "rate", text, "burst", &burst, "latency", "100ms"])
                .with_context(|| format!("shaping {dev} of host {ns}"))?;
        }
    }
    Ok(())
}

/// Creates the bridge and `hosts` namespaces with shaped links.
pub fn create(hosts: usize, rate: &Rate) -> Result<()> {
    let taken = sh("ip", &["-o", "addr", "show", "to", SUBNET])?;
    if let Some(line) = taken.lines().next() {
        let device = line.split_whitespace().nth(1).unwrap_or("?");
        bail!("{device} already has an address in {SUBNET}, the cluster's subnet: remove it first");
    }
    sh("ip", &["link", "add", BRIDGE, "type", "bridge"])?;
    sh("ip", &["addr", "add", &format!("{PREFIX}.1/24"), "dev", BRIDGE])?;
    sh("ip", &["link", "set", BRIDGE, "up"])?;
    for i in 0..hosts {
        let (ns, veth, peer) = (host_name(i), format!("{VETH_PREFIX}{i}"), format!("halo-p{i}"));
        sh("ip", &["netns", "add", &ns])?;
        sh("ip", &["link", "add", &veth, "type", "veth", "peer", "name", &peer])?;
        sh("ip", &["link", "set", &peer, "netns", &ns])?;
        sh("ip", &["-n", &ns, "link", "set", &peer, "name", "eth0"])?;
        sh("ip", &["-n", &ns, "addr", "add", &format!("{}/24", host_address(i)), "dev", "eth0"])?;
        sh("ip", &["-n", &ns, "link", "set", "eth0", "up"])?;
        sh("ip", &["-n", &ns, "link", "set", "lo", "up"])?;
        // A connection with bytes in flight ignores keepalives and retransmits for about 15
        // minutes by default; 6 retries give up after about 25 s, inside the launcher's deadline.
        let retries = format!("echo {TCP_RETRIES} > /proc/sys/net/ipv4/tcp_retries2");
        sh("ip", &["netns", "exec", &ns, "sh", "-c", &retries])
            .with_context(|| format!("setting {ns}'s TCP retries"))?;
        sh("ip", &["link", "set", &veth, "master", BRIDGE])?;
        sh("ip", &["link", "set", &veth, "up"])?;
        shape(i, rate)?;
    }
    Ok(())
}

/// Sets host `i`'s link down or up, from inside its namespace (what a pulled cable looks like to
/// the host).
pub fn set_link(i: usize, up: bool) -> Result<()> {
    sh("ip", &["-n", &host_name(i), "link", "set", "eth0", if up { "up" } else { "down" }]).map(drop)
}

/// The cluster's namespaces that exist now.
pub fn namespaces() -> Result<Vec<String>> {
    Ok(sh("ip", &["netns", "list"])?
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| name.starts_with(HOST_PREFIX))
        .map(str::to_owned)
        .collect())
}

/// The cluster's links in the root namespace that exist now.
pub fn root_links() -> Result<Vec<String>> {
    Ok(sh("ip", &["-o", "link", "show"])?
        .lines()
        .filter_map(|line| line.split(':').nth(1))
        .map(|name| name.trim().split('@').next().unwrap_or("").to_owned())
        .filter(|name| name == BRIDGE || name.starts_with(VETH_PREFIX))
        .collect())
}

/// Process ids running inside namespace `ns`.
pub fn pids(ns: &str) -> Result<Vec<u32>> {
    Ok(sh("ip", &["netns", "pids", ns])?.split_whitespace().filter_map(|p| p.parse().ok()).collect())
}

/// Kills every process inside the cluster's namespaces, deletes the namespaces and links, and
/// waits until the kernel has let go of them (an immediate `up` would fail otherwise).
pub fn remove() -> Result<()> {
    for ns in namespaces()? {
        for pid in pids(&ns)? {
            let _ = sh("kill", &["-KILL", &pid.to_string()]);
        }
        sh("ip", &["netns", "del", &ns])?;
    }
    for link in root_links()? {
        // A veth end goes with its peer's namespace; one already gone is not an error.
        let _ = sh("ip", &["link", "del", &link]);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = root_links()?;
        if left.is_empty() && namespaces()?.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the kernel still holds {} 20 s after their removal", left.join(", "));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_tc_rates_or_none() {
        assert_eq!(Rate::parse("1gbit").unwrap(), Rate(Some("1gbit".into())));
        assert_eq!(Rate::parse("100mbit").unwrap().label(), "100mbit");
        assert_eq!(Rate::parse("none").unwrap(), Rate(None));
        // A millisecond of the rate, at least two frames.
        assert_eq!(Rate::parse("100mbit").unwrap().burst_bytes(), Some(12_500));
        assert_eq!(Rate::parse("1gbit").unwrap().burst_bytes(), Some(125_000));
        assert_eq!(Rate::parse("500kbit").unwrap().burst_bytes(), Some(3028));
        assert_eq!(Rate::parse("none").unwrap().burst_bytes(), None);
        for bad in ["", "fast", "1gb", "-1mbit", "0gbit", "mbit"] {
            let err = Rate::parse(bad).unwrap_err().to_string();
            assert!(err.contains(&format!("--rate `{bad}`")), "{err}");
        }
    }

    #[test]
    fn hosts_get_the_clusters_own_names_and_addresses() {
        assert_eq!((host_name(0), host_address(0)), ("halo-h0".to_string(), "10.213.57.10".to_string()));
        assert_eq!(host_address(MAX_HOSTS - 1), "10.213.57.209");
    }
}
