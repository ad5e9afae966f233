//! The crates' file layout (issues 11 and 57): in the host crate, the library and CLI (`src/`) and the Python
//! bindings no file imports from a file that imports it and no room (a top folder or root file) imports,
//! directly or through others, a room that imports it; the CPU backend, the CUDA backend and the dispatch
//! layer stay apart. A source-level check: every `crate::` and
//! `super::` path of a file is resolved to the file that defines it (names re-exported by `lib.rs` or a
//! `mod.rs` to the file they come from).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, as paths relative to `root`.
fn rust_files(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path.strip_prefix(root).expect("under the root").to_path_buf());
        }
    }
}

/// The module path of a file (`cuda/launch/env.rs` -> `cuda::launch::env`, `cuda/mod.rs` -> `cuda`).
fn module_of(file: &Path) -> Vec<String> {
    let mut parts: Vec<String> = file.iter().map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned()).collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// Lines without comments.
fn code(text: &str) -> String {
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// The paths a file names: each `crate::a::b...` and `super::a...` (absolute, without `crate`), with the
/// members of `{...}` groups expanded one level.
fn referenced_paths(module: &[String], text: &str) -> Vec<Vec<String>> {
    let text = code(text);
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    // `super` of module `a::b` (file `a/b.rs` or `a/b/mod.rs`) is `a`.
    let parent = module[..module.len().saturating_sub(1)].to_vec();
    for (prefix, base) in [("crate::", Vec::new()), ("super::", parent)] {
        let mut from = 0;
        while let Some(at) = text[from..].find(prefix) {
            let start = from + at;
            from = start + prefix.len();
            if start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
                continue;
            }
            let rest = &text[from..];
            let mut path = base.clone();
            let mut chars = rest.char_indices().peekable();
            let mut seg = String::new();
            let mut group = None;
            if rest.starts_with('{') {
                let close = rest.find('}').unwrap_or(rest.len());
                group = Some(&rest[1..close]);
                chars = rest[..0].char_indices().peekable();
            }
            while let Some((i, c)) = chars.next() {
                if c.is_ascii_alphanumeric() || c == '_' {
                    seg.push(c);
                } else if c == ':' && rest[i..].starts_with("::") {
                    chars.next();
                    if !seg.is_empty() {
                        path.push(std::mem::take(&mut seg));
                    }
                    if rest[i + 2..].starts_with('{') {
                        let close = rest[i + 2..].find('}').map_or(rest.len(), |c| i + 2 + c);
                        group = Some(&rest[i + 3..close]);
                        break;
                    }
                } else {
                    break;
                }
            }
            if !seg.is_empty() {
                path.push(seg);
            }
            match group {
                Some(members) => {
                    for m in members.split(',') {
                        let m: Vec<String> =
                            m.trim().split("::").map(|s| s.trim().trim_end_matches(" as").to_owned()).collect();
                        let first = m[0].split_whitespace().next().unwrap_or("").to_owned();
                        if first.is_empty() || first == "self" {
                            out.push(path.clone());
                        } else {
                            let mut p = path.clone();
                            p.push(first);
                            p.extend(m[1..].iter().cloned());
                            out.push(p);
                        }
                    }
                }
                None => out.push(path),
            }
        }
    }
    out
}

struct Crate {
    /// Module path -> file.
    files: BTreeMap<Vec<String>, PathBuf>,
    /// (module, name) -> the module a `pub use` in that module's file takes the name from.
    reexports: BTreeMap<(Vec<String>, String), Vec<String>>,
}

