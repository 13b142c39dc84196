//! `cargo xtask ptx [--check]`: compile every `kernels/*.cu` to `kernels/ptx/<name>.ptx` through
//! NVRTC (loaded at run time, so no GPU and no CUDA install are needed: the library can come
//! from the `nvidia-cuda-nvrtc` wheel) or through nvcc with `--nvcc`, and record each in
//! `kernels/ptx/MANIFEST.tsv`. `--check` recompiles in memory and fails when the committed PTX
//! or manifest differ.

use std::env;
use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

#[path = "../../kernels/manifest.rs"]
mod manifest;

use manifest::{Entry, MANIFEST, REBUILD};

/// The default `-arch`: Ampere (A100) and newer run sm_80 PTX through the driver's JIT.
pub const DEFAULT_ARCH: &str = "sm_80";

/// Options passed to both compilers. Contractions stay off so that device arithmetic rounds
/// exactly as the Rust CPU references do (quantization codes must match bit for bit).
const NVRTC_OPTIONS: &[&str] = &["--fmad=false", "--std=c++17"];
const NVCC_OPTIONS: &[&str] = &["--fmad=false", "-std=c++17"];

/// Which compiler turns CUDA C into PTX.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compiler {
    Nvrtc,
    Nvcc,
}

/// What `cargo xtask ptx` does with the compiled PTX.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Write `kernels/ptx/*.ptx` and the manifest.
    Write,
    /// Compare with the committed files and fail on any difference.
    Check,
}

/// One compiled kernel file.
struct Compiled {
    entry: Entry,
    ptx: String,
}

/// Compiles each `.cu` file in `kernels` for `arch`, then writes or checks `kernels/ptx/`.
pub fn run(kernels: &Path, arch: &str, compiler: Compiler, mode: Mode) -> Result<()> {
    let (sources, headers) = manifest::sources(kernels).with_context(|| format!("listing {}", kernels.display()))?;
    if sources.is_empty() {
        eprintln!("no .cu files in {}; nothing to compile", kernels.display());
        return Ok(());
    }
    let header_bytes =
        manifest::read_headers(&headers).with_context(|| format!("reading {}/*.cuh", kernels.display()))?;
    let mut compiled = Vec::with_capacity(sources.len());
    for source in &sources {
        let text = fs::read_to_string(source).with_context(|| format!("reading {}", source.display()))?;
        let ptx = match compiler {
            Compiler::Nvrtc => nvrtc_compile(source, &text, kernels, arch)?,
            Compiler::Nvcc => nvcc_compile(&find_nvcc()?, source, arch)?,
        };
        let entry = Entry {
            kernel: stem(source),
            source_hash: manifest::source_hash(text.as_bytes(), &header_bytes),
            arch: arch.to_owned(),
            toolkit: ptx_toolkit(&ptx).with_context(|| format!("PTX of {}", source.display()))?,
            ptx_isa: ptx_isa(&ptx).with_context(|| format!("PTX of {}", source.display()))?,
        };
        compiled.push(Compiled { entry, ptx });
    }
    let out_dir = kernels.join("ptx");
    match mode {
        Mode::Write => write(&out_dir, &compiled),
        Mode::Check => check(&out_dir, &compiled),
    }
}

fn write(out_dir: &Path, compiled: &[Compiled]) -> Result<()> {
    fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    for c in compiled {
        let path = out_dir.join(format!("{}.ptx", c.entry.kernel));
        fs::write(&path, &c.ptx).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("{} ({} {}, PTX ISA {})", path.display(), c.entry.toolkit, c.entry.arch, c.entry.ptx_isa);
    }
    let entries: Vec<Entry> = compiled.iter().map(|c| c.entry.clone()).collect();
    let path = out_dir.join(MANIFEST);
    fs::write(&path, manifest::render(&entries)).with_context(|| format!("writing {}", path.display()))
}

fn check(out_dir: &Path, compiled: &[Compiled]) -> Result<()> {
    let mut stale = Vec::new();
    for c in compiled {
        let path = out_dir.join(format!("{}.ptx", c.entry.kernel));
        match fs::read_to_string(&path) {
            Ok(committed) if committed == c.ptx => {}
            Ok(_) => stale.push(format!("{} differs from a fresh compile", path.display())),
            Err(e) => stale.push(format!("{}: {e}", path.display())),
        }
    }
    let entries: Vec<Entry> = compiled.iter().map(|c| c.entry.clone()).collect();
    let path = out_dir.join(MANIFEST);
    match fs::read_to_string(&path).map_err(|e| e.to_string()).and_then(|text| manifest::parse(&text)) {
        Ok(committed) if committed == entries => {}
        Ok(_) => stale.push(format!("{} differs from a fresh compile", path.display())),
        Err(e) => stale.push(format!("{}: {e}", path.display())),
    }
    if !stale.is_empty() {
        bail!("committed PTX is not current; run `{REBUILD}` and commit kernels/ptx/:\n  {}", stale.join("\n  "));
    }
    eprintln!("{} kernel files: committed PTX is current", compiled.len());
    Ok(())
}

