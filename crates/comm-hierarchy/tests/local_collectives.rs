//! Collectives of the local backend: delivery, sums, ledger counts and the cost model.

use comm_hierarchy::{
    CommError, Communicator, LedgerSnapshot, LinkModel, LocalCluster, Topology, cost, ledger::CollectiveKind, wire,
};
use proptest::prelude::*;

fn topology(workers: usize, hosts: usize) -> Topology {
    Topology::for_workers(workers, hosts, LinkModel::default()).unwrap()
}

/// The bytes rank `src` sends to rank `dst`: `len` bytes that name both ends.
fn payload(src: usize, dst: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (src * 31 + dst * 7 + i) as u8).collect()
}

/// Gathers every rank's ledger at rank 0 and returns the merged snapshot there.
fn merged_ledger(comm: &dyn Communicator) -> Result<Option<LedgerSnapshot>, CommError> {
    comm.gather_ledger(0, &comm.ledger())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn all_to_all_delivers_every_byte_and_the_ledger_counts_them(
        (workers, hosts) in prop_oneof![Just((1, 1)), Just((2, 1)), Just((3, 3)), Just((4, 2)), Just((6, 2))],
        lens in proptest::collection::vec(0usize..300, 36),
    ) {
        let len = |s: usize, d: usize| lens[s * 6 + d];
        let t = topology(workers, hosts);
        let merged = LocalCluster::run(&t, |comm| {
            let rank = comm.rank();
            let send = (0..workers).map(|d| payload(rank, d, len(rank, d))).collect();
            let recv = comm.all_to_all_v("fwd/1", send).map_err(|e| e.to_string())?;
            for (src, bytes) in recv.iter().enumerate() {
                if *bytes != payload(src, rank, len(src, rank)) {
                    return Err(format!("rank {rank} got wrong bytes from rank {src}"));
                }
            }
            merged_ledger(comm).map_err(|e| e.to_string())
        })
        .unwrap()
        .remove(0)
        .unwrap();

        let mut handed = 0;
        for s in 0..workers {
            for d in (0..workers).filter(|&d| d != s) {
                prop_assert_eq!(merged.bytes_between(s, d), len(s, d) as u64);
                handed += len(s, d) as u64;
            }
            prop_assert_eq!(merged.bytes_between(s, s), 0, "self-traffic is not counted");
        }
        let totals = merged.totals();
        prop_assert_eq!(totals.bytes(), handed);
        prop_assert_eq!(totals.messages(), (workers * (workers - 1)) as u64);
        prop_assert_eq!(merged.phase_totals("fwd/1"), totals);
    }

    #[test]
    fn all_reduce_equals_the_serial_rank_order_sum_bit_for_bit(
        workers in 1usize..6,
        values in proptest::collection::vec(-1e3f32..1e3, 0..40),
    ) {
        let len = values.len();
        // Rank r contributes values scaled by a rank-specific factor, so order matters.
        let contribution = |rank: usize| -> Vec<f32> {
            values.iter().map(|v| v * (1.0 + rank as f32 * 0.37)).collect()
        };
        let mut serial = contribution(0);
        for r in 1..workers {
            serial.iter_mut().zip(contribution(r)).for_each(|(a, x)| *a += x);
        }
        let results = LocalCluster::run(&topology(workers, 1), |comm| {
            let mut data = contribution(comm.rank());
            comm.all_reduce_sum_f32("params", &mut data)?;
            let mut wide: Vec<f64> = data.iter().map(|&v| f64::from(v)).collect();
            comm.all_reduce_sum_f64("params/f64", &mut wide)?;
            Ok::<_, CommError>((data, wide))
        })
        .unwrap();
        for (data, wide) in &results {
            prop_assert_eq!(data.len(), len);
            prop_assert_eq!(
                data.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                serial.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            );
            let expected: Vec<f64> = serial.iter().map(|&v| f64::from(v) * workers as f64).collect();
            for (got, want) in wide.iter().zip(&expected) {
                prop_assert!((got - want).abs() <= 1e-9 * want.abs().max(1.0));
            }
        }
    }
}

