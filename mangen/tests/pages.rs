//! The generator writes one man page per tool, and each names the tool's options.

use std::process::Command;

#[test]
fn writes_the_three_pages_naming_their_options() {
    let dir = std::env::temp_dir().join(format!("symmem-mangen-{}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_symmem-mangen"))
        .arg(&dir)
        .output()
        .expect("running symmem-mangen");
    assert!(out.status.success(), "{out:?}");
    for (page, options) in [
        (
            "symrun.1",
            &[
                "np",
                "bind\\-to",
                "map\\-by",
                "tag\\-output",
                "kill\\-grace",
                "PROGRAM",
            ][..],
        ),
        ("symmem-info.1", &["pes", "bind\\-to", "map\\-by", "json"]),
        (
            "symmem-perf.1",
            &[
                "pes",
                "minbytes",
                "maxbytes",
                "stepfactor",
                "iters",
                "warmup",
                "bytes",
                "reps",
                "quick",
                "transport",
                "initiator",
                "bidir",
                "only",
                "matrix",
                "json",
                "plot",
                "from",
            ],
        ),
    ] {
        let text =
            std::fs::read_to_string(dir.join(page)).unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(text.starts_with(".ie"), "{page} is not roff:\n{text}");
        assert!(text.contains(".TH "), "{page} has no title");
        for option in options {
            // roff escapes every dash: `--bind-to` is `\-\-bind\-to`.
            let named = match *option {
                "PROGRAM" => text.contains("PROGRAM"),
                option => text.contains(&format!("\\-\\-{option}")),
            };
            assert!(named, "{page} does not name {option}:\n{text}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let usage = Command::new(env!("CARGO_BIN_EXE_symmem-mangen"))
        .output()
        .unwrap();
    assert_eq!(usage.status.code(), Some(2));
}
