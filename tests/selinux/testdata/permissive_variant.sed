# Applied to selinux/cagent.te (with permissive_variant.te appended) to build a deliberately broken
# variant of the module. check_policy.sh --expect-violations must then see EVERY check fail: the
# appended rules break the agent's confinement, the deletions below take away what the launcher and
# the agent need. If cagent.te changes so that a line here no longer matches, the
# selinux_policy_assertions_fail_on_permissive_variant test names the check that stopped failing.

# launcher_enters_agent_domain: no transition from the launcher into the agent domain.
/^domtrans_pattern(cagent_t, cagent_agent_exec_t, cagent_agent_t)$/d
/^allow cagent_t cagent_agent_t:process2 /d

# launcher_writes_audit_log_and_run_dirs: neither the explicit log rule nor unconfined access.
/^allow cagent_t cagent_log_t:file /d
# (An optional_policy block may not be empty: keep one statement in it that grants nothing.)
s/^\([[:space:]]*\)unconfined_domain(cagent_t)$/\1unconfined_stub(cagent_t)/

# agent_uses_broker_socket: no access to the inherited socketpair end.
/^allow cagent_agent_t cagent_t:unix_stream_socket /d

# agent_works_in_workspace_and_tmpfs: no file management in the workspace.
/^manage_files_pattern(cagent_agent_t, cagent_workspace_t, cagent_workspace_t)$/d

# agent_runs_toolchains_in_own_domain: cannot execute bin_t.
/^corecmd_exec_bin(cagent_agent_t)$/d
