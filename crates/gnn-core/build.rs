//! With the `cuda` feature: embeds `kernels/ptx/*.ptx` through a generated table, after checking
//! against `kernels/ptx/MANIFEST.tsv` that every kernel's PTX exists and was compiled from the
//! current source. A CPU build does nothing here.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

#[allow(dead_code)] // `render` is for cargo xtask ptx
#[path = "../../kernels/manifest.rs"]
mod manifest;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=CARGO_FEATURE_CUDA");
    if env::var_os("CARGO_FEATURE_CUDA").is_none() {
        return;
    }
    let kernels = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kernels");
    let table = match embed_table(&kernels) {
        Ok(table) => table,
        Err(problem) => panic!(
            "\n{problem}\nrun `{}` (it compiles kernels/*.cu through NVRTC; see docs/CUDA.md) and commit kernels/ptx/\n",
            manifest::REBUILD
        ),
    };
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("ptx_table.rs");
    fs::write(&out, table).unwrap_or_else(|e| panic!("writing {}: {e}", out.display()));
}

/// The generated `MODULES` table, or what is missing or stale.
fn embed_table(kernels: &Path) -> Result<String, String> {
    println!("cargo::rerun-if-changed={}", kernels.display());
    let (cu, cuh) = manifest::sources(kernels).map_err(|e| format!("listing {}: {e}", kernels.display()))?;
    for path in cu.iter().chain(&cuh) {
        println!("cargo::rerun-if-changed={}", path.display());
    }
    let manifest_path = kernels.join("ptx").join(manifest::MANIFEST);
    println!("cargo::rerun-if-changed={}", manifest_path.display());
    let text = fs::read_to_string(&manifest_path).map_err(|e| format!("{}: {e}", manifest_path.display()))?;
    let entries = manifest::parse(&text).map_err(|e| format!("{}: {e}", manifest_path.display()))?;
    let headers = manifest::read_headers(&cuh).map_err(|e| format!("reading kernel headers: {e}"))?;
    let mut table =
        String::from("/// `(module, PTX)` for every kernel file.\npub const MODULES: &[(&str, &str)] = &[\n");
    for source in &cu {
        let stem = source.file_stem().unwrap_or_default().to_string_lossy().into_owned();
        let code = fs::read(source).map_err(|e| format!("{}: {e}", source.display()))?;
        let entry = entries
            .iter()
            .find(|e| e.kernel == stem)
            .ok_or_else(|| format!("{} has no entry for {}", manifest_path.display(), source.display()))?;
        if entry.source_hash != manifest::source_hash(&code, &headers) {
            return Err(format!("kernels/ptx/{stem}.ptx is stale: {} changed since it was compiled", source.display()));
        }
        let ptx = kernels.join("ptx").join(format!("{stem}.ptx"));
        if !ptx.is_file() {
            return Err(format!("{} is missing", ptx.display()));
        }
        println!("cargo::rerun-if-changed={}", ptx.display());
        let ptx = ptx.canonicalize().map_err(|e| format!("{}: {e}", ptx.display()))?;
        writeln!(table, "    ({stem:?}, include_str!({:?})),", ptx.display().to_string()).expect("writing to a String");
    }
    table.push_str("];\n");
    Ok(table)
}
