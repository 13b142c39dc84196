//! `cargo xtask cluster`: a cluster on one machine, for measuring Halo on a real wire.
//!
//! Each host is a network namespace with a hostname of its own (`unshare --uts`), joined to a
//! bridge by a veth pair whose two ends are shaped with `tbf` ([`net`]). `run` starts `mpirun`
//! over the hosts through an agent script that enters a host's namespace in place of `ssh`, so
//! ranks on different hosts speak TCP through the shaped links and ranks on one host share
//! memory, as on a real cluster. `MPI_Get_processor_name` returns each host's own name.
//!
//! The cluster's state (its shape, the agent and the hostfile) lives in [`STATE_DIR`]. `down`
//! removes everything carrying the cluster's names whatever that state says, so it also cleans
//! up after a crash or Ctrl-C; `up` runs it first. Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN).
//!
//! One process at a time works on the cluster: each takes the lock [`LOCK`] (a file naming it)
//! until it exits; another is refused, naming it, while it runs, and takes the lock over once
//! it is gone, after a crash too.

mod cpu;
mod faults;
mod net;
mod reports;
mod smoke;
mod table;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use serde_json::json;

pub use cpu::Cpus;
pub use faults::faults;
pub use net::Rate;
pub use smoke::smoke;
pub use table::{TableSpec, table};

/// Where `up` writes the cluster's state.
pub const STATE_DIR: &str = "/run/halo-cluster";
/// The lock file of the process working on the cluster (outside [`STATE_DIR`], which `down`
/// removes): that process's id.
pub const LOCK: &str = "/run/halo-cluster.lock";

/// Whether this process holds the lock.
static HELD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Takes the cluster's lock for the rest of this process, or refuses while another live process
/// holds it. A lock left by a process that is gone (a crash) is taken over.
fn hold() -> Result<()> {
    use std::sync::atomic::Ordering;
    if HELD.load(Ordering::SeqCst) {
        return Ok(());
    }
    for _ in 0..2 {
        match fs::OpenOptions::new().write(true).create_new(true).open(LOCK) {
            Ok(mut file) => {
                use std::io::Write;
                write!(file, "{}", std::process::id()).with_context(|| format!("writing {LOCK}"))?;
                HELD.store(true, Ordering::SeqCst);
                return Ok(());
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let holder = fs::read_to_string(LOCK).unwrap_or_default();
                if let Some(pid) = live_holder(&holder, |pid| Path::new(&format!("/proc/{pid}")).exists()) {
                    bail!("cluster: process {pid} is working on the cluster ({LOCK}); wait for it to end, or stop it");
                }
                // Its holder is gone: take it over.
                let _ = fs::remove_file(LOCK);
            }
            Err(e) => return Err(e).with_context(|| format!("creating {LOCK}")),
        }
    }
    bail!("cluster: {LOCK} keeps coming back; another process is taking the cluster")
}

/// The process a lock file's `text` names, when `alive` says it still runs.
fn live_holder(text: &str, alive: impl Fn(u32) -> bool) -> Option<u32> {
    text.trim().parse().ok().filter(|&pid| alive(pid))
}

/// A `cargo xtask cluster` subcommand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Make `hosts` hosts with `ranks` slots each, links at `rate`, each host in a CPU cgroup
    /// of `cpus` cores when given.
    Up {
        hosts: usize,
        ranks: usize,
        rate: Rate,
        cpus: Option<Cpus>,
    },
    /// Reshape every link.
    Shape {
        rate: Rate,
    },
    /// Run a command under mpirun on every slot, killed after `timeout`.
    Run {
        timeout: Duration,
        command: Vec<String>,
    },
    /// Set one host's link down or up.
    Link {
        host: usize,
        up: bool,
    },
    Status,
    Down,
    /// The CI test: 2 hosts x 2 ranks, Cora, vanilla and adaqp over shaped links.
    Smoke {
        halo: PathBuf,
    },
    /// The methods against vanilla on the wire ([`mod@table`]).
    Table(TableSpec),
    /// Fault trials on the wire ([`mod@faults`]).
    Faults {
        halo: PathBuf,
        trials: usize,
        seed: u64,
    },
}

