//! The audit's report: one verdict per probe, target and identity; one line per
//! probe and a table (class × target × identity) for people; JSON for machines;
//! JUnit XML for CI systems.

use super::catalog::{Class, Probe};
use super::exec::{Identity, Target};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::PathBuf;
use std::time::Duration;

/// How one job ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The attack was stopped, or the control worked.
    Pass,
    /// The attack had its effect, or the control was broken.
    Fail,
    /// The probe did not run (the target refused to start it, it printed nothing).
    Error,
    /// Not judged here (not applicable, or its host control could not show the effect).
    Skip,
}

/// One probe on one target as one identity.
#[derive(Clone, Debug, Serialize)]
pub struct Verdict {
    /// `class/name`.
    pub probe: String,
    /// Its class.
    pub class: Class,
    /// The target (`landlock/read-only`, `wrapper/workspace-write`).
    pub target: String,
    /// The identity's name.
    pub identity: String,
    /// The outcome.
    pub outcome: Outcome,
    /// What was observed (the effect, or what held and the errno inside).
    pub detail: String,
    /// The command line that ran (empty when skipped).
    pub command: Vec<String>,
    /// Wall time of the run.
    pub elapsed_ms: u64,
}

/// One entry of the battery, as listed in the report.
#[derive(Clone, Debug, Serialize)]
pub struct ProbeInfo {
    /// `class/name`.
    pub id: String,
    /// Its class.
    pub class: Class,
    /// What it tries, what it proves.
    pub doc: String,
}

/// Totals.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Totals {
    /// Passed verdicts.
    pub pass: usize,
    /// Failed verdicts.
    pub fail: usize,
    /// Errors (probes that did not run).
    pub error: usize,
    /// Skipped verdicts.
    pub skip: usize,
}

/// The whole audit.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The battery.
    pub probes: Vec<ProbeInfo>,
    /// The targets audited.
    pub targets: Vec<String>,
    /// The identities.
    pub identities: Vec<String>,
    /// Every verdict.
    pub verdicts: Vec<Verdict>,
    /// What the audit itself left behind (processes, mounts, cgroups): must be empty.
    pub leftovers: Vec<String>,
    /// Totals.
    pub totals: Totals,
    /// Wall time.
    pub elapsed_ms: u64,
    /// Where failed jobs were kept (`--keep-failed`).
    pub kept: Option<PathBuf>,
}

impl Report {
    /// Builds the report.
    pub(crate) fn new(
        probes: &[Probe],
        targets: &[Target],
        ids: &[Identity],
        verdicts: Vec<Verdict>,
        leftovers: Vec<String>,
        elapsed: Duration,
        kept: Option<PathBuf>,
    ) -> Report {
        let mut totals = Totals::default();
        for v in &verdicts {
            match v.outcome {
                Outcome::Pass => totals.pass += 1,
                Outcome::Fail => totals.fail += 1,
                Outcome::Error => totals.error += 1,
                Outcome::Skip => totals.skip += 1,
            }
        }
        Report {
            probes: probes.iter().map(|p| ProbeInfo { id: p.id(), class: p.class, doc: p.doc.to_string() }).collect(),
            targets: targets.iter().map(Target::name).collect(),
            identities: ids.iter().map(|i| i.name.clone()).collect(),
            verdicts,
            leftovers,
            totals,
            elapsed_ms: elapsed.as_millis() as u64,
            kept,
        }
    }

    /// Everything held, every control worked, nothing was left behind.
    pub fn held(&self) -> bool {
        self.totals.fail == 0 && self.totals.error == 0 && self.leftovers.is_empty()
    }