#[test]
fn four_workers_on_two_hosts_count_4n_intra_and_8n_inter() {
    const N: usize = 1 << 16;
    let t = topology(4, 2);
    let merged = LocalCluster::run(&t, |comm| {
        let send = (0..4).map(|d| payload(comm.rank(), d, N)).collect();
        comm.all_to_all_v("fwd/1", send)?;
        merged_ledger(comm)
    })
    .unwrap()
    .remove(0)
    .unwrap();
    let totals = merged.totals();
    assert_eq!(totals.bytes_intra, 4 * N as u64);
    assert_eq!(totals.bytes_inter, 8 * N as u64);
    assert_eq!((totals.messages_intra, totals.messages_inter), (4, 8));

    let modeled = cost::model(&t, &merged);
    assert!(modeled.complete);
    // Every message is in flight at once: each host's two devices send 2 N each to the other
    // host through its one uplink, and receive as much through its downlink.
    let inter = t.links().inter;
    let expected = inter.transfer_s(4.0 * N as f64);
    assert!((modeled.total_s - expected).abs() < 1e-12, "{} vs {expected}", modeled.total_s);
}

#[test]
fn all_reduce_ledger_counts_the_chunks_really_moved() {
    let t = topology(4, 2);
    let merged = LocalCluster::run(&t, |comm| {
        let mut data = vec![1.0f32; 10];
        comm.all_reduce_sum_f32("grad", &mut data)?;
        assert_eq!(data, vec![4.0; 10]);
        merged_ledger(comm)
    })
    .unwrap()
    .remove(0)
    .unwrap();
    // Chunks of 3, 3, 2, 2 elements; each rank sends every other rank its chunk twice over
    // (reduce-scatter, then all-gather of the owner's sum).
    let chunk_bytes = [12u64, 12, 8, 8];
    let mut expected = 0;
    for s in 0..4 {
        for d in (0..4).filter(|&d| d != s) {
            expected += chunk_bytes[d] + chunk_bytes[s];
        }
    }
    assert_eq!(merged.totals().bytes(), expected);
    assert_eq!(merged.totals().messages(), 24);
    let record = &merged.collectives()[0];
    assert_eq!((record.kind, record.payload_bytes), (CollectiveKind::AllReduce, 40));
}

#[test]
fn rooted_collectives_barrier_and_point_to_point() {
    let t = topology(3, 1);
    let results = LocalCluster::run(&t, |comm| {
        let rank = comm.rank();
        let mut data = if rank == 2 { b"root says hi".to_vec() } else { Vec::new() };
        comm.broadcast("bcast", 2, &mut data)?;
        assert_eq!(data, b"root says hi");

        let gathered = comm.gather("gather", 1, vec![rank as u8; rank + 1])?;
        if rank == 1 {
            assert_eq!(gathered, Some(vec![vec![0], vec![1, 1], vec![2, 2, 2]]));
        } else {
            assert_eq!(gathered, None);
        }

        let parts = (rank == 0).then(|| (0..3).map(|p| vec![p as u8 * 10]).collect());
        assert_eq!(comm.scatter("scatter", 0, parts)?, vec![rank as u8 * 10]);

        comm.barrier("barrier")?;

        let mut rows = if rank == 0 { vec![0.5f32, -2.0, 1.0] } else { Vec::new() };
        comm.broadcast_f32("params", 0, &mut rows)?;
        assert_eq!(rows, vec![0.5, -2.0, 1.0]);

        // Point-to-point: messages between a pair keep their order.
        let next = (rank + 1) % 3;
        let prev = (rank + 2) % 3;
        comm.send("p2p", next, vec![1])?;
        comm.send("p2p", next, vec![2, 2])?;
        assert_eq!(comm.recv("p2p", prev)?, vec![1]);
        assert_eq!(comm.recv("p2p", prev)?, vec![2, 2]);
        Ok::<_, CommError>(comm.ledger())
    })
    .unwrap();
    let merged = LedgerSnapshot::merge_all(&results).unwrap();
    // Broadcast from rank 2: 12 bytes to 2 peers; gather: ranks 0 and 2 send 1 and 3 bytes.
    assert_eq!(merged.phase_totals("bcast").bytes(), 24);
    assert_eq!(merged.phase_totals("gather").bytes(), 4);
    assert_eq!(merged.phase_totals("scatter").bytes(), 2);
    assert_eq!(merged.phase_totals("barrier").messages(), 6);
    assert_eq!(merged.phase_totals("p2p").bytes(), 9);
}

