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
