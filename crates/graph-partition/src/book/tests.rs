//! Book construction on a hand-checked example, and what validation and loading reject.

use std::path::Path;

use super::*;
use crate::EdgeListOptions;

/// Path 0-1-2-3-4-5 cut in two: part 0 owns 0..3, part 1 owns 3..6.
fn path_book() -> (Csr, PartitionBook) {
    let edges: Vec<(u32, u32)> = (1..6).map(|v| (v - 1, v)).collect();
    let g = Csr::from_edges(6, &edges, EdgeListOptions::default()).unwrap();
    let book = PartitionBook::build(&g, &Partition::EdgeCut { parts: 2, owner: vec![0, 0, 0, 1, 1, 1] }).unwrap();
    (g, book)
}

#[test]
fn edge_cut_layout_by_hand() {
    let (_, book) = path_book();
    book.validate().unwrap();
    let (a, b) = (&book.parts()[0], &book.parts()[1]);
    assert_eq!(a.local_to_global(), &[0, 1, 2, 3]);
    assert_eq!(b.local_to_global(), &[3, 4, 5, 2]);
    assert_eq!((a.num_primary(), b.num_primary()), (3, 3));
    // Part 0's row for vertex 2 reads 1 and the halo copy of 3 (local 3); the halo row is empty.
    assert_eq!(a.csr().neighbors(2), &[1, 3]);
    assert_eq!(a.csr().neighbors(3), &[] as &[u32]);
    assert_eq!((a.send(1), a.recv(1)), (&[2][..], &[3][..]));
    assert_eq!((b.send(0), b.recv(0)), (&[0][..], &[3][..]));
    assert_eq!(a.origin_of(3), Some((1, 0)));
    assert_eq!(b.copies_of(0), &[(0, 3)]);
    assert_eq!(a.local_of(3), Some(3));
    assert_eq!(a.local_of(4), None);
    assert_eq!(a.global_in_degree(), &[1, 2, 2, 2]);
}

#[test]
fn vertex_cut_layout_by_hand() {
    // Triangle 0-1-2 plus isolated vertex 3. Edge {0,1} on part 0, {1,2} and {0,2} on part 1.
    let g = Csr::from_edges(4, &[(0, 1), (1, 2), (0, 2)], EdgeListOptions::default()).unwrap();
    // Entries: row 0 [1, 2], row 1 [0, 2], row 2 [0, 1].
    let edge_part = vec![0, 1, 0, 1, 1, 1];
    let book =
        PartitionBook::build(&g, &Partition::VertexCut { parts: 2, edge_part, master: vec![0, 1, 1, 0] }).unwrap();
    book.validate().unwrap();
    let (a, b) = (&book.parts()[0], &book.parts()[1]);
    assert_eq!(a.local_to_global(), &[0, 3, 1]);
    assert_eq!(b.local_to_global(), &[1, 2, 0]);
    assert_eq!(a.recv(1), &[2]);
    assert_eq!(b.send(0), &[0]);
    assert_eq!(b.recv(0), &[2]);
    assert_eq!(a.send(1), &[0]);
    assert_eq!(a.csr().num_edges() + b.csr().num_edges(), 6);
    // Part 1 holds 1->2, 0->2, 2->1 and 2->0: vertex 2 (local 1) reads 1 and 0 (locals 0, 2).
    assert_eq!(b.csr().neighbors(1), &[0, 2]);
}

fn saved(book: &PartitionBook) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    book.save(dir.path()).unwrap();
    dir
}

fn load_error(dir: &Path) -> String {
    PartitionBook::load(dir).unwrap_err().to_string()
}

#[test]
fn the_largest_peer_list_is_the_longest_send_or_recv_list() {
    let (_, book) = path_book();
    for p in book.parts() {
        let longest = (0..p.num_parts()).flat_map(|q| [p.send(q).len(), p.recv(q).len()]).max().unwrap();
        assert_eq!(p.largest_peer_list(), longest, "part {}", p.part());
    }
}

#[test]
fn inconsistent_lists_are_found_and_named() {
    let (_, mut book) = path_book();
    book.parts[1].recv[0].clear();
    let err = book.validate().unwrap_err();
    assert_eq!(err.part, Some(1), "{err}");
    let dir = saved(&book);
    let msg = load_error(dir.path());
    assert!(msg.contains("part-1.bin") && msg.contains("recv list"), "{msg}");

    let (_, mut book) = path_book();
    book.parts[0].send[1] = vec![1];
    let msg = load_error(saved(&book).path());
    assert!(msg.contains("does not match"), "{msg}");
}