impl Crate {
    fn load(root: &Path) -> (Self, BTreeMap<PathBuf, String>) {
        let mut list = Vec::new();
        rust_files(root, root, &mut list);
        let mut files = BTreeMap::new();
        let mut texts = BTreeMap::new();
        let mut reexports = BTreeMap::new();
        for f in &list {
            let text = std::fs::read_to_string(root.join(f)).expect("source file");
            files.insert(module_of(f), f.clone());
            texts.insert(f.clone(), text);
        }
        for f in &list {
            let module = module_of(f);
            for line in code(&texts[f]).lines() {
                let line = line.trim();
                let Some(rest) = line.strip_prefix("pub use ").or_else(|| line.strip_prefix("pub(crate) use ")) else {
                    continue;
                };
                let rest = rest.trim_end_matches(';');
                let (path, names): (&str, Vec<&str>) = match rest.find("::{") {
                    Some(i) => (&rest[..i], rest[i + 3..].trim_end_matches('}').split(',').map(str::trim).collect()),
                    None => match rest.rfind("::") {
                        Some(i) => (&rest[..i], vec![&rest[i + 2..]]),
                        None => continue,
                    },
                };
                let mut from: Vec<String> = if let Some(p) = path.strip_prefix("crate::") {
                    p.split("::").map(str::to_owned).collect()
                } else if path.starts_with("gpu_kernels") || path.starts_with("std") || path.starts_with("cudarc") {
                    continue;
                } else {
                    let mut m = module.clone();
                    m.extend(path.split("::").map(str::to_owned));
                    m
                };
                from.retain(|s| !s.is_empty());
                for name in names.into_iter().filter(|n| !n.is_empty()) {
                    let name = name.split("::").last().unwrap_or(name).to_owned();
                    reexports.insert((module.clone(), name), from.clone());
                }
            }
        }
        (Self { files, reexports }, texts)
    }

    /// The file that defines what `path` names: the deepest module file on the path, following re-exports.
    fn resolve(&self, path: &[String]) -> Option<PathBuf> {
        let mut module: Vec<String> = Vec::new();
        for (i, seg) in path.iter().enumerate() {
            let mut deeper = module.clone();
            deeper.push(seg.clone());
            if self.files.contains_key(&deeper) {
                module = deeper;
                continue;
            }
            if let Some(from) = self.reexports.get(&(module.clone(), seg.clone())) {
                let mut p = from.clone();
                p.push(seg.clone());
                p.extend(path[i + 1..].iter().cloned());
                if p.len() > path.len() + 4 {
                    return None;
                }
                return self.resolve(&p);
            }
            break;
        }
        self.files.get(&module).cloned()
    }
}

/// File -> the files it imports from.
fn imports(root: &Path) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let (krate, texts) = Crate::load(root);
    let mut edges = BTreeMap::new();
    for (file, text) in &texts {
        let module = module_of(file);
        let mut to = BTreeSet::new();
        for path in referenced_paths(&module, text) {
            if let Some(target) = krate.resolve(&path)
                && &target != file
                && !target.ends_with("lib.rs")
            {
                to.insert(target);
            }
        }
        edges.insert(file.clone(), to);
    }
    edges
}

fn host_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("host/src")
}

/// The crates whose files and rooms are checked: the host crate, the library and CLI, the Python bindings.
const CRATES: [&str; 3] = ["host/src", "src", "python/src"];

