//! Shared state and leaks (host `/tmp` and `/dev/shm`, SysV and POSIX IPC, inherited
//! descriptors), credentials in the environment, the honesty of cordon's report, and
//! the positive controls.

use super::{cordon_only, p, s, Class, Plan, Probe};
use crate::audit::exec::RunOutput;
use crate::audit::fixture::{skip, Fixture, Skip};
use crate::audit::watch::{Appears, Check, Output, Sentinel, Worked};
use crate::mode::Mode;
use std::os::fd::OwnedFd;
use std::path::PathBuf;

/// A mixed-case alphanumeric token of `n` characters, unique to the job (the shapes
/// credential scrubbers look for need mixed case and digits).
fn token(fx: &Fixture, n: usize) -> String {
    const A: &[u8] = b"Xq7Lm2Rt9Vb4Kp8Zn3Wc6Yh1Gd5Fs0JeUa";
    let seed: usize = fx.number() as usize;
    (0..n).map(|i| A[(i * 7 + seed / (i % 5 + 1)) % A.len()] as char).collect()
}

/// A credential in the environment: the run's output must never show `secret`.
fn credential(fx: &Fixture, name: &str, value: &str, secret: &str) -> Result<Plan, Skip> {
    Ok(Plan::op(fx, "environ", &[]).env(name, value).watch(Output::contains(secret, &format!("{name}'s secret"))))
}

/// `/proc/sysvipc/<kind>` lists `key`: a SysV object of the host. Cleanup removes it.
fn sysv_watch(kind: &'static str, key: i32) -> impl crate::audit::watch::Watch {
    let find = move || -> Option<i32> {
        let t = std::fs::read_to_string(format!("/proc/sysvipc/{kind}")).ok()?;
        t.lines().skip(1).find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.first()?.parse::<i32>().ok()? == key).then(|| f.get(1)?.parse().ok()).flatten()
        })
    };
    Check {
        effect: move |_: &RunOutput| {
            find().map(|id| format!("a SysV {kind} object (key {key}, id {id}) appeared on the host"))
        },
        cleanup: move || {
            use cordon_stage::probe::kernel;
            if let Some(id) = find() {
                let _ = match kind {
                    "shm" => kernel::shm_remove(id),
                    "msg" => kernel::msg_remove(id),
                    _ => kernel::sem_remove(id),
                };
            }
        },
    }
}

/// A path in the host's shared `/tmp` for this job (whatever is made there is removed
/// after the job).
fn host_tmp_file(fx: &Fixture, suffix: &str) -> PathBuf {
    PathBuf::from("/tmp").join(format!("{}-{suffix}", fx.tag))
}

/// A sentinel file of the identity in the host's `/tmp`, and an attack on it.
fn host_tmp_sentinel(fx: &Fixture, suffix: &str, attack: fn(&Fixture, &str) -> Plan) -> Result<Plan, Skip> {
    let f = host_tmp_file(fx, suffix);
    let (_, w) = fx.sentinel(&f);
    let rm = f.clone();
    Ok(attack(fx, &s(&f)).watch_box(w).on_cleanup(move || {
        let _ = std::fs::remove_file(&rm);
    }))
}

/// A report check: the result lists no denial at all (an attempted refusal missing).
fn no_denial(r: &serde_json::Value) -> Option<String> {
    let n = r["sandbox"]["denials"].as_array().map_or(0, Vec::len);
    (r["sandbox"]["denied"] != true || n == 0).then(|| "the report lists no denial for the refused attempt".into())
}

/// A report check: the result claims a denial (there was no refused attempt).
fn claims_denial(r: &serde_json::Value) -> Option<String> {
    let n = r["sandbox"]["denials"].as_array().map_or(0, Vec::len);
    (r["sandbox"]["denied"] == true || n > 0)
        .then(|| format!("the report claims {n} denial(s): {}", r["sandbox"]["denials"]))
}

/// The report's honesty is cordon's: not applicable to a wrapper.
fn report_probe(fx: &Fixture) -> Result<(), Skip> {
    cordon_only(fx, "judges cordon's own run result")
}