#[test]
fn damaged_files_are_rejected_with_their_name() {
    let (_, book) = path_book();
    let dir = saved(&book);
    let part1 = part_path(dir.path(), 1);
    let bytes = std::fs::read(&part1).unwrap();

    std::fs::write(&part1, &bytes[..bytes.len() / 2]).unwrap();
    let msg = load_error(dir.path());
    assert!(msg.contains("part-1.bin") && msg.contains("decode"), "{msg}");

    // Part 0's file in part 1's place: its summary and part id disagree.
    std::fs::copy(part_path(dir.path(), 0), &part1).unwrap();
    assert!(load_error(dir.path()).contains("part-1.bin"));

    // A huge length prefix fails within the allocation limit instead of allocating it.
    let bogus =
        bincode::encode_to_vec((0x4841_4c4f_5041_5254u64, 1u32, 0usize, 1u64 << 40), bincode::config::standard());
    std::fs::write(&part1, bogus.unwrap()).unwrap();
    let msg = load_error(dir.path());
    assert!(msg.contains("part-1.bin") && msg.contains("LimitExceeded"), "{msg}");

    std::fs::write(&part1, &bytes).unwrap();
    PartitionBook::load(dir.path()).unwrap();
    let meta = dir.path().join("book.json");
    let json = std::fs::read_to_string(&meta).unwrap().replace("\"parts\": 2", "\"parts\": 3");
    std::fs::write(&meta, json).unwrap();
    assert!(load_error(dir.path()).contains("book.json"));
    std::fs::remove_file(&meta).unwrap();
    assert!(load_error(dir.path()).contains("book.json"));
}

#[test]
fn l_hop_sets_round_trip_and_are_checked() {
    let (g, book) = path_book();
    let nodes = crate::partition::expand_l_hop(&g, 2, &[0, 0, 0, 1, 1, 1], &[2, 5], 2).unwrap();
    assert_eq!(nodes, [vec![0, 1, 2, 3, 4], vec![3, 4, 5]]);
    let book = book.with_l_hop(LHopSets { hops: 2, nodes }).unwrap();
    assert_eq!(PartitionBook::load(saved(&book).path()).unwrap(), book);
    let (_, plain) = path_book();
    let missing_owned = LHopSets { hops: 1, nodes: vec![vec![0, 1], vec![3, 4, 5]] };
    assert_eq!(plain.with_l_hop(missing_owned).unwrap_err().part, Some(0));
}

#[test]
fn feature_cut_book_keeps_only_columns() {
    let (g, _) = path_book();
    let columns = crate::partition::feature_cut(10, 3).unwrap();
    let book = PartitionBook::build(&g, &Partition::FeatureCut { columns: columns.clone() }).unwrap();
    assert!(book.parts().is_empty());
    assert_eq!(book.meta().feature_columns, columns);
    assert_eq!(PartitionBook::load(saved(&book).path()).unwrap(), book);
}

#[test]
fn saving_fewer_parts_removes_the_stale_part_files() {
    let (g, book) = path_book();
    let dir = tempfile::tempdir().unwrap();
    let three = PartitionBook::build(&g, &Partition::EdgeCut { parts: 3, owner: vec![0, 0, 1, 1, 2, 2] }).unwrap();
    three.save(dir.path()).unwrap();
    std::fs::write(dir.path().join("part-notes.bin"), "mine").unwrap();
    book.save(dir.path()).unwrap();
    assert!(!part_path(dir.path(), 2).exists(), "part-2.bin of the 3-part book is gone");
    assert!(dir.path().join("part-notes.bin").exists(), "files that are not parts stay");
    assert_eq!(PartitionBook::load(dir.path()).unwrap(), book);
}

#[test]
fn load_for_checks_the_graph_and_the_world_size() {
    let (g, book) = path_book();
    let dir = saved(&book);
    assert_eq!(PartitionBook::load_for(dir.path(), &g, 2).unwrap(), book);
    let fails = |graph: &Csr, workers: usize| {
        let msg = PartitionBook::load_for(dir.path(), graph, workers).unwrap_err().to_string();
        assert!(msg.contains(&dir.path().join("book.json").display().to_string()), "{msg}");
        msg
    };
    let msg = fails(&g, 4);
    assert!(msg.contains("2 parts") && msg.contains("4 workers"), "{msg}");
    let bigger = Csr::from_edges(7, &[(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)], EdgeListOptions::default()).unwrap();
    assert!(fails(&bigger, 2).contains("6 vertices, the graph has 7"));
    let denser =
        Csr::from_edges(6, &[(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (0, 5)], EdgeListOptions::default()).unwrap();
    assert!(fails(&denser, 2).contains("10 stored edges, the graph has 12"));
    // Same sizes, other edges: only the fingerprint tells.
    let rewired = Csr::from_edges(6, &[(0, 1), (1, 2), (2, 3), (3, 4), (0, 5)], EdgeListOptions::default()).unwrap();
    assert_eq!((rewired.num_nodes(), rewired.num_edges()), (g.num_nodes(), g.num_edges()));
    assert!(fails(&rewired, 2).contains("fingerprint"));
}

#[test]
fn fingerprints_tell_graphs_apart() {
    let (g, _) = path_book();
    assert_eq!(g.fingerprint(), g.clone().fingerprint());
    assert_ne!(g.fingerprint(), g.reverse().induced_subgraph(&[0, 1, 2, 3, 4]).fingerprint());
    let rewired = Csr::from_edges(6, &[(0, 1), (1, 2), (2, 3), (3, 4), (0, 5)], EdgeListOptions::default()).unwrap();
    assert_ne!(g.fingerprint(), rewired.fingerprint());
}
