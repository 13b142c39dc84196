use graph_partition::EdgeListOptions;
use graph_partition::rng::SplitMix64;
use ndarray::{Array2, Axis};
use proptest::prelude::*;

use super::*;
use crate::dropout::DropoutSite;
use crate::sparse::{self, Write};

fn random_graph(n: usize, m: usize, seed: u64) -> Csr {
    let mut r = SplitMix64::new(seed);
    let edges: Vec<(u32, u32)> = (0..m).map(|_| (r.below(n as u64) as u32, r.below(n as u64) as u32)).collect();
    Csr::from_edges(n, &edges, EdgeListOptions { symmetrize: false, remove_self_loops: false }).unwrap()
}

fn random_vec(len: usize, seed: u64) -> Vec<f32> {
    let mut r = SplitMix64::new(seed);
    (0..len).map(|_| r.next_f64() as f32 * 4.0 - 2.0).collect()
}

#[test]
fn spmm_t_matches_the_cpu_transpose_product() {
    let (csr, f) = (random_graph(30, 120, 1), 5);
    let vals = random_vec(csr.num_edges(), 2);
    let x = random_vec(csr.num_rows() * f, 3);
    let (t, perm) = csr.transpose_with_perm();
    let xv = Array2::from_shape_vec((csr.num_rows(), f), x.clone()).unwrap();
    let mut expect = Array2::zeros((csr.num_cols(), f));
    sparse::spmm_transpose(&t, &perm, Some(&vals), &xv.view(), &mut expect, Write::Overwrite);
    for (a, b) in spmm_t(&csr, Some(&vals), &x, f).iter().zip(expect.iter()) {
        assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{a} vs {b}");
    }
}

#[test]
fn dropout_keep_is_the_cpu_mask_bit_for_bit() {
    for (p, seed, epoch, layer) in [(0.5, 1, 2, 0), (0.1, 9, 0, 3), (0.0, 4, 4, 1), (0.95, 7, 11, 2)] {
        let site = DropoutSite::new(p, seed, epoch, layer);
        for gid in [0u32, 1, 77, 4_000_000] {
            let mut keep = [0u8; 37];
            site.feature_keep(gid, &mut keep);
            let port: Vec<u8> =
                (0..keep.len()).map(|c| dropout_keep(site.feature_prefix(), site.threshold(), gid, c)).collect();
            assert_eq!(port, keep, "p {p} gid {gid}");
        }
    }
}

#[test]
fn edge_softmax_backward_matches_finite_differences() {
    let (csr, heads) = (random_graph(8, 30, 5), 2);
    let z = random_vec(csr.num_edges() * heads, 6);
    let g = random_vec(z.len(), 7);
    let softmax = |z: &[f32]| {
        let mut w = z.to_vec();
        sparse::edge_softmax(&csr, &mut w, heads);
        w
    };
    let loss = |z: &[f32]| softmax(z).iter().zip(&g).map(|(w, g)| f64::from(w * g)).sum::<f64>();
    let dz = edge_softmax_backward(&csr, heads, &softmax(&z), &g);
    for i in 0..z.len() {
        let (mut up, mut down) = (z.clone(), z.clone());
        up[i] += 1e-2;
        down[i] -= 1e-2;
        let numeric = (loss(&up) - loss(&down)) / 2e-2;
        assert!((f64::from(dz[i]) - numeric).abs() < 2e-3, "entry {i}: {} vs {numeric}", dz[i]);
    }
}

#[test]
fn gat_logits_add_source_and_destination_scores() {
    let csr =
        Csr::from_edges(2, &[(0, 1), (1, 1)], EdgeListOptions { symmetrize: false, remove_self_loops: false }).unwrap();
    // Rows are destinations: row 1 holds columns 0 and 1, row 0 nothing.
    assert_eq!((csr.row_range(0), csr.row_range(1), csr.indices()), (0..0, 0..2, &[0u32, 1][..]));
    let out = gat_logits(&csr, 1, 0.2, &[5.0, -3.0], &[7.0, -1.0]);
    assert_eq!(out, [4.0, -4.0 * 0.2]);
}

#[test]
fn bias_act_and_column_sum_match_the_cpu_layers() {
    let (n, f) = (6, 4);
    let x = random_vec(n * f, 8);
    let bias = random_vec(f, 9);
    for act in [Activation::Relu, Activation::Elu { alpha: 1.0 }, Activation::LeakyRelu { slope: 0.2 }] {
        let mut expect = Array2::from_shape_vec((n, f), x.clone()).unwrap();
        expect += &ndarray::ArrayView1::from(&bias);
        act.forward_in_place(&mut expect);
        let mut got = x.clone();
        bias_act(f, Some(&bias), Some(act), &mut got);
        assert_eq!(got, expect.into_raw_vec_and_offset().0);
    }
    let sums = Array2::from_shape_vec((n, f), x.clone()).unwrap().sum_axis(Axis(0));
    for (a, b) in column_sum(f, &x).iter().zip(&sums) {
        assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    }
}