/// Whether the NVRTC library can be loaded (by name, through the dynamic loader's search path).
fn nvrtc_present() -> bool {
    // SAFETY: loading libnvrtc runs its initialisers, which have no preconditions on our side;
    // cudarc only probes the candidate names and keeps no handle from this call.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

fn nvrtc_compile(source: &Path, text: &str, include: &Path, arch: &str) -> Result<String> {
    if !nvrtc_present() {
        bail!(
            "the NVRTC library (libnvrtc.so.13) is not on the loader path: `pip install nvidia-cuda-nvrtc==13.0.*` \
             into a venv and add its site-packages/nvidia/cu13/lib to LD_LIBRARY_PATH (see docs/CUDA.md), or \
             pass --nvcc with the CUDA toolkit installed"
        );
    }
    let mut options: Vec<String> = NVRTC_OPTIONS.iter().map(|o| (*o).to_owned()).collect();
    options.push(format!("--gpu-architecture={arch}"));
    let opts = cudarc::nvrtc::CompileOptions {
        include_paths: vec![include.display().to_string()],
        options,
        name: Some(source.file_name().unwrap_or_default().to_string_lossy().into_owned()),
        ..Default::default()
    };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(text, opts)
        .map_err(|e| anyhow::anyhow!("NVRTC failed on {}: {e}", source.display()))?;
    Ok(ptx.to_src())
}

/// nvcc from `PATH`.
fn find_nvcc() -> Result<PathBuf> {
    find_in_path("nvcc", env::var_os("PATH").as_deref()).context(
        "--nvcc: nvcc is not on PATH: install the CUDA toolkit (or add its bin/ folder to PATH), or leave out \
         --nvcc to compile through NVRTC",
    )
}

/// Runs `nvcc -ptx -arch=<arch> <options> -o <tmp> <source>` and returns the PTX.
fn nvcc_compile(nvcc: &Path, source: &Path, arch: &str) -> Result<String> {
    let out = env::temp_dir().join(format!("halo-{}-{}.ptx", std::process::id(), stem(source)));
    let status = Command::new(nvcc)
        .arg("-ptx")
        .arg(format!("-arch={arch}"))
        .args(NVCC_OPTIONS)
        .arg("-o")
        .arg(&out)
        .arg(source)
        .status()
        .with_context(|| format!("running {}", nvcc.display()))?;
    if !status.success() {
        bail!("nvcc failed on {} ({status})", source.display());
    }
    let ptx = fs::read_to_string(&out).with_context(|| format!("reading {}", out.display()));
    // The temporary file is ours alone; failing to remove it loses nothing.
    let _ = fs::remove_file(&out);
    ptx
}

fn stem(source: &Path) -> String {
    source.file_stem().unwrap_or_default().to_string_lossy().into_owned()
}

/// `CUDA 13.0` from the `// Cuda compilation tools, release 13.0, ...` header line.
fn ptx_toolkit(ptx: &str) -> Result<String> {
    ptx.lines()
        .find_map(|l| l.strip_prefix("// Cuda compilation tools, release "))
        .and_then(|rest| rest.split(',').next())
        .map(|v| format!("CUDA {v}"))
        .context("no `// Cuda compilation tools, release` header line")
}

/// The PTX ISA from the `.version X.Y` directive.
fn ptx_isa(ptx: &str) -> Result<String> {
    ptx.lines()
        .find_map(|l| l.trim().strip_prefix(".version "))
        .map(|v| v.trim().to_owned())
        .context("no `.version` directive")
}

/// The first file called `name` in the directories of a `PATH`-style list.
fn find_in_path(name: &str, path: Option<&OsStr>) -> Option<PathBuf> {
    env::split_paths(path?).map(|dir| dir.join(name)).find(|candidate| candidate.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX_HEAD: &str = "//\n// Generated by NVIDIA NVVM Compiler\n//\n// Cuda compilation tools, release 13.0, \
                            V13.0.88\n// Based on NVVM 7.0.1\n//\n\n.version 9.0\n.target sm_80\n";

    #[test]
    fn no_sources_is_a_success() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("README.md"), "kernels").unwrap();
        run(tmp.path(), DEFAULT_ARCH, Compiler::Nvrtc, Mode::Write).unwrap();
        assert!(!tmp.path().join("ptx").exists());
    }

    #[test]
    fn sources_are_the_sorted_cu_files_and_headers() {
        let tmp = tempfile::tempdir().unwrap();
        for f in ["b.cu", "a.cu", "c.cuh", "notes.txt"] {
            fs::write(tmp.path().join(f), "").unwrap();
        }
        fs::create_dir(tmp.path().join("d.cu")).unwrap();
        let (cu, cuh) = manifest::sources(tmp.path()).unwrap();
        let names = |v: &[PathBuf]| v.iter().map(|p| p.file_name().unwrap().to_owned()).collect::<Vec<_>>();
        assert_eq!(names(&cu), ["a.cu", "b.cu"]);
        assert_eq!(names(&cuh), ["c.cuh"]);
        assert!(manifest::sources(&tmp.path().join("missing")).is_err());
    }

    #[test]
    fn nvcc_is_looked_up_in_each_path_entry() {
        let tmp = tempfile::tempdir().unwrap();
        let bin = tmp.path().join("bin");
        fs::create_dir(&bin).unwrap();
        let list = env::join_paths([tmp.path().join("empty"), bin.clone()]).unwrap();
        assert_eq!(find_in_path("nvcc", Some(&list)), None);
        fs::write(bin.join("nvcc"), "").unwrap();
        assert_eq!(find_in_path("nvcc", Some(&list)), Some(bin.join("nvcc")));
        assert_eq!(find_in_path("nvcc", None), None);
    }

    #[test]
    fn toolkit_and_isa_come_from_the_ptx_header() {
        assert_eq!(ptx_toolkit(PTX_HEAD).unwrap(), "CUDA 13.0");
        assert_eq!(ptx_isa(PTX_HEAD).unwrap(), "9.0");
        assert!(ptx_isa("// nothing").unwrap_err().to_string().contains(".version"));
    }

    #[test]
    fn manifest_round_trips_and_hash_covers_headers() {
        let e = Entry {
            kernel: "sparse".into(),
            source_hash: manifest::source_hash(b"k", &[b"h".to_vec()]),
            arch: "sm_80".into(),
            toolkit: "CUDA 13.0".into(),
            ptx_isa: "9.0".into(),
        };
        assert_eq!(manifest::parse(&manifest::render(std::slice::from_ref(&e))).unwrap(), std::slice::from_ref(&e));
        assert_ne!(e.source_hash, manifest::source_hash(b"k", &[b"g".to_vec()]));
        assert!(manifest::parse("kernel\tx\n").unwrap_err().contains("line 1"));
        let bad = format!("{}sparse\t1\n", manifest::render(&[]));
        assert!(manifest::parse(&bad).unwrap_err().contains("line 2"));
    }

    /// A stand-in nvcc writes a PTX header into its `-o` file, proving the command line and
    /// that `--check` then sees the fresh output as current and a changed file as stale.
    #[cfg(unix)]
    #[test]
    fn nvcc_output_is_written_then_checked() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let nvcc = tmp.path().join("nvcc");
        let script =
            format!("#!/bin/sh\nprintf '{}' > \"$6\"\necho \"// $@\" >> \"$6\"\n", PTX_HEAD.replace('\n', "\\n"));
        fs::write(&nvcc, script).unwrap();
        fs::set_permissions(&nvcc, fs::Permissions::from_mode(0o755)).unwrap();
        let src = tmp.path().join("spmm.cu");
        fs::write(&src, "__global__ void k() {}\n").unwrap();
        let ptx = nvcc_compile(&nvcc, &src, "sm_90").unwrap();
        assert!(ptx.contains("-ptx -arch=sm_90 --fmad=false -std=c++17 -o"), "{ptx}");
        assert!(ptx.ends_with(&format!("{}\n", src.display())), "{ptx}");

        fs::write(&nvcc, "#!/bin/sh\nexit 3\n").unwrap();
        let err = nvcc_compile(&nvcc, &src, "sm_80").unwrap_err().to_string();
        assert!(err.contains("nvcc failed on") && err.contains("spmm.cu"), "{err}");
    }

    #[test]
    fn check_names_stale_and_missing_files_and_the_command() {
        let tmp = tempfile::tempdir().unwrap();
        let entry = Entry {
            kernel: "sparse".into(),
            source_hash: "0".into(),
            arch: "sm_80".into(),
            toolkit: "CUDA 13.0".into(),
            ptx_isa: "9.0".into(),
        };
        let compiled = [Compiled { entry, ptx: PTX_HEAD.into() }];
        let out = tmp.path().join("ptx");
        let err = check(&out, &compiled).unwrap_err().to_string();
        assert!(err.contains("sparse.ptx") && err.contains(MANIFEST) && err.contains(REBUILD), "{err}");
        write(&out, &compiled).unwrap();
        check(&out, &compiled).unwrap();
        fs::write(out.join("sparse.ptx"), "old").unwrap();
        let err = check(&out, &compiled).unwrap_err().to_string();
        assert!(err.contains("sparse.ptx differs") && !err.contains(MANIFEST), "{err}");
    }

    /// Compiles a real kernel through NVRTC where the library is installed (CI installs it
    /// from the wheel); elsewhere checks that the error says how to install it.
    #[test]
    fn nvrtc_compiles_a_kernel_or_says_how_to_install_it() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("k.cu");
        let text = "extern \"C\" __global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n";
        match nvrtc_compile(&src, text, tmp.path(), "sm_80") {
            Ok(ptx) => {
                assert!(ptx.contains(".entry k") && ptx.contains(".target sm_80"), "{ptx}");
                assert!(ptx_toolkit(&ptx).unwrap().starts_with("CUDA "));
            }
            Err(e) => {
                assert!(!nvrtc_present());
                assert!(e.to_string().contains("LD_LIBRARY_PATH"), "{e}");
            }
        }
    }
}
