//! What the supervisor of a staged run (Linux) is given: the rules it judges writes
//! against, and cordon's egress proxy for `--allow-host`.

use super::*;

/// The rules the supervisor judges write-intent syscalls against: the run's own
/// Landlock ruleset (the landlock runner's, or the one the bwrap runner's stage helper
/// applies) and its mount layer.
#[cfg(target_os = "linux")]
pub(super) fn write_rules(
    plan: &crate::runner::LaunchPlan,
    policy: &crate::policy::ExecutionPolicy,
) -> crate::writes::WriteRules {
    let landlock = plan.landlock.as_ref().or(plan.stage_helper.as_ref().map(|h| &h.landlock));
    let mut rules = crate::writes::WriteRules {
        landlock_abi: landlock.map(|l| l.abi),
        protected: policy.protected.clone(),
        reopened: policy.git.reopened.clone(),
        holders: policy
            .self_binds()
            .into_iter()
            .filter(|(_, a)| *a == crate::policy::BindAccess::Same)
            .map(|(p, _)| p)
            .collect(),
        // bubblewrap always builds a mount namespace, read-only outside the binds.
        mount_layer: plan.namespaces.mount || plan.runner == RunnerKind::Bwrap,
        read_only_mode: policy.mode == Mode::ReadOnly,
        // The landlock runner drops them in its stage; the bwrap runner's stage helper
        // verifies they are empty.
        capabilities_dropped: plan.drop_capabilities || plan.stage_helper.is_some(),
        ..Default::default()
    };
    if let Some(l) = landlock {
        rules.write = l.write.clone();
        // The private tmpfs mounts (the fresh `/tmp` and `/dev/shm`, and the one on the
        // home's cache) exist as granted trees only in the command's view.
        rules.write_in_view =
            l.write_in_child.iter().chain(l.write_in_child_tmpfs.iter()).chain(l.devices.iter()).cloned().collect();
    }
    rules
}

/// Start cordon's egress proxy when the plan routes the network through it
/// (`--allow-host`), and point the command at it (replacing any proxy settings of the
/// caller: nothing else is reachable). The channel is the supervised `connect()`; a
/// plan without a supervisor has none, and nothing runs (fail closed).
#[cfg(target_os = "linux")]
pub(super) fn start_proxy(
    plan: &crate::runner::LaunchPlan,
    spec: &Spec,
    runner: RunnerKind,
    env: &mut Vec<(OsString, OsString)>,
) -> Result<Option<(crate::proxy::Proxy, crate::denials::DenialSink)>, CordonError> {
    let Some(seccomp) = plan.seccomp.filter(|s| s.proxy) else { return Ok(None) };
    if !seccomp.supervise {
        let reason = "--allow-host needs cordon's seccomp supervisor, which this runner's plan lacks".to_string();
        return Err(CordonError::SandboxUnavailable {
            mode: spec.policy.mode,
            reasons: vec![crate::error::RunnerReason { runner, reason }],
        });
    }
    let sink: crate::denials::DenialSink = Arc::default();
    let config = crate::proxy::ProxyConfig {
        allow: spec.policy.allow_hosts.clone(),
        test_resolve: crate::proxy::TestResolver::from_env(),
        host_addrs: None,
    };
    let proxy = crate::proxy::Proxy::start(config, sink.clone())
        .map_err(|e| CordonError::io("starting the egress proxy", e))?;
    for (k, v) in crate::proxy::client_env(proxy.addr()) {
        env.retain(|(name, _)| name.as_os_str() != k.as_str());
        env.push((k.into(), v.into()));
    }
    Ok(Some((proxy, sink)))
}