#[test]
fn linear_codes_round_to_nearest_and_constant_rows_are_exact() {
    let d = 16;
    let mut x = random_vec(4 * d, 10);
    x[2 * d..3 * d].fill(0.75);
    for bits in [1, 2, 4, 8] {
        let q = linear_quantize(d, bits, &x);
        assert!(q.codes.iter().all(|&c| c <= max_code(bits)));
        let back = row_dequantize(d, &q);
        for (t, (a, b)) in back.iter().zip(&x).enumerate() {
            assert!((a - b).abs() <= q.scale[t / d] * 0.5 + 1e-6, "bits {bits} element {t}: {a} vs {b}");
        }
        assert!(q.codes[2 * d..3 * d].iter().all(|&c| c == 0));
        assert!(back[2 * d..3 * d].iter().all(|&v| v == 0.75));
    }
}

#[test]
fn stochastic_rounding_is_unbiased_and_keyed() {
    // One 1-bit row holding 0, 1 and many copies of 0.3: each copy rounds up with probability 0.3.
    let d = 20_000;
    let mut x = vec![0.3f32; d];
    (x[0], x[1]) = (0.0, 1.0);
    let q = stochastic_quantize(d, 1, &x, &[42], 7);
    let mean = q.codes[2..].iter().map(|&c| f64::from(c)).sum::<f64>() / (d - 2) as f64;
    assert!((mean - 0.3).abs() < 0.015, "mean {mean}");
    assert_eq!(q, stochastic_quantize(d, 1, &x, &[42], 7));
    assert_ne!(q.codes, stochastic_quantize(d, 1, &x, &[43], 7).codes);
    let y = random_vec(3 * 8, 11);
    let q = stochastic_quantize(8, 3, &y, &[1, 2, 3], 9);
    for (t, (a, b)) in row_dequantize(8, &q).iter().zip(&y).enumerate() {
        assert!((a - b).abs() < q.scale[t / 8] + 1e-6, "{a} vs {b}");
    }
}

#[test]
fn buckets_decode_to_midpoints() {
    let x = random_vec(500, 12);
    for bits in [1, 3, 8] {
        let q = bucket_quantize(bits, &x);
        assert!(q.codes.iter().all(|&c| c <= max_code(bits)));
        let width = (q.hi - q.lo) / (1u32 << bits) as f32;
        for (a, b) in bucket_dequantize(bits, &q).iter().zip(&x) {
            assert!((a - b).abs() <= width * 0.5 + 1e-5, "bits {bits}: {a} vs {b}");
        }
    }
    let flat = bucket_quantize(4, &[2.0; 9]);
    assert!(flat.codes.iter().all(|&c| c == 0));
    assert_eq!(bucket_dequantize(4, &flat), [2.0; 9]);
}

/// A row's own columns (`kept`, the rest zero) completed by the others, compact, give the
/// whole row; the kept columns are left as they were.
#[test]
fn columns_put_around_the_kept_ones_complete_the_rows() {
    let (n, d) = (4, 7);
    let full = random_vec(n * d, 5);
    for kept in [0..3, 2..5, 4..7, 3..3, 0..7] {
        let mut rows = vec![0.0f32; n * d];
        let mut others = Vec::new();
        for (r, row) in full.chunks_exact(d).enumerate() {
            rows[r * d + kept.start..r * d + kept.end].copy_from_slice(&row[kept.clone()]);
            others.extend(row.iter().enumerate().filter(|(j, _)| !kept.contains(j)).map(|(_, v)| *v));
        }
        put_columns_around(d, kept.clone(), &others, &mut rows);
        assert_eq!(rows, full, "kept {kept:?}");
    }
}

/// Taking the columns around a window undoes putting them there.
#[test]
fn columns_taken_around_a_window_are_the_ones_put_there() {
    let (n, d) = (4, 7);
    for skipped in [0..3, 2..5, 4..7, 3..3, 0..7] {
        let others = random_vec(n * (d - skipped.len()), 9);
        let mut rows = random_vec(n * d, 10);
        put_columns_around(d, skipped.clone(), &others, &mut rows);
        assert_eq!(take_columns_around(d, skipped.clone(), &rows), others, "skipped {skipped:?}");
    }
}