/// The shape of a running cluster, as `up` recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    pub hosts: usize,
    pub ranks: usize,
    pub rate: Rate,
    /// Each host's cores (its CPU cgroup); `None`: the hosts share this machine's cores.
    pub cpus: Option<Cpus>,
}

impl Shape {
    /// `hosts` hosts of `ranks` slots, links at `rate`, sharing this machine's cores.
    pub fn new(hosts: usize, ranks: usize, rate: Rate) -> Self {
        Self { hosts, ranks, rate, cpus: None }
    }

    /// Each host's CPU, as tables state it.
    pub fn cpu_label(&self) -> String {
        self.cpus.map_or_else(|| "shared".to_owned(), |c| format!("{} cores", c.label()))
    }

    fn save(&self) -> Result<()> {
        let cpus = self.cpus.map(Cpus::label);
        let state = json!({ "hosts": self.hosts, "ranks": self.ranks, "rate": self.rate.label(), "cpus": cpus });
        let path = Path::new(STATE_DIR).join("state.json");
        fs::write(&path, state.to_string()).with_context(|| format!("writing {}", path.display()))
    }

    /// The running cluster's shape; an error says to run `up` when there is none.
    pub fn load() -> Result<Self> {
        let path = Path::new(STATE_DIR).join("state.json");
        let text = fs::read_to_string(&path).with_context(|| {
            format!("no cluster is up ({} is missing): run `cargo xtask cluster up`", path.display())
        })?;
        let state: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("{}: not a cluster state", path.display()))?;
        let count = |key: &str| state[key].as_u64().map(|n| n as usize);
        let cpus = state["cpus"].as_str().map(Cpus::parse).transpose()?;
        match (count("hosts"), count("ranks"), state["rate"].as_str()) {
            (Some(hosts), Some(ranks), Some(rate)) => Ok(Self { hosts, ranks, rate: Rate::parse(rate)?, cpus }),
            _ => bail!("{}: not a cluster state (hosts, ranks and rate expected)", path.display()),
        }
    }
}

/// Runs one action.
pub fn run(action: Action) -> Result<()> {
    if action != Action::Status {
        hold()?;
    }
    match action {
        Action::Up { hosts, ranks, rate, cpus } => up(&Shape { hosts, ranks, rate, cpus }),
        Action::Shape { rate } => {
            let mut shape = Shape::load()?;
            for i in 0..shape.hosts {
                net::shape(i, &rate)?;
            }
            shape.rate = rate;
            shape.save()
        }
        Action::Run { timeout, command } => {
            let run = run_command(&Shape::load()?, timeout, &command)?;
            ensure!(run.left.is_empty(), "cluster run: processes were left on the hosts: {}", run.left.join("; "));
            ensure!(!run.stopped, "cluster run: stopped after {} s", timeout.as_secs());
            ensure!(run.status.success(), "cluster run: mpirun ended with {}", run.status);
            Ok(())
        }
        Action::Link { host, up } => {
            let shape = Shape::load()?;
            ensure!(host < shape.hosts, "cluster link: host {host} does not exist (the cluster has {})", shape.hosts);
            net::set_link(host, up)
        }
        Action::Status => status(),
        Action::Down => down(),
        Action::Smoke { halo } => smoke(&halo),
        Action::Faults { halo, trials, seed } => faults(&halo, trials, seed),
        Action::Table(spec) => table(&spec),
    }
}

/// Refuses, naming what is missing, when this process cannot make namespaces.
pub fn check_privileges() -> Result<()> {
    match net::missing_privileges() {
        Some(why) => bail!("{why}"),
        None => Ok(()),
    }
}