    /// The text report: one line per probe, the table, the failures in detail.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "cordon audit: {} probes in {} classes; targets: {}; as: {}",
            self.probes.len(),
            self.classes().len(),
            self.targets.join(", "),
            self.identities.join(", ")
        );
        let width = self.probes.iter().map(|p| p.id.len()).max().unwrap_or(10) + 2;
        for p in &self.probes {
            let vs: Vec<&Verdict> = self.verdicts.iter().filter(|v| v.probe == p.id).collect();
            let count = |o: Outcome| vs.iter().filter(|v| v.outcome == o).count();
            let (pass, fail, err, skip) =
                (count(Outcome::Pass), count(Outcome::Fail), count(Outcome::Error), count(Outcome::Skip));
            let judged = pass + fail + err;
            let word = if fail + err > 0 {
                "FAIL"
            } else if pass > 0 {
                "PASS"
            } else {
                "SKIP"
            };
            let mut note = String::new();
            if fail + err > 0 {
                let mut on: Vec<String> = vs
                    .iter()
                    .filter(|v| matches!(v.outcome, Outcome::Fail | Outcome::Error))
                    .map(|v| format!("{} as {}", v.target, v.identity))
                    .collect();
                on.dedup();
                let _ = write!(note, "  failed on {}", on.join(", "));
            } else if skip > 0 {
                let why = vs.iter().find(|v| v.outcome == Outcome::Skip).map(|v| v.detail.as_str()).unwrap_or("");
                let _ = write!(note, "  ({skip} skipped: {})", first_words(why, 90));
            }
            let _ = writeln!(s, "{word}  {:<width$} {pass}/{judged}{note}", p.id);
        }
        s.push('\n');
        s.push_str(&self.table());
        let bad: Vec<&Verdict> =
            self.verdicts.iter().filter(|v| matches!(v.outcome, Outcome::Fail | Outcome::Error)).collect();
        if !bad.is_empty() {
            let _ = writeln!(s, "\nFailures ({}):", bad.len());
            for v in bad {
                let _ = writeln!(s, "  {} on {} as {}: {}", v.probe, v.target, v.identity, v.detail);
                let _ = writeln!(s, "    ran: {}", shell_words(&v.command));
            }
        }
        if !self.leftovers.is_empty() {
            let _ = writeln!(s, "\nLeft behind by the audit ({}):", self.leftovers.len());
            for l in &self.leftovers {
                let _ = writeln!(s, "  {l}");
            }
        }
        if let Some(k) = &self.kept {
            let _ = writeln!(s, "\nFailed jobs kept under {}", k.display());
        }
        let t = &self.totals;
        let _ = writeln!(
            s,
            "\ncordon audit: {} passed, {} failed, {} errors, {} skipped in {:.1} s: {}",
            t.pass,
            t.fail,
            t.error,
            t.skip,
            self.elapsed_ms as f64 / 1000.0,
            if self.held() { "everything held" } else { "NOT everything held" }
        );
        s
    }

    /// The classes present, in order.
    fn classes(&self) -> Vec<Class> {
        let mut c: Vec<Class> = self.probes.iter().map(|p| p.class).collect();
        c.dedup();
        c
    }

    /// The summary table: a row per class, a column per target and identity; a cell
    /// is `passed/judged`, with the failures marked.
    pub fn table(&self) -> String {
        let cols: Vec<(String, String)> =
            self.targets.iter().flat_map(|t| self.identities.iter().map(move |i| (t.clone(), i.clone()))).collect();
        let mut cells: BTreeMap<(Class, usize), (usize, usize, usize)> = BTreeMap::new();
        for v in &self.verdicts {
            let Some(ci) = cols.iter().position(|(t, i)| *t == v.target && *i == v.identity) else { continue };
            let e = cells.entry((v.class, ci)).or_default();
            match v.outcome {
                Outcome::Pass => e.0 += 1,
                Outcome::Fail | Outcome::Error => e.1 += 1,
                Outcome::Skip => e.2 += 1,
            }
        }
        let head: Vec<String> = cols.iter().map(|(t, i)| format!("{t} ({i})")).collect();
        let w: Vec<usize> = head.iter().map(|h| h.len().max(9)).collect();
        let mut s = String::new();
        let _ = write!(s, "{:<16}", "class");
        for (h, w) in head.iter().zip(&w) {
            let _ = write!(s, " {h:>w$}");
        }
        s.push('\n');
        for class in self.classes() {
            let n = self.probes.iter().filter(|p| p.class == class).count();
            let _ = write!(s, "{:<16}", format!("{} ({n})", class.name()));
            for (ci, w) in w.iter().enumerate() {
                let (pass, fail, skip) = cells.get(&(class, ci)).copied().unwrap_or_default();
                let cell = if fail > 0 {
                    format!("FAIL {fail}/{}", pass + fail)
                } else if pass > 0 {
                    format!("{pass}/{pass}")
                } else if skip > 0 {
                    "skip".to_string()
                } else {
                    "-".to_string()
                };
                let _ = write!(s, " {cell:>w$}");
            }
            s.push('\n');
        }
        s
    }

    /// JUnit XML: a test suite per target and identity, a test case per probe.
    pub fn junit(&self) -> String {
        let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let t = &self.totals;
        let _ = writeln!(
            s,
            "<testsuites name=\"cordon audit\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{:.3}\">",
            self.verdicts.len(),
            t.fail,
            t.error,
            t.skip,
            self.elapsed_ms as f64 / 1000.0
        );
        for target in &self.targets {
            for id in &self.identities {
                let vs: Vec<&Verdict> =
                    self.verdicts.iter().filter(|v| v.target == *target && v.identity == *id).collect();
                let c = |o: Outcome| vs.iter().filter(|v| v.outcome == o).count();
                let time: u64 = vs.iter().map(|v| v.elapsed_ms).sum();
                let _ = writeln!(
                    s,
                    "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{:.3}\">",
                    xml(&format!("{target} as {id}")),
                    vs.len(),
                    c(Outcome::Fail),
                    c(Outcome::Error),
                    c(Outcome::Skip),
                    time as f64 / 1000.0
                );
                for v in vs {
                    let (class, name) = v.probe.split_once('/').unwrap_or(("", &v.probe));
                    let _ = write!(
                        s,
                        "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
                        xml(&format!("{class}.{}", target.replace('/', "."))),
                        xml(name),
                        v.elapsed_ms as f64 / 1000.0
                    );
                    let body = match v.outcome {
                        Outcome::Pass => None,
                        Outcome::Fail => Some(("failure", "escape")),
                        Outcome::Error => Some(("error", "did-not-run")),
                        Outcome::Skip => Some(("skipped", "skipped")),
                    };
                    match body {
                        None => s.push_str("/>\n"),
                        Some((tag, ty)) => {
                            let _ = writeln!(
                                s,
                                ">\n      <{tag} message=\"{}\" type=\"{ty}\">{}</{tag}>\n    </testcase>",
                                xml(&first_words(&v.detail, 200)),
                                xml(&format!("{}\nran: {}", v.detail, shell_words(&v.command)))
                            );
                        }
                    }
                }
                s.push_str("  </testsuite>\n");
            }
        }
        if !self.leftovers.is_empty() {
            let _ =
                writeln!(s, "  <testsuite name=\"leftovers\" tests=\"1\" failures=\"1\" errors=\"0\" skipped=\"0\">");
            let _ = writeln!(
                s,
                "    <testcase classname=\"audit\" name=\"nothing-left-behind\"><failure message=\"the audit left things behind\" type=\"leftover\">{}</failure></testcase>\n  </testsuite>",
                xml(&self.leftovers.join("\n"))
            );
        }
        s.push_str("</testsuites>\n");
        s
    }

    /// The catalog as text: one line per probe, and the counts per class.
    pub(crate) fn catalog_text(probes: &[Probe]) -> String {
        let mut s = String::new();
        let width = probes.iter().map(|p| p.id().len()).max().unwrap_or(10) + 2;
        for p in probes {
            let _ = writeln!(s, "{:<width$} {}", p.id(), p.doc);
        }
        let _ = writeln!(s);
        for c in Class::ALL {
            let n = probes.iter().filter(|p| p.class == c).count();
            if n > 0 {
                let _ = writeln!(s, "{:<16} {n}", c.name());
            }
        }
        let _ = writeln!(s, "{:<16} {}", "total", probes.len());
        s
    }
}

