//! The house rules of `src/` (docs/architecture.md, "The house"), checked from the source
//! text: no compiler, no dependency, so it runs in a second.
//!
//! A *room* is a file or folder directly under `src/` (`exec/` with everything below it,
//! `mode.rs`). Every `crate::...` path (and every `super::` path that climbs out of its
//! room) in non-test code is an import of one room by another. The rules:
//!
//! 1. the vocabulary rooms (`mode`, `vocab`, `error`, `result`) import only each other
//!    (and std or other crates): they sit at the bottom;
//! 2. no circle of rooms: every strongly-connected component of the room drawing is a
//!    single room (a parent module and its own child are one room, so their mutual
//!    imports are allowed);
//! 3. no source file over [`MAX_LINES`] lines, not counting its `#[cfg(test)]` items.
//!
//! Test code (`#[cfg(test)]` items and the files only they declare) is left out of all
//! three: tests may reach anywhere. Comments and string literals are blanked before
//! reading, so intra-doc links do not count as imports.
//!
//! What this does not see: paths through the crate root's re-exports are followed only
//! for the `pub use room::...` lines of `lib.rs`; inline non-test modules (`mod x { }`)
//! shift `super::` by a level it does not track (the tree has none today).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The most lines a source file may hold outside its tests: a file longer than this
/// does more than one job (issue 29; reviews asked for files "split by concern").
const MAX_LINES: usize = 650;

/// The shared vocabulary: the rooms every other room may use, so they use none of them.
const VOCABULARY: &[&str] = &["mode", "vocab", "error", "result"];

/// Known breaches still being worked on: a breach listed here is reported but does not
/// fail the test; one that is gone must be removed from the list (the test says so).
const KNOWN: &[&str] = &[];

#[test]
fn house_rules() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut breaches: Vec<String> = Vec::new();

    let lib = read_crate(&src, "lib.rs");
    let bin = read_crate(&src, "main.rs");

    // 3. File sizes, both crates.
    for file in lib.files.iter().chain(bin.files.iter()) {
        if file.lines > MAX_LINES * 9 / 10 {
            println!("longest: src/{} has {} lines outside its tests", file.rel.display(), file.lines);
        }
        if file.lines > MAX_LINES {
            breaches.push(format!(
                "size: src/{} has {} lines outside its tests (most: {MAX_LINES})",
                file.rel.display(),
                file.lines
            ));
        }
    }

    // The room drawing of the library (the binary's only room under src/ is `cli`).
    let edges = lib.room_edges();
    print_drawing(&edges);

    // 1. The vocabulary imports only itself.
    for room in VOCABULARY {
        for (to, why) in edges.get(*room).into_iter().flatten() {
            if !VOCABULARY.contains(&to.as_str()) {
                breaches.push(format!("vocabulary: {room} imports {to} ({why})"));
            }
        }
    }

    // 2. No circle of rooms.
    for component in strongly_connected(&edges) {
        if component.len() > 1 {
            let cycle = one_cycle(&edges, &component);
            breaches.push(format!(
                "circle: {} rooms [{}]; for example {}",
                component.len(),
                component.iter().cloned().collect::<Vec<_>>().join(", "),
                cycle
            ));
        }
    }

    let mut failed = Vec::new();
    for breach in &breaches {
        let known = KNOWN.iter().any(|k| breach.starts_with(k));
        println!("{} {breach}", if known { "KNOWN" } else { "BREACH" });
        if !known {
            failed.push(breach.clone());
        }
    }
    for known in KNOWN {
        if !breaches.iter().any(|b| b.starts_with(known)) {
            failed.push(format!("fixed, remove from KNOWN in tests/house.rs: {known}"));
        }
    }
    assert!(failed.is_empty(), "house rules broken:\n{}", failed.join("\n"));
}

