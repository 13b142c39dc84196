//! NCCL all-to-all and all-reduce between the GPUs of this host, one `LocalCluster` thread per
//! GPU, against the host backend's results and ledger. Needs two GPUs, so `cargo test` skips it;
//! `cargo xtask gpu-test` runs it.
#![cfg(feature = "nccl")]

use comm_hierarchy::nccl::NcclComm;
use comm_hierarchy::{Communicator, LinkModel, LocalCluster, Topology};
use cudarc::driver::CudaContext;

#[test]
#[ignore = "needs 2 CUDA GPUs: cargo xtask gpu-test"]
fn nccl_collectives_match_the_host_backend() {
    let topology = Topology::new(1, 2, LinkModel::default()).unwrap();
    let sizes = |src: usize, dst: usize| 3 + 5 * src + 2 * dst;
    let results = LocalCluster::run(&topology, |comm| -> Result<_, String> {
        let me = comm.rank();
        let stream = CudaContext::new(me).map_err(|e| e.to_string())?.default_stream();
        let nccl = NcclComm::new(comm, stream.clone()).map_err(|e| e.to_string())?;
        let payload =
            |dst: usize| -> Vec<f32> { (0..sizes(me, dst)).map(|i| (100 * me + 10 * dst + i) as f32).collect() };
        let send: Vec<_> = (0..2).map(|p| stream.clone_htod(&payload(p)).unwrap()).collect();
        let mut recv: Vec<_> = (0..2).map(|p| stream.alloc_zeros::<f32>(sizes(p, me)).unwrap()).collect();
        nccl.all_to_all_f32("fwd/1", &send, &mut recv).map_err(|e| e.to_string())?;
        let got: Vec<Vec<f32>> = recv.iter().map(|r| stream.clone_dtoh(r).unwrap()).collect();
        let host = comm.all_to_all_rows("fwd/1", (0..2).map(payload).collect()).map_err(|e| e.to_string())?;
        let mut grads = stream.clone_htod(&vec![me as f32 + 0.5; 7]).unwrap();
        nccl.all_reduce_sum_f32("grads", &mut grads).map_err(|e| e.to_string())?;
        let mut host_grads = vec![me as f32 + 0.5; 7];
        comm.all_reduce_sum_f32("grads", &mut host_grads).map_err(|e| e.to_string())?;
        Ok((got, host, stream.clone_dtoh(&grads).unwrap(), host_grads, nccl.ledger(), comm.ledger()))
    })
    .unwrap();
    for (got, host, grads, host_grads, nccl_ledger, host_ledger) in results {
        assert_eq!(got, host);
        assert_eq!(grads, host_grads);
        // The host ledger also holds the NCCL id broadcast (`nccl-init`), which NCCL's does not.
        let host_traffic: Vec<_> = host_ledger.traffic().iter().filter(|t| t.phase != "nccl-init").cloned().collect();
        assert_eq!(nccl_ledger.traffic(), host_traffic);
    }
}

/// `send_recv`: one group of sends and receives of values and bytes between two GPUs (what a
/// device exchange sends GPU to GPU) delivers every message, an empty one included, and its
/// ledger record equals the host all-to-all of the same bytes, as does the host communicator's
/// `record_all_to_all_v`.
#[test]
#[ignore = "needs 2 CUDA GPUs: cargo xtask gpu-test"]
fn nccl_sends_and_receives_match_the_host_all_to_all() {
    use comm_hierarchy::nccl::{Incoming, Outgoing};
    let topology = Topology::new(1, 2, LinkModel::default()).unwrap();
    let results = LocalCluster::run(&topology, |comm| -> Result<_, String> {
        let (me, peer) = (comm.rank(), 1 - comm.rank());
        let stream = CudaContext::new(me).map_err(|e| e.to_string())?.default_stream();
        let nccl = NcclComm::new(comm, stream.clone()).map_err(|e| e.to_string())?;
        let values: Vec<f32> = (0..5 + me).map(|i| (10 * me + i) as f32).collect();
        // Rank 1 sends no bytes.
        let bytes: Vec<u8> = (0..(1 - me) * 9).map(|i| (me * 50 + i) as u8).collect();
        let (v, b) = (stream.clone_htod(&values).unwrap(), stream.clone_htod(&bytes).unwrap());
        let mut rv = stream.alloc_zeros::<f32>(5 + peer).unwrap();
        let mut rb = stream.alloc_zeros::<u8>((1 - peer) * 9).unwrap();
        let sends = vec![(peer, Outgoing::Values(v.as_view())), (peer, Outgoing::Bytes(b.as_view()))];
        let receives = vec![(peer, Incoming::Values(rv.as_view_mut())), (peer, Incoming::Bytes(rb.as_view_mut()))];
        nccl.send_recv("fwd/0/halo", sends, receives).map_err(|e| e.to_string())?;
        let err = nccl.send_recv("fwd/0/halo", vec![(me, Outgoing::Bytes(b.as_view()))], Vec::new()).unwrap_err();
        assert!(err.to_string().contains("cannot exchange"), "{err}");
        let got = (stream.clone_dtoh(&rv).unwrap(), stream.clone_dtoh(&rb).unwrap());
        let sent = values.len() * 4 + bytes.len();
        let mut host = vec![Vec::new(); 2];
        host[peer] = vec![0u8; sent];
        comm.all_to_all_v("fwd/0/halo", host).map_err(|e| e.to_string())?;
        let real = comm.ledger();
        let mark = comm.ledger_mark();
        let mut lens = vec![0; 2];
        lens[peer] = sent;
        comm.device_ledger("fwd/0/halo")
            .and_then(|l| l.record_all_to_all_v("fwd/0/halo", &lens))
            .map_err(|e| e.to_string())?;
        Ok((me, got, nccl.ledger(), real, comm.ledger_since(mark)))
    })
    .unwrap();
    for (me, (values, bytes), nccl_ledger, host_ledger, recorded) in results {
        let peer = 1 - me;
        assert_eq!(values, (0..5 + peer).map(|i| (10 * peer + i) as f32).collect::<Vec<_>>(), "rank {me}");
        assert_eq!(bytes, (0..(1 - peer) * 9).map(|i| (peer * 50 + i) as u8).collect::<Vec<_>>(), "rank {me}");
        let halo = |l: &comm_hierarchy::LedgerSnapshot| -> Vec<_> {
            l.traffic().iter().filter(|t| t.phase == "fwd/0/halo").cloned().collect()
        };
        assert_eq!(halo(&nccl_ledger), halo(&host_ledger), "rank {me}");
        assert_eq!(halo(&recorded), halo(&host_ledger), "rank {me}");
    }
}
