//! The wire kernels of `kernels/quant.cu` (a staged exchange's messages encoded and decoded where
//! the rows live; `docs/CUDA.md`, "Encoding on the device") run on the host, thread by thread,
//! against `cache_quant::Encoding`, which the CPU codecs themselves run: CI has no GPU, so this
//! is where their logic (offsets, packing, headers, rounding) is checked on every change. The
//! kernel file is compiled with the host's C++ compiler through `kernels/host/shim.h` (CUDA's
//! qualifiers as nothing, its round-to-nearest intrinsics as the IEEE operations they name, no
//! contraction, as the PTX is built); `kernels/host/wire.cpp` runs the cases this test writes.
//! The GPU itself is checked by `tests/gpu.rs` (`device_encoded_messages_are_the_cpu_codecs_bytes`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use cache_quant::codec::BUCKET_BITS;
use cache_quant::{Encoding, LINEAR_BITS};
use graph_partition::rng::SplitMix64;

/// The cases: per row width, a block with a flat row, a NaN, a negative zero, a tiny value, an
/// infinity and a row of halves whose levels tie; ten picked rows; every encoding at every width (stochastic also at mixed
/// widths). Each case as `wire.cpp` reads it (little-endian): kind (0 linear, 1 stochastic,
/// 2 bucket), width, block rows, the block's bits, the picked rows (count, then each); linear
/// and bucket: bits; stochastic: key, a width per row, a global id per row; then the CPU's
/// bytes (length, then each), its decoded rows' bits, and its error sums (two f64).
fn cases() -> (u32, Vec<u8>) {
    let mut out = Vec::new();
    let mut count = 0;
    for d in [1usize, 5, 16, 37, 128] {
        let rows = 40usize;
        let mut r = SplitMix64::new(d as u64);
        let mut x: Vec<f32> = (0..rows * d).map(|_| (r.next_u64() % 20_000) as f32 / 1000.0 - 10.0).collect();
        x[d..2 * d].fill(0.25);
        x[3 * d] = f32::NAN;
        if d > 2 {
            (x[5 * d + 1], x[5 * d + 2], x[6 * d]) = (-0.0, 1e-30, f32::INFINITY);
        }
        // Halves from -2 to 2: levels and buckets that fall exactly between two codes.
        x[12 * d..13 * d].iter_mut().enumerate().for_each(|(j, v)| *v = (j % 9) as f32 * 0.5 - 2.0);
        let picked = [7u32, 1, 3, 0, 39, 12, 13, 25, 5, 6];
        let gids: Arc<[u32]> = picked.iter().map(|&p| 1000 + 3 * p).collect();
        let mut encodings: Vec<Encoding> = LINEAR_BITS.iter().map(|&bits| Encoding::Linear { bits }).collect();
        for widths in [[2u8; 10], [4; 10], [8; 10], [2, 8, 4, 4, 2, 8, 8, 2, 4, 2]] {
            encodings.push(Encoding::Stochastic { key: 0x5eed ^ d as u64, bits: widths.to_vec(), gids: gids.clone() });
        }
        encodings.extend(BUCKET_BITS.iter().map(|&bits| Encoding::Bucket { bits }));
        for encoding in encodings {
            let packed: Vec<f32> = picked.iter().flat_map(|&p| x[p as usize * d..][..d].to_vec()).collect();
            let mut bytes = Vec::new();
            let measured = encoding.encode(&packed, d, &mut bytes).unwrap();
            let mut back = vec![0f32; packed.len()];
            encoding.decode(&bytes, d, &mut back).unwrap();
            let kind = match encoding {
                Encoding::Linear { .. } => 0u32,
                Encoding::Stochastic { .. } => 1,
                Encoding::Bucket { .. } => 2,
                Encoding::Exact => unreachable!("exact rows have no wire kernel: the device gathers and copies them"),
            };
            for v in [kind, d as u32, rows as u32] {
                out.extend(v.to_le_bytes());
            }
            x.iter().for_each(|v| out.extend(v.to_bits().to_le_bytes()));
            out.extend((picked.len() as u32).to_le_bytes());
            picked.iter().for_each(|p| out.extend(p.to_le_bytes()));
            match &encoding {
                Encoding::Linear { bits } | Encoding::Bucket { bits } => out.extend(u32::from(*bits).to_le_bytes()),
                Encoding::Stochastic { key, bits, gids } => {
                    out.extend(key.to_le_bytes());
                    out.extend(bits);
                    gids.iter().for_each(|g| out.extend(g.to_le_bytes()));
                }
                Encoding::Exact => {}
            }
            out.extend((bytes.len() as u32).to_le_bytes());
            out.extend(&bytes);
            back.iter().for_each(|v| out.extend(v.to_bits().to_le_bytes()));
            out.extend(measured.err_sq.to_le_bytes());
            out.extend(measured.ref_sq.to_le_bytes());
            count += 1;
        }
    }
    (count, out)
}

fn kernels() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kernels")
}

#[test]
fn the_wire_kernels_write_and_read_the_cpu_codecs_bytes() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("wire_kernels_on_host");
    std::fs::create_dir_all(&dir).unwrap();
    let (count, body) = cases();
    let file = dir.join("cases.bin");
    std::fs::write(&file, [count.to_le_bytes().as_slice(), &body].concat()).unwrap();
    let program = dir.join("wire");
    let compiler = std::env::var("CXX").unwrap_or_else(|_| "c++".to_string());
    let built = Command::new(&compiler)
        .args(["-std=c++17", "-O1", "-ffp-contract=off", "-o"])
        .arg(&program)
        .arg(kernels().join("host/wire.cpp"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C++ compiler `{compiler}` (set CXX to another): {e}"));
    assert!(built.status.success(), "compiling kernels/host/wire.cpp:\n{}", String::from_utf8_lossy(&built.stderr));
    let run = Command::new(&program).arg(&file).output().expect("the compiled wire program runs");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{stdout}{}", String::from_utf8_lossy(&run.stderr));
    assert!(stdout.contains(&format!("{count} cases, 0 differ")), "{stdout}");
}
