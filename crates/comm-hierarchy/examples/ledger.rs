//! Move bytes with a `Communicator` and read the ledger: 4 in-process workers on 2 hosts
//! all-reduce a gradient and exchange rows; the ledger counts every byte inside and across
//! hosts, and the cost model prices them on the CDFGNN paper's cluster.
//!
//!     cargo run -p comm-hierarchy --example ledger

use comm_hierarchy::{Communicator, LocalCluster, Preset, Topology, cost};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let topology = Topology::for_workers(4, 2, Preset::Cdfgnn.links())?;
    let ledgers = LocalCluster::run(&topology, |comm| {
        let mut grads = vec![comm.rank() as f32; 1024];
        comm.all_reduce_sum_f32("grads", &mut grads)?;
        assert_eq!(grads[0], 6.0, "0 + 1 + 2 + 3");
        // Every worker sends 16 floats to each peer.
        let rows = (0..comm.size()).map(|peer| vec![peer as f32; 16]).collect();
        let received = comm.all_to_all_rows("fwd/0", rows)?;
        assert!(received.iter().all(|r| r.len() == 16));
        Ok::<_, comm_hierarchy::CommError>(comm.ledger())
    })?;
    for (rank, ledger) in ledgers.iter().enumerate() {
        let t = ledger.totals();
        println!(
            "rank {rank}: {} B within its host, {} B across hosts, {} messages",
            t.bytes_intra,
            t.bytes_inter,
            t.messages()
        );
    }
    let cost = cost::model(&topology, &ledgers[0]);
    println!("rank 0's traffic costs {:.6} s on `{}` ({})", cost.total_s, Preset::Cdfgnn.as_str(), cost::MODEL);
    Ok(())
}