/// A part's softmax as the device splits it around its replica syncs, on one replica holding
/// every entry: the exponentials with their sums beside the numerators (`w h` per head), then
/// the quotient, equal the fused edge softmax applied to `h`; and the backward
/// (`head_divide_backward`, the numerators' gradient into `w`, `edge_exp_backward`) is the
/// gradient of the logits by finite differences, the maximum held where the forward put it.
#[test]
fn the_split_softmax_equals_the_fused_one_and_its_backward_the_finite_differences() {
    let (csr, heads, dh) = (random_graph(9, 30, 11), 2, 3);
    let (width, stride) = (heads * dh, heads + heads * dh);
    let n = csr.num_rows();
    let z = random_vec(csr.num_edges() * heads, 12);
    let h = random_vec(n * width, 13);
    let (src, dst) = (random_vec(n * heads, 14), random_vec(n * heads, 15));
    let max = gat_row_max(&csr, heads, 0.2, &z, &src, &dst);
    let g = random_vec(n * width, 16);
    // Numerators: per head, the row's weights times its sources' head rows.
    let split = |z: &[f32]| {
        let mut w = z.to_vec();
        let mut block = vec![0.0f32; n * stride];
        edge_exp_sums(&csr, heads, &max, &mut w, &mut block, stride);
        for r in 0..n {
            for k in csr.row_range(r) {
                let u = csr.indices()[k] as usize;
                for c in 0..width {
                    block[r * stride + heads + c] += w[k * heads + c / dh] * h[u * width + c];
                }
            }
        }
        (w, block)
    };
    let (w, block) = split(&z);
    let out = head_divide(heads, dh, &block);
    let mut fused = z.clone();
    sparse::edge_softmax(&csr, &mut fused, heads);
    for r in 0..n {
        for c in 0..width {
            let want: f32 =
                csr.row_range(r).map(|k| fused[k * heads + c / dh] * h[csr.indices()[k] as usize * width + c]).sum();
            let got = out[r * width + c];
            assert!((got - want).abs() <= 1e-5 * (1.0 + want.abs()), "row {r} column {c}: {got} vs {want}");
        }
    }
    assert!(
        (0..n).filter(|&r| csr.row_range(r).is_empty()).all(|r| out[r * width..][..width].iter().all(|&v| v == 0.0))
    );

    let dblock = head_divide_backward(heads, dh, &block, &g);
    let mut gw = vec![0.0f32; w.len()];
    for r in 0..n {
        for k in csr.row_range(r) {
            let u = csr.indices()[k] as usize;
            for c in 0..width {
                gw[k * heads + c / dh] += dblock[r * stride + heads + c] * h[u * width + c];
            }
        }
    }
    let dz = edge_exp_backward(&csr, heads, &w, &gw, &dblock, stride);
    let loss = |z: &[f32]| {
        let out = head_divide(heads, dh, &split(z).1);
        out.iter().zip(&g).map(|(o, g)| f64::from(o * g)).sum::<f64>()
    };
    let eps = 1e-3f32;
    for i in 0..z.len() {
        let (mut up, mut down) = (z.clone(), z.clone());
        up[i] += eps;
        down[i] -= eps;
        let fd = ((loss(&up) - loss(&down)) / (2.0 * f64::from(eps))) as f32;
        assert!((fd - dz[i]).abs() <= 2e-3 * (1.0 + fd.abs()), "logit {i}: finite difference {fd}, backward {}", dz[i]);
    }
}

#[test]
fn gather_then_scatter_add_counts_repeats() {
    let f = 3;
    let src = random_vec(5 * f, 13);
    let idx = [4u32, 0, 4, 2];
    let gathered = gather_rows(f, &idx, &src);
    assert_eq!(&gathered[..f], &src[4 * f..5 * f]);
    let mut dst = vec![0.0f32; 5 * f];
    scatter_add_rows(f, &idx, &gathered, &mut dst);
    for r in 0..5 {
        let times = idx.iter().filter(|&&i| i as usize == r).count() as f32;
        for j in 0..f {
            assert_eq!(dst[r * f + j], times * src[r * f + j]);
        }
    }
}

#[test]
fn scatter_overwrites_and_scaled_add_scales_each_row() {
    let f = 2;
    let src = [1.0f32, 2.0, 3.0, 4.0];
    let mut dst = vec![9.0f32; 3 * f];
    scatter_rows(f, &[2, 0], &src, &mut dst);
    assert_eq!(dst, [3.0, 4.0, 9.0, 9.0, 1.0, 2.0]);
    let gathered = gather_rows(f, &[2, 0], &dst);
    assert_eq!(gathered, src);
    let mut acc = vec![1.0f32; 2 * f];
    add_scaled_rows(f, Some(&[0.5, -2.0]), &src, &mut acc);
    assert_eq!(acc, [1.5, 2.0, -5.0, -7.0]);
    add_scaled_rows(f, None, &src, &mut acc);
    assert_eq!(acc, [2.5, 4.0, -2.0, -3.0]);
}

proptest! {
    #[test]
    fn packing_round_trips(bits in 1u32..=MAX_CODE_BITS, raw in proptest::collection::vec(any::<u32>(), 0..200)) {
        let codes: Vec<u32> = raw.iter().map(|c| c & max_code(bits)).collect();
        let bytes = pack_codes(bits, &raw);
        prop_assert_eq!(bytes.len(), (codes.len() * bits as usize).div_ceil(8));
        prop_assert_eq!(unpack_codes(bits, &bytes, codes.len()), codes);
    }
}

#[test]
fn packing_is_lsb_first() {
    assert_eq!(pack_codes(3, &[0b101, 0b011, 0b111]), [0b1101_1101, 0b1]);
    assert_eq!(pack_codes(8, &[0x1ff, 7]), [0xff, 7]);
}