/// XML text and attribute escaping; characters XML 1.0 cannot carry are dropped.
fn xml(t: &str) -> String {
    let mut s = String::with_capacity(t.len());
    for c in t.chars() {
        match c {
            '&' => s.push_str("&amp;"),
            '<' => s.push_str("&lt;"),
            '>' => s.push_str("&gt;"),
            '"' => s.push_str("&quot;"),
            '\'' => s.push_str("&apos;"),
            '\t' | '\n' | '\r' => s.push(c),
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => {}
            c => s.push(c),
        }
    }
    s
}

/// At most `n` characters, on one line.
fn first_words(t: &str, n: usize) -> String {
    let one = t.replace('\n', " ");
    if one.chars().count() > n {
        format!("{}…", one.chars().take(n).collect::<String>())
    } else {
        one
    }
}

/// A command line quoted for a POSIX shell (to run it again by hand).
pub fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if !a.is_empty() && a.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@+%".contains(&b)) {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_escapes_markup_and_drops_control_characters() {
        assert_eq!(xml("a<b>&\"c'\u{1}\n"), "a&lt;b&gt;&amp;&quot;c&apos;\n");
    }

    #[test]
    fn shell_words_quote_what_a_shell_would_split() {
        let v: Vec<String> = ["cordon", "run", "--", "sh", "-c", "echo 'x' y"].map(String::from).to_vec();
        assert_eq!(shell_words(&v), "cordon run -- sh -c 'echo '\\''x'\\'' y'");
    }
}