/// Makes the cluster (after removing any left from before) and writes its agent and hostfile.
pub fn up(shape: &Shape) -> Result<()> {
    check_privileges()?;
    hold()?;
    ensure!(
        (1..=net::MAX_HOSTS).contains(&shape.hosts),
        "--hosts {}: between 1 and {} hosts",
        shape.hosts,
        net::MAX_HOSTS
    );
    ensure!(shape.ranks >= 1, "--ranks 0: each host needs at least one rank");
    down()?;
    fs::create_dir_all(STATE_DIR).with_context(|| format!("creating {STATE_DIR}"))?;
    let made = net::create(shape.hosts, &shape.rate).and_then(|()| match shape.cpus {
        Some(cpus) => {
            let cgroups = cpu::Hierarchy::find()?;
            cgroups.create(&host_names(shape), cpus)?;
            cgroups.expose(&cgroup_mount())
        }
        None => Ok(()),
    });
    if let Err(e) = made {
        // Leave nothing half made.
        let _ = down();
        return Err(e.context("cluster up"));
    }
    write_launch_files(shape)?;
    shape.save()?;
    eprintln!(
        "cluster: {} hosts x {} ranks, links {}, CPU {} ({} .. {}), subnet {}",
        shape.hosts,
        shape.ranks,
        shape.rate.label(),
        shape.cpu_label(),
        net::host_name(0),
        net::host_name(shape.hosts - 1),
        net::SUBNET
    );
    Ok(())
}

/// Removes every namespace, link and process of the cluster, and its state.
pub fn down() -> Result<()> {
    check_privileges()?;
    hold()?;
    net::remove()?;
    // Whatever the state says: a crashed `up --cpus-per-host` leaves cgroups too. Unmounted
    // first, so that removing the state cannot reach into them.
    cpu::Hierarchy::hide(&cgroup_mount())?;
    if let Ok(cgroups) = cpu::Hierarchy::find() {
        cgroups.remove()?;
    }
    match fs::remove_dir_all(STATE_DIR) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e).with_context(|| format!("removing {STATE_DIR}")),
        _ => Ok(()),
    }
}

fn status() -> Result<()> {
    let shape = Shape::load()?;
    println!("{} hosts x {} ranks, links {}, CPU {}", shape.hosts, shape.ranks, shape.rate.label(), shape.cpu_label());
    for ns in net::namespaces()? {
        let pids = net::pids(&ns)?;
        let link = net::sh("ip", &["-n", &ns, "-br", "addr", "show", "eth0"])?;
        println!("{ns}: {} process(es); {}", pids.len(), link.trim());
    }
    Ok(())
}

/// The launcher's keepalives: idle seconds before the first probe, seconds between probes, and
/// probes missed before the link counts as lost.
const KEEPALIVE: [u64; 3] = [10, 5, 4];
/// How long after a cut the launcher notices a lost host, at most.
pub const LAUNCHER_DEADLINE_S: u64 = KEEPALIVE[0] + KEEPALIVE[1] * KEEPALIVE[2];

/// Where `up --cpus-per-host` exposes the hosts' cgroups to processes inside a namespace.
fn cgroup_mount() -> PathBuf {
    Path::new(STATE_DIR).join("cgroup")
}

/// The names of the shape's hosts.
fn host_names(shape: &Shape) -> Vec<String> {
    (0..shape.hosts).map(net::host_name).collect()
}

/// The agent `mpirun` starts each host's daemon through, in place of `ssh HOST COMMAND`: it
/// joins the host's CPU cgroup when the hosts have their own CPU (`cgroups`; through
/// [`cgroup_mount`], since it runs inside host 0's namespace, whose `/sys` is remounted),
/// enters the host's namespace, gives it its hostname (and its cgroups where a host has them),
/// and runs the command as a shell would.
fn agent(cgroups: Option<&cpu::Hierarchy>) -> String {
    let (join, mount) = match cgroups {
        Some(h) => (
            format!("echo $$ > \"{}/$host/cgroup.procs\" || exit 1\n", cgroup_mount().display()),
            format!(" && {}", h.mount_command()),
        ),
        None => (String::new(), String::new()),
    };
    format!(
        "#!/bin/sh\n\
         # Written by `cargo xtask cluster up`: `agent HOST COMMAND...` runs COMMAND on emulated HOST.\n\
         host=\"$1\"; shift\n\
         {join}\
         exec ip netns exec \"$host\" unshare --uts sh -c 'hostname \"$1\"{mount} && eval \"$2\"' halo-agent \"$host\" \"$*\"\n"
    )
}