pub(super) fn probes() -> Vec<Probe> {
    use Class::{Controls as C, Credentials as K, Ipc as I, Report as R};
    vec![
        // ------------------------------------------------------------ ipc
        p(I, "host-tmp-write", "create a file in /tmp; proves nothing created in /tmp reaches the host", |fx| {
            let f = host_tmp_file(fx, "planted");
            Ok(Plan::op(fx, "create", &[&s(&f)]).watch(Appears::outside_job(&f)))
        }),
        p(I, "host-tmp-overwrite", "overwrite a file the user keeps in the host's /tmp; proves changes in /tmp stay private to the run", |fx| {
            host_tmp_sentinel(fx, "kept", |fx, f| Plan::op(fx, "overwrite", &[f, "pwned\n"]))
        }),
        p(I, "host-tmp-unlink", "delete a file the user keeps in the host's /tmp; proves removals in /tmp stay private", |fx| {
            host_tmp_sentinel(fx, "kept", |fx, f| Plan::op(fx, "unlink", &[f]))
        }),
        p(I, "host-tmp-chmod", "chmod a file in the host's /tmp; proves metadata changes in /tmp stay private", |fx| {
            host_tmp_sentinel(fx, "kept", |fx, f| Plan::op(fx, "chmod", &[f, "0777"]))
        }),
        p(I, "host-tmp-fifo", "write into a FIFO in the host's /tmp that a host process reads; proves /tmp is no channel out", |fx| {
            let f = host_tmp_file(fx, "fifo");
            let reader = crate::audit::watch::FifoReader::new(fx, &f)?;
            let rm = f.clone();
            Ok(Plan::op(fx, "open-w-write", &[&s(&f), "injected\n"]).watch(reader).on_cleanup(move || {
                let _ = std::fs::remove_file(&rm);
            }))
        }),
        p(I, "host-tmp-socket", "connect to a unix socket a host daemon listens on in /tmp; proves /tmp sockets do not open", |fx| {
            let f = host_tmp_file(fx, "sock");
            let (name, w) = fx.unix_stream(Some(&f))?;
            Ok(Plan::op(fx, "unix-connect", &[&name]).watch_box(w).on_cleanup(move || {
                let _ = std::fs::remove_file(&f);
            }))
        }),
        p(I, "host-tmp-foreign", "read another user's 0600 file in the host's /tmp; proves /tmp is no wider than the host's own permissions", |fx| {
            if fx.id.uid == 65534 {
                return skip("the identity is the file's owner");
            }
            let f = host_tmp_file(fx, "foreign");
            let secret = format!("foreign-secret-{}", fx.tag);
            fx.file(&f, &secret);
            let _ = std::os::unix::fs::chown(&f, Some(65534), Some(65534));
            let _ = std::fs::set_permissions(&f, std::os::unix::fs::PermissionsExt::from_mode(0o600));
            let rm = f.clone();
            Ok(Plan::op(fx, "read", &[&s(&f)]).watch(Output::contains(&secret, "another user's /tmp secret")).on_cleanup(move || {
                let _ = std::fs::remove_file(&rm);
            }))
        }),
        p(I, "host-dev-shm", "create a file in /dev/shm; proves nothing created in /dev/shm reaches the host", |fx| {
            let f = PathBuf::from("/dev/shm").join(format!("{}-shm", fx.tag));
            Ok(Plan::op(fx, "create", &[&s(&f)]).watch(Appears::outside_job(&f)))
        }),
        p(I, "sysv-shm", "create a SysV shared-memory segment; proves SysV IPC is private", |fx| {
            let key = fx.number() as i32;
            Ok(Plan::op(fx, "shmget", &[&key.to_string()]).watch(sysv_watch("shm", key)))
        }),
        p(I, "sysv-msg", "create a SysV message queue; proves SysV IPC is private", |fx| {
            let key = fx.number() as i32;
            Ok(Plan::op(fx, "msgget", &[&key.to_string()]).watch(sysv_watch("msg", key)))
        }),
        p(I, "sysv-sem", "create a SysV semaphore set; proves SysV IPC is private", |fx| {
            let key = fx.number() as i32;
            Ok(Plan::op(fx, "semget", &[&key.to_string()]).watch(sysv_watch("sem", key)))
        }),
        p(I, "sysv-shm-read", "read a host SysV segment holding a secret; proves host IPC objects are invisible", |fx| {
            use cordon_stage::probe::kernel;
            let key = fx.number() as i32 ^ 0x55;
            let secret = format!("shm-secret-{}", fx.tag);
            let id = kernel::shm_get(key, 4096, libc::IPC_CREAT | libc::IPC_EXCL | 0o666).map_err(|e| Skip(format!("shmget: {e}")))?;
            let _ = kernel::shm_write(id, secret.as_bytes());
            Ok(Plan::op(fx, "shm-read", &[&key.to_string()])
                .watch(Output::contains(&secret, "the host segment's secret"))
                .on_cleanup(move || {
                    let _ = kernel::shm_remove(id);
                }))
        }),
        p(I, "posix-mq", "create a POSIX message queue; proves POSIX IPC is private", |fx| {
            let name = format!("/{}", fx.tag);
            let c = std::ffi::CString::new(name.clone()).map_err(|_| Skip("name".into()))?;
            let c2 = c.clone();
            Ok(Plan::op(fx, "mq-open", &[&name]).watch(Check {
                effect: move |_: &RunOutput| {
                    cordon_stage::probe::kernel::mq_open(&c, libc::O_RDONLY).ok().map(|_| "a POSIX queue appeared on the host".to_string())
                },
                cleanup: move || {
                    let _ = cordon_stage::probe::kernel::mq_unlink(&c2);
                },
            }))
        }),
        p(I, "inherited-fd-file", "write to descriptor 3, a file outside the caller left open; proves only stdio crosses into the run", |fx| {
            let (path, _) = fx.sentinel(&fx.outside.join("open-file"));
            let w = Sentinel::record(&path);
            let f: OwnedFd = std::fs::OpenOptions::new().append(true).open(&path).map_err(|e| Skip(format!("open: {e}")))?.into();
            let mut plan = Plan::op(fx, "fd-write", &["3", "pwned\n"]).watch(w);
            plan.fds.push((f, 3));
            Ok(plan)
        }),
        p(I, "inherited-fd-socket", "write to descriptor 4, a socket to a host process the caller left open; proves inherited sockets are closed", |fx| {
            let (mine, theirs) = std::os::unix::net::UnixStream::pair().map_err(|e| Skip(format!("socketpair: {e}")))?;
            let _ = mine.set_nonblocking(true);
            let mut plan = Plan::op(fx, "fd-write", &["4", "pwned\n"]).watch(Check {
                effect: move |_: &RunOutput| {
                    use std::io::Read;
                    let mut b = [0u8; 64];
                    (&mine).read(&mut b).ok().filter(|n| *n > 0).map(|n| format!("the host end of the socket received {n} bytes"))
                },
                cleanup: || {},
            });
            plan.fds.push((OwnedFd::from(theirs), 4));
            Ok(plan)
        }),
        // ------------------------------------------------------------ credentials
        p(K, "aws-secret", "AWS_SECRET_ACCESS_KEY in the environment; proves secret-named variables are scrubbed", |fx| {
            let v = token(fx, 40);
            credential(fx, "AWS_SECRET_ACCESS_KEY", &v, &v)
        }),
        p(K, "github-token", "GITHUB_TOKEN=ghp_...; proves token-named variables are scrubbed", |fx| {
            let v = format!("ghp_{}", token(fx, 36));
            credential(fx, "GITHUB_TOKEN", &v, &v)
        }),
        p(K, "token-shaped-value", "a GitHub token under an innocent name (BUILD_INFO); proves values are scrubbed by shape", |fx| {
            let v = format!("ghp_{}", token(fx, 36));
            credential(fx, "BUILD_INFO", &v, &v)
        }),
        p(K, "openai-key", "OPENAI_API_KEY=sk-proj-...; proves API keys are scrubbed", |fx| {
            let v = format!("sk-proj-{}", token(fx, 48));
            credential(fx, "OPENAI_API_KEY", &v, &v)
        }),
        p(K, "anthropic-key", "an Anthropic key under an innocent name; proves its shape is recognized", |fx| {
            let v = format!("sk-ant-api03-{}", token(fx, 48));
            credential(fx, "MODEL_CONFIG", &v, &v)
        }),
        p(K, "database-url", "DATABASE_URL with a password; proves URLs carrying passwords are scrubbed", |fx| {
            let pw = token(fx, 20);
            credential(fx, "DATABASE_URL", &format!("postgres://app:{pw}@db.internal:5432/app"), &pw)
        }),
        p(K, "url-query-token", "a callback URL with access_token=...; proves credential query parameters are scrubbed", |fx| {
            let t = token(fx, 24);
            credential(fx, "CALLBACK_URL", &format!("https://api.example.com/hook?access_token={t}"), &t)
        }),
        p(K, "sentry-dsn", "a Sentry-style DSN (a token as the URL's user); proves token-like user parts are scrubbed", |fx| {
            let t: String = token(fx, 32).to_lowercase().chars().map(|c| if c.is_ascii_digit() { c } else { 'a' }).collect();
            credential(fx, "SENTRY_DSN", &format!("https://{t}@o123.ingest.sentry.io/42"), &t)
        }),
        p(K, "ssh-agent", "SSH_AUTH_SOCK; proves the agent socket (a signing oracle) is not handed over", |fx| {
            let v = format!("/tmp/ssh-{}/agent.1", fx.tag);
            credential(fx, "SSH_AUTH_SOCK", &v, &v)
        }),
        p(K, "npm-token", "NPM_TOKEN=npm_...; proves registry tokens are scrubbed", |fx| {
            let v = format!("npm_{}", token(fx, 36));
            credential(fx, "NPM_TOKEN", &v, &v)
        }),
        p(K, "private-key", "a PEM private key block under an innocent name; proves key material is scrubbed by shape", |fx| {
            let body = token(fx, 40);
            let v = format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{body}\n-----END OPENSSH PRIVATE KEY-----");
            credential(fx, "DEPLOY_MATERIAL", &v, &body)
        }),
        p(K, "jwt", "a signed JWT under an innocent name; proves bearer tokens are scrubbed by shape", |fx| {
            let sig = token(fx, 43);
            let v = format!("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.{sig}");
            credential(fx, "SESSION_STATE", &v, &sig)
        }),
        p(K, "slack-token", "a Slack bot token under an innocent name; proves its shape is recognized", |fx| {
            let v = format!("xoxb-1234567890-{}", token(fx, 24));
            credential(fx, "CHAT_BOT", &v, &v)
        }),
        p(K, "password", "DB_PASSWORD in the environment; proves password-named variables are scrubbed", |fx| {
            let v = token(fx, 18);
            credential(fx, "DB_PASSWORD", &v, &v)
        }),
        // ------------------------------------------------------------ report
        p(R, "refusal-reported", "write outside and check the result names the refusal; proves an attempted escape is reported", |fx| {
            report_probe(fx)?;
            let (f, _) = fx.sentinel(&fx.outside.join("target"));
            let w = Sentinel::record(&f);
            Ok(Plan::op(fx, "overwrite", &[&s(&f), "pwned\n"])
                .watch(w)
                .watch(crate::audit::watch::Report::new(no_denial))
                .control_cordon(fx, Mode::FullAccess, "overwrite", &[&s(&f), "pwned\n"]))
        }),
        p(R, "network-refusal-reported", "connect to a loopback listener and check the result names the refusal; proves network attempts are reported", |fx| {
            report_probe(fx)?;
            let (port, w) = fx.tcp(false)?;
            let port = port.to_string();
            Ok(Plan::op(fx, "tcp", &["127.0.0.1", &port])
                .watch_box(w)
                .watch(crate::audit::watch::Report::new(no_denial))
                .control_cordon(fx, Mode::FullAccess, "tcp", &["127.0.0.1", &port]))
        }),
        p(R, "forged-stderr", "print a refusal line on stderr without attempting anything; proves forged text is not reported as a denial", |fx| {
            forged(fx, "stderr")
        }),
        p(R, "forged-stdout", "print a refusal line on stdout without attempting anything; proves output never becomes a denial", |fx| {
            forged(fx, "stdout")
        }),
        p(R, "self-signal", "kill itself with SIGSYS; proves a self-sent signal is not reported as a seccomp refusal", |fx| {
            report_probe(fx)?;
            let mut plan = Plan::op(fx, "raise", &["31"])
                .watch(crate::audit::watch::Report::new(claims_denial))
                .control_cordon(fx, Mode::ReadOnly, "i386-getpid", &[]);
            plan.prints_line = false;
            Ok(plan)
        }),
        // ------------------------------------------------------------ controls
        p(C, "read-system", "read /etc/passwd; proves the system stays readable", |fx| Ok(Plan::op(fx, "read", &["/etc/passwd"]).watch(Worked).works())),
        p(C, "read-workspace", "read a workspace file; proves the workspace is readable in every mode", |fx| {
            let f = fx.file(&fx.ws.join("README"), "readme\n");
            Ok(Plan::op(fx, "read", &[&s(&f)]).watch(Worked).works())
        }),
        p(C, "dev-null", "write /dev/null; proves the usual devices work", |fx| {
            Ok(Plan::op(fx, "overwrite", &["/dev/null", "x"]).watch(Worked).works())
        }),
        p(C, "tmpdir", "create and delete a file in $TMPDIR; proves a private writable TMPDIR exists in every mode", |fx| {
            Ok(Plan::op(fx, "tmpdir", &[]).watch(Worked).works())
        }),
        p(C, "pipes", "`echo | cat` in a shell; proves pipes work", |fx| {
            let t = format!("piped-{}", fx.tag);
            Ok(Plan::sh(&format!("echo {t} | cat")).watch(Output::contains(&t, "the piped text")).works())
        }),
        p(C, "job-control", "a background job and `wait`; proves shells can run jobs", |fx| {
            let t = format!("waited-{}", fx.tag);
            Ok(Plan::sh(&format!("sleep 0.05 & wait; echo {t}")).watch(Output::contains(&t, "the job's end")).works())
        }),
        p(C, "socketpair", "a unix stream socketpair; proves in-process IPC works", |fx| Ok(Plan::op(fx, "socketpair", &[]).watch(Worked).works())),
        p(C, "git-status", "`git status` in a repository; proves git read commands work", |fx| {
            fx.git_repo(&fx.ws)?;
            Ok(Plan::sh("git status").watch(Output::contains("nothing to commit", "git's status")).works())
        }),
        p(C, "git-log", "`git log` in a repository; proves history is readable", |fx| {
            fx.git_repo(&fx.ws)?;
            Ok(Plan::sh("git log --oneline").watch(Output::contains("initial commit", "the commit")).works())
        }),
        p(C, "git-diff", "`git diff` of a modified file; proves git compares the work tree", |fx| {
            fx.git_repo(&fx.ws)?;
            let t = format!("changed-{}", fx.tag);
            fx.file(&fx.ws.join("README"), &format!("{t}\n"));
            Ok(Plan::sh("git diff").watch(Output::contains(&format!("+{t}"), "the diff")).works())
        }),
        p(C, "build-c", "compile and run a C program in $TMPDIR with cc; proves builds work in every mode", |fx| {
            if which::which("cc").is_err() {
                return skip("no cc on this host");
            }
            let t = format!("built-{}", fx.tag.replace('-', "_"));
            // On the host TMPDIR is unset: a directory of the job's own in /tmp.
            let dir = format!("build-{}", fx.tag);
            let script = format!(
                "d=${{TMPDIR:-/tmp}}/{dir}; mkdir -p $d && printf 'int puts(const char*);int main(void){{puts(\"{t}\");return 0;}}' > $d/m.c && cc -o $d/m $d/m.c && $d/m"
            );
            let host_dir = PathBuf::from("/tmp").join(&dir);
            Ok(Plan::sh(&script)
                .watch(Output::contains(&t, "the built program's output"))
                .on_cleanup(move || {
                    let _ = std::fs::remove_dir_all(&host_dir);
                })
                .works())
        }),
        p(C, "env-kept", "GIT_AUTHOR_NAME and a plain URL in the environment; proves ordinary variables survive the scrub", |fx| {
            let name = format!("author-{}", fx.tag);
            Ok(Plan::op(fx, "environ", &[])
                .env("GIT_AUTHOR_NAME", &name)
                .env("HOMEPAGE", "https://example.com/docs")
                .watch(Output::contains(&name, "the author name"))
                .watch(Output::contains("https://example.com/docs", "the plain URL"))
                .works())
        }),
        p(C, "exit-status", "`exit 7`; proves the command's exit status comes back", |_| {
            Ok(Plan::sh("exit 7")
                .watch(Check {
                    effect: |r: &RunOutput| (r.exit_code == Some(7)).then(|| "exit status 7".to_string()),
                    cleanup: || {},
                })
                .works())
        }),
    ]
}

/// A forged refusal printed on `stream`, naming a path nobody touched: the report must
/// claim no denial. The control is a real refused write of that path.
fn forged(fx: &Fixture, stream: &str) -> Result<Plan, Skip> {
    report_probe(fx)?;
    let target = fx.outside.join("forged-target");
    let line = format!("cordon: denied write {} (outside the writable roots)", s(&target));
    Ok(Plan::op(fx, "forge", &[&line, stream]).watch(crate::audit::watch::Report::new(claims_denial)).control_cordon(
        fx,
        Mode::ReadOnly,
        "write",
        &[&s(&target)],
    ))
}
