//! Named host lists for common ecosystems (`--allow-hosts python`), each documented
//! one by one in docs/network.md. Exact names where the ecosystem has them: a
//! wildcard would also open every other service under the same domain.

use super::hosts::HostPattern;

/// A named list of hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[non_exhaustive]
pub enum Preset {
    /// PyPI: the index (`pypi.org`) and its file host (`files.pythonhosted.org`).
    Python,
    /// npm: the public registry (`registry.npmjs.org`).
    Node,
    /// crates.io: the API (`crates.io`), the sparse index (`index.crates.io`) and the
    /// crate files (`static.crates.io`).
    Rust,
    /// Go modules: the module proxy (`proxy.golang.org`) and the checksum database
    /// (`sum.golang.org`).
    Go,
    /// GitHub over HTTPS: `github.com`, `codeload.github.com` (archives),
    /// `objects.githubusercontent.com` (release assets, LFS) and
    /// `raw.githubusercontent.com` (raw files). Anything hosted there is reachable,
    /// uploads included: an exfiltration channel (docs/network.md).
    Github,
}

impl Preset {
    /// The exact names of the preset.
    pub fn hosts(self) -> &'static [&'static str] {
        match self {
            Preset::Python => &["pypi.org", "files.pythonhosted.org"],
            Preset::Node => &["registry.npmjs.org"],
            Preset::Rust => &["crates.io", "index.crates.io", "static.crates.io"],
            Preset::Go => &["proxy.golang.org", "sum.golang.org"],
            Preset::Github => {
                &["github.com", "codeload.github.com", "objects.githubusercontent.com", "raw.githubusercontent.com"]
            }
        }
    }

    /// The preset as patterns (port 443 for `CONNECT`, 80 for plain HTTP).
    pub fn patterns(self) -> Vec<HostPattern> {
        self.hosts().iter().map(|h| h.parse().expect("preset hosts are valid patterns")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    #[test]
    fn the_flags_expand_presets_next_to_single_hosts() {
        let args = crate::flags::PolicyArgs {
            allow_host: vec!["git.example.org:8080".parse().unwrap()],
            allow_hosts: vec![Preset::Python],
            ..Default::default()
        };
        let hosts: Vec<String> = args.request().allow_hosts.iter().map(ToString::to_string).collect();
        assert_eq!(hosts, ["git.example.org:8080", "pypi.org", "files.pythonhosted.org"]);
    }

    #[test]
    fn every_preset_parses_and_names_exact_hosts() {
        for p in Preset::value_variants() {
            let patterns = p.patterns();
            assert_eq!(patterns.len(), p.hosts().len());
            for (pat, host) in patterns.iter().zip(p.hosts()) {
                assert_eq!(pat.to_string(), *host, "{p:?}: no wildcard, no port");
            }
        }
    }
}