fn write_launch_files(shape: &Shape) -> Result<()> {
    let agent = Path::new(STATE_DIR).join("agent");
    let cgroups = shape.cpus.map(|_| cpu::Hierarchy::find()).transpose()?;
    fs::write(&agent, self::agent(cgroups.as_ref())).with_context(|| format!("writing {}", agent.display()))?;
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&agent, fs::Permissions::from_mode(0o755))?;
    let hostfile: String = (0..shape.hosts).map(|i| format!("{} slots={}\n", net::host_name(i), shape.ranks)).collect();
    let path = Path::new(STATE_DIR).join("hostfile");
    fs::write(&path, hostfile).with_context(|| format!("writing {}", path.display()))
}

/// `mpirun`'s arguments for every slot of the cluster: the agent, TCP between hosts on the
/// cluster's subnet only, shared memory inside a host, and TCP keepalives on the launcher's own
/// links, so that a host whose link is cut is noticed within [`LAUNCHER_DEADLINE_S`] and the job
/// ends (Open MPI's default waits 8 minutes).
pub fn mpirun_args(shape: &Shape) -> Vec<String> {
    let state = Path::new(STATE_DIR);
    let mut args: Vec<String> = vec![
        "--hostfile".into(),
        state.join("hostfile").display().to_string(),
        "-np".into(),
        (shape.hosts * shape.ranks).to_string(),
    ];
    for (key, value) in [
        ("plm_rsh_agent", state.join("agent").display().to_string()),
        ("plm_rsh_no_tree_spawn", "1".into()),
        ("btl", "tcp,vader,self".into()),
        ("btl_tcp_if_include", net::SUBNET.into()),
        ("oob_tcp_if_include", net::SUBNET.into()),
        ("oob_tcp_keepalive_time", KEEPALIVE[0].to_string()),
        ("oob_tcp_keepalive_intvl", KEEPALIVE[1].to_string()),
        ("oob_tcp_keepalive_probes", KEEPALIVE[2].to_string()),
        // A daemon that cannot call back (its host cut during the launch) fails the launch.
        ("orte_startup_timeout", LAUNCHER_DEADLINE_S.to_string()),
    ] {
        args.extend(["--mca".into(), key.into(), value]);
    }
    args
}

/// How a command under mpirun ended.
pub struct Finished {
    pub status: ExitStatus,
    /// Whether mpirun had to be stopped at the timeout.
    pub stopped: bool,
    /// Processes still on a host after mpirun ended (then killed), as `host: pid name`.
    pub left: Vec<String>,
}

/// Runs `command` on every slot under mpirun; after `timeout` mpirun is stopped. Then every
/// process still inside a host is named and killed: a run leaves nothing behind.
pub fn run_command(shape: &Shape, timeout: Duration, command: &[String]) -> Result<Finished> {
    let child = start(shape, command, std::process::Stdio::inherit())?;
    let (status, stopped) = wait_bounded(child, timeout)?;
    Ok(Finished { status, stopped, left: clear(Duration::from_secs(3))? })
}

/// Starts mpirun with `command` on every slot, its stderr to `stderr`.
pub(crate) fn start(shape: &Shape, command: &[String], stderr: std::process::Stdio) -> Result<Child> {
    ensure!(!command.is_empty(), "cluster run: missing the command (after `--`)");
    // mpirun runs on the first host, as it would on a node of a real cluster: its connections
    // to the daemons then cross the cluster's links and give up as the hosts' do.
    let mut mpirun = match shape.cpus {
        // mpirun is a process of host 0: it joins that host's cgroup first.
        Some(_) => {
            let procs = cpu::Hierarchy::procs(&cgroup_mount().join(net::host_name(0)));
            let mut sh = Command::new("sh");
            sh.args(["-c", &format!("{}exec \"$@\"", cpu::join_command(&procs)), "sh", "ip"]);
            sh
        }
        None => Command::new("ip"),
    };
    mpirun.args(["netns", "exec", &net::host_name(0), "mpirun"]).args(mpirun_args(shape)).args(command);
    if net::missing_privileges().is_none() {
        mpirun.env("OMPI_ALLOW_RUN_AS_ROOT", "1").env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    }
    mpirun.stderr(stderr).spawn().context("cannot start mpirun (package openmpi-bin)")
}

/// Names and kills every process still inside a host `grace` after mpirun ended.
pub(crate) fn clear(grace: Duration) -> Result<Vec<String>> {
    let left = leftovers(grace)?;
    if !left.is_empty() {
        eprintln!("cluster: left after mpirun ended, now killed: {}", left.join("; "));
        for ns in net::namespaces()? {
            for pid in net::pids(&ns)? {
                let _ = net::sh("kill", &["-KILL", &pid.to_string()]);
            }
        }
    }
    Ok(left)
}

