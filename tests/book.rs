//! The README and the book (`docs/`) agree: every chapter is in the book's summary, every
//! link from the README into the book names a chapter that exists, and the README's Rust
//! samples are the book's, which `cargo test --doc` compiles (`src/lib.rs`).

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The Rust code blocks of a Markdown text, their lines without the fence's indentation
/// and without rustdoc's hidden (`# `) lines.
fn rust_samples(text: &str) -> Vec<Vec<String>> {
    let mut samples = Vec::new();
    let mut current: Option<(usize, Vec<String>)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match &mut current {
            None if trimmed.starts_with("```rust") => current = Some((indent, Vec::new())),
            Some(_) if trimmed.starts_with("```") => {
                samples.extend(current.take().map(|(_, lines)| lines));
            }
            Some((fence, lines)) => {
                let line = line.get(*fence..).unwrap_or(trimmed);
                if line != "#" && !line.starts_with("# ") {
                    lines.push(line.to_string());
                }
            }
            None => {}
        }
    }
    samples
}

/// Chapter files (`docs/src/*.md`, without the summary).
fn chapters() -> Vec<String> {
    let dir = repo().join("docs/src");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            e.expect("a directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| n.ends_with(".md") && n != "SUMMARY.md")
        .collect();
    names.sort();
    names
}

#[test]
fn every_chapter_is_in_the_summary() {
    let summary = read(&repo().join("docs/src/SUMMARY.md"));
    for chapter in chapters() {
        assert!(
            summary.contains(&format!("]({chapter})")),
            "docs/src/{chapter} is not linked from docs/src/SUMMARY.md"
        );
    }
}

#[test]
fn the_readmes_links_into_the_book_name_chapters() {
    let readme = read(&repo().join("README.md"));
    let chapters = chapters();
    let mut links = 0;
    for (at, _) in readme.match_indices("](docs/src/") {
        let rest = &readme[at + "](docs/src/".len()..];
        let target = &rest[..rest.find([')', '#']).expect("a closed link")];
        assert!(
            chapters.iter().any(|c| c == target),
            "the README links to docs/src/{target}, which is not a chapter"
        );
        links += 1;
    }
    assert!(links > 0, "the README links to no chapter of the book");
}

#[test]
fn the_readmes_rust_samples_are_the_books() {
    let readme = rust_samples(&read(&repo().join("README.md")));
    assert!(!readme.is_empty(), "the README has no Rust sample");
    let book: Vec<Vec<String>> = chapters()
        .iter()
        .flat_map(|c| rust_samples(&read(&repo().join("docs/src").join(c))))
        .collect();
    for sample in readme {
        assert!(
            book.contains(&sample),
            "this README sample is in no chapter of the book (docs/src), where the doctests compile it:\n{}",
            sample.join("\n")
        );
    }
}
