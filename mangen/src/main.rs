//! `symmem-mangen OUTDIR`: writes `symrun.1`, `symmem-info.1` and `symmem-perf.1` into
//! OUTDIR, from the same clap definitions ([`symmem::cli`]) that the tools parse with.

use std::path::Path;
use std::process::ExitCode;

/// Writes one man page per tool into `dir` (created if missing); returns the files.
fn write_pages(dir: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    for command in symmem::cli::commands() {
        let path = dir.join(format!("{}.1", command.get_name()));
        let mut page = Vec::new();
        clap_mangen::Man::new(command).render(&mut page)?;
        std::fs::write(&path, page)?;
        written.push(path);
    }
    Ok(written)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir] = args.as_slice() else {
        eprintln!("usage: symmem-mangen OUTDIR\n\nWrites the man pages symrun.1, symmem-info.1 and symmem-perf.1 into OUTDIR.");
        return ExitCode::from(2);
    };
    match write_pages(Path::new(dir)) {
        Ok(files) => {
            for f in files {
                println!("{}", f.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("symmem-mangen: {dir}: {e}");
            ExitCode::FAILURE
        }
    }
}
