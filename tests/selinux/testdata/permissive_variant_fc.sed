# Applied to selinux/cagent.fc for the broken test variant (see permissive_variant.sed):
# file_contexts_label_cagent_paths must fail when workspaces are no longer labelled.
/workspace(\/\.\*)?/d