/// Pairs of files that import each other.
fn mutual_imports(edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<String> {
    let mut mutual = Vec::new();
    for (a, tos) in edges {
        for b in tos {
            if a < b && edges.get(b).is_some_and(|t| t.contains(a)) {
                mutual.push(format!("{} <-> {}", a.display(), b.display()));
            }
        }
    }
    mutual
}

/// A file's room: its top folder, or the file itself at the crate's root (`hyperopt/search/mod.rs` ->
/// `hyperopt`, `error.rs` -> `error`).
fn room(file: &Path) -> String {
    let first = file.iter().next().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    first.trim_end_matches(".rs").to_owned()
}

/// The rooms' imports (a room importing itself left out), and each arrow's example files.
fn room_imports(edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut rooms: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (a, tos) in edges {
        for b in tos {
            let (ra, rb) = (room(a), room(b));
            if ra != rb {
                rooms.entry(ra).or_default().entry(rb).or_insert_with(|| format!("{} -> {}", a.display(), b.display()));
            }
        }
    }
    rooms
}

/// A cycle among the rooms (an arrow back up), as its rooms and one file import per arrow, if any.
fn room_cycle(rooms: &BTreeMap<String, BTreeMap<String, String>>) -> Option<Vec<String>> {
    fn visit(
        at: &str,
        rooms: &BTreeMap<String, BTreeMap<String, String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|r| r == at) {
            let mut cycle = path[i..].to_vec();
            cycle.push(at.to_owned());
            let arrows = cycle.windows(2).map(|w| rooms[&w[0]][&w[1]].clone()).collect();
            return Some(arrows);
        }
        if done.contains(at) {
            return None;
        }
        path.push(at.to_owned());
        for next in rooms.get(at).map(|m| m.keys().cloned().collect::<Vec<_>>()).unwrap_or_default() {
            if let Some(c) = visit(&next, rooms, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(at.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    rooms.keys().find_map(|r| visit(r, rooms, &mut Vec::new(), &mut done))
}

#[test]
fn no_file_imports_from_a_file_that_imports_it() {
    if source_tree_missing() {
        return;
    }
    for krate in CRATES {
        let mutual = mutual_imports(&imports(&Path::new(env!("CARGO_MANIFEST_DIR")).join(krate)));
        assert!(mutual.is_empty(), "{krate}: files that import each other:\n{}", mutual.join("\n"));
    }
}

/// The rooms of each crate (its top folders and root files) form floors: no room imports, directly or
/// through others, one that imports it (issue 57).
#[test]
fn no_room_imports_a_room_that_imports_it() {
    if source_tree_missing() {
        return;
    }
    for krate in CRATES {
        let rooms = room_imports(&imports(&Path::new(env!("CARGO_MANIFEST_DIR")).join(krate)));
        if let Some(cycle) = room_cycle(&rooms) {
            panic!("{krate}: rooms that import each other (an arrow back up):\n{}", cycle.join("\n"));
        }
    }
}

/// The checks find what they look for: a planted circle, and the library's real arrows.
#[test]
fn the_room_check_sees_a_circle_and_the_library_s_arrows() {
    if source_tree_missing() {
        return;
    }
    let file = |s: &str| PathBuf::from(s);
    let edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = [
        (file("a/x.rs"), [file("b/y.rs")].into()),
        (file("b/y.rs"), [file("c.rs")].into()),
        (file("c.rs"), [file("a/mod.rs")].into()),
        (file("a/mod.rs"), BTreeSet::new()),
    ]
    .into();
    let cycle = room_cycle(&room_imports(&edges)).expect("the planted circle");
    assert_eq!(cycle.len(), 3, "{cycle:?}");
    let rooms = room_imports(&imports(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src")));
    assert!(rooms["job"].contains_key("evidence") && rooms["evidence"].contains_key("hyperopt"), "{rooms:?}");
    assert!(rooms["hyperopt"].contains_key("train"), "{rooms:?}");
}

#[test]
fn the_backends_do_not_import_each_other_or_the_dispatch_layer() {
    if source_tree_missing() {
        return;
    }
    let edges = imports(&host_src());
    let dispatch = ["env_batch.rs", "backtest.rs", "dqn.rs", "ppo.rs"].map(PathBuf::from);
    let mut wrong = Vec::new();
    for (file, tos) in &edges {
        let backend = file.iter().next().and_then(|s| s.to_str()).filter(|s| *s == "cpu" || *s == "cuda");
        let Some(backend) = backend else { continue };
        for to in tos {
            let other = to.iter().next().and_then(|s| s.to_str()).filter(|s| *s == "cpu" || *s == "cuda");
            if dispatch.contains(to) || other.is_some_and(|o| o != backend) {
                wrong.push(format!("{} imports {}", file.display(), to.display()));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_checker_sees_an_import() {
    if source_tree_missing() {
        return;
    }
    // The check above must not pass because it resolves nothing: the CPU env is imported by the dispatch
    // layer, and the dispatch layer's DQN agent by nobody in the backends.
    let edges = imports(&host_src());
    let env_batch = &edges[&PathBuf::from("env_batch.rs")];
    assert!(env_batch.contains(&PathBuf::from("cpu/env.rs")), "env_batch.rs imports {env_batch:?}");
    assert!(edges[&PathBuf::from("dqn.rs")].contains(&PathBuf::from("env_batch.rs")));
}

/// A line's braces outside string and character literals and `//` comments: `(opened, closed)`.
fn braces(line: &str) -> (usize, usize) {
    let (mut open, mut close, mut chars) = (0, 0, line.chars().peekable());
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => break,
            '"' => {
                while let Some(s) = chars.next() {
                    match s {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            // A character literal ('{', '\''); a lifetime (`'a`) has no closing quote two characters on.
            '\'' => {
                let mut ahead = chars.clone();
                let literal = match ahead.next() {
                    Some('\\') => true,
                    Some(_) => ahead.next() == Some('\''),
                    None => false,
                };
                if literal {
                    for s in chars.by_ref() {
                        if s == '\'' {
                            break;
                        }
                    }
                }
            }
            '{' => open += 1,
            '}' => close += 1,
            _ => {}
        }
    }
    (open, close)
}

/// Each function of `text` that has a body: its name and its length in lines (its `fn` line to its closing
/// brace).
fn function_lengths(text: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let words: Vec<&str> = lines[i].split_whitespace().collect();
        let at = words.iter().position(|w| *w == "fn").filter(|&k| {
            words[..k].iter().all(|w| {
                ["pub", "const", "unsafe", "async", "extern"].contains(w) || w.starts_with("pub(") || w.starts_with('"')
            })
        });
        let Some(k) = at else {
            i += 1;
            continue;
        };
        let name = words.get(k + 1).map_or("", |w| w.split(['(', '<']).next().unwrap_or("")).to_owned();
        let (mut depth, mut j) = (0usize, i);
        let mut opened = false;
        while j < lines.len() {
            let (o, c) = braces(lines[j]);
            depth = (depth + o).saturating_sub(c);
            opened |= o > 0;
            if (opened && depth == 0) || (!opened && lines[j].trim_end().ends_with(';')) {
                break;
            }
            j += 1;
        }
        if opened {
            out.push((name, j - i + 1));
        }
        i = j + 1;
    }
    out
}

/// One job per file and per function (issue 40): no source file of the four crates over 800 lines, no
/// function over 150 (tests/ and benches/ are not sources).
#[test]
fn no_source_file_over_800_lines_or_function_over_150() {
    if source_tree_missing() {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "host/src", "gpu-kernels/src", "python/src"] {
        rust_files(root, &root.join(dir), &mut files);
    }
    assert!(files.len() > 100, "the sources were found: {}", files.len());
    let mut over = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(root.join(file)).expect("read a source file");
        let lines = text.lines().count();
        if lines > 800 {
            over.push(format!("{}: {lines} lines", file.display()));
        }
        for (name, length) in function_lengths(&text) {
            if length > 150 {
                over.push(format!("{}: fn {name}: {length} lines", file.display()));
            }
        }
    }
    assert!(over.is_empty(), "split these: {over:#?}");
}

/// The measure sees a function's whole body, braces in strings and characters aside, and one-line ones.
#[test]
fn the_function_measure_counts_bodies() {
    let text = "pub(crate) fn a(x: u8) -> u8 {\n    let s = \"}}\";\n    let c = '{';\n    if x > 0 {\n        1\n    } else {\n        0\n    }\n}\nfn b<'a>(s: &'a str) -> &'a str { s }\nfn c();\n";
    assert_eq!(function_lengths(text), vec![("a".to_owned(), 9), ("b".to_owned(), 1)]);
}

/// Whether the source tree the tests read is absent: a staged run on a GPU host has the test binaries alone
/// (scripts/gpu-suite.sh), and each check that reads the sources skips there, saying why. CI has the tree.
fn source_tree_missing() -> bool {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    if root.join("host/src").is_dir() {
        return false;
    }
    assert!(std::env::var_os("CI").is_none(), "CI must have the source tree at {}", root.display());
    eprintln!("skipped: no source tree at {} (a staged run carries the binaries alone)", root.display());
    true
}
