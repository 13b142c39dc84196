use std::time::Instant;
use graph_partition::SynthConfig;
use graph_partition::book::PartitionBook;
use graph_partition::partition::*;

#[test]
#[ignore]
fn timing() {
    let t = Instant::now();
    let g = SynthConfig { nodes: 1_000_000, avg_degree: 10.0, features: 1, classes: 2, communities: Some(1000), intra_community: 0.8, seed: 1, ..SynthConfig::default() }.generate().unwrap().graph;
    println!("gen {:.2}", t.elapsed().as_secs_f64());
    let layout = HostLayout::new(8, 2).unwrap();
    let t = Instant::now();
    let ep = ebv(&g, &layout, &EbvWeights::default()).unwrap();
    println!("ebv {:.2}", t.elapsed().as_secs_f64());
    let t = Instant::now();
    let m = place_masters(&g, &layout, &ep, MasterRule::HostAware).unwrap();
    println!("masters {:.2}", t.elapsed().as_secs_f64());
    let p = Partition::VertexCut { parts: 8, edge_part: ep, master: m };
    let t = Instant::now();
    let b = PartitionBook::build(&g, &p).unwrap();
    println!("book {:.2}", t.elapsed().as_secs_f64());
    let t = Instant::now();
    b.validate().unwrap();
    println!("validate {:.2}", t.elapsed().as_secs_f64());
}
