//! Local-backend collectives on 4 workers (2 hosts x 2): all-to-all with 64 KiB and 1 MiB
//! per ordered pair, and all-reduce of 64 KiB and 4 MiB of f32. One cluster runs all the
//! iterations of a sample; the time is the slowest worker's, from a barrier to a barrier.
//! All-to-all throughput counts the bytes moved between distinct workers (12 blocks per call);
//! the blocks received are sent on in the next call, so no allocation is timed. All-reduce
//! throughput counts the payload; it includes encoding, decoding and summing.
//!
//! Run: `cargo bench -p halo-benches --bench comm -- --warm-up-time 1 --measurement-time 3`

use std::time::{Duration, Instant};

use comm_hierarchy::{CommError, Communicator, LinkModel, LocalCluster, LocalCommunicator, Topology};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

const WORKERS: usize = 4;

fn topology() -> Topology {
    Topology::for_workers(WORKERS, 2, LinkModel::default()).expect("4 workers fit 2 hosts")
}

/// Runs `op` `iters` times on every worker of a fresh cluster, on a per-worker state made by
/// `setup` before the clock starts; returns the slowest worker's time between the barriers
/// around the loop.
fn timed<S>(
    iters: u64,
    setup: impl Fn(&LocalCommunicator) -> S + Sync,
    op: impl Fn(&LocalCommunicator, &mut S) -> Result<(), CommError> + Sync,
) -> Duration {
    let times = LocalCluster::run(&topology(), |comm| {
        let mut state = setup(comm);
        comm.barrier("bench/sync")?;
        let start = Instant::now();
        for _ in 0..iters {
            op(comm, &mut state)?;
        }
        comm.barrier("bench/sync")?;
        Ok::<_, CommError>(start.elapsed())
    })
    .expect("the local cluster failed");
    times.into_iter().max().unwrap_or_default()
}

fn all_to_all(c: &mut Criterion) {
    let mut group = c.benchmark_group("local_all_to_all_4w");
    for bytes in [64usize << 10, 1 << 20] {
        group.throughput(Throughput::Bytes((WORKERS * (WORKERS - 1) * bytes) as u64));
        group.bench_with_input(BenchmarkId::from_parameter(bytes), &bytes, |b, &bytes| {
            b.iter_custom(|iters| {
                timed(
                    iters,
                    |_| (0..WORKERS).map(|dst| vec![dst as u8; bytes]).collect::<Vec<_>>(),
                    // What arrives is sent on in the next call: no allocation inside the loop.
                    |comm, blocks| {
                        *blocks = comm.all_to_all_v("bench/all_to_all", std::mem::take(blocks))?;
                        Ok(())
                    },
                )
            })
        });
    }
    group.finish();
}

fn all_reduce(c: &mut Criterion) {
    let mut group = c.benchmark_group("local_all_reduce_4w");
    for bytes in [64usize << 10, 4 << 20] {
        group.throughput(Throughput::Bytes(bytes as u64));
        group.bench_with_input(BenchmarkId::from_parameter(bytes), &bytes, |b, &bytes| {
            b.iter_custom(|iters| {
                timed(
                    iters,
                    |comm| vec![comm.rank() as f32 * 1e-3; bytes / 4],
                    |comm, values| comm.all_reduce_sum_f32("bench/all_reduce", values),
                )
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    // Each sample spawns a 4-thread cluster; 10 samples keep a run short on small machines.
    config = Criterion::default().sample_size(10);
    targets = all_to_all, all_reduce
}
criterion_main!(benches);
