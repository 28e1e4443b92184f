//! The layers of ARCHITECTURE.md, checked in the code: a module of the crate names
//! (`crate::…`, outside comments and doc links) only modules of its own layer or of the
//! layers below.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The crate's top-level modules by layer, lowest first, as ARCHITECTURE.md draws them.
const LAYERS: [&[&str]; 5] = [
    // Foundation: data, bounds, errors and the text rules everything shares.
    &[
        "error", "record", "limits", "text", "progress", "models", "hub", "coalesce", "filter",
        "config", "credits",
    ],
    // Providers: models and what memlane asks of them.
    &["embed", "llm", "rerank", "infer"],
    // The truth and what is derived from it.
    &["store", "index"],
    // The handle, the ranking engine and tenancy.
    &["memory", "retrieve", "projects"],
    // The service: operations and integrations.
    &["ops", "rig", "fuzzing", "lib"],
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module each name the crate root re-exports comes from (`pub use memory::{Memory, …};`
/// in `src/lib.rs`: `Memory` → `memory`).
fn reexports(lib: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for line in lib.lines() {
        let Some(path) = line.trim().strip_prefix("pub use ") else {
            continue;
        };
        let path = path.trim_end_matches(';');
        let module = path.split("::").next().unwrap_or("").to_owned();
        let names = path.rsplit("::").next().unwrap_or("");
        for name in names.trim_matches(['{', '}']).split(',') {
            let name = name.trim();
            if !name.is_empty() {
                out.insert(name.to_owned(), module.clone());
            }
        }
    }
    out
}

/// The modules a line of code names as `crate::module`, or as `crate::Name` for a name the
/// crate root re-exports (the module it comes from; the root's, `lib`, if it is not known).
fn named<'a>(line: &'a str, root: &'a HashMap<String, String>) -> Vec<&'a str> {
    let mut out = Vec::new();
    for (at, _) in line.match_indices("crate::") {
        let rest = &line[at + "crate::".len()..];
        let items: Vec<&str> = match rest.strip_prefix('{') {
            Some(group) => group
                .split('}')
                .next()
                .unwrap_or("")
                .split(',')
                .map(str::trim)
                .collect(),
            None => vec![rest],
        };
        for item in items {
            let end = item
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(item.len());
            let name = &item[..end];
            if name.starts_with(|c: char| c.is_ascii_uppercase()) {
                out.push(root.get(name).map_or("lib", String::as_str));
            } else if !name.is_empty() {
                out.push(name);
            }
        }
    }
    out
}

#[test]
fn imports_go_down_the_layers() {
    let layer: HashMap<&str, usize> = LAYERS
        .iter()
        .enumerate()
        .flat_map(|(i, modules)| modules.iter().map(move |m| (*m, i)))
        .collect();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let root = reexports(&std::fs::read_to_string(src.join("lib.rs")).unwrap());
    assert!(
        root.get("Memory").is_some_and(|m| m == "memory"),
        "{root:?}"
    );
    let (mut names, mut against) = (0, Vec::new());
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let top = relative.components().next().unwrap().as_os_str();
        let top = top.to_str().unwrap().trim_end_matches(".rs");
        let Some(&own) = layer.get(top) else {
            panic!(
                "{} is in no layer: add its module to LAYERS",
                relative.display()
            );
        };
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            // Comments and doc attributes link, they do not import.
            if line.trim_start().starts_with("//") || line.contains("doc = \"") {
                continue;
            }
            for module in named(line, &root) {
                names += 1;
                match layer.get(module) {
                    None => panic!(
                        "{}:{} names crate::{module}, in no layer: add it to LAYERS",
                        relative.display(),
                        n + 1
                    ),
                    Some(&theirs) if theirs > own => against.push(format!(
                        "{}:{}: {top} (layer {own}) names crate::{module} (layer {theirs})",
                        relative.display(),
                        n + 1
                    )),
                    Some(_) => {}
                }
            }
        }
    }
    assert!(
        files.len() > 80 && names > 300,
        "{} files, {names} names read",
        files.len()
    );
    assert!(
        against.is_empty(),
        "imports against the layers:\n{}",
        against.join("\n")
    );
}