/// One source file of a crate, read.
struct SourceFile {
    /// Path below `src/`.
    rel: PathBuf,
    /// Its module path below the crate root (`["exec", "launch"]`).
    module: Vec<String>,
    /// Lines outside `#[cfg(test)]` items.
    lines: usize,
    /// The code outside test items, comments and string literals blanked.
    code: String,
}

struct Crate {
    files: Vec<SourceFile>,
    /// The crate root's `pub use room::Name` re-exports: `Name` -> `room`.
    reexports: BTreeMap<String, String>,
    rooms: BTreeSet<String>,
}

fn read_crate(src: &Path, root: &str) -> Crate {
    let mut files = Vec::new();
    let mut queue = vec![(PathBuf::from(root), Vec::<String>::new())];
    while let Some((rel, module)) = queue.pop() {
        let text = std::fs::read_to_string(src.join(&rel)).unwrap_or_else(|e| panic!("src/{}: {e}", rel.display()));
        let blank = blank_comments_and_strings(&text);
        let (code, test_lines) = strip_test_items(&blank);
        let lines = text.lines().count() - test_lines;
        // The directory this file's child modules live in.
        let is_dir_owner = module.is_empty() || rel.file_name().is_some_and(|n| n == "mod.rs");
        let child_dir =
            if is_dir_owner { rel.parent().unwrap_or(Path::new("")).to_path_buf() } else { rel.with_extension("") };
        for name in declared_modules(&code) {
            let flat = child_dir.join(format!("{name}.rs"));
            let nested = child_dir.join(&name).join("mod.rs");
            let child = if src.join(&flat).exists() { flat } else { nested };
            let mut child_module = module.clone();
            child_module.push(name);
            queue.push((child, child_module));
        }
        files.push(SourceFile { rel, module, lines, code });
    }
    files.sort_by(|a, b| a.rel.cmp(&b.rel));
    let rooms: BTreeSet<String> = files.iter().filter_map(|f| f.module.first().cloned()).collect();
    let mut reexports = BTreeMap::new();
    if let Some(root_file) = files.iter().find(|f| f.module.is_empty()) {
        for (room, names) in root_reexports(&root_file.code) {
            for name in names {
                reexports.insert(name, room.clone());
            }
        }
    }
    Crate { files, reexports, rooms }
}

impl Crate {
    /// room -> (room it imports -> first place seen, as "file: path").
    fn room_edges(&self) -> BTreeMap<String, BTreeMap<String, String>> {
        let mut edges: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        for file in &self.files {
            let Some(from) = file.module.first() else { continue };
            edges.entry(from.clone()).or_default();
            for (target, shown) in crate_references(&file.code, &file.module) {
                let to = if self.rooms.contains(&target) {
                    target
                } else if let Some(room) = self.reexports.get(&target) {
                    room.clone()
                } else {
                    continue;
                };
                if &to != from {
                    edges
                        .entry(from.clone())
                        .or_default()
                        .entry(to)
                        .or_insert_with(|| format!("src/{}: {shown}", file.rel.display()));
                }
            }
        }
        edges
    }
}

fn print_drawing(edges: &BTreeMap<String, BTreeMap<String, String>>) {
    println!("room drawing of src/ (room -> rooms it imports):");
    for (from, tos) in edges {
        println!("  {from} -> {}", tos.keys().cloned().collect::<Vec<_>>().join(", "));
    }
}