#[test]
fn split_all_to_all_overlaps_other_calls() {
    let t = topology(4, 2);
    LocalCluster::run(&t, |comm| {
        let rank = comm.rank();
        let pending = comm.start_all_to_all_v("fwd/1", (0..4).map(|d| payload(rank, d, 5)).collect())?;
        // Computation and another collective while the all-to-all is in flight.
        let mut grad = vec![rank as f32; 3];
        comm.all_reduce_sum_f32("params", &mut grad)?;
        assert_eq!(grad, vec![6.0; 3]);
        let rows = comm.all_to_all_rows("fwd/2", (0..4).map(|d| vec![(rank * 10 + d) as f32; 2]).collect())?;
        for (src, block) in rows.iter().enumerate() {
            assert_eq!(block, &vec![(src * 10 + rank) as f32; 2]);
        }
        let recv = pending.wait()?;
        for (src, bytes) in recv.iter().enumerate() {
            assert_eq!(bytes, &payload(src, rank, 5));
        }
        Ok::<_, CommError>(())
    })
    .unwrap();
}

#[test]
fn gather_ledger_merges_without_recording_itself_and_deltas_isolate_an_epoch() {
    let t = topology(2, 2);
    let results = LocalCluster::run(&t, |comm| {
        comm.all_to_all_v("fwd/1", vec![vec![0; 100], vec![0; 100]])?;
        let start = comm.ledger();
        comm.all_to_all_v("fwd/1", vec![vec![0; 7], vec![0; 7]])?;
        let epoch = comm.ledger().delta_since(&start)?;
        let merged_epoch = comm.gather_ledger(0, &epoch)?;
        let merged_all = comm.gather_ledger(0, &comm.ledger())?;
        Ok::<_, CommError>((merged_epoch, merged_all, comm.ledger()))
    })
    .unwrap();
    let (epoch, all, own) = &results[0];
    assert_eq!(epoch.as_ref().unwrap().totals().bytes_inter, 14);
    assert_eq!(all.as_ref().unwrap().totals().bytes_inter, 214);
    assert!(own.phases().iter().all(|p| *p == "fwd/1"), "ledger bookkeeping must not be recorded");
    assert_eq!(results[1].0, None);
}

#[test]
fn bad_arguments_are_reported_with_the_phase() {
    let t = topology(2, 1);
    let errors = LocalCluster::run(&t, |comm| {
        let count = comm.all_to_all_v("fwd/3", vec![Vec::new()]).unwrap_err();
        let root = comm.broadcast("params", 5, &mut Vec::new()).unwrap_err();
        let own = comm.send("p2p", comm.rank(), Vec::new()).unwrap_err();
        Ok::<_, CommError>((count.to_string(), root.to_string(), own.to_string()))
    })
    .unwrap();
    let (count, root, own) = &errors[0];
    assert!(count.contains("`fwd/3`") && count.contains("one buffer per rank (2), got 1"), "{count}");
    assert!(root.contains("root 5 is out of range"), "{root}");
    assert!(own.contains("itself"), "{own}");
}

#[test]
fn mismatched_reduce_lengths_fail_instead_of_corrupting() {
    let t = topology(2, 1);
    let err = LocalCluster::run(&t, |comm| {
        let mut data = vec![1.0f32; 4 + comm.rank()];
        comm.all_reduce_sum_f32("params", &mut data)
    })
    .unwrap_err();
    assert!(err.to_string().contains("different lengths"), "{err}");
}