/// Waits for `child`; past `timeout` sends it SIGTERM, then SIGKILL 10 s later. Says whether
/// it had to be stopped.
pub(crate) fn wait_bounded(mut child: Child, timeout: Duration) -> Result<(ExitStatus, bool)> {
    let started = Instant::now();
    let mut terminated = None;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok((status, terminated.is_some()));
        }
        match terminated {
            None if started.elapsed() > timeout => {
                eprintln!("cluster: mpirun still running after {} s; stopping it", timeout.as_secs());
                let _ = net::sh("kill", &["-TERM", &child.id().to_string()]);
                terminated = Some(Instant::now());
            }
            Some(at) if at.elapsed() > Duration::from_secs(10) => {
                child.kill()?;
            }
            _ => {}
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Processes still inside the cluster's hosts `grace` after mpirun ended, as `host: pid
/// command` (daemons and ranks take a moment to go; a host cut off from mpirun longer).
pub fn leftovers(grace: Duration) -> Result<Vec<String>> {
    let mut left = Vec::new();
    let deadline = Instant::now() + grace;
    for ns in net::namespaces()? {
        let mut pids = net::pids(&ns)?;
        while !pids.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
            pids = net::pids(&ns)?;
        }
        for pid in pids {
            let name = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            left.push(format!("{ns}: {pid} {}", name.trim()));
        }
    }
    Ok(left)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mpirun_reaches_every_slot_through_the_agent_on_the_clusters_subnet() {
        let args = mpirun_args(&Shape::new(3, 2, Rate(None))).join(" ");
        assert!(args.contains("-np 6"), "{args}");
        assert!(args.contains("--mca plm_rsh_agent /run/halo-cluster/agent"), "{args}");
        assert!(args.contains("--mca btl tcp,vader,self"), "{args}");
        assert!(args.contains("--mca btl_tcp_if_include 10.213.57.0/24"), "{args}");
        assert!(args.contains("--mca oob_tcp_if_include 10.213.57.0/24"), "{args}");
    }

    #[test]
    fn a_lock_is_held_while_its_process_runs() {
        assert_eq!(live_holder("4242\n", |pid| pid == 4242), Some(4242));
        assert_eq!(live_holder("4242", |_| false), None, "a crashed holder's lock is taken over");
        assert_eq!(live_holder("", |_| true), None, "an empty lock names nobody");
        assert_eq!(live_holder("x", |_| true), None);
    }

    /// The cluster itself: up with 4 hosts, one process per slot reports its own hostname, and
    /// down leaves nothing. Without root it cannot run: in CI that fails, elsewhere it says why.
    #[test]
    fn four_hosts_come_up_answer_with_their_names_and_go() {
        if let Some(why) = net::missing_privileges() {
            assert!(std::env::var_os("CI").is_none(), "CI must run the cluster test: {why}");
            eprintln!("ignored: {why}");
            return;
        }
        let shape = Shape::new(4, 1, Rate::parse("100mbit").unwrap());
        up(&shape).unwrap();
        let out = std::env::temp_dir().join(format!("halo-cluster-names-{}", std::process::id()));
        let command = format!("hostname > {}.$OMPI_COMM_WORLD_RANK", out.display());
        let run = run_command(&shape, Duration::from_secs(120), &["sh".into(), "-c".into(), command]);
        let names: Vec<String> = (0..4)
            .map(|r| {
                let path = PathBuf::from(format!("{}.{r}", out.display()));
                let name = fs::read_to_string(&path).unwrap_or_default();
                let _ = fs::remove_file(path);
                name.trim().to_owned()
            })
            .collect();
        down().unwrap();
        let run = run.unwrap();
        assert!(run.status.success() && run.left.is_empty() && !run.stopped);
        assert_eq!(names, ["halo-h0", "halo-h1", "halo-h2", "halo-h3"]);
        assert!(net::namespaces().unwrap().is_empty() && net::root_links().unwrap().is_empty());
        assert!(!Path::new(STATE_DIR).exists());
    }
}