/// Replaces comments and the contents of string and char literals with spaces, keeping
/// every newline, so positions and line numbers stay those of the file.
fn blank_comments_and_strings(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let mut i = 0;
    while i < b.len() {
        let ident_before = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
        // `b'x'`: a byte literal, not a lifetime after an identifier.
        let byte_prefix =
            i > 0 && b[i - 1] == b'b' && (i < 2 || !(b[i - 2].is_ascii_alphanumeric() || b[i - 2] == b'_'));
        if b[i..].starts_with(b"//") {
            let end = b[i..].iter().position(|&c| c == b'\n').map_or(b.len(), |p| i + p);
            blank(&mut out, i, end);
            i = end;
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            let mut j = i;
            while j < b.len() {
                if b[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if b[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if !ident_before && raw_string_start(&b[i..]).is_some() {
            let (prefix, hashes) = raw_string_start(&b[i..]).unwrap_or_default();
            let mut close = vec![b'"'];
            close.extend(std::iter::repeat_n(b'#', hashes));
            let body = i + prefix;
            let end = b[body..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(b.len(), |p| body + p + close.len());
            blank(&mut out, body, end.saturating_sub(close.len()));
            i = end;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            blank(&mut out, i + 1, j.min(b.len()));
            i = j + 1;
        } else if b[i] == b'\'' && (!ident_before || byte_prefix) {
            // A char literal ('a', '\n', '\u{1F600}', 'é', b'"') or a lifetime ('a).
            if b.get(i + 1) == Some(&b'\\') {
                let mut j = i + 2;
                while j < b.len() && b[j] != b'\'' {
                    j += 1;
                }
                blank(&mut out, i + 1, j);
                i = j + 1;
            } else {
                let ch_len = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                if b.get(i + 1 + ch_len) == Some(&b'\'') {
                    blank(&mut out, i + 1, i + 1 + ch_len);
                    i += 2 + ch_len;
                } else {
                    i += 1;
                }
            }
        } else {
            i += 1;
        }
    }
    // Blanking multi-byte characters byte by byte keeps the text valid UTF-8 only where
    // whole characters were blanked; every blanked range above is whole characters.
    String::from_utf8_lossy(&out).into_owned()
}

/// `r"`, `r#"`, `br"`...: the prefix length up to and including the quote, and the
/// number of hashes.
fn raw_string_start(b: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    if b.first() == Some(&b'b') {
        i += 1;
    }
    if b.get(i) != Some(&b'r') {
        return None;
    }
    i += 1;
    let hashes = b[i..].iter().take_while(|&&c| c == b'#').count();
    i += hashes;
    (b.get(i) == Some(&b'"')).then_some((i + 1, hashes))
}

/// Removes `#[cfg(test)]` (and `#[cfg(all(test, ...))]`) items from blanked code:
/// returns the rest (test items replaced by newlines) and how many lines they spanned.
fn strip_test_items(code: &str) -> (String, usize) {
    let b = code.as_bytes();
    let mut out = String::with_capacity(code.len());
    let mut test_lines = 0;
    let mut i = 0;
    let mut copied = 0;
    while let Some(found) = find_test_attr(&code[i..]) {
        let start = i + found;
        let end = item_end(b, start);
        out.push_str(&code[copied..start]);
        let removed = &code[start..end];
        let newlines = removed.matches('\n').count();
        out.extend(std::iter::repeat_n('\n', newlines));
        // Lines wholly inside the item: all its newlines, plus its last line when the
        // item ends at the end of a line.
        test_lines += newlines + usize::from(b.get(end) == Some(&b'\n') || end == b.len());
        copied = end;
        i = end;
    }
    out.push_str(&code[copied..]);
    (out, test_lines)
}

fn find_test_attr(code: &str) -> Option<usize> {
    ["#[cfg(test)]", "#[cfg(all(test,"].iter().filter_map(|p| code.find(p)).min()
}

/// The end of the item whose attributes start at `start`: after its `;` or its closing
/// brace, whichever comes first at depth zero.
fn item_end(b: &[u8], start: usize) -> usize {
    let mut i = start;
    let mut depth = 0usize;
    // Skip the attributes (`#[...]`, brackets nested).
    loop {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if b.get(i) == Some(&b'#') && b.get(i + 1) == Some(&b'[') {
            let mut d = 0;
            while i < b.len() {
                match b[i] {
                    b'[' => d += 1,
                    b']' => {
                        d -= 1;
                        if d == 0 {
                            i += 1;
                            break;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        } else {
            break;
        }
    }
    while i < b.len() {
        match b[i] {
            b'{' | b'(' | b'[' => depth += 1,
            b'}' | b')' | b']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 && b[i] == b'}' {
                    return i + 1;
                }
            }
            b';' if depth == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    b.len()
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Reads an identifier at `i` (after whitespace); returns it and the index after it.
fn ident_at(b: &[u8], mut i: usize) -> Option<(String, usize)> {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    let start = i;
    while i < b.len() && is_ident(b[i]) {
        i += 1;
    }
    (i > start).then(|| (String::from_utf8_lossy(&b[start..i]).into_owned(), i))
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// `mod name;` declarations (not inline modules) in non-test code.
fn declared_modules(code: &str) -> Vec<String> {
    let b = code.as_bytes();
    let mut names = Vec::new();
    let mut from = 0;
    while let Some(p) = code[from..].find("mod ") {
        let at = from + p;
        from = at + 4;
        if at > 0 && is_ident(b[at - 1]) {
            continue;
        }
        if let Some((name, after)) = ident_at(b, at + 4) {
            if b.get(skip_ws(b, after)) == Some(&b';') {
                names.push(name);
            }
        }
    }
    names
}

/// Every path that leaves the file's module through `crate::` or `super::`, as the first
/// segment below the crate root it names, with the text shown in reports.
fn crate_references(code: &str, module: &[String]) -> Vec<(String, String)> {
    let b = code.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let starts_word = i == 0 || !(is_ident(b[i - 1]) || b[i - 1] == b':');
        let dollar = i > 0 && b[i - 1] == b'$';
        if !(starts_word || dollar) || !(b[i..].starts_with(b"crate") || b[i..].starts_with(b"super")) {
            i += 1;
            continue;
        }
        // Resolve a chain of crate/super/self segments to a module path.
        let mut path: Vec<String> = module.to_vec();
        let mut j = i;
        let mut resolved = false;
        while let Some((seg, after)) = ident_at(b, j) {
            match seg.as_str() {
                "crate" if j == i => path.clear(),
                "super" => {
                    if path.pop().is_none() {
                        break;
                    }
                }
                "self" => {}
                _ => break,
            }
            resolved = true;
            let k = skip_ws(b, after);
            if !b[k..].starts_with(b"::") {
                // `use super::x as y`? `crate` alone: nothing named.
                j = after;
                resolved = false;
                break;
            }
            j = k + 2;
        }
        if !resolved {
            i += 5;
            continue;
        }
        let shown_end = b[j..].iter().position(|&c| c == b';' || c == b'\n').map_or(b.len(), |p| j + p);
        let shown = code[i..shown_end.min(i + 80)].trim().to_string();
        if let Some(room) = path.first() {
            found.push((room.clone(), shown));
        } else {
            let k = skip_ws(b, j);
            if b.get(k) == Some(&b'{') {
                for name in group_heads(b, k) {
                    found.push((name, shown.clone()));
                }
            } else if let Some((name, _)) = ident_at(b, k) {
                found.push((name, shown));
            }
        }
        i = j;
    }
    found
}

/// The first segment of each path in a `{a::b, c, d::{e, f}}` group at `open`.
fn group_heads(b: &[u8], open: usize) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut expect_head = true;
    let mut i = open;
    while i < b.len() {
        match b[i] {
            b'{' => {
                depth += 1;
                if depth == 1 {
                    expect_head = true;
                }
            }
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            b',' if depth == 1 => expect_head = true,
            c if depth == 1 && expect_head && is_ident(c) => {
                if let Some((name, after)) = ident_at(b, i) {
                    heads.push(name);
                    expect_head = false;
                    i = after;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    heads
}

/// `pub use room::{A, B};` / `pub use room::A;` lines of the crate root.
fn root_reexports(code: &str) -> Vec<(String, Vec<String>)> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(p) = code[from..].find("pub use ") {
        let at = from + p + "pub use ".len();
        from = at;
        let Some((room, after)) = ident_at(b, at) else { continue };
        let end = code[after..].find(';').map_or(code.len(), |e| after + e);
        let body = &code[after..end];
        let names = body
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| w.chars().next().is_some_and(char::is_uppercase))
            .map(str::to_string)
            .collect::<Vec<_>>();
        // Lower-case functions re-exported too (`parse_accepted_gaps`).
        let lower = body
            .rsplit([',', '{', ':'])
            .map(|w| w.trim().trim_end_matches('}').trim())
            .filter(|w| !w.is_empty() && w.chars().all(|c| c.is_alphanumeric() || c == '_'))
            .map(str::to_string);
        let mut all: Vec<String> = names.into_iter().chain(lower).collect();
        all.sort();
        all.dedup();
        out.push((room, all));
    }
    out
}

/// Tarjan's strongly-connected components.
fn strongly_connected(edges: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<BTreeSet<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeMap<String, String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        next: usize,
        out: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        let edges = s.edges;
        for w in edges.get(v).into_iter().flat_map(|m| m.keys()) {
            let w = w.as_str();
            if !edges.contains_key(w) {
                continue;
            }
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.insert(w.to_string());
                if w == v {
                    break;
                }
            }
            s.out.push(component);
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

/// A shortest circle through the component's first room, each step with where it is
/// imported, so a report says which line to change.
fn one_cycle(edges: &BTreeMap<String, BTreeMap<String, String>>, component: &BTreeSet<String>) -> String {
    let start = component.iter().next().expect("non-empty").clone();
    // Breadth-first search back to `start` inside the component.
    let mut previous: BTreeMap<String, String> = BTreeMap::new();
    let mut frontier = vec![start.clone()];
    'search: while !frontier.is_empty() {
        let mut next = Vec::new();
        for v in frontier {
            for w in edges.get(&v).into_iter().flat_map(|m| m.keys()) {
                if !component.contains(w) {
                    continue;
                }
                if *w == start {
                    previous.insert(start.clone(), v.clone());
                    break 'search;
                }
                if !previous.contains_key(w) {
                    previous.insert(w.clone(), v.clone());
                    next.push(w.clone());
                }
            }
        }
        frontier = next;
    }
    let mut rooms = vec![start.clone()];
    let mut at = previous.get(&start).cloned().unwrap_or_default();
    while at != start && !at.is_empty() {
        rooms.push(at.clone());
        at = previous.get(&at).cloned().unwrap_or_default();
    }
    rooms.push(start);
    rooms.reverse();
    rooms.windows(2).map(|w| format!("{} -> {} ({})", w[0], w[1], edges[&w[0]][&w[1]])).collect::<Vec<_>>().join("; ")
}

/// The types moved down to the vocabulary (or over to policy) keep their old public
/// paths: this compiles only while every re-export is in place.
#[test]
#[allow(unused_imports)]
fn moved_types_keep_their_paths() {
    use cordon::escalation::{printable, Grant};
    use cordon::layer::{Change, ChangeKind, EntryKind, Fate, HeldWrites, Skipped, MAX_LISTED_CHANGES};
    use cordon::limits::{AppliedLimits, Mechanism, Resource};
    use cordon::policy::IndexError;
    use cordon::proxy::presets::Preset as OldPreset;
    use cordon::proxy::rules::{
        class_on, classify, normalize_name, AddrClass, AllowList, Grant as HostGrant, HostPattern, HostPort, IpRange,
        NotHostPort, PatternError, ProxyRefusal, Refusal, Target, Via, MAX_HOST_LEN,
    };
    use cordon::proxy::{NetworkLog, NetworkLogEntry, Preset};
    use cordon::runner::error::{MaterializeError, PlanError, RunnerFailure};
    use cordon::runner::seatbelt::{PathRole, SeatbeltPlanError};
    #[cfg(target_os = "linux")]
    use cordon::runner::seccomp::SeccompError;
    use cordon::EnvError;
    assert_eq!(printable("a\u{1b}b"), "a\\u{1b}b");
    assert_eq!(classify("127.0.0.1".parse().unwrap()), AddrClass::Loopback);
}
