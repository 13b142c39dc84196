//! MPI self-test driver, started under `mpirun` by `tests/mpi_launch.rs`.
//!
//! `comm-mpi-selftest check HOSTS|auto BYTES`: runs every collective on the MPI backend,
//! checks the bytes delivered and the ledger counts, and exits 0. `auto` groups ranks into
//! hosts by processor name.
//! `comm-mpi-selftest fail RANK error|panic|abort|hang`: rank RANK fails in the given way in
//! the middle of a run of all-to-alls; the job must end non-zero, naming the rank.

use std::process::ExitCode;
use std::time::Duration;

use comm_hierarchy::mpi_backend::{self, MpiCommunicator, MpiOptions};
use comm_hierarchy::{CommError, Communicator, cost, wire};

const USAGE: &str = "usage: comm-mpi-selftest check HOSTS|auto BYTES | fail RANK error|panic|abort|hang";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let outcome = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["check", hosts, bytes] => {
            let hosts = if *hosts == "auto" { Ok(None) } else { parse(hosts, "HOSTS").map(Some) };
            hosts.and_then(|hosts| Ok((hosts, parse(bytes, "BYTES")?))).and_then(|(hosts, bytes)| {
                let options = MpiOptions { hosts, ..MpiOptions::default() };
                mpi_backend::run(&options, |comm| check(comm, bytes)).map_err(|e| e.to_string())
            })
        }
        ["fail", rank, how] => parse(rank, "RANK").and_then(|rank| {
            let options = MpiOptions { hosts: None, timeout: Duration::from_secs(2), ..MpiOptions::default() };
            mpi_backend::run(&options, |comm| fail(comm, rank, how)).map_err(|e| e.to_string())
        }),
        _ => Err(USAGE.to_owned()),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("comm-mpi-selftest: {e}");
            ExitCode::FAILURE
        }
    }
}

fn parse(text: &str, name: &str) -> Result<usize, String> {
    text.parse().map_err(|e| format!("{name} must be a non-negative integer, got {text:?}: {e}"))
}

/// What rank `src` sends rank `dst`: `len` bytes naming both ends.
fn payload(src: usize, dst: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (src * 31 + dst * 7 + i) as u8).collect()
}

fn ensure(ok: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if ok { Ok(()) } else { Err(what()) }
}