#[test]
fn wire_rows_decode_what_all_to_all_rows_sent() {
    let t = topology(2, 1);
    let out = LocalCluster::run(&t, |comm| {
        let blocks = comm.all_to_all_rows("fwd/1", vec![vec![1.5; 4], vec![-3.25; 2]])?;
        Ok::<_, CommError>(wire::encode(&blocks[1 - comm.rank()]))
    })
    .unwrap();
    // Every rank sends [1.5; 4] to rank 0 and [-3.25; 2] to rank 1.
    assert_eq!(wire::decode::<f32>(&out[0]).unwrap(), vec![1.5; 4]);
    assert_eq!(wire::decode::<f32>(&out[1]).unwrap(), vec![-3.25; 2]);
}

/// `ledger_since` is the cheap form of `delta_since`: the same snapshot, over collectives,
/// point-to-point messages and a phase that already had traffic before the mark.
#[test]
fn ledger_since_a_mark_equals_the_delta_of_two_snapshots() {
    LocalCluster::run(&topology(4, 2), |comm| {
        let (rank, size) = (comm.rank(), comm.size());
        comm.all_reduce_sum_f32("grads", &mut [1.0, 2.0])?;
        let (mark, before) = (comm.ledger_mark(), comm.ledger());
        comm.all_to_all_v("fwd/0", (0..size).map(|d| payload(rank, d, 5 + d)).collect())?;
        comm.all_reduce_sum_f32("grads", &mut [1.0; 7])?;
        comm.send("p2p", (rank + 1) % size, vec![1, 2, 3])?;
        comm.recv("p2p", (rank + size - 1) % size)?;
        let since = comm.ledger_since(mark);
        assert_eq!(since, comm.ledger().delta_since(&before).unwrap());
        assert_eq!(since.collectives().len(), 3);
        assert!(since.totals().bytes() > 0);
        let empty = comm.ledger_since(comm.ledger_mark());
        assert!(empty.traffic().is_empty() && empty.collectives().is_empty());
        assert_eq!(empty.ranks(), &[rank]);
        Ok::<_, CommError>(())
    })
    .unwrap();
}

/// `scatter_with` makes the root's buffers one at a time, its own last, and the ledger records
/// the same call as `scatter` with those buffers; an error of the maker ends the root's call.
#[test]
fn streamed_scatter_makes_one_buffer_at_a_time_and_is_ledgered_like_scatter() {
    let t = topology(4, 2);
    let ledgers = |streamed: bool| {
        LocalCluster::run(&t, |comm| {
            let rank = comm.rank();
            let got = if streamed && rank == 1 {
                let mut made = Vec::new();
                let mut next = |p: usize| {
                    made.push(p);
                    Ok(payload(1, p, p + 3))
                };
                let own = comm.scatter_with("setup", 1, Some(&mut next))?;
                assert_eq!(made, [2, 3, 0, 1]);
                own
            } else if streamed {
                comm.scatter_with("setup", 1, None)?
            } else {
                comm.scatter("setup", 1, (rank == 1).then(|| (0..4).map(|p| payload(1, p, p + 3)).collect()))?
            };
            assert_eq!(got, payload(1, rank, rank + 3));
            Ok::<_, CommError>(comm.ledger())
        })
        .unwrap()
    };
    let (streamed, whole) = (ledgers(true), ledgers(false));
    assert_eq!(streamed, whole);
    let merged = LedgerSnapshot::merge_all(&streamed).unwrap();
    assert_eq!(merged.phase_totals("setup").bytes(), 3 + 5 + 6);
    assert_eq!(merged.collectives()[0].payload_bytes, 14);

    let failed = LocalCluster::run(&topology(2, 1), |comm| {
        if comm.rank() == 0 {
            let mut next = |_: usize| Err(CommError::InvalidArgument { phase: "setup".into(), detail: "no".into() });
            comm.scatter_with("setup", 0, Some(&mut next)).map(drop)
        } else {
            comm.scatter_with("setup", 0, None).map(drop)
        }
    });
    assert!(failed.is_err());
}
