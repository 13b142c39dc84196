//! `cargo xtask ptx`: compile every `kernels/*.cu` to `kernels/ptx/<name>.ptx` with nvcc.

use std::env;
use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The default `-arch`: Ampere (A100) and newer run sm_80 PTX through the driver's JIT.
pub const DEFAULT_ARCH: &str = "sm_80";

/// Compiles each `.cu` file in `kernels` for `arch`; with none there, says so and succeeds.
pub fn compile_all(kernels: &Path, arch: &str) -> Result<()> {
    let sources = cu_sources(kernels)?;
    if sources.is_empty() {
        eprintln!("no .cu files in {}; nothing to compile", kernels.display());
        return Ok(());
    }
    let nvcc = find_in_path("nvcc", env::var_os("PATH").as_deref()).context(
        "nvcc is not on PATH: install the CUDA toolkit (or add its bin/ folder to PATH) to build PTX; \
         the CPU build does not need it",
    )?;
    compile_with(&nvcc, &sources, &kernels.join("ptx"), arch)
}

/// Runs `nvcc -ptx -arch=<arch> -o <out_dir>/<stem>.ptx <source>` for each source.
fn compile_with(nvcc: &Path, sources: &[PathBuf], out_dir: &Path, arch: &str) -> Result<()> {
    fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    for source in sources {
        let mut name = source.file_stem().unwrap_or_default().to_os_string();
        name.push(".ptx");
        let out = out_dir.join(name);
        let status = Command::new(nvcc)
            .arg("-ptx")
            .arg(format!("-arch={arch}"))
            .arg("-o")
            .arg(&out)
            .arg(source)
            .status()
            .with_context(|| format!("running {}", nvcc.display()))?;
        if !status.success() {
            bail!("nvcc failed on {} ({status})", source.display());
        }
        eprintln!("{} -> {}", source.display(), out.display());
    }
    Ok(())
}

/// The `.cu` files directly in `dir`, sorted so output order is stable.
fn cu_sources(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut sources = Vec::new();
    for entry in fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let path = entry.with_context(|| format!("listing {}", dir.display()))?.path();
        if path.is_file() && path.extension() == Some(OsStr::new("cu")) {
            sources.push(path);
        }
    }
    sources.sort();
    Ok(sources)
}

/// The first file called `name` in the directories of a `PATH`-style list.
fn find_in_path(name: &str, path: Option<&OsStr>) -> Option<PathBuf> {
    env::split_paths(path?).map(|dir| dir.join(name)).find(|candidate| candidate.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_sources_is_a_success() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("README.md"), "kernels").unwrap();
        compile_all(tmp.path(), DEFAULT_ARCH).unwrap();
        assert!(!tmp.path().join("ptx").exists());
    }

    #[test]
    fn sources_are_the_sorted_cu_files_only() {
        let tmp = tempfile::tempdir().unwrap();
        for f in ["b.cu", "a.cu", "c.cuh", "notes.txt"] {
            fs::write(tmp.path().join(f), "").unwrap();
        }
        fs::create_dir(tmp.path().join("d.cu")).unwrap();
        let names: Vec<_> = cu_sources(tmp.path()).unwrap().iter().map(|p| p.file_name().unwrap().to_owned()).collect();
        assert_eq!(names, ["a.cu", "b.cu"]);
        assert!(cu_sources(&tmp.path().join("missing")).unwrap_err().to_string().contains("missing"));
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

    /// A stand-in nvcc records its arguments into the `-o` file, proving the command line.
    #[cfg(unix)]
    #[test]
    fn each_source_is_compiled_to_a_ptx_file_with_the_chosen_arch() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let nvcc = tmp.path().join("nvcc");
        fs::write(&nvcc, "#!/bin/sh\nout=$4\necho \"$@\" > \"$out\"\n").unwrap();
        fs::set_permissions(&nvcc, fs::Permissions::from_mode(0o755)).unwrap();
        let src = tmp.path().join("spmm.cu");
        fs::write(&src, "__global__ void k() {}\n").unwrap();
        let out_dir = tmp.path().join("ptx");
        compile_with(&nvcc, std::slice::from_ref(&src), &out_dir, "sm_90").unwrap();
        let args = fs::read_to_string(out_dir.join("spmm.ptx")).unwrap();
        assert_eq!(
            args.trim(),
            format!("-ptx -arch=sm_90 -o {} {}", out_dir.join("spmm.ptx").display(), src.display())
        );

        fs::write(&nvcc, "#!/bin/sh\nexit 3\n").unwrap();
        let err = compile_with(&nvcc, &[src], &out_dir, "sm_80").unwrap_err().to_string();
        assert!(err.contains("nvcc failed on") && err.contains("spmm.cu"), "{err}");
    }
}