fn check(comm: MpiCommunicator, bytes: usize) -> Result<(), String> {
    let (rank, size) = (comm.rank(), comm.size());
    let err = |e: CommError| e.to_string();

    // One all-to-all of `bytes` per ordered pair: the ledger must count exactly those bytes.
    let received = comm.all_to_all_v("fwd/1", (0..size).map(|d| payload(rank, d, bytes)).collect()).map_err(err)?;
    for (src, got) in received.iter().enumerate() {
        ensure(*got == payload(src, rank, bytes), || format!("rank {rank}: wrong bytes from rank {src}"))?;
    }
    let one = comm.gather_ledger(0, &comm.ledger()).map_err(err)?;
    if let Some(merged) = one {
        let t = comm.topology();
        let intra_pairs = (0..size)
            .flat_map(|s| (0..size).map(move |d| (s, d)))
            .filter(|&(s, d)| s != d && t.host_of(s) == t.host_of(d))
            .count();
        let inter_pairs = size * (size - 1) - intra_pairs;
        let totals = merged.totals();
        println!(
            "all_to_all hosts={} workers={size} bytes={bytes} bytes_intra={} bytes_inter={} modeled_s={:.9}",
            t.hosts(),
            totals.bytes_intra,
            totals.bytes_inter,
            cost::model(t, &merged).total_s
        );
        ensure(totals.bytes_intra == (intra_pairs * bytes) as u64, || format!("bytes_intra {}", totals.bytes_intra))?;
        ensure(totals.bytes_inter == (inter_pairs * bytes) as u64, || format!("bytes_inter {}", totals.bytes_inter))?;
    }

    // All-reduce: the serial rank-order sum, bit for bit.
    let contribution =
        |r: usize| -> Vec<f32> { (0..37).map(|i| (i as f32 * 0.1 + 1.0) * (1.0 + r as f32 * 0.37)).collect() };
    let mut serial = contribution(0);
    for r in 1..size {
        serial.iter_mut().zip(contribution(r)).for_each(|(a, x)| *a += x);
    }
    let mut data = contribution(rank);
    comm.all_reduce_sum_f32("params", &mut data).map_err(err)?;
    ensure(data.iter().map(|v| v.to_bits()).eq(serial.iter().map(|v| v.to_bits())), || {
        format!("rank {rank}: all-reduce differs")
    })?;
    let mut count = [rank as f64 + 0.5];
    comm.all_reduce_sum_f64("count", &mut count).map_err(err)?;
    let want = (0..size).map(|r| r as f64 + 0.5).sum::<f64>();
    ensure(count[0] == want, || format!("rank {rank}: f64 sum {} != {want}", count[0]))?;

    // Rooted collectives, barrier, point-to-point.
    let mut block = if rank == size - 1 { b"from the last rank".to_vec() } else { Vec::new() };
    comm.broadcast("bcast", size - 1, &mut block).map_err(err)?;
    ensure(block == b"from the last rank", || format!("rank {rank}: broadcast"))?;
    let gathered = comm.gather("gather", 0, vec![rank as u8; rank + 1]).map_err(err)?;
    if let Some(all) = gathered {
        ensure(all.iter().enumerate().all(|(r, v)| *v == vec![r as u8; r + 1]), || "gather".to_owned())?;
    }
    let parts = (rank == 0).then(|| (0..size).map(|p| vec![p as u8; 3]).collect());
    ensure(comm.scatter("scatter", 0, parts).map_err(err)? == vec![rank as u8; 3], || "scatter".to_owned())?;
    comm.barrier("barrier").map_err(err)?;
    if size > 1 {
        comm.send("p2p", (rank + 1) % size, vec![rank as u8]).map_err(err)?;
        let got = comm.recv("p2p", (rank + size - 1) % size).map_err(err)?;
        ensure(got == vec![((rank + size - 1) % size) as u8], || "p2p".to_owned())?;
    }

    // Split all-to-all overlapping another collective, with 4 MiB messages (large enough for
    // MPI's rendezvous protocol, so the owned send buffers must stay alive until received).
    let big = 4 << 20;
    let pending = comm.start_all_to_all_v("fwd/2", (0..size).map(|d| payload(rank, d, big)).collect()).map_err(err)?;
    let rows =
        comm.all_to_all_rows("fwd/3", (0..size).map(|d| vec![(rank * 10 + d) as f32; 5]).collect()).map_err(err)?;
    for (src, r) in rows.iter().enumerate() {
        ensure(*r == vec![(src * 10 + rank) as f32; 5], || format!("rows from {src}"))?;
    }
    for (src, got) in pending.wait().map_err(err)?.iter().enumerate() {
        ensure(*got == payload(src, rank, big), || format!("rank {rank}: wrong 4 MiB block from {src}"))?;
    }

    // The communicator is `Send`: finish the job on another thread.
    let (comm, summed) = std::thread::spawn(move || {
        let mut x = [1.0f64];
        let summed = comm.all_reduce_sum_f64("thread", &mut x).map(|()| x[0]);
        (comm, summed)
    })
    .join()
    .map_err(|_| "the helper thread panicked".to_owned())?;
    let summed = summed.map_err(err)?;
    ensure(summed == size as f64, || format!("all-reduce on the helper thread gave {summed}"))?;

    let total = comm.gather_ledger(0, &comm.ledger()).map_err(err)?;
    if let Some(merged) = total {
        let phases: Vec<&str> = merged.phases().into_iter().collect();
        println!("phases={phases:?} total_bytes={}", merged.totals().bytes());
        ensure(!phases.contains(&"ledger"), || "ledger bookkeeping was recorded".to_owned())?;
        ensure(merged.ranks() == (0..size).collect::<Vec<_>>().as_slice(), || "ranks".to_owned())?;
    }
    println!("rank {rank}: ok");
    Ok(())
}

fn fail(comm: MpiCommunicator, failing: usize, how: &str) -> Result<(), String> {
    let rank = comm.rank();
    for step in 0..5 {
        if rank == failing && step == 2 {
            match how {
                "error" => return Err(format!("rank {rank} hit a deliberate error at step {step}")),
                "panic" => panic!("deliberate panic at step {step}"),
                "abort" => std::process::abort(),
                "hang" => std::thread::sleep(Duration::from_secs(30)),
                other => return Err(format!("unknown failure mode {other:?}; {USAGE}")),
            }
        }
        let sent = (0..comm.size()).map(|d| wire::encode(&[step as f32, d as f32])).collect();
        comm.all_to_all_v(&format!("step/{step}"), sent).map_err(|e| e.to_string())?;
    }
    Ok(())
}
